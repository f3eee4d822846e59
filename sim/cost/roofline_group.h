// The roofline rule for one operator group, shared by the step-cost models (roofline, pipeline,
// expert-parallel; docs/cost-model.md#step-time):
//   seconds = max(hypot(FLOPs / rate, bytes / bandwidth), kernels x kernel floor) x repeat.
#pragma once

#include <algorithm>
#include <cmath>

#include "sim/cost/step_cost.h"

namespace capsim {

// Adds one operator group (per layer, `repeat` layers) to `out`; `keep` also lists it.
inline void add_roofline_group(StepBreakdown& out, bool keep, const char* group, double flops,
                               double bytes, double rate, double kernels, double repeat,
                               double bandwidth, double kernel_floor) {
  const double c = flops / rate;
  const double mem = bytes / bandwidth;
  const double floor = kernels * kernel_floor;
  // Near the ridge point a kernel is held back by both limits at once, so the two times are
  // combined as a 2-norm rather than a max (docs/cost-model.md#step-time); far from it the
  // larger term dominates and the 2-norm tends to the plain roofline.
  const double s = std::max(std::hypot(c, mem), floor) * repeat;
  Bound bound = c >= mem ? Bound::kCompute : Bound::kMemory;
  if (floor > std::hypot(c, mem)) bound = Bound::kFloor;
  out.seconds += s;
  out.flops += flops * repeat;
  out.bytes += bytes * repeat;
  if (bound == Bound::kCompute) out.compute_s += s; else out.memory_s += s;
  if (keep) out.groups.push_back({group, flops * repeat, bytes * repeat, c * repeat, mem * repeat, s, bound});
}

// Adds a communication group: `bytes` moved per GPU in `seconds` (already summed over layers).
inline void add_communication_group(StepBreakdown& out, bool keep, const char* group, double bytes,
                                    double seconds) {
  out.seconds += seconds;
  out.communication_s += seconds;
  if (keep) out.groups.push_back({group, 0, bytes, 0, 0, seconds, Bound::kCommunication});
}

}  // namespace capsim
