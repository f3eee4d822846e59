// The request's path to its first token outside the GPU step (docs/cost-model.md#request-path):
// asynchronous scheduling's one-step lag, the front end before the engine core and the return
// path to the client. Expectations are worked by hand from the mechanism and the step times.
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <vector>

#include "sim/cluster/simulation.h"
#include "sim/cost/roofline_cost.h"
#include "sim/workload/generators.h"
#include "tests/engine/test_support.h"

namespace {

using namespace capsim;
using namespace capsim::test;

EngineProfile async_engine() {
  EngineProfile e = without_request_path(engine_catalogue().find("vllm"));
  e.async_scheduling = true;
  return e;
}

}  // namespace

TEST_CASE("request path: asynchronous scheduling runs a request that arrives mid-step one step later",
          "[request-path]") {
  // Steps take 10 ms flat. A (32-token prompt, 5 tokens) arrives at 0 on an idle replica: step 1
  // runs 0-10 ms, A's first token at 10 ms. B arrives at 5 ms, during step 1.
  //   synchronous: step 2 (10-20) is formed at 10 ms and holds B's prefill -> B's first token
  //                at 20 ms, TTFT 15 ms;
  //   asynchronous: step 2 was formed when step 1 started (0 ms), before B arrived, so it holds
  //                A's decode alone; step 3 (20-30) is formed at 10 ms and holds B -> first token
  //                at 30 ms, TTFT 25 ms: one step (10 ms) more.
  for (const bool async : {false, true}) {
    ReplicaHarness h(limits(8, 512, false), 100, "vllm-v1", 0.010, 0.0,
                     async ? async_engine() : without_request_path(engine_catalogue().find("vllm")));
    h.add(request(0, 0, 32, 5));
    h.add(request(1, 5 * kMs, 32, 5));
    h.run();
    const FinishedSeq& a = h.rec().get(0);
    const FinishedSeq& b = h.rec().get(1);
    CHECK(a.first_token == 10 * kMs);
    CHECK(b.first_token == (async ? 30 : 20) * kMs);
    // Both decode one token per step afterwards: B's last token 4 steps after its first.
    CHECK(b.finish == b.first_token + 4 * 10 * kMs);
  }
}

TEST_CASE("request path: an asynchronous engine whose next step would be empty schedules afresh",
          "[request-path]") {
  // A (1 output token) runs alone in step 1 (0-10 ms) and finishes at 10 ms. B arrives at 5 ms.
  // The step formed at 0 ms holds nothing (A is done, B unseen), so vLLM's engine core waits
  // for step 1, then schedules with B: step 2 runs 10-20 ms, B's TTFT is 15 ms, as without the
  // lag. (Without this rule the replica would stall with B waiting.)
  ReplicaHarness h(limits(8, 512, false), 100, "vllm-v1", 0.010, 0.0, async_engine());
  h.add(request(0, 0, 32, 1));
  h.add(request(1, 5 * kMs, 32, 3));
  h.run();
  CHECK(h.rec().get(0).finish == 10 * kMs);
  CHECK(h.rec().get(1).first_token == 20 * kMs);
  CHECK(h.rec().get(1).finish == 40 * kMs);
}

TEST_CASE("request path: TTFT of a 2,000-token prompt = front end + prefill step + return",
          "[request-path]") {
  // One request on an idle H100 running llama-3.1-8b: prompt 2,000 tokens, 3 output tokens.
  // Engine: front end 2 ms + 1 us per prompt token, return 3 ms + 100 us per sequence that
  // emits a token in the step, asynchronous scheduling (idle: no lag).
  //   front end = 2 ms + 2,000 x 1 us = 4.000 ms (the request reaches the engine at 4 ms);
  //   queue     = 0 (the replica is idle when it arrives);
  //   prefill   = the roofline time of one step holding the whole 2,000-token prompt (the
  //               default budget of 8,192 tokens takes it in one chunk);
  //   return    = 3 ms + 1 x 100 us = 3.100 ms (the request is the only one emitting);
  //   TTFT      = 4.000 + prefill + 3.100 ms.
  Deployment d = deployment("llama-3.1-8b", "h100-sxm");
  d.engine.frontend_s = 0.002;
  d.engine.frontend_per_prompt_token_s = 1e-6;
  d.engine.return_s = 0.003;
  d.engine.return_per_sequence_s = 100e-6;
  d.engine.async_scheduling = true;
  d.limits.enable_prefix_caching = false;
  BatchShape prefill;
  prefill.add_prefill_chunk(0, 2000, true);
  const double prefill_s = RooflineCost(d).seconds(prefill);
  REQUIRE(prefill_s > 0.02);  // compute-bound: 2 x 8e9 x 2,000 FLOPs is ~32 TFLOP

  SimulationConfig c;
  c.groups = {ReplicaGroup{d, 1}};
  ScriptedWorkload w({request(0, 0, 2000, 3)});
  const SimulationResult r = simulate(c, w);
  REQUIRE(r.records.size() == 1);
  const RequestRecord& rec = r.records[0];
  CHECK(rec.frontend_s == Approx(0.004).margin(1e-9));
  CHECK(rec.queue_s == Approx(0.0).margin(1e-9));
  CHECK(rec.prefill_s == Approx(prefill_s).margin(1e-8));
  CHECK(rec.return_s == Approx(0.0031).margin(1e-9));
  CHECK(rec.ttft_s == Approx(0.004 + prefill_s + 0.0031).margin(1e-8));
  CHECK(rec.ttft_s == Approx(rec.frontend_s + rec.queue_s + rec.prefill_s + rec.return_s).margin(1e-9));
  // Every later token also reaches the client 3.1 ms after its step, so TPOT is the decode step.
  BatchShape decode;
  decode.add_decode(2001);
  const double decode_s = RooflineCost(d).seconds(decode);
  CHECK(rec.tpot_s == Approx(decode_s).epsilon(0.02));
}

TEST_CASE("request path: the shipped vLLM profile adds one step of lag and its fitted path",
          "[request-path]") {
  // Two identical runs of 200 requests at 5 req/s (constant gaps of 200 ms, so every request
  // finds the replica idle or decoding others): with the profile's request path and without.
  // With it, each request's TTFT gains exactly its front end (9.47 us per prompt token in
  // calibration/engines/vllm.yaml: 512 x 8.92 us = 4.57 ms) and its return (157 us per emitting
  // sequence), and the queue part holds the wait for the step in flight plus, while others
  // decode, the step already formed.
  const Deployment with = deployment("llama-3.1-8b", "h100-sxm", 1, "vllm", true);
  REQUIRE(with.engine.async_scheduling);
  const Deployment without = deployment("llama-3.1-8b", "h100-sxm", 1, "vllm", false);
  OpenLoopConfig o;
  o.process = ArrivalProcess::kConstant;
  o.stages = {{5.0, 0}};
  o.requests = 200;
  o.lengths.prompt = Distribution::fixed(512, Distribution::Unit::kTokens);
  o.lengths.output = Distribution::fixed(64, Distribution::Unit::kTokens);
  SimulationConfig c;
  c.groups = {ReplicaGroup{with, 1}};
  auto w1 = make_open_loop(o);
  const SimulationResult a = simulate(c, *w1);
  c.groups = {ReplicaGroup{without, 1}};
  auto w2 = make_open_loop(o);
  const SimulationResult b = simulate(c, *w2);
  REQUIRE(a.completed == 200);
  REQUIRE(b.completed == 200);
  const double frontend = 512 * with.engine.frontend_per_prompt_token_s + with.engine.frontend_s;
  CHECK(a.frontend.mean == Approx(frontend).margin(1e-9));
  CHECK(b.frontend.mean == 0.0);
  CHECK(b.first_token_return.mean == 0.0);
  // At 5 req/s and ~0.5 s per request 2-3 sequences emit per step: the return is at least one
  // and at most six sequences' worth (157 us each).
  CHECK(a.first_token_return.mean >= with.engine.return_per_sequence_s);
  CHECK(a.first_token_return.mean <= 6 * with.engine.return_per_sequence_s);
  CHECK(a.ttft.mean > b.ttft.mean + frontend);
}

TEST_CASE("open loop: a pool of recurring prompts resends each prompt every pool-size requests",
          "[request-path][workload]") {
  // 2 groups x 3 prompts per group = 6 prompts; 18 requests: each prompt is sent exactly 3
  // times, 6 requests apart, with the same length each time (drawn once per prompt), behind its
  // group's 100-token system prompt.
  OpenLoopConfig o;
  o.process = ArrivalProcess::kConstant;
  o.stages = {{10.0, 0}};
  o.requests = 18;
  o.lengths.prompt = Distribution::parse("uniform:50:500", Distribution::Unit::kTokens, "test");
  o.prefix = PrefixGroups{2, 100, 3};
  const std::vector<Request> got = sent_requests(*make_open_loop(o));
  REQUIRE(got.size() == 18);
  std::map<std::uint64_t, std::vector<std::size_t>> by_prompt;  // question content -> requests
  for (std::size_t i = 0; i < got.size(); ++i) {
    const Request& r = got[i];
    REQUIRE(r.segments.size() == 3);
    CHECK(r.segments[0].tokens == 100);  // system prompt
    CHECK(r.prompt_tokens == 100 + r.segments[1].tokens);
    by_prompt[r.segments[1].content].push_back(i);
  }
  REQUIRE(by_prompt.size() == 6);
  for (const auto& [content, idx] : by_prompt) {
    REQUIRE(idx.size() == 3);
    CHECK(idx[1] - idx[0] == 6);
    CHECK(idx[2] - idx[1] == 6);
    CHECK(got[idx[0]].prompt_tokens == got[idx[2]].prompt_tokens);
    // Group of a prompt: prompts 0-2 in group 0, 3-5 in group 1; its system prompt follows it.
    CHECK(got[idx[0]].segments[0].content == got[idx[1]].segments[0].content);
  }
  // The shuffle visits the prompts in some order once per 6 requests: the first 6 are distinct.
  std::set<std::uint64_t> first;
  for (std::size_t i = 0; i < 6; ++i) first.insert(got[i].segments[1].content);
  CHECK(first.size() == 6);
}
