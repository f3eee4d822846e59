// One evaluation of plan's search (declared in search.h): running a scenario at a replica count
// with its extra seeds and early-stop rules, judging it against the SLOs, and the share of the
// load one of several identical parts carries. CAPSIM_PLAN_TRACE's per-run trace lives here too.
// Split from search.cc (issue 34); the searches that call these are in search.cc.
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
  // A share of the load has 1/replicas of the measured requests: too few for an interval says
  // nothing about the cluster, whose verification (the whole load) must be long enough.
  e.verdict = search_verdict(std::move(e.verdict));
  e.replicas = replicas;
  e.from_share = replicas > 1;
  return e;
}

}  // namespace capsim::plan
