// DP attention with expert parallelism as one engine (sim/cost/expert_parallel.h
// lockstep_step_seconds, docs/cost-model.md#dp-lockstep): every MoE layer is an all-to-all among
// the DP ranks, so the ranks step together at the slowest one's time, the experts compute the
// mean of the ranks' tokens, and an idle rank takes part with a one-token dummy batch.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "sim/cost/batch_shape.h"
#include "sim/cost/expert_parallel.h"
#include "sim/cost/roofline_cost.h"
#include "sim/llm/deployment.h"
#include "sim/llm/engine_profile.h"
#include "sim/llm/memory_plan.h"
#include "tests/support/catalogues.h"

namespace {

using namespace capsim;

// A cost whose MoE layers take, for t tokens per rank, experts 1 ms + 10 us x t and an
// all-to-all of 0.2 ms + 5 us x t; the whole step is given per rank.
class HandCost : public StepCost {
 public:
  double seconds(const BatchShape&) const override { return 0; }
  StepBreakdown breakdown(const BatchShape&) const override { return {}; }
  ExpertLayers expert_layers(double t) const override { return {1e-3 + 10e-6 * t, 0.2e-3 + 5e-6 * t}; }
};

Deployment deepseek(int tp, int dp, bool ep) {
  Deployment d;
  d.model = capsim_test::model_catalogue().find("deepseek-v3");
  d.card = capsim_test::card_catalogue().find("h200");
  d.engine = capsim_test::engine_profile("vllm");
  d.tp = tp;
  d.dp = dp;
  d.expert_parallel = ep;
  d.weights = Precision::kFp8;
  d.kv_cache = Precision::kBf16;
  d.limits = default_limits(d.card, d.engine);
  d.validate();
  return d;
}

BatchShape decodes(int batch, int context) {
  BatchShape b;
  for (int i = 0; i < batch; ++i) b.add_decode(context);
  return b;
}

}  // namespace

TEST_CASE("DP lockstep: a rank with 8 sequences and one with 1 both step at the slower one's time",
          "[dp-lockstep]") {
  // Rank A: 8 tokens, 20 ms alone; rank B: 1 token, 12 ms alone. Without their MoE layers
  // (experts + all-to-all at their own token count):
  //   A: 20 - (1 + 0.08) - (0.2 + 0.04)  = 18.680 ms
  //   B: 12 - (1 + 0.01) - (0.2 + 0.005) =  9.785 ms
  // The experts see the mean of the ranks' tokens, (8 + 1) / 2 = 4.5: 1 + 0.045 = 1.045 ms; the
  // all-to-all ends when A (8 tokens) has sent: 0.2 + 0.04 = 0.240 ms.
  //   step = 18.680 + 1.045 + 0.240 = 19.965 ms for both ranks (B alone would take 12 ms).
  const HandCost cost;
  CHECK(lockstep_step_seconds(cost, {{0.020, 8}, {0.012, 1}}) == Approx(0.019965));
  // B idle runs the one-token dummy batch (11 ms alone): its rest 11 - 1.01 - 0.205 = 9.785 ms
  // is below A's and it still sends one token, so A's step stays 19.965 ms: an idle rank does
  // not speed A up against a rank holding one sequence.
  CHECK(lockstep_step_seconds(cost, {{0.020, 8}, {0.011, 1}}) == Approx(0.019965));
  // A rank with 1 token but 30 ms alone (a long context's attention) holds A back:
  //   rest 30 - 1.01 - 0.205 = 28.785 ms; step 28.785 + 1.045 + 0.240 = 30.070 ms.
  CHECK(lockstep_step_seconds(cost, {{0.020, 8}, {0.030, 1}}) == Approx(0.030070));
  // One rank is its own step.
  CHECK(lockstep_step_seconds(cost, {{0.020, 8}}) == Approx(0.020));
}

TEST_CASE("DP lockstep: the MoE layers' share of a DeepSeek-V3 step under DP attention", "[dp-lockstep]") {
  // DP 8 x TP 1 on H200, fp8: the all-to-all of 64 tokens per rank is 58 MoE layers x
  // (2 x NVLink latency + 9,734,144 B / 360 GB/s) (worked in tests/cost/parallelism_test.cc);
  // the experts' share is the step's moe_mlp_ep and moe_dispatch groups.
  const Deployment dp8 = deepseek(1, 8, true);
  const RooflineCost cost(dp8);
  const StepCost::ExpertLayers moe = cost.expert_layers(64);
  const double lat = capsim_test::engine_profile("vllm").allreduce_latency_nvlink_s;
  CHECK(moe.all_to_all_s == Approx(58 * (2 * lat + 9734144.0 / 360e9)));
  double experts = 0;
  for (const OperatorCost& g : cost.breakdown(decodes(64, 2048)).groups) {
    if (g.group == "moe_mlp_ep" || g.group == "moe_dispatch") experts += g.seconds;
  }
  CHECK(moe.experts_s == Approx(experts));
  // TP 8 with expert parallelism has no DP ranks to wait for: nothing to share.
  const RooflineCost tp8(deepseek(8, 1, true));
  CHECK(tp8.expert_layers(64).experts_s == 0);
  CHECK(tp8.expert_layers(64).all_to_all_s == 0);

  // Two ranks (DP 2 x TP 4): 8 decodes and 1 decode, both at 2,048 tokens of context. The rank
  // with 8 is slower without its MoE layers, so the step is its rest + the experts at 4.5
  // tokens + the all-to-all at 8; the idle rank's dummy (1 token) gives the same step.
  const RooflineCost dp2(deepseek(4, 2, true));
  const double eight = dp2.totals(decodes(8, 2048)).seconds;
  const double one = dp2.totals(decodes(1, 2048)).seconds;
  const double dummy = dp2.totals(dummy_batch()).seconds;
  const StepCost::ExpertLayers at8 = dp2.expert_layers(8);
  const double expected = eight - at8.experts_s - at8.all_to_all_s + dp2.expert_layers(4.5).experts_s + at8.all_to_all_s;
  const double step = lockstep_step_seconds(dp2, {{eight, 8}, {one, 1}});
  CHECK(step == Approx(expected));
  CHECK(step > one);  // the one-sequence rank waits for the other
  CHECK(lockstep_step_seconds(dp2, {{eight, 8}, {dummy, 1}}) == Approx(step));
  CHECK(dummy_batch().decode_sequences == 1);
  CHECK(dummy_batch().tokens() == 1);
}
