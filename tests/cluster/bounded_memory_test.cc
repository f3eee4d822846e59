// SimulationConfig::bounded_memory (--bounded-memory): the per-step distributions go to bounded
// histograms. The run itself must not change (every per-request record and latency summary the
// same bit for bit), the pooled ITL and the replicas' step distributions must keep their counts,
// extremes and (for ITL, one set) mean exactly and their percentiles within 2^-10, and their memory
// must stop growing with the run while the exact sets' grows with its steps.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "sim/cluster/simulation.h"
#include "sim/workload/generators.h"
#include "tests/cluster/result_fingerprint.h"
#include "tests/engine/test_support.h"

namespace {

using namespace capsim;
using namespace capsim::test;

SimulationConfig two_replicas(bool bounded) {
  Deployment d = deployment("llama-2-7b", "a100-80gb-sxm", 1, "vllm", true);
  d.limits.max_num_seqs = 128;
  d.limits.max_num_batched_tokens = 2048;
  SimulationConfig c;
  c.groups = {ReplicaGroup{d, 2}};
  c.bounded_memory = bounded;
  return c;
}

SimulationResult run(bool bounded, std::int64_t requests) {
  OpenLoopConfig o;
  o.stages = {{16.0, 0}};
  o.requests = requests;
  o.lengths.prompt = Distribution::parse("lognormal:512:2048", Distribution::Unit::kTokens, "test");
  o.lengths.output = Distribution::parse("lognormal:256:1024", Distribution::Unit::kTokens, "test");
  o.seed = 7;
  auto w = make_open_loop(o);
  return simulate(two_replicas(bounded), *w);
}

std::string records_and_latencies(const SimulationResult& r) {
  Fingerprint f;
  for (const RequestRecord& q : r.records) {
    f.add("id", static_cast<std::int64_t>(q.id));
    f.add("ttft", q.ttft_s); f.add("e2el", q.e2el_s); f.add("tpot", q.tpot_s);
    f.add("queue", q.queue_s); f.add("replica", static_cast<std::int64_t>(q.replica));
  }
  f.add("ttft", r.ttft); f.add("tpot", r.tpot); f.add("e2el", r.e2el); f.add("queue", r.queue);
  f.add("steps", r.steps); f.add("out_tp", r.output_throughput); f.add("goodput", r.request_goodput);
  return f.text;
}

void check_close(const WeightedSamples& bounded, const WeightedSamples& exact) {
  REQUIRE(bounded.bounded());
  REQUIRE_FALSE(exact.bounded());
  CHECK(bounded.size() == exact.size());
  for (const double p : {50.0, 90.0, 95.0, 99.0}) {
    INFO("p" << p);
    CHECK(std::abs(bounded.percentile(p) - exact.percentile(p)) < 0x1p-10 * exact.percentile(p));
  }
  CHECK(bounded.min() == exact.min());
  CHECK(bounded.max() == exact.max());
}

}  // namespace

TEST_CASE("bounded memory: the same run, per-step percentiles within 2^-10", "[bounded-memory]") {
  const SimulationResult exact = run(false, 1500);
  const SimulationResult bounded = run(true, 1500);
  REQUIRE(exact.completed == 1500);
  REQUIRE(exact.replicas.size() == 2);
  CHECK(records_and_latencies(bounded) == records_and_latencies(exact));

  // The pooled ITL: one set, so its count, extremes and mean are exact.
  CHECK(bounded.itl.count == exact.itl.count);
  CHECK(bounded.itl.mean == exact.itl.mean);
  CHECK(bounded.itl.min == exact.itl.min);
  CHECK(bounded.itl.max == exact.itl.max);
  for (const auto& [b, e] : {std::pair{bounded.itl.median, exact.itl.median}, std::pair{bounded.itl.p90, exact.itl.p90},
                             std::pair{bounded.itl.p95, exact.itl.p95}, std::pair{bounded.itl.p99, exact.itl.p99}}) {
    CHECK(std::abs(b - e) < 0x1p-10 * e);
  }
  CHECK(std::abs(bounded.itl.std - exact.itl.std) < 1e-12 * exact.itl.std);

  for (std::size_t i = 0; i < 2; ++i) {
    const ReplicaStats& b = bounded.replicas[i].stats;
    const ReplicaStats& e = exact.replicas[i].stats;
    check_close(b.step_ms_distribution, e.step_ms_distribution);
    // Batch sizes are integers below 2,048: exact.
    for (const double p : {50.0, 90.0, 99.0}) {
      CHECK(b.batch_sequences_distribution.percentile(p) == e.batch_sequences_distribution.percentile(p));
    }
  }
}

TEST_CASE("bounded memory: the per-step sets stop growing with the run", "[bounded-memory]") {
  // Ten times the requests, 4.5 times the steps (3,458 -> 15,427: the longer run overloads the two
  // replicas, so its batches are larger): the exact step-time and batch-size sets grow with them; the bounded ones hold the binades the step times span (24 KiB each), which a longer run can
  // widen by one or two at its extremes, and a count per batch size.
  const SimulationResult exact_short = run(false, 300), exact_long = run(false, 3000);
  const SimulationResult bounded_short = run(true, 300), bounded_long = run(true, 3000);
  const auto bytes = [](const SimulationResult& r) {
    return r.replicas[0].stats.step_ms_distribution.memory_bytes() + r.replicas[0].stats.batch_sequences_distribution.memory_bytes();
  };
  CHECK(exact_long.steps > 4 * exact_short.steps);
  INFO("exact " << bytes(exact_short) << " -> " << bytes(exact_long) << " B, bounded " << bytes(bounded_short) << " -> "
                << bytes(bounded_long) << " B");
  CHECK(bytes(exact_long) > 3 * bytes(exact_short));
  CHECK(bytes(bounded_long) <= bytes(bounded_short) + 2 * (1024 * 24 + 64));
}
