// Speculative decoding's model (sim/llm/speculative.h) and step cost (sim/cost/speculative_cost.h),
// with the numbers worked by hand in the comments.
#include "sim/llm/speculative.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "sim/core/error.h"
#include "sim/cost/roofline_cost.h"
#include "sim/cost/speculative_cost.h"
#include "sim/llm/memory_plan.h"
#include "sim/scenario/deployment_spec.h"
#include "tests/engine/test_support.h"

namespace {

using namespace capsim;
using Catch::Matchers::Contains;

SpeculativeConfig config(const std::string& method, int k, std::vector<double> alpha) {
  SpeculativeConfig c;
  c.method = method;
  c.num_speculative_tokens = k;
  c.acceptance = std::move(alpha);
  return c;
}

}  // namespace

TEST_CASE("speculative: expected tokens per verify step, by hand", "[speculative]") {
  // EAGLE, k = 4, alpha 0.8 at every position: 1 + 0.8 + 0.64 + 0.512 + 0.4096 = 3.3616.
  CHECK(config("eagle", 4, geometric_acceptance(0.8, 1.0, 4)).expected_tokens() == Approx(3.3616));
  // The same as the closed form (1 - a^(k+1)) / (1 - a) = (1 - 0.32768) / 0.2 = 3.3616.
  CHECK((1 - std::pow(0.8, 5)) / 0.2 == Approx(3.3616));
  // Per position 0.9, 0.8, 0.7: 1 + 0.9 + 0.72 + 0.504 = 3.124.
  CHECK(config("eagle3", 3, {0.9, 0.8, 0.7}).expected_tokens() == Approx(3.124));
  // alpha 0.8 with decay 0.5: alphas 0.8, 0.4, 0.2 -> 1 + 0.8 + 0.32 + 0.064 = 2.184.
  CHECK(config("eagle3", 3, geometric_acceptance(0.8, 0.5, 3)).expected_tokens() == Approx(2.184));
  // MTP k = 1 at DeepSeek-V3's 0.85: 1.85 tokens per step.
  CHECK(config("mtp", 1, {0.85}).expected_tokens() == Approx(1.85));
  // Only 2 of 4 drafts verified (a budget cut them): 1 + 0.8 + 0.64 = 2.44.
  CHECK(config("eagle", 4, geometric_acceptance(0.8, 1.0, 4)).expected_tokens(2) == Approx(2.44));
}

TEST_CASE("speculative: accepted counts are drawn with the right distribution and replay", "[speculative]") {
  SpeculativeConfig c = config("eagle", 4, geometric_acceptance(0.8, 1.0, 4));
  c.seed = 7;
  // P(A = 1) = 1 - 0.8 = 0.2; P(A = 5) = 0.8^4 = 0.4096; mean 3.3616. 40000 draws: the mean's
  // standard error is sd / 200 with sd < 1.6, so 0.03 is over 3.5 standard errors.
  const int n = 40000;
  double sum = 0;
  int ones = 0, all = 0;
  for (int i = 0; i < n; ++i) {
    const int a = c.draw_accepted(static_cast<std::uint64_t>(i), 10, 4);
    REQUIRE(a >= 1);
    REQUIRE(a <= 5);
    sum += a;
    ones += a == 1;
    all += a == 5;
  }
  CHECK(sum / n == Approx(3.3616).margin(0.03));
  CHECK(static_cast<double>(ones) / n == Approx(0.2).margin(0.01));
  CHECK(static_cast<double>(all) / n == Approx(0.4096).margin(0.01));
  // A pure function of (seed, request, tokens generated): the same draw again, another seed
  // a different stream.
  CHECK(c.draw_accepted(123, 45, 4) == c.draw_accepted(123, 45, 4));
  int differ = 0;
  SpeculativeConfig other = c;
  other.seed = 8;
  for (int i = 0; i < 100; ++i) differ += c.draw_accepted(i, 1, 4) != other.draw_accepted(i, 1, 4);
  CHECK(differ > 20);
  // Acceptance 1 accepts every verified draft.
  CHECK(config("eagle", 3, {1, 1, 1}).draw_accepted(1, 1, 3) == 4);
  CHECK(config("eagle", 3, {1, 1, 1}).draw_accepted(1, 1, 2) == 3);
}

TEST_CASE("speculative: vLLM's --speculative-config JSON and capsim's acceptance", "[speculative]") {
  using scenario::parse_speculative;
  const SpeculativeConfig e = parse_speculative(R"({"method": "eagle3", "num_speculative_tokens": 4})", std::nullopt, std::nullopt);
  CHECK(e.method == "eagle3");
  CHECK(e.num_speculative_tokens == 4);
  CHECK(e.acceptance == std::vector<double>{0.65, 0.65, 0.65, 0.65});  // the cited default
  const SpeculativeConfig m = parse_speculative(R"({"method": "deepseek_mtp"})", std::nullopt, std::nullopt);
  CHECK(m.method == "mtp");
  CHECK(m.num_speculative_tokens == 1);
  CHECK(m.acceptance == std::vector<double>{0.85});
  const SpeculativeConfig d = parse_speculative(R"({"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 2})",
                                                std::string("0.7,0.6"), std::nullopt);
  REQUIRE(d.draft);
  CHECK(d.draft->layers == 16);
  CHECK(d.acceptance == std::vector<double>{0.7, 0.6});
  const auto bad = [](const std::string& json, std::optional<std::string> acc, const std::string& want) {
    INFO(json);
    CHECK_THROWS_WITH(parse_speculative(json, acc, std::nullopt), Contains(want));
  };
  bad("{method: eagle}", std::nullopt, "is not JSON");
  bad(R"({"method": "medusa2"})", std::nullopt, "unknown speculative method 'medusa2'; accepted: eagle3, eagle, mtp, ngram, draft_model");
  bad(R"({"method": "eagle3", "num_speculative_tokens": 0})", std::nullopt, "num_speculative_tokens: 0 is not a whole number in 1..16");
  bad(R"({"method": "eagle3", "acceptance": 0.7})", std::nullopt, "unknown field 'acceptance'");
  bad(R"({"method": "ngram"})", std::nullopt, "--spec-acceptance: ngram has no published default acceptance");
  bad(R"({"method": "draft_model"})", std::string("0.7"), "draft_model needs the draft");
  bad(R"({"method": "eagle3"})", std::string("1.5"), "--spec-acceptance: '1.5' is not an acceptance in (0, 1]");
  bad(R"({"method": "eagle3", "num_speculative_tokens": 3})", std::string("0.9,0.8"), "2 values for 3 speculative tokens");
}

TEST_CASE("speculative: proposer memory, by hand", "[speculative][memory]") {
  using namespace capsim::test;
  Deployment d = deployment("llama-3.1-8b", "h100-sxm");
  const MemoryPlan plain = plan_memory(d, 2048);
  d.speculative = config("eagle3", 3, {0.65, 0.65, 0.65});
  d.validate();
  // EAGLE-3 head on Llama-3.1-8B: one decoder layer + its own LM head over 32000 tokens, 16-bit.
  //   attention: q 4096x4096 + k,v 2 x 4096x1024 + o 4096x4096 = 41,943,040
  //   MLP: 3 x 4096 x 14336 = 176,160,768;  norms: 2 x 4096 = 8,192 (+ the final norm 4,096)
  //   LM head: 32000 x 4096 = 131,072,000;  sum 349,188,096 params = 698,376,192 B.
  CHECK(proposer_weight_bytes(*d.speculative, d.model, TargetWeightLayout{}) == Approx(698'376'192.0).epsilon(1e-4));
  const MemoryPlan spec = plan_memory(d, 2048);
  CHECK(spec.proposer_weights == Approx(698'376'192.0).epsilon(1e-4));
  CHECK(plain.kv_cache - spec.kv_cache == Approx(spec.proposer_weights));
  // Its one layer keeps KV in the same blocks: a block grows from 32 to 33 layers' worth.
  CHECK(spec.kv_block_bytes == Approx(plain.kv_block_bytes * 33.0 / 32.0));
  // n-gram: nothing on the GPU.
  d.speculative = config("ngram", 3, {0.5, 0.5, 0.5});
  const MemoryPlan ngram = plan_memory(d, 2048);
  CHECK(ngram.kv_blocks == plain.kv_blocks);
}

TEST_CASE("speculative: an MTP module is the target's own fp8 layer, split as its layers are, by hand",
          "[speculative][memory]") {
  // DeepSeek-V3 (= R1's shapes, models/deepseek-v3/config.json): num_nextn_predict_layers 1, one
  // MoE decoder layer loaded with the checkpoint's fp8 quantisation (vLLM deepseek_mtp.py passes
  // the target's quant_config), plus eh_proj and two norms in 16-bit; embedding and LM head are
  // the target's. hidden 7168, 128 heads, q_lora 1536, kv_lora 512, rope 64, nope 128, v 128,
  // 256 routed experts + 1 shared of 2048.
  //   MLA: q_a 7168x1536 + 1536 + q_b 1536x128x192 + kv_a 7168x576 + 512 + kv_b 512x128x256
  //        + o 128x128x7168 = 187,107,328 (linear: 187,105,280)
  //   routed experts 256 x 3 x 7168 x 2048 = 11,274,289,152; shared 3 x 7168 x 2048 = 44,040,192
  //   router 7168 x 256 + 256 (noaux_tc bias) = 1,835,264; norms 3 x 7168 = 21,504
  // fp8 (ModelSpec::weight_bytes: 1 B a linear weight + one fp32 scale per output row, the rest
  // 16-bit): rows attention 128x192 + 2x128x192 + 7168 = 80,896, shared 2x2048 + 7168 = 11,264,
  // routed 256 x (2x2048 + 7168) = 2,883,584.
  //   routed experts: 11,274,289,152 + 4 x 2,883,584                        = 11,285,823,488 B
  //   the rest of the layer: 187,105,280 + 44,040,192 + 4 x (80,896 + 11,264)
  //                          + 2 x (21,504 + 2,048 + 1,835,264)             =    235,231,744 B
  //   eh_proj + enorm + hnorm: 2 x (2 x 7168 x 7168 + 2 x 7168)             =    205,549,568 B
  // TP 1 x DP 8 with expert parallelism (8 GPUs): 11,285,823,488 / 8 + 235,231,744 + 205,549,568
  //   = 1,851,509,248 B per GPU (1.72 GiB). Before: the layer at 16-bit over TP alone,
  //   2 x 11,507,293,440 = 23,014,586,880 B (21.43 GiB) on every GPU.
  scenario::DeploymentSpec spec;
  spec.model = "deepseek-v3";
  spec.card = "h200";
  spec.tp = 1;
  spec.dp = 8;
  spec.enable_expert_parallel = true;
  spec.speculative_config = R"({"method": "deepseek_mtp"})";
  const Deployment ep = spec.resolve();
  CHECK(ep.model.mtp_layers == 1);
  CHECK(ep.weights == Precision::kFp8);
  const MemoryPlan with_mtp = plan_memory(ep, 4096);
  CHECK(with_mtp.proposer_weights == Approx(1'851'509'248.0).epsilon(1e-12));
  Deployment plain = ep;
  plain.speculative.reset();
  CHECK(plan_memory(plain, 4096).kv_cache - with_mtp.kv_cache == Approx(1'851'509'248.0).epsilon(1e-9));
  CHECK(with_mtp.fits);
  // TP 8 without expert parallelism: every expert sliced over the same 8 GPUs, the rest too.
  //   (11,285,823,488 + 235,231,744) / 8 + 205,549,568 = 1,645,681,472 B per GPU.
  spec.tp = 8;
  spec.dp = 1;
  spec.enable_expert_parallel = false;
  CHECK(plan_memory(spec.resolve(), 4096).proposer_weights == Approx(1'645'681'472.0).epsilon(1e-12));
}

TEST_CASE("speculative: the verify step is a (k+1)-token decode plus the proposer's passes", "[speculative][cost]") {
  using namespace capsim::test;
  Deployment d = deployment("llama-3.1-8b", "h100-sxm");
  d.speculative = config("eagle3", 3, {0.65, 0.65, 0.65});
  const auto target = std::make_shared<RooflineCost>(d);
  const SpeculativeCost spec(target, d);
  // One decode at context 1000 verifying 3 drafts: 4 query tokens, 4 logit rows, pairs
  // 3 x 1000 + (1 + 2 + 3) = 3006 beyond the plain decode's 1000.
  BatchShape b;
  b.add_speculative_decode(1000, 3);
  CHECK(b.tokens() == 4);
  CHECK(b.logit_sequences == 4);
  CHECK(b.spec_attention_pairs == Approx(3006.0));
  // The proposer: pass 1 over the same 4 tokens with one logit row, then 2 passes of one token.
  const BatchShape p1 = spec.first_pass(b);
  CHECK(p1.tokens() == 4);
  CHECK(p1.logit_sequences == 1);
  const BatchShape later = spec.later_pass(b);
  CHECK(later.decode_sequences == 1);
  CHECK(later.decode_context_tokens == Approx(1003.0));
  Deployment head = d;
  head.model = *proposer_model(*d.speculative, d.model);
  head.speculative.reset();
  head.engine.step_overhead_s = head.engine.per_sequence_overhead_s = 0;
  const RooflineCost head_cost(head);
  const double want = target->seconds(b) + head_cost.seconds(p1) + 2 * head_cost.seconds(later);
  CHECK(spec.seconds(b) == Approx(want).epsilon(1e-12));
  // At batch 1 the verify step reads the same weights as a plain decode: 4 tokens cost < 5%
  // more than 1 (memory-bound). At batch 256 with short contexts (100 tokens, so the weights,
  // not the KV, dominate) the 1024 query tokens are compute-bound: the MLP alone is
  // 2 x 1024 x 3 x 4096 x 14336 x 32 = 11.5 TFLOP, 15.4 ms at the H100's 751.9 TFLOP/s achieved,
  // against ~5.8 ms (memory-bound, 11.4 GB of weights) for 256 tokens; the whole step costs more
  // than twice the plain decode, so 2.35 expected tokens per verify barely break even.
  BatchShape one;
  one.add_decode(1000);
  CHECK(target->seconds(b) < 1.05 * target->seconds(one));
  BatchShape wide, wide_spec;
  for (int i = 0; i < 256; ++i) {
    wide.add_decode(100);
    wide_spec.add_speculative_decode(100, 3);
  }
  CHECK(target->seconds(wide_spec) > 2.0 * target->seconds(wide));
  // With long contexts (1000) the KV reads, shared by the 4 queries of a sequence, dominate the
  // plain step (11.7 of 20.8 ms), and the verify costs less than twice as much.
  BatchShape long_plain, long_spec;
  for (int i = 0; i < 256; ++i) {
    long_plain.add_decode(1000);
    long_spec.add_speculative_decode(1000, 3);
  }
  CHECK(target->seconds(long_spec) < 2.0 * target->seconds(long_plain));
  CHECK(target->seconds(long_spec) > 1.4 * target->seconds(long_plain));
  // n-gram adds nothing to the target's step.
  Deployment ng = d;
  ng.speculative = config("ngram", 3, {0.5, 0.5, 0.5});
  const SpeculativeCost ngram(target, ng);
  CHECK(ngram.seconds(b) == target->seconds(b));
}

TEST_CASE("speculative: MTP's cited default decays past the one trained module, by hand", "[speculative]") {
  using scenario::parse_speculative;
  // DeepSeek-V3's one MTP module: 0.85 for the first draft (arXiv 2412.19437 section 5.4.3), then
  // a decay of 0.83 per later draft (the module reused at K = 7 reaches 3.09 tokens per verify,
  // nebius/MTP-DeepSeek-V3-0324 model card). k = 3: alphas 0.85, 0.7055, 0.585565;
  // E[A] = 1 + 0.85 + 0.85 x 0.7055 + 0.85 x 0.7055 x 0.585565
  //      = 1 + 0.85 + 0.599675 + 0.351149 = 2.800824 (a flat 0.85 gave 3.186625).
  const SpeculativeConfig k3 = parse_speculative(R"({"method": "mtp", "num_speculative_tokens": 3})", std::nullopt, std::nullopt);
  REQUIRE(k3.acceptance.size() == 3);
  CHECK(k3.acceptance[0] == Approx(0.85));
  CHECK(k3.acceptance[1] == Approx(0.7055));
  CHECK(k3.acceptance[2] == Approx(0.585565));
  CHECK(k3.expected_tokens() == Approx(2.800824).epsilon(1e-6));
  // K = 7 lands on the published length: 3.0698 against 3.09 (within 1%).
  const SpeculativeConfig k7 = parse_speculative(R"({"method": "mtp", "num_speculative_tokens": 7})", std::nullopt, std::nullopt);
  CHECK(k7.expected_tokens() == Approx(3.09).epsilon(0.01));
  // k = 1 is the report's own number, unchanged: 1.85.
  CHECK(parse_speculative(R"({"method": "mtp"})", std::nullopt, std::nullopt).expected_tokens() == Approx(1.85));
  // A user's alpha stays flat unless a decay is given; a decay of 1 flattens the default.
  CHECK(parse_speculative(R"({"method": "mtp", "num_speculative_tokens": 3})", std::string("0.85"), std::nullopt).acceptance ==
        std::vector<double>{0.85, 0.85, 0.85});
  CHECK(parse_speculative(R"({"method": "mtp", "num_speculative_tokens": 3})", std::nullopt, 1.0).acceptance ==
        std::vector<double>{0.85, 0.85, 0.85});
  // The EAGLE-3 default (a flat alpha fitted to an acceptance length) is not decayed.
  CHECK(parse_speculative(R"({"method": "eagle3", "num_speculative_tokens": 3})", std::nullopt, std::nullopt).acceptance ==
        std::vector<double>{0.65, 0.65, 0.65});
}

TEST_CASE("speculative: vLLM schedules synchronously with n-gram and draft-model drafting", "[speculative]") {
  // vLLM (v0.14 release notes; vllm/config/vllm.py) keeps asynchronous scheduling for EAGLE/MTP
  // drafters only: unset it turns it off, asked for it refuses to start.
  const auto spec_with = [](const std::string& json, std::optional<bool> async) {
    scenario::DeploymentSpec s;
    s.model = "llama-3.1-8b";
    s.card = "h100-sxm";
    s.speculative_config = json;
    s.spec_acceptance = "0.6";
    s.async_scheduling = async;
    return s;
  };
  REQUIRE(spec_with(R"({"method": "eagle3"})", std::nullopt).resolve().engine.async_scheduling);
  CHECK_FALSE(spec_with(R"({"method": "ngram"})", std::nullopt).resolve().engine.async_scheduling);
  CHECK_FALSE(spec_with(R"({"method": "draft_model", "model": "llama-3.2-1b"})", std::nullopt).resolve().engine.async_scheduling);
  CHECK_FALSE(spec_with(R"({"method": "ngram"})", false).resolve().engine.async_scheduling);
  CHECK_THROWS_WITH(spec_with(R"({"method": "ngram"})", true).resolve(),
                    Contains("--async-scheduling: vLLM refuses asynchronous scheduling with ngram speculative decoding") &&
                        Contains("accepted with ngram: false"));
  // EAGLE/MTP keep it either way.
  CHECK(spec_with(R"({"method": "eagle3"})", true).resolve().engine.async_scheduling);
}

TEST_CASE("speculative: the verify step's speed-up shrinks with the batch, 70B on H100, by hand", "[speculative][cost]") {
  // Llama-3.1-70B, TP 4 on H100 SXM, k = 3 at alpha 0.8: E[A] = 1 + 0.8 + 0.64 + 0.512 = 2.952
  // tokens per verify. n-gram drafting, so the speed-up is the verify step's alone:
  // speed-up(b) = 2.952 x T(b plain decodes) / T(b decodes verifying 3 drafts each).
  using namespace capsim::test;
  Deployment d = deployment("llama-3.1-70b", "h100-sxm", 4);
  d.speculative = config("ngram", 3, {0.8, 0.8, 0.8});
  CHECK(d.speculative->expected_tokens() == Approx(2.952));
  const auto target = std::make_shared<RooflineCost>(d);
  const SpeculativeCost spec(target, d);
  const auto speed_up = [&](int batch) {
    BatchShape plain, verify;
    for (int i = 0; i < batch; ++i) {
      plain.add_decode(1000);
      verify.add_speculative_decode(1000, 3);
    }
    return 2.952 * spec.seconds(plain) / spec.seconds(verify);
  };
  // Batch 1: every GEMM is memory-bound (35 GB of weights per GPU against 4 tokens' FLOPs), so
  // the 4-token verify costs what 1 token does, to within 2%: speed-up > 2.952 / 1.02 = 2.89.
  CHECK(speed_up(1) > 2.89);
  // Batch 256: 1024 query tokens. The MLP alone is 2 x 1024 x 3 x 8192 x 28672 x 80 / 4 =
  // 28.86 TFLOP per GPU, 38.4 ms at the H100's 751.9 TFLOP/s achieved (989 x 0.76), against
  // 11.0 ms to read its 28.2 GB: compute-bound, 4 x the plain step's 9.6 ms of MLP FLOPs.
  BatchShape verify;
  for (int i = 0; i < 256; ++i) verify.add_speculative_decode(1000, 3);
  const StepBreakdown b = spec.breakdown(verify);
  bool found = false;
  for (const auto& g : b.groups) {
    if (g.group != "mlp") continue;
    found = true;
    CHECK(g.flops == Approx(2.0 * 1024 * 3 * 8192.0 * 28672 * 80 / 4).epsilon(1e-9));
    CHECK(g.compute_s == Approx(2.0 * 1024 * 3 * 8192.0 * 28672 * 80 / 4 / 751.9e12).epsilon(0.01));
    CHECK(g.compute_s > 3 * g.memory_s);
  }
  CHECK(found);
  // The plain step at 256 is 33.0 ms (capsim roofline --model llama-3.1-70b --card h100-sxm --tp 4
  // --batch 256 --context 1000); the verify adds (38.4 - 14.6) ms of MLP, ~15 ms of all-reduces
  // over 4 x the activations (5.4 ms for 256 tokens), ~5 ms of projections and ~4 ms of
  // elementwise kernels: ~80 ms, a speed-up near 2.952 x 33 / 80 = 1.2 (capsim: 1.27), under
  // half of batch 1's.
  CHECK(speed_up(256) < 1.35);
  CHECK(speed_up(256) > 1.15);
  CHECK(speed_up(256) < 0.5 * speed_up(1));
}

TEST_CASE("speculative: an MTP module's passes read the target's fp8 experts, by hand", "[speculative][cost]") {
  // DeepSeek-V3 on 8 x H200, TP 8, MTP k = 2. The later pass of 256 sequences (context 10, so
  // the KV is negligible) routes 256 x 8 experts over 256: all but e^-8 of them are read. Per GPU
  // at fp8 (1 B a weight + an fp32 scale per row, speculative memory test above): routed experts
  // 11,285,823,488 / 8 = 1,410,727,936 B; attention, shared expert and router 235,231,744 / 8 =
  // 29,403,968 B; the LM head 129,280 x 7168 x 2 B / 8 = 231,669,760 B: about 1.67 GB. Read at
  // 16-bit (as every head was before) the experts alone would be 2 x 11,274,289,152 / 8 = 2.82 GB.
  scenario::DeploymentSpec s;
  s.model = "deepseek-v3";
  s.card = "h200";
  s.tp = 8;
  s.speculative_config = R"({"method": "mtp", "num_speculative_tokens": 2})";
  const Deployment d = s.resolve();
  const auto target = std::make_shared<RooflineCost>(d);
  const SpeculativeCost spec(target, d);
  BatchShape b;
  for (int i = 0; i < 256; ++i) b.add_speculative_decode(10, 2);
  const StepBreakdown br = spec.breakdown(b);
  double later = -1;
  for (const auto& g : br.groups) {
    if (g.group == "draft_later_passes") later = g.bytes;
  }
  REQUIRE(later > 0);
  // The weights, 1,671,801,664 B, plus under 10% of activations, MoE dispatch buffers (66 MB)
  // and logits (capsim roofline --model deepseek-v3 --card h200 --tp 8 --batch 256 --context 12,
  // per layer: 1,810.7 MB in all).
  const double hand = 1'410'727'936.0 + 29'403'968.0 + 231'669'760.0;
  CHECK(later > hand);
  CHECK(later < 1.1 * hand);
  CHECK(later < 2.0 * 11'274'289'152.0 / 8);
}
