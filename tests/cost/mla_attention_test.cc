// MLA (DeepSeek-V2/V3) attention in the roofline step cost: the two forms vLLM runs
// (vllm/v1/attention/backends/mla/common.py, module docstring; docs/cost-model.md#mla), worked
// out by hand from models/deepseek-v3/config.json: 61 layers, 128 heads, kv_lora_rank 512,
// qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128. TP8: 16 heads per GPU; the
// 576-element latent (512 + 64) is cached whole on every GPU.
#include <catch2/catch.hpp>

#include <string>

#include "sim/cost/batch_shape.h"
#include "sim/cost/roofline_cost.h"
#include "sim/llm/deployment.h"
#include "sim/llm/engine_profile.h"
#include "sim/llm/model_spec.h"
#include "tests/cost/breakdown_groups.h"
#include "tests/support/catalogues.h"

namespace {

using namespace capsim;
using test::group;
using test::has_group;

// DeepSeek-V3 in FP8 (as shipped) with a bf16 KV cache, vLLM, TP8 on H200s.
Deployment deepseek_v3_tp8() {
  Deployment d;
  d.model = capsim_test::model_catalogue().find("deepseek-v3");
  d.card = capsim_test::card_catalogue().find("h200");
  d.engine = capsim_test::engine_profile("vllm");
  d.tp = 8;
  d.weights = Precision::kFp8;
  d.kv_cache = Precision::kBf16;
  d.limits = default_limits(d.card, d.engine);
  d.validate();
  return d;
}

}  // namespace

TEST_CASE("mla: the DeepSeek-V3 shapes the hand numbers below use", "[cost][mla]") {
  const ModelSpec& m = deepseek_v3_tp8().model;
  CHECK(m.attention == AttentionKind::kLatent);
  CHECK(m.layers == 61);
  CHECK(m.heads == 128);
  CHECK(m.kv_lora_rank == 512);
  CHECK(m.qk_nope_head_dim == 128);
  CHECK(m.qk_rope_head_dim == 64);
  CHECK(m.v_head_dim == 128);
}

// Decode runs the absorbed form: each head's query is projected into the latent space
// (q_nope x W_UK), so every head is an MQA head over the cached latent: QK^T over 512 + 64 = 576
// dims and P.V over the 512-dim latent, 2 x (576 + 512) = 2,176 FLOPs per head per key; 16 heads
// per GPU: 34,816 per key per layer. (The expanded form, 2 x (128 + 64 + 128) = 640 per head,
// 10,240 per GPU, is 3.4x smaller.)
// Batch 64 at context 8,192: 524,288 keys x 34,816 x 61 layers = 1,113,470,271,488 FLOPs.
// Bytes: 524,288 x 576 elements x 2 B x 61 = 36,842,766,336 (the latent is read once per step
// for all heads).
TEST_CASE("mla: decode attends the 576-wide latent per head (absorbed form)", "[cost][mla]") {
  const RooflineCost cost(deepseek_v3_tp8());
  BatchShape b;
  for (int i = 0; i < 64; ++i) b.add_decode(8192);
  const auto breakdown = cost.breakdown(b);  // group() refers into it: keep it alive
  const OperatorCost& a = group(breakdown, "attention_decode");
  CHECK(a.flops == 1'113'470'271'488.0);
  CHECK(a.bytes == 36'842'766'336.0);
}

// Speculative drafts are decode queries too (FlashMLA takes several query tokens per sequence):
// one decode at context 1,000 with 3 drafts adds 3 x 1,000 + 3 x 4 / 2 = 3,006 pairs to its
// 1,000 keys: 4,006 x 34,816 x 61 = 8,507,846,656 FLOPs over the same 1,000 cached tokens.
TEST_CASE("mla: speculative drafts attend in the absorbed form", "[cost][mla]") {
  const RooflineCost cost(deepseek_v3_tp8());
  BatchShape b;
  b.add_speculative_decode(1000, 3);
  const auto breakdown = cost.breakdown(b);  // group() refers into it: keep it alive
  const OperatorCost& a = group(breakdown, "attention_decode");
  CHECK(a.flops == 8'507'846'656.0);
  CHECK(a.bytes == 1000.0 * 576 * 2 * 61);
}

// Prefill runs the expanded form: MHA with QK^T over 128 + 64 = 192 dims and P.V over 128,
// 2 x 16 x 320 = 10,240 FLOPs per query-key pair per GPU per layer. An 8,192-token prompt with
// nothing cached: 8,192 x 8,193 / 2 = 33,558,528 causal pairs x 10,240 x 61 = 20,961,998,929,920.
// Nothing is cached, so nothing is up-projected again.
TEST_CASE("mla: prefill attends per head in the expanded form", "[cost][mla]") {
  const RooflineCost cost(deepseek_v3_tp8());
  BatchShape b;
  b.add_prefill_chunk(0, 8192, true);
  const StepBreakdown s = cost.breakdown(b);
  CHECK(group(s, "attention_prefill").flops == 20'961'998'929'920.0);
  CHECK_FALSE(has_group(s, "mla_kv_up_proj"));
}

// A chunk after a cached context up-projects the cached latents with kv_b_proj again (common.py,
// "Chunked Prefill"). 2,048 new tokens after 6,144 cached, per GPU per layer:
//   kv_b per GPU = 512 x 16 x (128 + 128) = 2,097,152 parameters
//   FLOPs = 2 x 6,144 x 2,097,152 = 25,769,803,776; x 61 = 1,571,958,030,336
//   bytes = 2,097,152 x 1 B (fp8 weights) + 6,144 x (576 x 2 B read + 16 x 256 x 2 B written)
//         = 2,097,152 + 6,144 x 9,344 = 59,506,688; x 61 = 3,629,907,968
// The chunk's own attention: 2,048 x (6,144 + 2,049 / 2) = 14,681,088 pairs x 10,240 x 61
// = 9,170,394,808,320 FLOPs, so the up-projection adds 17% to it.
TEST_CASE("mla: a prefill chunk up-projects its cached context", "[cost][mla]") {
  const RooflineCost cost(deepseek_v3_tp8());
  BatchShape b;
  b.add_prefill_chunk(6144, 2048, true);
  const StepBreakdown s = cost.breakdown(b);
  const OperatorCost& up = group(s, "mla_kv_up_proj");
  CHECK(up.flops == 1'571'958'030'336.0);
  CHECK(up.bytes == 3'629'907'968.0);
  CHECK(group(s, "attention_prefill").flops == 9'170'394'808'320.0);
}

// MHA models have no up-projection: Llama-3.1-8B's chunk after a cached context has none.
TEST_CASE("mla: multi-head models have no kv up-projection", "[cost][mla]") {
  Deployment d;
  d.model = capsim_test::model_catalogue().find("llama-3.1-8b");
  d.card = capsim_test::card_catalogue().find("h200");
  d.engine = capsim_test::engine_profile("vllm");
  d.limits = default_limits(d.card, d.engine);
  d.validate();
  BatchShape b;
  b.add_prefill_chunk(6144, 2048, true);
  CHECK_FALSE(has_group(RooflineCost(d).breakdown(b), "mla_kv_up_proj"));
}
