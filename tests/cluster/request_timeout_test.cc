// SimulationConfig::request_timeout: a client that gives up. The request ends for the metrics
// and the workload at arrival + timeout, and the engine lets go of it wherever it is (front end,
// queue, running). Expected numbers come from runs without the timeout, as the comments derive.
#include <catch2/catch.hpp>

#include "sim/cluster/simulation.h"
#include "sim/core/error.h"
#include "tests/engine/test_support.h"

namespace {

using namespace capsim;
using namespace capsim::test;

SimulationConfig one_replica(const Deployment& d) {
  SimulationConfig c;
  c.groups = {ReplicaGroup{d, 1}};
  return c;
}

const RequestRecord& record_of(const SimulationResult& r, std::uint64_t id) {
  for (const RequestRecord& rec : r.records) {
    if (rec.id == id) return rec;
  }
  FAIL("no record for request " << id);
  return r.records.front();
}

}  // namespace

TEST_CASE("request timeout: a running and a queued request are let go, the next one finds the engine free",
          "[cluster][timeout]") {
  // One sequence at a time (max_num_seqs 1). A (id 0, 1000 output tokens) and B (id 1) arrive at
  // t = 0; B waits behind A. Without a timeout A ends at E_A. With timeout T = E_A / 2 both
  // clients give up at T: A mid-decode, B still queued. C (id 2) arrives at T + 1 s. Had A kept
  // its slot, C would wait until E_A = 2T, i.e. T - 1 s; aborted, A's slot and KV are free and C
  // runs exactly as it does alone on an empty engine.
  Deployment d = deployment();
  d.limits.max_num_seqs = 1;
  ScriptedWorkload ab({request(0, 0, 64, 1000), request(1, 0, 64, 4)});
  const SimulationResult free_run = simulate(one_replica(d), ab);
  REQUIRE(free_run.completed == 2);
  const SimTime e_a = from_seconds(record_of(free_run, 0).e2el_s);
  const SimTime timeout = e_a / 2;
  REQUIRE(to_seconds(timeout) > 1.0);  // so that C arrives before A would have ended

  const SimTime c_at = timeout + from_seconds(1.0);
  ScriptedWorkload alone({request(2, 0, 64, 4)});
  const SimulationResult lone = simulate(one_replica(d), alone);
  REQUIRE(lone.completed == 1);

  ScriptedWorkload abc({request(0, 0, 64, 1000), request(1, 0, 64, 4), request(2, c_at, 64, 4)});
  SimulationConfig c = one_replica(d);
  c.request_timeout = timeout;
  const SimulationResult r = simulate(c, abc);
  CHECK(r.arrived == 3);
  CHECK(r.timed_out == 2);
  REQUIRE(r.completed == 1);
  const RequestRecord& rc = record_of(r, 2);
  CHECK(rc.queue_s == 0.0);
  CHECK(rc.ttft_s == Approx(lone.records[0].ttft_s).margin(1e-9));
  CHECK(rc.e2el_s == Approx(lone.records[0].e2el_s).margin(1e-9));
  // The run ends with C's last token, not at C's own (unneeded) timeout at c_at + T.
  CHECK(r.simulated_s == Approx(to_seconds(c_at) + lone.records[0].e2el_s).margin(1e-6));
}

TEST_CASE("request timeout: a timeout no request reaches changes nothing", "[cluster][timeout]") {
  // 200 requests at 20/s on an H100: every one ends within seconds, far under 1 hour.
  std::vector<Request> rs;
  for (std::uint64_t i = 0; i < 200; ++i) {
    rs.push_back(request(i, from_seconds(0.05 * static_cast<double>(i)), 300 + 7 * static_cast<std::int64_t>(i % 13),
                         20 + static_cast<std::int64_t>(i % 17)));
  }
  ScriptedWorkload w1(rs), w2(rs);
  const Deployment d = deployment();
  const SimulationResult plain = simulate(one_replica(d), w1);
  SimulationConfig c = one_replica(d);
  c.request_timeout = from_seconds(3600.0);
  const SimulationResult timed = simulate(c, w2);
  CHECK(timed.timed_out == 0);
  REQUIRE(timed.records.size() == plain.records.size());
  for (std::size_t k = 0; k < plain.records.size(); ++k) {
    CHECK(timed.records[k].ttft_s == plain.records[k].ttft_s);
    CHECK(timed.records[k].e2el_s == plain.records[k].e2el_s);
  }
  CHECK(timed.simulated_s == plain.simulated_s);
  CHECK(timed.steps == plain.steps);
}

TEST_CASE("request timeout: a client that gives up during the front end never reaches the engine",
          "[cluster][timeout]") {
  // With the vllm profile's request path the API server works frontend_s + 8.98 us per prompt
  // token (calibration/engines/vllm.yaml) before the engine core sees a request: 1.15 ms for 128
  // tokens. A timeout of half that ends the request in the front end: no step runs.
  const Deployment d = deployment("llama-3.1-8b", "h100-sxm", 1, "vllm", true);
  const double frontend = d.engine.frontend_s + d.engine.frontend_per_prompt_token_s * 128;
  REQUIRE(frontend > 0);
  ScriptedWorkload w({request(0, 0, 128, 8)});
  SimulationConfig c = one_replica(d);
  c.request_timeout = from_seconds(frontend / 2);
  const SimulationResult r = simulate(c, w);
  CHECK(r.timed_out == 1);
  CHECK(r.completed == 0);
  CHECK(r.steps == 0);
}

TEST_CASE("request timeout: refused where it is not modelled", "[cluster][timeout][errors]") {
  const Deployment d = deployment();
  ScriptedWorkload w({request(0, 0, 128, 8)});
  SimulationConfig c = one_replica(d);
  c.request_timeout = 0;
  CHECK_THROWS_WITH(simulate(c, w), Catch::Contains("--request-timeout: must be > 0"));
}
