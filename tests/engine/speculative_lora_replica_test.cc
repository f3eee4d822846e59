// Speculative decoding and multi-LoRA inside one replica (sim/engine/replica.cc,
// policy_vllm_v1.cc) on a fake step cost of 10 ms per step, traced step by step.
#include <catch2/catch.hpp>

#include <memory>

#include "tests/engine/test_support.h"

namespace {

using namespace capsim;
using namespace capsim::test;

// One replica of `d` stepped by hand until idle; every request arrives at t = 0.
struct Driver {
  explicit Driver(Deployment dep, std::int64_t blocks = 1000)
      : d(std::move(dep)), cost(std::make_shared<FakeStepCost>()),
        replica(0, d, cost, blocks, make_policy("vllm-v1")) {}
  int run(int max_steps = 10000) {
    int n = 0;
    for (; n < max_steps && replica.has_work(); ++n) {
      const SimTime dur = replica.begin_step(now);
      if (dur == 0) break;
      now += dur;
      replica.end_step(now, rec);
    }
    return n;
  }
  Deployment d;
  std::shared_ptr<FakeStepCost> cost;
  Replica replica;
  Recorder rec;
  SimTime now = 0;
};

Deployment with_spec(int k, std::vector<double> alpha) {
  Deployment d = deployment();
  d.limits = limits(8, 1000, false);
  SpeculativeConfig c;
  c.method = "eagle3";
  c.num_speculative_tokens = k;
  c.acceptance = std::move(alpha);
  c.seed = 1;
  d.speculative = c;
  return d;
}

}  // namespace

TEST_CASE("speculative replica: every draft accepted emits k+1 tokens per step", "[engine][speculative]") {
  // k = 3, acceptance 1: prompt 100, output 10.
  //   step 1: prefill 100 -> token 1 (10 ms)
  //   step 2: decode + 3 drafts (4 tokens) -> tokens 2..5 (20 ms)
  //   step 3: 4 tokens -> 6..9 (30 ms)
  //   step 4: 4 tokens, only 1 still wanted -> token 10 (40 ms)
  Driver h(with_spec(3, {1, 1, 1}));
  h.replica.add_request(request(0, 0, 100, 10), 0);
  CHECK(h.run() == 4);
  const auto& shapes = h.cost->shapes();
  REQUIRE(shapes.size() == 4);
  CHECK(shapes[0].prefill_tokens == 100);
  CHECK(shapes[0].spec_tokens == 0);
  for (int i = 1; i < 4; ++i) {
    CHECK(shapes[i].decode_sequences == 1);
    CHECK(shapes[i].spec_tokens == 3);
    CHECK(shapes[i].tokens() == 4);
    CHECK(shapes[i].logit_sequences == 4);
  }
  // Contexts: 101, then 105, then 109 (the pending token + 4 accepted each step).
  CHECK(shapes[1].decode_context_tokens == Approx(101));
  CHECK(shapes[2].decode_context_tokens == Approx(105));
  CHECK(shapes[3].decode_context_tokens == Approx(109));
  const FinishedSeq& f = h.rec.get(0);
  CHECK(f.generated == 10);
  CHECK(f.finish == 40 * kMs);
  // One token event per step (a streamed chunk): 4 of them.
  CHECK(h.rec.tokens.at(0).size() == 4);
  CHECK(h.replica.stats().spec_verifies == 3);
  CHECK(h.replica.stats().spec_drafts == 9);
  CHECK(h.replica.stats().spec_accepted == 3 + 3 + 0);  // the last step keeps 1 of 4 tokens
}

TEST_CASE("speculative replica: drawn acceptance, exact output length, drafts in the token budget",
          "[engine][speculative]") {
  // acceptance 0.6: E[A] = 1 + 0.6 + 0.36 + 0.216 = 2.176 tokens per verify. 8 requests of 200
  // output tokens: 199 tokens after the first each, so about 199 / 2.176 = 91.5 verify steps.
  Driver h(with_spec(3, {0.6, 0.6, 0.6}));
  for (int i = 0; i < 8; ++i) h.replica.add_request(request(i, 0, 50, 200), 0);
  const int steps = h.run();
  REQUIRE(h.rec.finished.size() == 8);
  for (const FinishedSeq& f : h.rec.finished) CHECK(f.generated == 200);
  const ReplicaStats& st = h.replica.stats();
  const double per_verify = 1.0 + static_cast<double>(st.spec_accepted) / static_cast<double>(st.spec_verifies);
  // 8 x ~91 verifies = ~730 draws; sd of A ~1.1, so the mean's standard error is ~0.04.
  CHECK(per_verify == Approx(2.176).margin(0.15));
  CHECK(steps > 80);
  CHECK(steps < 110);
  // The same again: byte-identical replay from the seed.
  Driver again(with_spec(3, {0.6, 0.6, 0.6}));
  for (int i = 0; i < 8; ++i) again.replica.add_request(request(i, 0, 50, 200), 0);
  CHECK(again.run() == steps);
  CHECK(again.rec.tokens == h.rec.tokens);
  // Budget: max_num_batched_tokens 10. Step 1 prefills four 2-token prompts (8 tokens). In
  // step 2 the decodes take 1 + 3 drafts each while the budget lasts: 4 + 4 + 2 (the third
  // verifies 1 draft), the fourth waits: 3 decodes, 7 drafts, 10 tokens.
  Deployment tight = with_spec(3, {1, 1, 1});
  tight.limits = limits(8, 10, false);
  Driver t(tight);
  for (int i = 0; i < 4; ++i) t.replica.add_request(request(i, 0, 2, 50), 0);
  const SimTime first = t.replica.begin_step(t.now);
  t.now += first;
  t.replica.end_step(t.now, t.rec);
  REQUIRE(t.replica.begin_step(t.now) > 0);
  const BatchShape& second = t.cost->shapes().back();
  CHECK(second.decode_sequences == 3);
  CHECK(second.spec_tokens == 7);
  CHECK(second.tokens() == 10);
}

TEST_CASE("lora replica: max_loras bounds a batch's adapters, others wait, and loads are counted",
          "[engine][lora]") {
  Deployment d = deployment();
  d.limits = limits(8, 1000, false);
  LoraConfig c;
  c.max_loras = 1;
  c.max_cpu_loras = 2;
  d.lora = c;
  Driver h(d);
  // A (adapter 0) and B (adapter 1) and C (adapter 0), all at t = 0, prompt 10, output 3.
  //   step 1: A's prefill; B is skipped (its adapter would make 2 > max_loras 1), C admitted
  //           past it (same adapter as A): one load (adapter 0).
  //   steps 2-3: A and C decode; C and A finish at the end of step 3.
  //   step 4: B's prefill: adapter 1 replaces adapter 0 in the one GPU slot (second load).
  //   steps 5-6: B decodes, done at 60 ms.
  auto req = [](std::uint64_t id, std::int32_t adapter) {
    Request r = request(id, 0, 10, 3);
    r.adapter = adapter;
    return r;
  };
  h.replica.add_request(req(0, 0), 0);
  h.replica.add_request(req(1, 1), 0);
  h.replica.add_request(req(2, 0), 0);
  CHECK(h.run() == 6);
  const auto& shapes = h.cost->shapes();
  REQUIRE(shapes.size() == 6);
  CHECK(shapes[0].prefill_sequences == 2);
  CHECK(shapes[0].lora_adapters == 1);
  CHECK(shapes[0].lora_tokens == 20);
  CHECK(shapes[0].lora_loads == 1);
  CHECK(shapes[1].lora_loads == 0);
  CHECK(shapes[3].prefill_sequences == 1);
  CHECK(shapes[3].lora_loads == 1);
  CHECK(h.rec.get(0).finish == 30 * kMs);
  CHECK(h.rec.get(2).finish == 30 * kMs);
  CHECK(h.rec.get(1).finish == 60 * kMs);
  CHECK(h.replica.stats().lora_loads == 2);
  CHECK(h.replica.stats().lora_host_misses == 2);
  // Base-model requests (adapter -1) never count against max_loras and run no LoRA work.
  Driver base(d);
  base.replica.add_request(req(5, 0), 0);
  base.replica.add_request(request(6, 0, 10, 3), 0);
  CHECK(base.run() == 3);
  CHECK(base.cost->shapes()[0].lora_tokens == 10);
}
