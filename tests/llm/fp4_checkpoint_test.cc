// 4-bit float weights (nvfp4, mxfp4) and checkpoints run as shipped (`--weights auto`): bytes per
// weight with their scales, what each architecture runs them with, and gpt-oss-120b's MXFP4
// experts fitting one 80 GB GPU as OpenAI ships it. Numbers worked by hand in the comments.
#include <catch2/catch.hpp>

#include <string>

#include "sim/core/error.h"
#include "sim/cost/batch_shape.h"
#include "sim/cost/roofline_cost.h"
#include "sim/hardware/precision.h"
#include "sim/llm/deployment.h"
#include "sim/llm/memory_plan.h"
#include "sim/scenario/deployment_spec.h"
#include "tests/cost/breakdown_groups.h"

namespace {

using namespace capsim;

Deployment resolve(const std::string& model, const std::string& card, const std::string& weights,
                   const std::string& kv = "auto", int tp = 1) {
  scenario::DeploymentSpec s;
  s.model = model;
  s.card = card;
  s.weights = weights;
  s.kv_cache = kv;
  s.tp = tp;
  return s.resolve();
}

std::string refusal(const std::string& model, const std::string& card, const std::string& weights,
                    const std::string& kv = "auto") {
  try {
    resolve(model, card, weights, kv);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

using test::group;

}  // namespace

TEST_CASE("fp4: names, aliases and bytes per weight with scales", "[hardware][precision][fp4]") {
  CHECK(parse_precision("nvfp4", "t") == Precision::kNvfp4);
  CHECK(parse_precision("fp4", "t") == Precision::kNvfp4);  // Blackwell's and ModelOpt's format
  CHECK(parse_precision("MXFP4", "t") == Precision::kMxfp4);
  CHECK(precision_name(Precision::kNvfp4) == "nvfp4");
  CHECK(precision_name(Precision::kMxfp4) == "mxfp4");
  CHECK(element_bytes(Precision::kNvfp4) == 0.5);
  // nvfp4: 4 bits + one FP8 (1 B) scale per 16 weights = 0.5 + 1/16 = 0.5625 B.
  CHECK(quantized_weight_bytes(Precision::kNvfp4) == 0.5625);
  // mxfp4: 4 bits + one E8M0 (1 B) scale per 32 weights = 0.5 + 1/32 = 0.53125 B.
  CHECK(quantized_weight_bytes(Precision::kMxfp4) == 0.53125);
  // int4 (AWQ/GPTQ): 4 bits + fp16 scale + fp16 zero point per 128 = 0.5 + 4/128 = 0.53125 B.
  CHECK(quantized_weight_bytes(Precision::kInt4) == 0.53125);
  CHECK(quantized_weight_bytes(Precision::kBf16) == 2);
}

TEST_CASE("fp4: gpt-oss-120b runs as shipped: bf16 attention, mxfp4 experts, one H100",
          "[llm][fp4]") {
  const Deployment d = resolve("gpt-oss-120b", "h100-sxm", "auto");
  CHECK(d.weights == Precision::kBf16);
  REQUIRE(d.expert_weights);
  CHECK(*d.expert_weights == Precision::kMxfp4);
  // The checkpoint's own size (model_spec_test: 36 layers x 128 experts x 3 x 2880 x 2880 routed
  // weights at 0.53125 B, the rest 16-bit) = 65,248,815,744 B = 60.77 GiB.
  CHECK(d.weight_bytes() == 65'248'815'744.0);
  CHECK(d.weight_bytes() == d.model.checkpoint_weight_bytes());
  const MemoryPlan p = plan_memory(d, 8192);
  CHECK(p.weights == 65'248'815'744.0);
  CHECK(p.fits);  // "fits within a single 80GB GPU" (OpenAI's model card), now also in capsim
  // Re-quantising on purpose is still possible: --weights bf16 keeps every matrix 16-bit and
  // no longer fits (2 B x ~117B parameters > 80 GB).
  const Deployment bf16 = resolve("gpt-oss-120b", "h100-sxm", "bf16");
  CHECK_FALSE(bf16.expert_weights);
  CHECK_FALSE(plan_memory(bf16, 8192).fits);
}

TEST_CASE("fp4: DeepSeek-V3's fp8 checkpoint runs as fp8 where the card has an fp8 kernel", "[llm][fp4]") {
  CHECK(resolve("deepseek-v3", "h200", "auto", "auto", 8).weights == Precision::kFp8);
  CHECK(resolve("deepseek-v3", "h200", "auto", "auto", 8).compute_precision() == Precision::kFp8);
  // Ampere: FP8 Marlin (weight-only): stored in 1 byte, multiplied in 16-bit.
  const Deployment a100 = resolve("deepseek-v3", "a100-80gb-sxm", "auto", "auto", 8);
  CHECK(a100.weights == Precision::kFp8);
  CHECK(a100.compute_precision() == Precision::kBf16);
}

TEST_CASE("fp4: a checkpoint without quantisation resolves auto to 16-bit as before", "[llm][fp4]") {
  const Deployment d = resolve("llama-3.1-8b", "h100-sxm", "auto");
  CHECK(d.weights == Precision::kBf16);
  CHECK_FALSE(d.expert_weights);
  CHECK(d.weight_bytes() == d.model.weight_bytes(Precision::kBf16));
}

TEST_CASE("fp4: the kernels each architecture has", "[hardware][precision][fp4]") {
  // Blackwell multiplies FP4 on its tensor cores: the B200's fp4 key (9 PFLOPS dense) serves both.
  const Deployment b200 = resolve("llama-3.1-8b", "b200", "nvfp4");
  CHECK(b200.compute_precision() == Precision::kNvfp4);
  CHECK(b200.card.peak(Precision::kNvfp4) == Approx(9000e12));
  CHECK(b200.card.peak(Precision::kMxfp4) == Approx(9000e12));
  // Hopper, Ada and Ampere have no FP4 tensor cores: Marlin dequantises to 16-bit math.
  CHECK(resolve("llama-3.1-8b", "h100-sxm", "nvfp4").compute_precision() == Precision::kBf16);
  CHECK(resolve("llama-3.1-8b", "l40s", "mxfp4").compute_precision() == Precision::kBf16);
  CHECK(resolve("llama-3.1-8b", "a100-80gb-sxm", "nvfp4").compute_precision() == Precision::kBf16);
  // Turing (no Marlin below compute capability 8.0) and the MI300X have no FP4 kernel at all.
  const std::string t4 = refusal("llama-3.1-8b", "t4", "nvfp4", "fp16");
  CHECK(t4.find("--weights: nvfp4 is not supported on t4") != std::string::npos);
  CHECK(t4.find("FP4 (tensor-core or Marlin weight-only)") != std::string::npos);
  CHECK(refusal("llama-3.1-8b", "mi300x", "mxfp4").find("not supported on mi300x") != std::string::npos);
  // A 4-bit KV cache is not a format capsim models.
  CHECK(refusal("llama-3.1-8b", "b200", "bf16", "nvfp4").find("is not a KV-cache precision") !=
        std::string::npos);
  // gpt-oss on a T4 cannot run its experts as shipped: auto falls back to the 16-bit weights
  // (which then do not fit), rather than claiming a kernel the card lacks.
  const Deployment t4_oss = resolve("gpt-oss-20b", "t4", "auto", "fp16");
  CHECK_FALSE(t4_oss.expert_weights);
  CHECK(t4_oss.weights == Precision::kFp16);
}

TEST_CASE("fp4: decode reads 0.5625 B per nvfp4 weight and the experts at their own precision",
          "[cost][roofline][fp4]") {
  // llama-3.1-8b qkv_proj: 4096 x (4096 + 2 x 1024) = 25,165,824 weights per layer; one decode
  // token adds 4096 x 2 B of activations: 25,165,824 x 0.5625 + 8192 = 14,163,968 B per layer.
  const Deployment d = resolve("llama-3.1-8b", "h100-sxm", "nvfp4");
  const RooflineCost cost(d);
  BatchShape b;
  b.add_decode(1024);
  const StepBreakdown s = cost.breakdown(b);
  CHECK(group(s, "qkv_proj").bytes == Approx(32 * (25'165'824 * 0.5625 + 8192)).epsilon(1e-12));

  // gpt-oss-120b at batch 1: 4 experts of 3 x 2880 x 2880 = 24,883,200 weights each are read
  // per MoE layer, at 0.53125 B (mxfp4) while attention stays 16-bit.
  const Deployment oss = resolve("gpt-oss-120b", "h100-sxm", "auto");
  const RooflineCost oss_cost(oss);
  BatchShape one;
  one.add_decode(1024);
  const StepBreakdown o = oss_cost.breakdown(one);
  const OperatorCost& moe = group(o, "moe_mlp");
  // The breakdown is kept in a variable: group() returns a reference into it.
  const StepBreakdown bf16 = RooflineCost(resolve("gpt-oss-120b", "h100-sxm", "bf16")).breakdown(one);
  const OperatorCost& bf16_moe = group(bf16, "moe_mlp");
  // Same shapes, same token: the routed experts' bytes shrink by 0.53125 / 2; the router and
  // activations are unchanged, so the difference is exactly the experts' saving.
  const double experts_bytes_bf16 = 36.0 * 4 * oss.model.expert_params() * 2.0;
  CHECK(bf16_moe.bytes - moe.bytes ==
        Approx(experts_bytes_bf16 * (1.0 - 0.53125 / 2.0)).epsilon(1e-9));
}
