// The roofline rule for one operator group, shared by the step-cost models (roofline, pipeline,
// expert-parallel; docs/cost-model.md#step-time):
//   seconds = max(hypot(FLOPs / rate, bytes / bandwidth), kernels x kernel floor) x repeat.
#pragma once

#include <algorithm>
#include <cmath>

#include "sim/cost/step_cost.h"

namespace capsim {

// One operator group's share of a step (per layer, `repeat` layers), whole step: what
// add_roofline_group adds. Separate so that a cost model can keep it (RooflineCost memoizes the
// groups that depend only on the step's token count).
struct RooflineTerm {
  double flops = 0, bytes = 0;           // x repeat
  double compute_s = 0, memory_s = 0;    // FLOPs / rate and bytes / bandwidth, x repeat
  double seconds = 0;
  Bound bound = Bound::kMemory;
  bool measured = false;  // seconds from measured kernel tables (OperatorCost::measured)
};

inline RooflineTerm roofline_term(double flops, double bytes, double rate, double kernels,
                                  double repeat, double bandwidth, double kernel_floor) {
  const double c = flops / rate;
  const double mem = bytes / bandwidth;
  const double floor = kernels * kernel_floor;
  // Near the ridge point a kernel is held back by both limits at once, so the two times are
  // combined as a 2-norm rather than a max (docs/cost-model.md#step-time); far from it the
  // larger term dominates and the 2-norm tends to the plain roofline.
  const double norm = std::hypot(c, mem);
  RooflineTerm t;
  t.seconds = std::max(norm, floor) * repeat;
  t.bound = c >= mem ? Bound::kCompute : Bound::kMemory;
  if (floor > norm) t.bound = Bound::kFloor;
  t.flops = flops * repeat;
  t.bytes = bytes * repeat;
  t.compute_s = c * repeat;
  t.memory_s = mem * repeat;
  return t;
}

// Two kernels' terms as one group: times, FLOPs and bytes add; bound by the larger time.
inline RooflineTerm sum_terms(const RooflineTerm& a, const RooflineTerm& b) {
  RooflineTerm t;
  t.flops = a.flops + b.flops;
  t.bytes = a.bytes + b.bytes;
  t.compute_s = a.compute_s + b.compute_s;
  t.memory_s = a.memory_s + b.memory_s;
  t.seconds = a.seconds + b.seconds;
  t.bound = a.seconds >= b.seconds ? a.bound : b.bound;
  t.measured = a.measured && b.measured;
  return t;
}

// Lists a group's term in a breakdown (reports only: kept out of the simulator's inlined path).
[[gnu::noinline]] inline void list_roofline_term(StepBreakdown& out, const char* group, const RooflineTerm& t) {
  out.groups.push_back({group, t.flops, t.bytes, t.compute_s, t.memory_s, t.seconds, t.bound, t.measured});
}

// Adds a group's term to `out`; `keep` also lists it under `group`.
inline void add_roofline_term(StepBreakdown& out, bool keep, const char* group, const RooflineTerm& t) {
  out.seconds += t.seconds;
  out.flops += t.flops;
  out.bytes += t.bytes;
  if (t.bound == Bound::kCompute) out.compute_s += t.seconds; else out.memory_s += t.seconds;
  if (keep) list_roofline_term(out, group, t);
}

// Adds one operator group (per layer, `repeat` layers) to `out`; `keep` also lists it.
inline void add_roofline_group(StepBreakdown& out, bool keep, const char* group, double flops,
                               double bytes, double rate, double kernels, double repeat,
                               double bandwidth, double kernel_floor) {
  add_roofline_term(out, keep, group, roofline_term(flops, bytes, rate, kernels, repeat, bandwidth, kernel_floor));
}

// Adds a communication group: `bytes` moved per GPU in `seconds` (already summed over layers).
inline void add_communication_group(StepBreakdown& out, bool keep, const char* group, double bytes,
                                    double seconds) {
  out.seconds += seconds;
  out.communication_s += seconds;
  if (keep) out.groups.push_back({group, 0, bytes, 0, 0, seconds, Bound::kCommunication});
}

}  // namespace capsim
