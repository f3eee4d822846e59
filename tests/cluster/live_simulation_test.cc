// The live driver of the cluster simulation (sim/cluster/live_simulation.h): the same token times
// as a batch run for the same requests, tokens released only when their time is reached, aborts
// that free KV and let the next request in, and rejections. Step times come from the real
// roofline cost (RooflineCost) and are composed by hand in the comments.
#include "sim/cluster/live_simulation.h"

#include <catch2/catch.hpp>
#include <map>
#include <vector>

#include "sim/cost/roofline_cost.h"
#include "sim/workload/generators.h"
#include "tests/engine/test_support.h"

namespace {

using namespace capsim;
using namespace capsim::test;

SimulationConfig one_group(const Deployment& d, int replicas = 1) {
  SimulationConfig c;
  c.groups = {ReplicaGroup{d, replicas}};
  return c;
}

// The requests an open loop sends, in arrival order (what simulate() would get from it).
std::vector<Request> open_loop_requests(double rate, std::int64_t n, std::uint64_t seed) {
  OpenLoopConfig o;
  o.stages = {{rate, 0}};
  o.requests = n;
  o.lengths.prompt = Distribution::parse("uniform:100:1500", Distribution::Unit::kTokens, "test");
  o.lengths.output = Distribution::parse("uniform:10:200", Distribution::Unit::kTokens, "test");
  o.seed = seed;
  return sent_requests(*make_open_loop(o));
}

// Step time of one shape on `d`, rounded to whole ns as Replica::begin_step rounds it.
SimTime step_ns(const Deployment& d, const BatchShape& b) { return from_seconds(RooflineCost(d).seconds(b)); }
SimTime prefill_ns(const Deployment& d, std::int64_t prompt) {
  BatchShape b;
  b.add_prefill_chunk(0, prompt, true);
  return step_ns(d, b);
}
SimTime decode_ns(const Deployment& d, std::int64_t context) {
  BatchShape b;
  b.add_decode(context);
  return step_ns(d, b);
}

}  // namespace

TEST_CASE("live simulation: the same requests at the same times give simulate()'s token times",
          "[live]") {
  // 300 requests at 20 req/s (Poisson) on 2 replicas of llama-3.1-8b / H100 with the shipped
  // vLLM request path (front end, asynchronous scheduling, return path). Driven live — each
  // request submitted when the clock reaches its arrival, the clock advanced in uneven hops —
  // every request's TTFT and E2E must equal the batch run's to the nanosecond: the live driver
  // runs the same events in the same order.
  const Deployment d = deployment("llama-3.1-8b", "h100-sxm", 1, "vllm", true);
  const std::vector<Request> reqs = open_loop_requests(20.0, 300, 7);
  REQUIRE(reqs.size() == 300);

  ScriptedWorkload w(reqs);
  const SimulationResult batch = simulate(one_group(d, 2), w);
  REQUIRE(batch.records.size() == 300);

  LiveSimulation live(one_group(d, 2));
  std::map<std::uint64_t, SimTime> first, last;
  std::map<std::uint64_t, std::int64_t> tokens;
  SimTime prev = -1;
  const auto take = [&](const std::vector<LiveEvent>& evs) {
    for (const LiveEvent& e : evs) {
      CHECK(e.time >= prev);  // time order
      prev = e.time;
      if (e.kind == LiveEvent::kToken) {
        if (!first.count(e.id)) first[e.id] = e.time;
        CHECK(e.generated == ++tokens[e.id]);
      } else if (e.kind == LiveEvent::kFinished) {
        last[e.id] = e.time;
      }
    }
  };
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const Request& r = reqs[i];
    // Events at exactly the arrival instant are processed together with it, as in a batch run.
    take(live.advance_to(std::max(live.now(), r.arrival - 1)));
    live.submit(r);
    // A hop past it, as a wall clock would make, but not past the next arrival.
    SimTime hop = r.arrival + 3 * kMs;
    if (i + 1 < reqs.size()) hop = std::min(hop, reqs[i + 1].arrival - 1);
    take(live.advance_to(std::max(live.now(), hop)));
  }
  int hops = 0;
  while (const auto t = live.next_time()) {
    take(live.advance_to(*t));
    REQUIRE(++hops < 1'000'000);
  }
  CHECK(live.in_flight() == 0);
  for (const RequestRecord& rec : batch.records) {
    INFO("request " << rec.id);
    REQUIRE(first.count(rec.id));
    const Request& r = reqs[rec.id];
    REQUIRE(r.id == rec.id);
    CHECK(to_seconds(first[rec.id] - r.arrival) == rec.ttft_s);
    CHECK(to_seconds(last[rec.id] - r.arrival) == rec.e2el_s);
    CHECK(tokens[rec.id] == rec.output_tokens);
  }
  for (const LiveReplicaState& s : live.replicas()) CHECK(s.running + s.waiting == 0);
}

TEST_CASE("live simulation: a token is released only when the clock reaches it", "[live]") {
  // One request (prompt 1,000, 3 tokens) at 0 on an idle H100, no request path, synchronous:
  // token 1 at p = prefill(1,000); token 2 at p + decode(1,001); token 3 at that + decode(1,002).
  const Deployment d = deployment("llama-3.1-8b", "h100-sxm");
  const SimTime p = prefill_ns(d, 1000);
  const SimTime t2 = p + decode_ns(d, 1001);
  const SimTime t3 = t2 + decode_ns(d, 1002);
  LiveSimulation live(one_group(d));
  live.submit(request(5, 0, 1000, 3));
  CHECK(live.advance_to(0).empty());
  CHECK(live.next_time() == p);  // the prefill step's end
  CHECK(live.advance_to(p - 1).empty());
  std::vector<LiveEvent> e = live.advance_to(p);
  REQUIRE(e.size() == 1);
  CHECK(e[0].kind == LiveEvent::kToken);
  CHECK(e[0].id == 5);
  CHECK(e[0].time == p);
  CHECK(e[0].generated == 1);
  e = live.advance_to(t3 + 1000);
  REQUIRE(e.size() == 3);
  CHECK(e[0].time == t2);
  CHECK(e[1].time == t3);
  CHECK(e[1].generated == 3);
  CHECK(e[2].kind == LiveEvent::kFinished);
  CHECK(e[2].time == t3);
  CHECK_FALSE(live.next_time().has_value());
  CHECK(live.replicas()[0].kv_used_blocks == 0);
}

TEST_CASE("live simulation: an abort mid-step drops the step's token, frees the KV and lets the "
          "waiting request in", "[live]") {
  // max_num_seqs = 1, no request path, synchronous, no prefix cache. A (prompt 512, 100 tokens)
  // and B (prompt 512, 2 tokens) arrive at 0; B waits while A runs.
  //   A: token 1 at p = prefill(512), token 2 at T2 = p + decode(513), token 3 at
  //      T3 = T2 + decode(514); step 4 (decode 515) runs T3 .. T4 = T3 + decode(515).
  //   The client of A leaves at T3 + decode(515)/2, during step 4: the step ends first (its token
  //   is dropped), then A leaves and frees its ceil(515/16) = 33 blocks; B is admitted at T4
  //   holding 512/16 = 32 blocks: B's token 1 at T4 + p, token 2 at T4 + p + decode(513).
  Deployment d = deployment("llama-3.1-8b", "h100-sxm");
  d.limits.max_num_seqs = 1;
  d.limits.enable_prefix_caching = false;
  const SimTime p = prefill_ns(d, 512);
  const SimTime t2 = p + decode_ns(d, 513), t3 = t2 + decode_ns(d, 514), t4 = t3 + decode_ns(d, 515);
  LiveSimulation live(one_group(d));
  live.submit(request(1, 0, 512, 100));
  live.submit(request(2, 0, 512, 2));
  std::vector<LiveEvent> e = live.advance_to(t3 + (t4 - t3) / 2);
  REQUIRE(e.size() == 3);
  CHECK(e[2].time == t3);
  CHECK(live.replicas()[0].running == 1);
  CHECK(live.replicas()[0].waiting == 1);
  CHECK(live.replicas()[0].kv_used_blocks == 33);  // A: 515 tokens' KV in the step in flight
  CHECK(live.abort(1));
  CHECK_FALSE(live.abort(1));  // once
  CHECK(live.in_flight() == 2);  // A leaves when its step ends
  e = live.advance_to(t4);
  CHECK(e.empty());  // A's 4th token is dropped
  CHECK(live.in_flight() == 1);
  CHECK(live.replicas()[0].kv_used_blocks == 32);  // B's prompt; A's 33 blocks are free
  CHECK(live.replicas()[0].running == 1);
  CHECK(live.replicas()[0].waiting == 0);
  e = live.advance_to(t4 + p + decode_ns(d, 513));
  REQUIRE(e.size() == 3);
  CHECK(e[0].id == 2);
  CHECK(e[0].time == t4 + p);
  CHECK(e[1].time == t4 + p + decode_ns(d, 513));
  CHECK(e[2].kind == LiveEvent::kFinished);
  CHECK(live.replicas()[0].kv_used_blocks == 0);
  CHECK(live.in_flight() == 0);
}

TEST_CASE("live simulation: aborts before the engine and between steps take effect at once", "[live]") {
  // With the shipped request path the front end holds a 512-token request for
  // frontend_s + 512 x frontend_per_prompt_token_s (> 0) before the engine sees it; aborting in
  // that window means it never reaches a replica. A waiting request (max_num_seqs = 1) aborted
  // between steps leaves the queue at once.
  Deployment d = deployment("llama-3.1-8b", "h100-sxm", 1, "vllm", true);
  d.limits.max_num_seqs = 1;
  const SimTime front = from_seconds(d.engine.frontend_s + 512 * d.engine.frontend_per_prompt_token_s);
  REQUIRE(front > 0);
  LiveSimulation live(one_group(d));
  live.submit(request(1, 0, 512, 50));
  live.submit(request(2, 0, 512, 50));
  live.submit(request(3, 0, 512, 50));
  CHECK(live.advance_to(front / 2).empty());
  CHECK(live.abort(3));  // in the front end
  CHECK(live.advance_to(front).empty());
  CHECK(live.replicas()[0].running + live.replicas()[0].waiting == 2);
  CHECK(live.in_flight() == 2);
  const SimTime step_end = *live.next_time();  // A's prefill step
  live.advance_to(step_end);
  REQUIRE(live.replicas()[0].waiting == 1);
  // B waits (max_num_seqs = 1) and holds no slot of A's step in flight: it leaves at once.
  CHECK(live.abort(2));
  CHECK(live.in_flight() == 1);
  int hops = 0;
  std::int64_t tokens_2 = 0, tokens_1 = 0;
  while (const auto t = live.next_time()) {
    for (const LiveEvent& e : live.advance_to(*t)) {
      if (e.kind != LiveEvent::kToken) continue;
      (e.id == 2 ? tokens_2 : tokens_1) += 1;
    }
    REQUIRE(++hops < 100000);
  }
  CHECK(tokens_1 == 50);
  CHECK(tokens_2 == 0);
  CHECK(live.in_flight() == 0);
}

TEST_CASE("live simulation: a request longer than max_model_len is rejected at its arrival", "[live]") {
  const Deployment d = deployment("llama-3.1-8b", "h100-sxm");
  LiveSimulation live(one_group(d));
  const std::int64_t len = live.max_model_len();
  REQUIRE(len > 1000);
  // prompt len - 1 + 2 output tokens = len + 1 > len: refused; prompt len - 2 + 2 = len: served.
  live.submit(request(1, 10 * kMs, len - 1, 2));
  std::vector<LiveEvent> e = live.advance_to(10 * kMs);
  REQUIRE(e.size() == 1);
  CHECK(e[0].kind == LiveEvent::kRejected);
  CHECK(e[0].time == 10 * kMs);
  CHECK(live.in_flight() == 0);
  live.submit(request(2, 20 * kMs, len - 2, 2));
  live.advance_to(20 * kMs);
  CHECK(live.in_flight() == 1);
}
