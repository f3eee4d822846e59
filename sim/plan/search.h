// The capacity search behind `capsim plan`, `capacity` and `compare`: simulate a scenario on a
// deployment, check it against SLOs, and find the fewest replicas (or the most load) that meet
// them. Replica counts are found by doubling then bisecting, which assumes that more replicas
// never make latency worse (true for the routers capsim has, up to simulation noise).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/threads.h"
#include "sim/scenario/scenario.h"

namespace capsim::plan {

// How sure an SLO answer is. PASS: the 95% interval of the statistic (batch means after MSER-5,
// sim/metrics/steady_state.h) and the run's own value lie at or below the bound; FAIL: the
// interval lies above it (or, without an interval, the value does), the run rejected a request
// (longer than max_model_len), or — for TTFT and E2E — the run is overloaded (TTFT keeps
// growing); INCONCLUSIVE: the interval straddles the bound, or the
// run passed without reaching steady state or while overloaded. Only PASS counts as meeting the SLO.
enum class Decision { kPass, kFail, kInconclusive };
const char* decision_name(Decision d);  // "PASS", "FAIL", "INCONCLUSIVE"

struct SloDecision {
  std::string slo;      // "ttft_p95"
  double bound = 0;     // seconds
  double value = 0;     // the run's statistic over its measured window (NaN: none completed)
  double estimate = 0;  // the statistic after MSER-5's truncation, the interval's centre (= value without one)
  double low = 0, high = 0;  // the 95% interval (= value when has_interval is false)
  bool has_interval = false;
  int seeds = 1;        // runs the interval spans: 1 = one run's batch means; n = a t interval over n seeds
  Decision decision = Decision::kFail;
  std::string why;      // for FAIL and INCONCLUSIVE
  // INCONCLUSIVE only because the run measured fewer than kMinSteadyStateObservations requests
  // (no interval, no steady-state check): within its bound, but too short to support a PASS.
  bool too_short = false;
};
SloDecision decide_slo(const scenario::SloSpec& slo, const SimulationResult& r);
// The same decision from independent replications (the scenario run with n >= 2 seeds): the
// interval is mean +/- t(n-1, 0.975) x sd / sqrt(n) of the runs' steady-state estimates, which
// holds however correlated each run's output is; `value` is the first run's. A run that is
// overloaded fails the SLO; one that did not settle keeps a PASS from being conclusive. Runs whose
// estimates are all identical (seeds change nothing, as in a trace replay) decide as the first
// run alone (decide_slo), since their zero spread is no interval.
SloDecision decide_slo_replicated(const scenario::SloSpec& slo, const std::vector<const SimulationResult*>& runs);

struct SloVerdict {
  bool met = false;       // decision == kPass
  Decision decision = Decision::kFail;
  std::vector<SloDecision> slos;
  std::string worst;      // the SLO closest to (or furthest past) its bound, "ttft_p95"
  double worst_ratio = 0; // value / bound of that SLO (> 1 = violated)
  // INCONCLUSIVE, and each inconclusive SLO only too short (SloDecision::too_short).
  bool only_too_short() const;
};

// Why a run of `measured` requests verifies nothing, in every message that says so: "99 measured
// requests, fewer than the 200 a PASS needs (about 2.1x the measured window)" (the factor
// 200 / measured rounded up to a tenth; none for 0).
std::string too_short_text(std::size_t measured);

// The verdict a search over loads or replica counts steers by (plan's load shares, its headroom,
// capacity): a run too short for an interval counts by its statistic against the bound, as its
// SLOs' too-short INCONCLUSIVEs become PASS. A share's run has 1/r of the cluster's requests and
// a low load few in a fixed window; what such a search finds is then verified, or reported with
// the run it rests on. Every other verdict stays as decided.
SloVerdict search_verdict(SloVerdict v);

// Checks a result against the scenario's SLOs and an optional minimum goodput share.
SloVerdict check_slos(const scenario::ScenarioSpec& spec, const SimulationResult& r,
                      std::optional<double> min_goodput);
// The same over independent replications (runs[0] is the scenario's seed): each SLO decided by
// decide_slo_replicated; goodput and rejections must hold in every run.
SloVerdict check_slos_runs(const scenario::ScenarioSpec& spec, const std::vector<const SimulationResult*>& runs,
                           std::optional<double> min_goodput);

// What limits a deployment, read from a run: KV capacity, memory bandwidth, compute,
// communication, or queueing.
std::string binding_resource(const SimulationResult& r);

struct Evaluation {
  int replicas = 0;
  SimulationResult result;
  SloVerdict verdict;
  bool from_share = false;  // result is one replica under 1/replicas of the load
  // The verdict is search_verdict's and the run's own was INCONCLUSIVE only for being too short
  // (plan's verification: the option is within its SLOs but cannot be called verified).
  bool too_short = false;

  // The cluster's throughput: a share's scaled by the replica count.
  double output_throughput() const { return result.output_throughput * (from_share ? replicas : 1); }
  double request_throughput() const { return result.request_throughput * (from_share ? replicas : 1); }
};

// Runs the scenario (replicas overridden). Throws capsim::Error for bad input. With
// `replications` > 1 the seeds seed+1 .. seed+replications-1 run too (one after another, in this
// thread) and the verdict is decided over all of them; `result` stays the scenario seed's run.
// With `early_stop` each run may end once it has missed a percentile SLO of ttft, tpot or e2el
// decisively (EarlyStop, sim/cluster/simulation.h); its verdict is then FAIL, with the reason.
Evaluation evaluate(const scenario::ScenarioSpec& spec, int replicas, std::optional<double> min_goodput,
                    int replications = 1, bool early_stop = false);

// Drops what no plan answer reads of a run: the per-request records, the timelines and each
// replica's per-step distributions (step times, batch sizes), several MB for a 30-minute cluster
// run. Keeps every percentile, the steady-state analysis and the totals that check_slos,
// binding_resource and the plan's JSON read. The planner holds the runs of every option it
// reports until it answers.
void drop_run_details(SimulationResult& r);

// `--replications`: the scenario run again with seeds spec.seed + 1 .. spec.seed + count, each
// built afresh (exactly the run `--seed` would give), on up to `threads` threads (results by seed,
// whatever the thread count), no progress line, with `early_stop` rules if given; each keeps only
// what the SLO decisions read (drop_run_details), so memory stays one run per thread.
std::vector<SimulationResult> run_next_seeds(const scenario::ScenarioSpec& spec, int count, unsigned threads,
                                             const std::vector<EarlyStop>& early_stop = {});

// The early-stop rules for the scenario's SLOs (percentile SLOs of ttft, tpot and e2el).
std::vector<EarlyStop> early_stop_rules(const scenario::ScenarioSpec& spec);

// The scenario's load divided by `parts`: users, concurrency, rate and request count divided
// (rounded up), a trace slowed down by `parts`. Replicas behind a balancing router serve about
// an equal share each, so one replica under 1/r of the load stands for r replicas at a 1/r of
// the simulation cost.
scenario::ScenarioSpec share_of_load(const scenario::ScenarioSpec& spec, int parts);

// Like evaluate(), on one replica with 1/replicas of the load (see share_of_load).
Evaluation evaluate_share(const scenario::ScenarioSpec& spec, int replicas,
                          std::optional<double> min_goodput, bool early_stop = false);

struct ReplicaSearch {
  bool found = false;
  Evaluation best;                 // the fewest replicas that meet the SLOs (if found)
  std::optional<Evaluation> below; // one replica fewer (why more are needed), when > 1
  int evaluations = 0;
  int stopped_early = 0;           // evaluations that ended early (EarlyStop)
  // Over all its evaluations: requests that arrived and engine steps simulated (the work done,
  // whatever the machine's load).
  std::int64_t simulated_requests = 0, simulated_steps = 0;
  void count(const Evaluation& e) {
    ++evaluations;
    if (!e.result.stopped_early.empty()) ++stopped_early;
    simulated_requests += e.result.arrived;
    simulated_steps += e.result.steps;
  }
};

// Fewest replicas in 1..max_replicas meeting the SLOs, searched on load shares
// (evaluate_share); `verify` re-runs the answer as a whole cluster behind its router and, if
// that misses the SLOs, keeps adding replicas until it meets them.
// With `early_stop` its load-share runs may stop early (evaluate); the verification runs do not.
ReplicaSearch search_replicas(const scenario::ScenarioSpec& spec, int max_replicas,
                              std::optional<double> min_goodput, bool verify, bool early_stop = false);

// Fewest replicas in 1..max_replicas meeting the SLOs as a whole cluster behind spec.router,
// starting from `start` (a load-share estimate): downwards while one fewer still meets them,
// otherwise upwards in doubling steps, then bisecting. Every evaluation is a whole-cluster run:
// evaluate(spec, n, min_goodput, replications), or `evaluator(n)` when given (it must return
// exactly that; the planner shares one-replica runs between routers through it).
ReplicaSearch search_whole_cluster(const scenario::ScenarioSpec& spec, int start, int max_replicas,
                                   std::optional<double> min_goodput, int replications = 1,
                                   const std::function<Evaluation(int)>& evaluator = {});

// search_whole_cluster behind several routers at once, for the one needing the fewest replicas
// (ties: the lower index, routers[0] being the scenario's). Gives exactly the winner, its best and
// below runs and the replica counts that search_whole_cluster would give router by router, without
// finishing the searches that can no longer win (a cut router would need more replicas than the
// winner, or as many with a higher index; see search.cc for why each cut is exact).
struct RouterOutcome {
  int replicas = 0;  // fewest meeting the SLOs (0: none within max_replicas), when known
  // > 0: not searched further, as it could no longer win: it needs at least this many replicas,
  // more than the winner, or as many with a higher index (a tie at best).
  int at_least = 0;
};
struct RoutersSearch {
  bool found = false;
  std::size_t router = 0;             // the winner (when found)
  ReplicaSearch search;               // the winner's, as search_whole_cluster gives it; routers[0]'s when none found
  std::vector<RouterOutcome> routers; // per router, in the order given
  int evaluations = 0;                // simulations run (a shared one-replica run counts once)
  std::int64_t simulated_requests = 0, simulated_steps = 0;  // over those simulations
};
// eval(router, n): the whole cluster of n replicas behind that router (as search_whole_cluster's
// evaluator). With `one_replica_shared`, one replica is the same run behind every router (no other
// card groups), run once. Runs of one step of the search go on up to `threads` threads; results do
// not depend on the thread count.
RoutersSearch search_routers(std::size_t routers, int start, int max_replicas,
                             const std::function<Evaluation(std::size_t, int)>& eval, bool one_replica_shared,
                             unsigned threads);

// Runs `jobs` on up to `threads` threads, the caller's included, each taking the next job not
// yet taken (so a slow job does not hold back others); results are stored by index, so the
// output does not depend on the thread count. Threads already started by other run_parallel
// calls still working count against `threads`: one nested in another's job starts threads only
// as the outer's finish (it runs its jobs on the calling thread meanwhile), so nested calls never
// run more than `threads` threads at once. `progress(done, total)` is called from a watcher thread.
void run_parallel(std::size_t jobs, unsigned threads, const std::function<void(std::size_t)>& job,
                  const std::function<void(std::size_t, std::size_t)>& progress);

// Threads to use: $CAPSIM_THREADS, else the hardware's (sim/core/threads.h).
using capsim::default_threads;
using capsim::pool_width;

}  // namespace capsim::plan
