// Is a run's answer at steady state, and how sure is it? MSER-5 on the per-request latencies
// (in arrival order, after the configured warm-up) finds any transient the warm-up left; batch
// means on what follows give 95% intervals for the mean and percentiles of TTFT, TPOT and E2E
// (methods and citations: sim/core/steady_state.h). A run whose transient does not end in its
// first half, or whose TTFT keeps climbing, is flagged: its percentiles depend on the run length.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/steady_state.h"
#include "sim/metrics/metrics.h"

namespace capsim {

struct MetricIntervals {
  Interval mean, p50, p90, p95, p99;
  // By statistic name: "mean", "p50", "p90", "p95", "p99"; nullptr for another name.
  const Interval* get(const std::string& statistic) const;
};

struct SteadyState {
  std::size_t observations = 0;   // finished requests analysed (arrived after --warmup)
  std::size_t truncated = 0;      // of them, dropped by MSER-5 as further transient
  double transient_end_s = 0;     // arrival time of the first request kept (0 when none measured)
  bool analysed = false;          // enough requests (kMinSteadyStateObservations) for MSER-5 and intervals
  bool settled = true;            // MSER-5's truncation point lies in the first half (true when not analysed)
  bool growing = false;           // TTFT batch means climb through the run: overload
  std::size_t batches = 0;
  MetricIntervals ttft, tpot, e2el;
  std::vector<std::string> warnings;  // why the run's answer is doubtful; empty when none
  bool at_steady_state() const { return analysed && settled && !growing; }
};

// `batches`: number of batches for the intervals (20; fewer when the run is short).
// `bounded_population`: the workload bounds the requests in the system (a closed loop), so TTFT
// rising through the run is a transient still settling (sessions filling, histories growing),
// reported as not settled, never as an overload (`growing`), which only an open loop can be.
// Below this many measured requests a run gets no MSER-5 check and no interval, and so no PASS
// (plan::decide_slo): a p95 of fewer requests rests on a handful of them.
inline constexpr std::size_t kMinSteadyStateObservations = 200;
inline constexpr std::size_t kSteadyStateBatches = 20;
SteadyState analyze_steady_state(const std::vector<RequestRecord>& records,
                                 std::size_t batches = kSteadyStateBatches, bool bounded_population = false);

}  // namespace capsim
