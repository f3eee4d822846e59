// The SLO verdicts of plan's search (declared in search.h): whether one run, or the seeds of one
// configuration together, meet a scenario's SLOs, with the metric and value each decision rests on,
// and which resource bound a run. Split from search.cc (issue 34) so that each file holds one job.
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

std::string too_short_text(std::size_t measured) {
  std::string s = std::to_string(measured) + " measured requests, fewer than the " +
                  std::to_string(kMinSteadyStateObservations) + " a PASS needs";
  if (measured == 0) return s;
  const double x = std::ceil(10.0 * static_cast<double>(kMinSteadyStateObservations) / static_cast<double>(measured)) / 10;
  return s + " (about " + fmt("%.1f", x) + "x the measured window)";
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
  } else if (!r.steady.analysed) {
    d.decision = Decision::kInconclusive;
    d.why = "within its bound, but the run is too short for a 95% interval: " + too_short_text(r.steady.observations) +
            "; run longer";
    d.too_short = true;
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
  bool growing = false, settled = true, analysed = true;
  std::size_t fewest = 0;  // the fewest measured requests of a replication
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
    settled = settled && r->steady.settled;
    if (est.size() == 1 || r->steady.observations < fewest) fewest = r->steady.observations;
    analysed = analysed && r->steady.analysed;
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
  } else if (!analysed) {
    // As for one run (decide_slo): each seed's estimate is then its whole window's statistic.
    d.decision = Decision::kInconclusive;
    d.why = "within its bound" + range + ", but a replication is too short for its steady-state check: " +
            too_short_text(fewest) + "; run longer";
    d.too_short = true;
  } else {
    d.decision = Decision::kPass;
    d.why.clear();
  }
  return d;
}

bool SloVerdict::only_too_short() const {
  if (decision != Decision::kInconclusive) return false;
  return std::all_of(slos.begin(), slos.end(),
                     [](const SloDecision& d) { return d.decision != Decision::kInconclusive || d.too_short; });
}

SloVerdict search_verdict(SloVerdict v) {
  if (!v.only_too_short()) return v;
  for (SloDecision& d : v.slos) {
    if (!d.too_short) continue;
    d.decision = Decision::kPass;
    d.why.clear();
  }
  v.decision = Decision::kPass;
  v.met = true;
  return v;
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

}  // namespace capsim::plan
