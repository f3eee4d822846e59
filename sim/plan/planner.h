// The search behind `capsim plan` (and `capsim check`'s plan_cheapest_max_usd_per_hour): every
// card x TP x weight precision x KV precision of a space is a candidate; the memory plan rejects
// what does not fit; the rest are searched for the fewest replicas meeting the SLOs, cheapest per
// replica first with branch and bound against the `top` cheapest options found. Every option
// reported is then verified as the whole cluster it names, behind each router of the space (the
// scenario's, plus prefix-aware for workloads with shared prefixes or multi-turn history), in
// order of estimated cost until `top` verified options are known and no estimate undercuts them.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"
#include "sim/plan/prices.h"
#include "sim/plan/search.h"

namespace capsim::plan {

struct PlanSpace {
  std::vector<std::string> cards;  // catalogue names; empty = every card of the catalogue
  std::vector<int> tps = {1, 2, 4, 8};
  std::vector<std::string> weights = {"auto"};
  std::vector<std::string> kv_caches = {"auto"};
  int max_cards = 64;               // most cards per deployment
  std::optional<double> min_goodput;
  int top = 10;                     // options kept by the branch and bound
  std::string search_duration = "5min";  // measured window of the search's runs
  // KV-cache precisions: with try_fp8_kv, every "auto" candidate also runs with an fp8 KV cache
  // where the card's engines support one (plan's default when --kv-cache is not given).
  bool try_fp8_kv = false;
  // Routers tried when verifying; empty = the scenario's router only.
  std::vector<std::string> routers;
  // Seeds per verification run (plan --replications): > 1 decides each option over independent
  // replications instead of one run's batch means (N times the verification cost).
  int replications = 1;
  // The load-share search's runs stop once they have missed an SLO decisively (EarlyStop): they
  // decide only whether a candidate at r replicas could meet the SLOs, and a run that stopped
  // early fails. Verification runs always go to their end (their numbers are printed). false
  // runs every search run to its end (the tests compare the answers).
  bool early_stop = true;
  // Which search rounds run together as one batch of jobs (search_plan; the answer is the same,
  // only the waits at rounds' ends differ; the tests compare them): each round alone, rounds
  // while their limit is certainly infinite, or rounds while their caps are certain.
  enum class Batching { kRoundByRound, kWhileUnbounded, kWhileCertain };
  Batching batching = Batching::kWhileCertain;
  // How much more load the first `top` options take before an SLO fails (Candidate::headroom):
  // a short search on each verified cluster, on the search's measurement window. Off by default:
  // `check` asks only for the cheapest option's price; `plan` (answer_plan) turns it on.
  bool headroom = false;
  // A catalogue card name: every candidate of that card is explained (PlanOutcome::explained),
  // the ones the branch and bound cut by cost searched and verified anyway. Empty: none.
  std::string explain_card;
};

// The routers a user would try for this workload: the scenario's router, plus prefix-aware when
// requests share prefixes (multi-turn chat history, system prompts, traces with prefix ids).
std::vector<std::string> routers_to_try(const scenario::ScenarioSpec& base);

struct Candidate {
  std::string card;
  int tp = 1;
  std::string weights, kv;
  // Filled by the search.
  bool rejected = false;
  bool cut_by_cost = false;  // rejected only because it could not rank among the --top cheapest
  // Rejected only because its verification runs were too short to support a PASS (within the SLOs
  // by their statistics; Evaluation::too_short).
  bool too_short = false;
  std::string reason;
  ReplicaSearch search;
  bool verified = false;
  std::string router;       // the router of the verified answer
  // Per router tried: the verified replicas (0 when none within max_replicas met the SLOs), or,
  // for a router whose search stopped once it could no longer win (search_routers), at_least:
  // a lower bound on the replicas it needs, not below the winner's.
  struct RouterTried {
    std::string router;
    int replicas = 0;
    int at_least = 0;
  };
  std::vector<RouterTried> router_replicas;
  int estimated_replicas = 0;  // from the load-share search, before verification
  // The load the verified cluster still meets the SLOs at (load_headroom), for listed options.
  struct Headroom {
    bool searched = false;
    std::string unit;        // "users", "concurrent requests", "requests/s" or "x load" (a trace, a rate schedule)
    double load = 0;         // the scenario's load in that unit (1 for "x load")
    double max_load = 0;     // the most load found to meet every SLO (>= load: the verified run)
    double fail_load = 0;    // the least load found not to (unless capped)
    bool capped = false;     // still met at the largest load tried: max_load is a lower bound
    std::string fails_first; // the SLO (or "goodput") worst at the least load that did not pass
    Decision fails_as = Decision::kFail;  // FAIL, or INCONCLUSIVE at that load
    int runs = 0;
  };
  Headroom headroom;
  double usd_per_hour = 0;  // per replica
  int max_replicas = 1;
  int total_cards() const { return tp * search.best.replicas; }
  double option_usd_per_hour() const { return usd_per_hour * search.best.replicas; }
};

// "h100-sxm tp2 fp8/kv bf16".
std::string label(const Candidate& c);

// The largest load (users, concurrency, requests/s or a trace's speed, x up to kHeadroomMaxFactor)
// at which `replicas` replicas of `spec` (router included) still meet the SLOs: loads 1.25, 1.6,
// 2.5 and 4 x the scenario's, whole-cluster runs with early stop, until one does not pass, then
// two bisection steps between the last that passed and it. The scenario's own load is taken as
// passing (the verified run). Not searched (searched = false) for a workload with no load to
// scale (a fixed request count).
inline constexpr double kHeadroomMaxFactor = 4;
Candidate::Headroom load_headroom(const scenario::ScenarioSpec& spec, int replicas,
                                  std::optional<double> min_goodput);
// The scenario on the candidate's deployment.
scenario::ScenarioSpec spec_of(const scenario::ScenarioSpec& base, const Candidate& c);

struct PlanOutcome {
  std::vector<Candidate> candidates;
  std::vector<std::size_t> live;  // candidates that fit in memory
  std::vector<std::size_t> ok;    // options meeting the SLOs, cheapest first
  std::size_t searched = 0, skipped = 0, verify_n = 0;
  std::size_t verify_rounds = 0, not_verified = 0, evaluations = 0;
  std::size_t search_evaluations = 0, stopped_early = 0;  // the load-share search's runs, and those that stopped early
  std::size_t search_batches = 0;  // the search's batches of rounds (each ends waiting for its slowest candidate)
  // Work done, whatever the machine's load: requests that arrived and engine steps simulated, in
  // the load-share search and in verification.
  std::int64_t search_requests = 0, search_steps = 0, verify_requests = 0, verify_steps = 0;
  // PlanSpace::explain_card: each of its candidates, in candidates' order. A candidate the plan
  // cut by cost (not searched, searched only up to the replicas that would rank, or not verified)
  // is searched up to --max-cards and verified here: `as_searched` holds that search (its
  // `rejected`/`reason` as the plan would have given them with no cost cut).
  struct Explained {
    std::size_t candidate = 0;
    bool searched_now = false;
    Candidate as_searched;
  };
  std::vector<Explained> explained;
};

// progress(done, total, "searching" | "verifying" | "verified"); may be empty (the headroom and
// --explain runs after them report none, so the line ends with verification's). Each phase ends
// with done == total, except verification that stops early (the options left already cost more
// than the --top verified ones): it ends with one "verified" call, done = the options verified.
using PlanProgress = std::function<void(std::size_t, std::size_t, const char*)>;

// REQUIRES: base has SLOs or space.min_goodput, one deployment group. Throws capsim::Error for
// bad input (--search-duration, unknown precisions are candidate rejections, not errors).
PlanOutcome search_plan(const scenario::ScenarioSpec& base, const PlanSpace& space, const PriceBook& prices,
                        const PlanProgress& progress);

}  // namespace capsim::plan
