#include "sim/plan/search.h"

#include <algorithm>
#include <functional>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <exception>
#include <mutex>
#include <thread>
#include <ctime>

#include "sim/scenario/slo_value.h"
#include "sim/core/allocator_tuning.h"
#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/core/yaml_fields.h"
#include "sim/report/table.h"

namespace capsim::plan {

const char* decision_name(Decision d) {
  switch (d) {
    case Decision::kPass: return "PASS";
    case Decision::kFail: return "FAIL";
    case Decision::kInconclusive: return "INCONCLUSIVE";
  }
  return "?";
}

SloDecision decide_slo(const scenario::SloSpec& s, const SimulationResult& r) {
  SloDecision d;
  d.slo = s.metric + "_" + s.statistic;
  d.bound = s.seconds;
  d.value = scenario::slo_value(s, r);
  d.low = d.high = d.estimate = d.value;
  const MetricIntervals* m = s.metric == "ttft"   ? &r.steady.ttft
                             : s.metric == "tpot" ? &r.steady.tpot
                             : s.metric == "e2el" ? &r.steady.e2el
                                                  : nullptr;  // itl pools gaps: no per-request series
  if (const Interval* i = m ? m->get(s.statistic) : nullptr; i && i->valid) {
    d.has_interval = true;
    d.estimate = i->estimate;
    d.low = i->low;
    d.high = i->high;
  }
  if (!r.stopped_early.empty() && r.stopped_slo == d.slo) {
    d.decision = Decision::kFail;
    d.why = "missed decisively, " + r.stopped_early;
    return d;
  }
  // Requests the deployment refused (prompt + output over max_model_len) have no latency in the
  // statistics either, and no answer at all: the deployment does not serve the workload, however
  // fast the answered ones were. check_slos_runs fails such a run for plan and compare; each SLO
  // says so too, so that simulate, check and the report give compare's verdict (before, they
  // said PASS where compare said "missed").
  if (r.rejected > 0) {
    d.decision = Decision::kFail;
    d.why = std::to_string(r.rejected) + " of " + std::to_string(r.rejected + r.completed + r.timed_out) +
            " measured requests were rejected (longer than max_model_len): the deployment does not serve this workload";
    return d;
  }
  // Requests whose client gave up (--request-timeout) have no latency in the statistics, which
  // cover the answered ones only: their TTFT and E2E were over the timeout, so those SLOs fail;
  // a per-token SLO cannot pass on the survivors alone.
  const bool queued_metric = s.metric == "ttft" || s.metric == "e2el";
  const std::string timed_out = r.timed_out > 0 ? std::to_string(r.timed_out) + " of " +
                                                      std::to_string(r.timed_out + r.completed) +
                                                      " measured requests timed out (the client gave up)"
                                                : "";
  if (!timed_out.empty() && queued_metric) {
    d.decision = Decision::kFail;
    d.why = timed_out;
    return d;
  }
  if (std::isnan(d.value)) {
    d.decision = Decision::kFail;
    d.why = "no request completed with this statistic";
    return d;
  }
  const std::string range = d.has_interval ? " (95% interval " + units::format_time(d.low) + " - " +
                                                 units::format_time(d.high) + ")"
                                           : "";
  // Overload (TTFT keeps growing) fails the SLOs that include queueing (TTFT, E2E); a per-token
  // SLO of an overloaded run is at best inconclusive: its value belongs to no steady state.
  if (r.steady.growing && queued_metric) {
    d.decision = Decision::kFail;
    d.why = "overloaded: TTFT keeps growing through the run";
  } else if (d.low > d.bound || (!d.has_interval && d.value > d.bound)) {
    d.decision = Decision::kFail;
    // The steady-state estimate (the interval's centre) is what the decision rests on.
    d.why = d.slo + " is " + units::format_time(d.estimate) + range + ", over its bound of " +
            units::format_time(d.bound) + " by " + fmt("%.1f%%", 100 * (d.estimate / d.bound - 1));
  } else if (d.high > d.bound) {
    d.decision = Decision::kInconclusive;
    d.why = d.slo + " is " + units::format_time(d.estimate) + range + ": the interval straddles the bound of " +
            units::format_time(d.bound) + "; run longer to decide";
  } else if (d.value > d.bound) {
    // The steady state is inside the bound, but not the whole measured window: what MSER-5 cut
    // as warm-up was over it, and that is too much to call a PASS.
    d.decision = Decision::kInconclusive;
    d.why = d.slo + " is " + units::format_time(d.estimate) + range + ", inside its bound of " +
            units::format_time(d.bound) + ", but " + units::format_time(d.value) +
            " over the whole measured window: its start, cut as warm-up by MSER-5, was over the bound; "
            "lengthen --warmup or run longer to decide";
  } else if (!timed_out.empty()) {
    d.decision = Decision::kInconclusive;
    d.why = "within its bound on the answered requests, but " + timed_out;
  } else if (r.steady.growing) {
    d.decision = Decision::kInconclusive;
    d.why = "within its bound, but the run is overloaded (TTFT keeps growing): no steady state to decide on";
  } else if (!r.steady.settled) {
    d.decision = Decision::kInconclusive;
    d.why = "within its bound, but the run did not reach steady state (MSER-5, or TTFT still rising; see the warnings); run longer to decide";
  } else {
    d.decision = Decision::kPass;
  }
  return d;
}

SloDecision decide_slo_replicated(const scenario::SloSpec& slo, const std::vector<const SimulationResult*>& runs) {
  if (runs.size() < 2) return decide_slo(slo, *runs.at(0));
  SloDecision d = decide_slo(slo, *runs.front());
  std::vector<double> est;
  bool growing = false, settled = true;
  for (const SimulationResult* r : runs) {
    const SloDecision one = decide_slo(slo, *r);
    // A replication whose clients timed out, or that rejected a request, decides it (decide_slo:
    // FAIL or at best INCONCLUSIVE).
    if (r->timed_out > 0 || r->rejected > 0) return one;
    if (std::isnan(one.estimate)) {
      d.decision = Decision::kFail;
      d.why = "no request completed with this statistic in one of the replications";
      return d;
    }
    est.push_back(one.estimate);
    growing = growing || r->steady.growing;
    settled = settled && r->steady.settled && r->steady.analysed;
  }
  // Seeds that change nothing (a trace replay has no random input) give identical runs: their
  // spread of zero says nothing about the uncertainty, so the first run's own batch-means
  // decision stands.
  if (std::all_of(est.begin(), est.end(), [&](double x) { return x == est.front(); })) {
    SloDecision one = decide_slo(slo, *runs.front());
    if (!one.why.empty()) one.why += " (the " + std::to_string(runs.size()) + " seeds gave identical runs)";
    return one;
  }
  const double n = static_cast<double>(est.size());
  double mean = 0, var = 0;
  for (double x : est) mean += x;
  mean /= n;
  for (double x : est) var += (x - mean) * (x - mean);
  var /= n - 1;
  const double half = student_t_quantile(n - 1, 0.975) * std::sqrt(var / n);
  d.has_interval = true;
  d.seeds = static_cast<int>(runs.size());
  d.estimate = mean;
  d.low = std::max(0.0, mean - half);
  d.high = mean + half;
  const std::string range = " (95% interval over " + std::to_string(runs.size()) + " seeds " +
                            units::format_time(d.low) + " - " + units::format_time(d.high) + ")";
  const bool queued_metric = slo.metric == "ttft" || slo.metric == "e2el";
  if (growing && queued_metric) {
    d.decision = Decision::kFail;
    d.why = "overloaded: TTFT keeps growing through at least one replication";
  } else if (d.low > d.bound) {
    d.decision = Decision::kFail;
    d.why = d.slo + " is " + units::format_time(mean) + range + ", over its bound of " + units::format_time(d.bound);
  } else if (d.high > d.bound) {
    d.decision = Decision::kInconclusive;
    d.why = d.slo + " is " + units::format_time(mean) + range + ": the interval straddles the bound of " +
            units::format_time(d.bound) + "; run longer or more replications to decide";
  } else if (!settled || growing) {
    d.decision = Decision::kInconclusive;
    d.why = "within its bound" + range + ", but a replication did not reach steady state (MSER-5, or TTFT still rising) or is "
            "overloaded; run longer";
  } else {
    d.decision = Decision::kPass;
    d.why.clear();
  }
  return d;
}

SloVerdict check_slos(const scenario::ScenarioSpec& spec, const SimulationResult& r,
                      std::optional<double> min_goodput) {
  return check_slos_runs(spec, {&r}, min_goodput);
}

SloVerdict check_slos_runs(const scenario::ScenarioSpec& spec, const std::vector<const SimulationResult*>& runs,
                           std::optional<double> min_goodput) {
  SloVerdict v;
  const SimulationResult& r = *runs.front();
  bool fail = false, inconclusive = false;
  for (const SimulationResult* x : runs) {
    fail = fail || x->completed == 0 || x->rejected > 0 || !x->stopped_early.empty();
  }
  for (const scenario::SloSpec& s : spec.slos) {
    SloDecision d = decide_slo_replicated(s, runs);
    const double ratio = std::isnan(d.value) ? INFINITY : d.value / s.seconds;
    if (d.decision == Decision::kFail) fail = true;
    if (d.decision == Decision::kInconclusive) inconclusive = true;
    if (v.worst.empty() || ratio > v.worst_ratio) {
      v.worst = d.slo;
      v.worst_ratio = ratio;
    }
    v.slos.push_back(std::move(d));
  }
  if (min_goodput) {
    const double ratio = r.goodput_fraction > 0 ? *min_goodput / r.goodput_fraction : INFINITY;
    for (const SimulationResult* x : runs) fail = fail || x->goodput_fraction < *min_goodput;
    if (v.worst.empty() || ratio > v.worst_ratio) {
      v.worst = "goodput";
      v.worst_ratio = ratio;
    }
  }
  v.decision = fail ? Decision::kFail : inconclusive ? Decision::kInconclusive : Decision::kPass;
  v.met = v.decision == Decision::kPass;
  return v;
}

std::string binding_resource(const SimulationResult& r) {
  double kv_peak = 0, busy = 0, compute = 0, memory = 0, comm = 0, overhead = 0;
  for (const ReplicaSummary& s : r.replicas) {
    if (!s.stats.kv_used_fraction.empty()) kv_peak = std::max(kv_peak, s.stats.kv_used_fraction.peak());
    busy += s.stats.busy_seconds;
    compute += s.stats.compute_s;
    memory += s.stats.memory_s;
    comm += s.stats.communication_s;
    overhead += s.stats.overhead_s;
  }
  if (r.preemptions > 0 || kv_peak > 0.97) return "KV-cache capacity";
  if (busy <= 0) return "idle";
  // Queueing behind other requests; the step of lag of an asynchronous scheduler is not.
  const double queued = std::max(0.0, r.queue.mean - r.scheduling_lag_s);
  const double queue_share = r.ttft.mean > 0 ? queued / r.ttft.mean : 0;
  if (queue_share > 0.5) return "queueing";
  if (comm >= compute && comm >= memory) return "communication";
  if (overhead >= compute && overhead >= memory) return "engine overhead";
  return compute >= memory ? "compute" : "memory bandwidth";
}

void drop_run_details(SimulationResult& r) {
  // A fresh vector, not `= {}`: that picks the initializer-list assignment, which empties the
  // vector and keeps its memory.
  r.records = std::vector<RequestRecord>();
  r.timeline = std::vector<ClusterSample>();
  for (ReplicaSummary& s : r.replicas) {
    s.stats.step_ms_distribution = WeightedSamples{};
    s.stats.batch_sequences_distribution = WeightedSamples{};
    s.stats.timeline = std::vector<TimelineSample>();
  }
}

std::vector<SimulationResult> run_next_seeds(const scenario::ScenarioSpec& spec, int count, unsigned threads,
                                             const std::vector<EarlyStop>& early_stop) {
  std::vector<SimulationResult> out(static_cast<std::size_t>(std::max(0, count)));
  run_parallel(
      out.size(), threads,
      [&](std::size_t k) {
        scenario::ScenarioSpec other = spec;
        other.seed = spec.seed + k + 1;
        scenario::BuiltScenario b = scenario::build_scenario(other);
        b.config.progress = false;
        b.config.early_stop = early_stop;
        out[k] = simulate(b.config, *b.workload);
        drop_run_details(out[k]);
      },
      {});
  return out;
}

std::vector<EarlyStop> early_stop_rules(const scenario::ScenarioSpec& spec) {
  std::vector<EarlyStop> out;
  for (const scenario::SloSpec& s : spec.slos) {
    if (s.statistic.size() < 2 || s.statistic[0] != 'p') continue;  // mean: no share to count
    EarlyStop e;
    if (s.metric == "ttft") e.metric = EarlyStop::kTtft;
    else if (s.metric == "tpot") e.metric = EarlyStop::kTpot;
    else if (s.metric == "e2el") e.metric = EarlyStop::kE2el;
    else continue;  // itl pools gaps: no per-request value
    e.slo = s.metric + "_" + s.statistic;
    e.quantile = std::atof(s.statistic.c_str() + 1) / 100;
    e.bound_s = s.seconds;
    if (e.quantile <= 0 || e.quantile >= 1 || !(e.bound_s > 0)) continue;
    out.push_back(e);
  }
  return out;
}

namespace {

double thread_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double wall_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// With CAPSIM_PLAN_TRACE set, one line per simulation on stderr: what ran, how long it simulated
// and how much work it was (thread CPU seconds, requests, engine steps), when it started and ended
// on the steady clock (seconds; to see how busy the threads were), and its verdict. A measuring
// aid for plan's search (docs/scale.md), off by default.
void trace_run(const scenario::ScenarioSpec& spec, const Evaluation& e, bool early_stop, double cpu_s,
               double wall_start_s, double wall_end_s) {
  static const bool on = std::getenv("CAPSIM_PLAN_TRACE") != nullptr;
  if (!on) return;
  static std::mutex m;
  const std::lock_guard<std::mutex> lock(m);
  std::fprintf(stderr,
               "plan-run card=%s tp=%d weights=%s kv=%s router=%s replicas=%d users=%d early_stop=%d cpu_s=%.4f "
               "start_s=%.3f end_s=%.3f simulated_s=%.1f requests=%lld steps=%lld met=%d stopped=%d worst=%s ratio=%.3f\n",
               spec.deployment.card.c_str(), spec.deployment.tp, spec.deployment.weights.c_str(),
               spec.deployment.kv_cache.c_str(), spec.router.c_str(), e.replicas, spec.users ? *spec.users : -1,
               early_stop ? 1 : 0, cpu_s, wall_start_s, wall_end_s, e.result.simulated_s,
               static_cast<long long>(e.result.arrived), static_cast<long long>(e.result.steps), e.verdict.met ? 1 : 0,
               e.result.stopped_early.empty() ? 0 : 1, e.verdict.worst.c_str(), e.verdict.worst_ratio);
}

}  // namespace

Evaluation evaluate(const scenario::ScenarioSpec& spec, int replicas, std::optional<double> min_goodput,
                    int replications, bool early_stop) {
  scenario::ScenarioSpec s = spec;
  s.replicas = replicas;
  scenario::BuiltScenario b = scenario::build_scenario(s);
  b.config.progress = false;
  if (early_stop) b.config.early_stop = early_stop_rules(spec);
  Evaluation e;
  e.replicas = replicas;
  const double cpu0 = thread_cpu_s(), wall0 = wall_s();
  e.result = simulate(b.config, *b.workload);
  const double cpu1 = thread_cpu_s(), wall1 = wall_s();
  if (replications <= 1) {
    e.verdict = check_slos(spec, e.result, min_goodput);
    trace_run(spec, e, early_stop, cpu1 - cpu0, wall0, wall1);
    return e;
  }
  // One thread: evaluate itself runs on one of plan's threads.
  const std::vector<SimulationResult> others = run_next_seeds(s, replications - 1, 1, b.config.early_stop);
  std::vector<const SimulationResult*> runs = {&e.result};
  for (const SimulationResult& x : others) runs.push_back(&x);
  e.verdict = check_slos_runs(spec, runs, min_goodput);
  trace_run(spec, e, early_stop, cpu1 - cpu0, wall0, wall1);  // the first seed's run
  return e;
}

scenario::ScenarioSpec share_of_load(const scenario::ScenarioSpec& spec, int parts) {
  scenario::ScenarioSpec s = spec;
  s.replicas = 1;
  if (parts <= 1) return s;
  const auto div_up = [parts](auto v) { return (v + parts - 1) / parts; };
  if (s.users) s.users = div_up(*s.users);
  if (s.concurrency) s.concurrency = div_up(*s.concurrency);
  if (s.requests) s.requests = div_up(*s.requests);
  if (s.trace) s.time_scale *= parts;
  if (s.rate) {
    std::string out;
    std::stringstream in(*s.rate);
    std::string part;
    while (std::getline(in, part, ',')) {
      const auto at = part.find('@');
      const double rate = parse_number(part.substr(0, at), "--rate") / parts;
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", rate);
      out += (out.empty() ? "" : ",") + std::string(buf) +
             (at == std::string::npos ? "" : part.substr(at));
    }
    s.rate = out;
  }
  return s;
}

Evaluation evaluate_share(const scenario::ScenarioSpec& spec, int replicas,
                          std::optional<double> min_goodput, bool early_stop) {
  Evaluation e = evaluate(share_of_load(spec, replicas), 1, min_goodput, 1, early_stop);
  e.replicas = replicas;
  e.from_share = replicas > 1;
  return e;
}

// Narrows [lo fails, pass meets] to the fewest replicas that meet the SLOs; `out.best` is that
// evaluation and `out.below` the one at one replica fewer, when it was run. `eval` counts its runs.
static void bisect(int lo, Evaluation pass, std::optional<Evaluation> fail_at_lo, ReplicaSearch& out,
            const std::function<Evaluation(int)>& eval) {
  int hi = pass.replicas;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    Evaluation e = eval(mid);  // counted by eval
    if (e.verdict.met) {
      hi = mid;
      pass = std::move(e);
    } else {
      lo = mid;
      fail_at_lo = std::move(e);
    }
  }
  out.found = true;
  out.best = std::move(pass);
  if (fail_at_lo && fail_at_lo->replicas == hi - 1) out.below = std::move(fail_at_lo);
}

ReplicaSearch search_replicas(const scenario::ScenarioSpec& spec, int max_replicas,
                              std::optional<double> min_goodput, bool verify, bool early_stop) {
  ReplicaSearch out;
  int lo = 0;  // largest count known to fail
  std::optional<Evaluation> fail_at_lo;
  std::optional<Evaluation> pass;
  int r = 1;
  while (r <= max_replicas) {
    Evaluation e = evaluate_share(spec, r, min_goodput, early_stop);
    out.count(e);
    if (e.verdict.met) {
      pass = std::move(e);
      break;
    }
    lo = r;
    fail_at_lo = std::move(e);
    if (r == max_replicas) break;
    r = std::min(max_replicas, r * 2);
  }
  if (!pass) {
    if (fail_at_lo) out.best = std::move(*fail_at_lo);
    return out;
  }
  bisect(lo, std::move(*pass), std::move(fail_at_lo), out, [&](int n) {
    Evaluation e = evaluate_share(spec, n, min_goodput, early_stop);
    out.count(e);
    return e;
  });
  if (verify) {
    // Shares are an approximation (routing is not a perfect split); the whole cluster decides.
    for (int n = out.best.replicas; n <= max_replicas; ++n) {
      Evaluation whole = evaluate(spec, n, min_goodput);
      out.count(whole);
      if (whole.verdict.met) {
        out.best = std::move(whole);
        return out;
      }
      out.below = std::move(whole);
    }
    out.found = false;
  }
  return out;
}

ReplicaSearch search_whole_cluster(const scenario::ScenarioSpec& spec, int start, int max_replicas,
                                   std::optional<double> min_goodput, int replications,
                                   const std::function<Evaluation(int)>& evaluator) {
  const auto evaluate = [&](const scenario::ScenarioSpec& s, int n, std::optional<double> g, int reps) {
    return evaluator ? evaluator(n) : plan::evaluate(s, n, g, reps);
  };
  ReplicaSearch out;
  start = std::clamp(start, 1, std::max(1, max_replicas));
  Evaluation first = evaluate(spec, start, min_goodput, replications);
  ++out.evaluations;
  if (first.verdict.met) {
    out.found = true;
    out.best = std::move(first);
    for (int n = start - 1; n >= 1; --n) {
      Evaluation e = evaluate(spec, n, min_goodput, replications);
      ++out.evaluations;
      if (!e.verdict.met) {
        out.below = std::move(e);
        break;
      }
      out.best = std::move(e);
    }
    return out;
  }
  int lo = start;  // largest count known to fail
  std::optional<Evaluation> fail_at_lo = std::move(first);
  std::optional<Evaluation> pass;
  for (int step = 1; lo < max_replicas; step *= 2) {
    const int n = std::min(max_replicas, start + step);
    Evaluation e = evaluate(spec, n, min_goodput, replications);
    ++out.evaluations;
    if (e.verdict.met) {
      pass = std::move(e);
      break;
    }
    lo = n;
    fail_at_lo = std::move(e);
  }
  if (!pass) {
    out.best = std::move(*fail_at_lo);
    return out;
  }
  bisect(lo, std::move(*pass), std::move(fail_at_lo), out,
         [&](int n) {
           ++out.evaluations;
           return evaluate(spec, n, min_goodput, replications);
         });
  return out;
}

// Why each cut below is exact, router by router, against search_whole_cluster (which the
// routers' searches would run independently, and whose answers the winner is picked from: the
// fewest replicas, ties to the lower index):
// - From `start`, a router that meets the SLOs walks down while one fewer still meets them; its
//   answer is <= start. A router that misses them at `start` searches upwards only, so its answer
//   is > start (or none): it cannot win (nor tie) against one that met them at start, and is cut
//   with at_least = start + 1.
// - Walking down in step, a router that misses at level-1 has the answer `level` (exactly what its
//   own walk would stop at); the walk goes on while any router still meets the SLOs, so the winner
//   is the router still meeting them at the lowest level (ties: the lower index), its `below` the
//   run that missed one level lower.
// - When one replica is the same run behind every router (one_replica_shared), a router that
//   meets the SLOs with 2 walks down to that same run: two routers meeting them with 2 end on the
//   same answer (1 or 2). So at level 2 the routers are run in index order and, once one meets the
//   SLOs, the later ones are cut: they would tie at best, and ties go to the lower index
//   (at_least = the winner's answer: 1 fails for them exactly when it fails for the winner).
// - When no router meets them at start, every router's own search takes the same doubling steps
//   start+1, start+2, start+4, ... (capped at max_replicas) while it misses; at the first step
//   `hi` where some router meets them, a router that missed at hi would keep doubling (answer >
//   hi) while one that met them at hi bisects in (lo, hi] (answer <= hi): the first is cut with
//   at_least = hi + 1. When hi = lo + 1 a router meeting them there has the answer hi, so the
//   routers are run in index order and the ones after the first that meets them are cut (a tie at
//   best, at_least = hi). Those that met them bisect as they would alone; a router is cut once its
//   interval's lower end (a count it misses with: answer > lo) reaches another's upper end (a
//   count that router meets them with: answer <= hi), so its answer would be strictly larger.
// No step assumes that more replicas never make latency worse: each router's answer, where
// reported, is the one its own search would give, and a cut router's would be larger than the
// winner's, or equal with a higher index.
RoutersSearch search_routers(std::size_t routers, int start, int max_replicas,
                             const std::function<Evaluation(std::size_t, int)>& eval, bool one_replica_shared,
                             unsigned threads) {
  RoutersSearch out;
  out.routers.assign(routers, RouterOutcome{});
  if (routers == 0) return out;
  max_replicas = std::max(1, max_replicas);
  start = std::clamp(start, 1, max_replicas);
  std::optional<Evaluation> one_replica;  // the shared one-replica run, once run
  // Runs router r at n for every (r, n) asked, in parallel; results by position.
  const auto run = [&](const std::vector<std::pair<std::size_t, int>>& asks) {
    std::vector<std::optional<Evaluation>> got(asks.size());
    std::vector<std::size_t> todo;
    bool one_here = false;
    for (std::size_t k = 0; k < asks.size(); ++k) {
      if (one_replica_shared && asks[k].second == 1) {
        if (one_replica || one_here) continue;
        one_here = true;
      }
      todo.push_back(k);
    }
    run_parallel(todo.size(), std::max(1u, threads), [&](std::size_t j) {
      got[todo[j]] = eval(asks[todo[j]].first, asks[todo[j]].second);
    }, {});
    out.evaluations += static_cast<int>(todo.size());
    for (std::size_t k : todo) {
      out.simulated_requests += got[k]->result.arrived;
      out.simulated_steps += got[k]->result.steps;
      if (one_replica_shared && asks[k].second == 1) one_replica = *got[k];
    }
    std::vector<Evaluation> res;
    for (std::size_t k = 0; k < asks.size(); ++k) res.push_back(got[k] ? std::move(*got[k]) : *one_replica);
    return res;
  };
  // Runs the routers `who` (ascending) at n: all at once, or, with `first_wins`, one after another
  // until one meets the SLOs (the later ones are then not run: nullopt).
  const auto level = [&](const std::vector<std::size_t>& who, int n, bool first_wins) {
    std::vector<std::optional<Evaluation>> res(who.size());
    if (!first_wins) {
      std::vector<std::pair<std::size_t, int>> asks;
      for (std::size_t r : who) asks.emplace_back(r, n);
      std::vector<Evaluation> got = run(asks);
      for (std::size_t k = 0; k < who.size(); ++k) res[k] = std::move(got[k]);
      return res;
    }
    for (std::size_t k = 0; k < who.size(); ++k) {
      res[k] = std::move(run({{who[k], n}}).front());
      if (res[k]->verdict.met) break;
    }
    return res;
  };
  std::vector<std::size_t> everyone(routers);
  for (std::size_t r = 0; r < routers; ++r) everyone[r] = r;
  std::vector<ReplicaSearch> per(routers);
  std::vector<int> tied;  // routers cut as a tie at best: at_least = the winner's answer, set at the end
  const auto finish = [&](std::size_t winner) {
    for (std::size_t r : tied) out.routers[r].at_least = per[winner].best.replicas;
    // Needing more than max_replicas is what "none within max_replicas" means: that answer is exact.
    for (RouterOutcome& o : out.routers) {
      if (o.at_least > max_replicas) o = RouterOutcome{};
    }
    out.found = true;
    out.router = winner;
    out.search = std::move(per[winner]);
    out.search.found = true;
    out.search.evaluations = out.evaluations;
    return out;
  };
  const bool tie_at_two = one_replica_shared && routers > 1;
  std::vector<std::optional<Evaluation>> first = level(everyone, start, tie_at_two && start == 2);
  std::vector<std::size_t> alive;  // routers still walking down
  for (std::size_t r = 0; r < routers; ++r) {
    if (!first[r]) {
      tied.push_back(static_cast<int>(r));
    } else if (first[r]->verdict.met) {
      alive.push_back(r);
    }
  }
  if (!alive.empty()) {
    for (std::size_t r = 0; r < routers; ++r) {
      if (first[r] && !first[r]->verdict.met) out.routers[r].at_least = start + 1;
      if (first[r]) per[r].best = std::move(*first[r]);
    }
    int at = start;
    while (at > 1) {
      std::vector<std::optional<Evaluation>> got = level(alive, at - 1, tie_at_two && at - 1 == 2);
      std::vector<std::size_t> still;
      for (std::size_t k = 0; k < alive.size(); ++k) {
        const std::size_t r = alive[k];
        if (!got[k]) {
          tied.push_back(static_cast<int>(r));
        } else if (got[k]->verdict.met) {
          per[r].best = std::move(*got[k]);
          still.push_back(r);
        } else {
          per[r].below = std::move(*got[k]);
          out.routers[r].replicas = at;
        }
      }
      if (still.empty()) break;  // every router still walking missed at level - 1
      alive = std::move(still);
      --at;
    }
    // The routers still walking share the lowest level (answers elsewhere are larger).
    for (std::size_t r : alive) out.routers[r].replicas = at;
    return finish(alive.front());
  }
  // Upwards: every router missed at start.
  int lo = start;
  std::vector<std::optional<Evaluation>> fail_at_lo(routers);
  for (std::size_t r = 0; r < routers; ++r) fail_at_lo[r] = std::move(first[r]);
  std::vector<std::size_t> met;
  int hi = 0;
  for (int step = 1; lo < max_replicas; step *= 2) {
    const int n = std::min(max_replicas, start + step);
    std::vector<std::optional<Evaluation>> got = level(everyone, n, routers > 1 && n == lo + 1);
    for (std::size_t r = 0; r < routers; ++r) {
      if (!got[r]) {
        out.routers[r].at_least = n;  // a tie at best with the first that met them at n
      } else if (got[r]->verdict.met) {
        met.push_back(r);
        per[r].best = std::move(*got[r]);
      }
    }
    if (!met.empty()) {
      hi = n;
      for (std::size_t r = 0; r < routers; ++r) {
        if (got[r] && !got[r]->verdict.met) out.routers[r].at_least = n + 1;
      }
      break;
    }
    lo = n;
    for (std::size_t r = 0; r < routers; ++r) fail_at_lo[r] = std::move(got[r]);
  }
  if (met.empty()) {
    // None within max_replicas: routers[0]'s search, as search_whole_cluster would leave it.
    out.search.best = std::move(*fail_at_lo[0]);
    out.search.evaluations = out.evaluations;
    return out;  // every RouterOutcome stays {0, 0}: none within max_replicas
  }
  // Bisection in (lo, hi] for each router that met the SLOs at hi, in step.
  std::vector<int> lo_of(routers, lo), hi_of(routers, hi);
  std::vector<std::size_t> active = met;
  for (;;) {
    // Cut: a router whose lower end reaches another's upper end needs more replicas than it.
    std::vector<std::size_t> next;
    for (std::size_t r : active) {
      bool beaten = false;
      for (std::size_t o : met) {
        if (o != r && out.routers[o].at_least == 0 && lo_of[r] >= hi_of[o]) beaten = true;
      }
      if (beaten) {
        out.routers[r].at_least = lo_of[r] + 1;
      } else if (hi_of[r] - lo_of[r] > 1) {
        next.push_back(r);
      }
    }
    active = std::move(next);
    if (active.empty()) break;
    std::vector<std::pair<std::size_t, int>> asks;
    for (std::size_t r : active) asks.emplace_back(r, lo_of[r] + (hi_of[r] - lo_of[r]) / 2);
    std::vector<Evaluation> got = run(asks);
    for (std::size_t k = 0; k < active.size(); ++k) {
      const std::size_t r = active[k];
      if (got[k].verdict.met) {
        hi_of[r] = asks[k].second;
        per[r].best = std::move(got[k]);
      } else {
        lo_of[r] = asks[k].second;
        fail_at_lo[r] = std::move(got[k]);
      }
    }
  }
  std::optional<std::size_t> winner;
  for (std::size_t r : met) {
    if (out.routers[r].at_least != 0) continue;
    out.routers[r].replicas = hi_of[r];
    if (!winner || hi_of[r] < hi_of[*winner]) winner = r;
  }
  if (fail_at_lo[*winner] && fail_at_lo[*winner]->replicas == hi_of[*winner] - 1) {
    per[*winner].below = std::move(fail_at_lo[*winner]);
  }
  return finish(*winner);
}

void run_parallel(std::size_t jobs, unsigned threads, const std::function<void(std::size_t)>& job,
                  const std::function<void(std::size_t, std::size_t)>& progress) {
  std::atomic<std::size_t> next{0}, done{0};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  const auto worker = [&] {
    for (std::size_t i = next++; i < jobs; i = next++) {
      try {
        job(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
      }
      ++done;
    }
  };
  const unsigned n = std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(jobs)));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < n; ++t) {
    pool.emplace_back([&worker] {
      tune_thread_heap();  // this thread's own arena on huge pages too, as main's heap is
      worker();
    });
  }
  std::thread watcher;
  std::atomic<bool> stop{false};
  if (progress) {
    watcher = std::thread([&] {
      while (!stop) {
        // The last report (jobs of jobs) comes once, after the workers joined.
        const std::size_t d = done.load();
        if (d < jobs) progress(d, jobs);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  worker();
  for (auto& t : pool) t.join();
  stop = true;
  if (watcher.joinable()) watcher.join();
  if (progress) progress(jobs, jobs);
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace capsim::plan
