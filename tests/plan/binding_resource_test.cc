// plan::binding_resource (sim/plan/slo_verdict.cc): what limits a run, from its result alone.
#include <catch2/catch.hpp>

#include "sim/plan/search.h"

namespace {

using namespace capsim;

// A run of one replica whose steps were all memory-bound, with the given mean TTFT and mean
// wait before the first step (seconds).
SimulationResult run(double ttft_s, double queue_s, double scheduling_lag_s) {
  SimulationResult r;
  r.ttft.mean = ttft_s;
  r.queue.mean = queue_s;
  r.scheduling_lag_s = scheduling_lag_s;
  ReplicaSummary s{};
  s.stats.busy_seconds = 10;
  s.stats.memory_s = 8;
  s.stats.compute_s = 1;
  s.stats.overhead_s = 1;
  r.replicas.push_back(s);
  return r;
}

}  // namespace

TEST_CASE("binding resource: an asynchronous scheduler's step of lag is not queueing", "[plan]") {
  // TTFT 30 ms of which 20 ms before the first step. With no lag, 20/30 = 67% > 50%: queueing.
  // With a 10 ms step of lag (async scheduling, mean step 10 ms), only 10 ms is waiting behind
  // others: 10/30 = 33%, so the steps' own bound shows: memory bandwidth (8 of 10 s busy).
  CHECK(plan::binding_resource(run(0.030, 0.020, 0.0)) == "queueing");
  CHECK(plan::binding_resource(run(0.030, 0.020, 0.010)) == "memory bandwidth");
  // A real queue still shows through the lag: 40 of 50 ms waiting, 10 ms of it lag: 60%.
  CHECK(plan::binding_resource(run(0.050, 0.040, 0.010)) == "queueing");
}
