// The memory plan (sim/llm/memory_plan.h): vLLM's accounting of one GPU, worked out by hand.
//   budget   = gpu_memory_utilization x visible memory
//   kv_bytes = budget - weights/TP - activation peak - runtime memory
//   blocks   = floor(kv_bytes / (block_size x KV bytes per token per GPU))
// Only the card's visible memory is read from the Card object (it is data); everything else is
// computed here from the model's shape and the vLLM engine file's numbers.
#include "sim/llm/memory_plan.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "sim/core/error.h"
#include "sim/hardware/card.h"
#include "sim/llm/deployment.h"
#include "sim/llm/engine_profile.h"
#include "sim/llm/model_spec.h"
#include "tests/support/catalogues.h"

#ifndef CAPSIM_DATA_DIR
#error "CAPSIM_DATA_DIR must name the repository root (the build defines it)"
#endif

namespace {

using namespace capsim;

constexpr double kGiB = 1073741824.0;  // 2^30

constexpr auto& cards = capsim_test::card_catalogue;
constexpr auto& models = capsim_test::model_catalogue;
const EngineProfile& vllm() { return capsim_test::engine_profile("vllm"); }

Deployment deploy(const std::string& model, const std::string& card, int tp = 1,
                  Precision weights = Precision::kBf16, Precision kv = Precision::kBf16) {
  Deployment d;
  d.model = models().find(model);
  d.card = cards().find(card);
  d.engine = vllm();
  d.tp = tp;
  d.weights = weights;
  d.kv_cache = kv;
  d.limits = default_limits(d.card, d.engine);
  d.validate();
  return d;
}

// llama-3.1-8b in bf16: 2 x 8,030,261,248 parameters.
constexpr double kLlama8bWeights = 16'060'522'496.0;
// Activation peak at vLLM's H100 defaults (8192 batched tokens, 1024 sequences): the larger of
//   the forward pass 8192 x (3 x 4096 + 3 x 14336) x 2 B = 8192 x 55,296 x 2 = 905,969,664 and
//   the sampler     1024 x 128256 x 4 B x 2           = 1,050,673,152.
const double kLlama8bActivations =
    std::max(8192.0 * (3 * 4096 + 3 * 14336) * 2, 1024.0 * 128256 * 4 * 2);
// vLLM's non-torch runtime memory from calibration/engines/vllm.yaml: 1.79 GiB (PR #10511 log).
constexpr double kRuntime = 1.79 * kGiB;
// A block of 16 tokens of llama-3.1-8b bf16 KV: 16 x 131,072 B = 2,097,152 B.
constexpr double kLlama8bBlock = 16 * 131'072.0;

}  // namespace

TEST_CASE("memory: vLLM's default limits depend on the card", "[llm][memory]") {
  // >= 70 GiB visible and not an A100: 8192 batched tokens, 1024 sequences; otherwise 2048 / 256.
  const SchedulerLimits h100 = default_limits(cards().find("h100-sxm"), vllm());
  CHECK(h100.max_num_batched_tokens == 8192);
  CHECK(h100.max_num_seqs == 1024);
  CHECK(h100.block_size == 16);
  CHECK(h100.gpu_memory_utilization == 0.9);
  const SchedulerLimits a100 = default_limits(cards().find("a100-80gb-sxm"), vllm());
  CHECK(a100.max_num_batched_tokens == 2048);
  CHECK(a100.max_num_seqs == 256);
  const SchedulerLimits rtx = default_limits(cards().find("rtx-4090"), vllm());
  CHECK(rtx.max_num_batched_tokens == 2048);
  CHECK(rtx.max_num_seqs == 256);
}

TEST_CASE("memory: llama-3.1-8b on one h100-sxm, vLLM defaults, by hand", "[llm][memory]") {
  const Deployment d = deploy("llama-3.1-8b", "h100-sxm");
  const MemoryPlan p = plan_memory(d, 4096);

  const double visible = d.card.visible_memory_bytes;  // memory_visible, else memory
  const double budget = 0.9 * visible;
  const double kv = budget - kLlama8bWeights - kLlama8bActivations - kRuntime;
  const long long blocks = static_cast<long long>(std::floor(kv / kLlama8bBlock));
  const long long tokens = blocks * 16;

  CHECK(p.visible == visible);
  CHECK(p.budget == Approx(budget).epsilon(1e-14));
  CHECK(p.weights == kLlama8bWeights);
  CHECK(p.activations == kLlama8bActivations);
  CHECK(kLlama8bActivations == 1'050'673'152.0);  // the sampler wins
  CHECK(p.runtime == Approx(kRuntime).epsilon(1e-15));
  CHECK(p.outside_budget == Approx(1.5 * kGiB).epsilon(1e-15));  // CUDA context + graphs
  CHECK(p.kv_bytes_per_token_per_gpu == 131'072);
  CHECK(p.kv_cache == Approx(kv).epsilon(1e-12));
  CHECK(p.kv_blocks == blocks);
  CHECK(p.kv_tokens == tokens);
  // A sequence of 4096 tokens needs 4096 / 16 = 256 blocks.
  CHECK(p.max_sequences_at_context == blocks / 256);
  CHECK(p.fits);
  CHECK(p.shortfall == 0);
  CHECK(p.reason.empty());

  // With the catalogue's 79.11 GiB (vLLM's 'total capacity of 79.11 GiB' on H100):
  //   visible 84,943,715,696.64; budget 76,449,344,126.976
  //   kv = 76,449,344,126.976 - 16,060,522,496 - 1,050,673,152 - 1,921,997,864.96
  //      = 57,416,150,614.016 B; / 2,097,152 = 27,378.15 -> 27,378 blocks = 438,048 tokens;
  //   sequences of 4096 tokens: 27,378 / 256 = 106.
  if (visible == Approx(79.11 * kGiB).epsilon(1e-15)) {
    CHECK(p.kv_blocks == 27'378);
    CHECK(p.kv_tokens == 438'048);
    CHECK(p.max_sequences_at_context == 106);
  } else {
    WARN("h100-sxm visible memory is no longer 79.11 GiB; the literal check is skipped");
  }
  // vLLM's log prints the weights as 14.96 GiB: 16,060,522,496 / 2^30
  //   = 14 + (16,060,522,496 - 14 x 1,073,741,824 = 1,028,136,960) / 1,073,741,824 = 14.9575.
  CHECK(p.weights / kGiB == Approx(14.9575).margin(0.0001));
}

TEST_CASE("memory: llama-3.1-8b on one h200 budgets what CUDA reports, by hand", "[llm][memory]") {
  // The H200 card's memory_visible is 143156 MiB, what torch reports on an H200 (card file
  // reference visible-h200); the datasheet's 141 GB (131.32 GiB) was budgeted before.
  //   visible = 143,156 x 2^20 = 150,109,945,856 B (139.80 GiB); budget 0.9 x = 135,098,951,270.4
  //   kv = 135,098,951,270.4 - 16,060,522,496 - 1,050,673,152 - 1,921,997,864.96
  //      = 116,065,757,757.44 B; / 2,097,152 = 55,344.47 -> 55,344 blocks = 885,504 tokens;
  //   sequences of 4096 tokens: 55,344 / 256 = 216.
  // (With 141e9 B: 51,434 blocks.) The H200 takes vLLM's large-card defaults as the H100 does.
  const Deployment d = deploy("llama-3.1-8b", "h200");
  const MemoryPlan p = plan_memory(d, 4096);
  CHECK(p.visible == 150'109'945'856.0);
  CHECK(p.budget == Approx(135'098'951'270.4).epsilon(1e-14));
  CHECK(p.activations == kLlama8bActivations);
  CHECK(p.kv_cache == Approx(116'065'757'757.44).epsilon(1e-12));
  CHECK(p.kv_blocks == 55'344);
  CHECK(p.kv_tokens == 885'504);
  CHECK(p.max_sequences_at_context == 216);
  CHECK(p.fits);
}

TEST_CASE("memory: an fp8 KV cache holds twice the tokens", "[llm][memory]") {
  const Deployment d = deploy("llama-3.1-8b", "h100-sxm", 1, Precision::kBf16, Precision::kFp8);
  const MemoryPlan p = plan_memory(d, 4096);
  const double kv = 0.9 * d.card.visible_memory_bytes - kLlama8bWeights - kLlama8bActivations -
                    kRuntime;
  // 65,536 B a token; a block of 16 = 1,048,576 B.
  CHECK(p.kv_bytes_per_token_per_gpu == 65'536);
  CHECK(p.kv_blocks == static_cast<long long>(std::floor(kv / 1'048'576.0)));
  CHECK(p.kv_tokens == p.kv_blocks * 16);
}

TEST_CASE("memory: sequences at a context count whole blocks", "[llm][memory]") {
  // A card whose memory leaves exactly 64.5 blocks of KV after weights, activations and runtime
  // (gpu_memory_utilization 1 so that the budget is the visible memory itself).
  Deployment d = deploy("llama-3.1-8b", "h100-sxm");
  d.limits.gpu_memory_utilization = 1.0;
  d.card.visible_memory_bytes = kLlama8bWeights + kLlama8bActivations + kRuntime + 64.5 * kLlama8bBlock;

  // 64 whole blocks of 16 = 1024 tokens.
  const MemoryPlan p512 = plan_memory(d, 512);
  CHECK(p512.kv_cache == Approx(64.5 * kLlama8bBlock).epsilon(1e-9));
  CHECK(p512.kv_blocks == 64);
  CHECK(p512.kv_tokens == 1024);
  // 2 requests x 512 tokens = 2 x 32 blocks = 64 blocks of 16.
  CHECK(p512.max_sequences_at_context == 2);
  CHECK(p512.fits);
  // 513 tokens need ceil(513 / 16) = 33 blocks: only one such sequence fits in 64.
  CHECK(plan_memory(d, 513).max_sequences_at_context == 1);
  // 1024 tokens = 64 blocks: exactly one.
  const MemoryPlan p1024 = plan_memory(d, 1024);
  CHECK(p1024.max_sequences_at_context == 1);
  CHECK(p1024.fits);
  // 1025 tokens = 65 blocks: none. Short by 65 blocks - 64.5 blocks = 0.5 x 2,097,152 = 1,048,576 B.
  const MemoryPlan p1025 = plan_memory(d, 1025);
  CHECK(p1025.max_sequences_at_context == 0);
  CHECK_FALSE(p1025.fits);
  CHECK(p1025.shortfall == Approx(1'048'576.0).margin(1e-3));
  CHECK(p1025.reason == "the KV cache (1024 tokens) cannot hold one sequence of 1025 tokens");
}

TEST_CASE("memory: llama-3.1-70b does not fit on one rtx-4090, short by the difference",
          "[llm][memory]") {
  const Deployment d = deploy("llama-3.1-70b", "rtx-4090");
  const MemoryPlan p = plan_memory(d, 4096);
  // llama-3.1-70b: hidden 8192, 80 layers, 64 heads, 8 KV heads, intermediate 28672, vocab 128256.
  //   per layer: q, o 2 x 8192^2 = 134,217,728; k, v 2 x 8192 x 1024 = 16,777,216;
  //     MLP 3 x 8192 x 28672 = 704,643,072; norms 16,384 => 855,654,400; x 80 = 68,452,352,000
  //   embedding + lm_head 2 x 128256 x 8192 = 2,101,346,304; final norm 8,192
  //   total 70,553,706,496 parameters; bf16 weights 141,107,412,992 B.
  const double weights = 141'107'412'992.0;
  // rtx-4090 (< 70 GiB): 2048 batched tokens, 256 sequences. Activation peak: the larger of
  //   2048 x (3 x 8192 + 3 x 28672) x 2 = 2048 x 110,592 x 2 = 452,984,832 and
  //   256 x 128256 x 4 x 2 = 262,668,288.
  const double activations = 452'984'832.0;
  const double budget = 0.9 * d.card.visible_memory_bytes;
  // Fitting needs weights + activations + runtime + one 4096-token sequence of KV:
  //   KV per token 80 x 2 x 8 x 128 x 2 = 327,680 B; 4096 / 16 = 256 blocks of 16 x 327,680
  //   = 256 x 5,242,880 = 1,342,177,280 B.
  const double needed = weights + activations + kRuntime + 1'342'177'280.0;

  CHECK(p.weights == weights);
  CHECK(p.activations == activations);
  CHECK_FALSE(p.fits);
  CHECK(p.kv_cache < 0);
  CHECK(p.kv_blocks == 0);
  CHECK(p.kv_tokens == 0);
  CHECK(p.max_sequences_at_context == 0);
  CHECK(p.shortfall == Approx(needed - budget).epsilon(1e-12));
  // weights 141,107,412,992 / 2^30 = 131.42 GiB; activations 0.42 GiB; runtime 1.79 GiB.
  CHECK(p.reason.rfind("weights (131.42 GiB), activations (0.42 GiB) and runtime (1.79 GiB) "
                       "exceed the budget of ",
                       0) == 0);
}

TEST_CASE("memory: TP=2 halves the weights per GPU and adds the TP runtime", "[llm][memory]") {
  const Deployment d = deploy("llama-3.1-8b", "h100-sxm", 2);
  const MemoryPlan p = plan_memory(d, 4096);
  // Weights 16,060,522,496 / 2 = 8,030,261,248 per GPU.
  CHECK(p.weights == 8'030'261'248.0);
  // runtime 1.79 GiB + runtime_tp_extra 1.79 GiB (vLLM's 3.58 GiB at TP 2 in PR #10511).
  CHECK(p.runtime == Approx(2 * kRuntime).epsilon(1e-15));
  // Activations: forward 8192 x (3 x 4096 + 3 x 14336 / 2) x 2 = 553,648,128, but the sampler
  // (logits gathered to every rank) still needs 1,050,673,152.
  CHECK(p.activations == 1'050'673'152.0);
  // 4 of the 8 KV heads per GPU: 32 x 2 x 4 x 128 x 2 = 65,536 B a token.
  CHECK(p.kv_bytes_per_token_per_gpu == 65'536);
  const double kv = 0.9 * d.card.visible_memory_bytes - 8'030'261'248.0 - 1'050'673'152.0 -
                    2 * kRuntime;
  CHECK(p.kv_blocks == static_cast<long long>(std::floor(kv / (16 * 65'536.0))));
  CHECK(p.fits);
}

TEST_CASE("memory: activation peak at other shapes", "[llm][memory]") {
  const ModelSpec m = models().find("mixtral-8x7b");
  // MoE layers route each token to 2 experts of 14336: widest intermediate 3 x 2 x 14336 = 86,016
  // (vs qkv (32 + 16) x 128 = 6,144). 2048 tokens: 2048 x (3 x 4096 + 86,016) x 2 = 402,653,184.
  // Sampler at 16 sequences: 16 x 32000 x 8 = 4,096,000.
  CHECK(activation_peak_bytes(m, 1, 2048, 16) == 402'653'184.0);
  // At TP 2 the intermediate splits: 2048 x (12,288 + 43,008) x 2 = 226,492,416.
  CHECK(activation_peak_bytes(m, 2, 2048, 16) == 226'492'416.0);
}

// ---- Sliding windows: vLLM's hybrid KV-cache manager ----

TEST_CASE("memory: a sliding-window KV layout counts blocks per layer group, by hand",
          "[llm][memory][sliding]") {
  // Blocks of 16, one full group and one sliding group, window 4096, prefill chunks of up to
  // 8192 tokens: the sliding peak is ceil((4096 - 1 + 8192) / 16) + 1 = 768 + 1 = 769 blocks.
  KvLayout l;
  l.block_size = 16;
  l.layers_per_group = 21;
  l.full_groups = 1;
  l.sliding_groups = 1;
  l.sliding_window = 4096;
  l.sliding_peak_blocks = 769;
  // 100 tokens: 7 blocks in each group.
  CHECK(l.decode_blocks(100) == 14);
  // 8192 tokens decoding: 512 full + the window's ceil(4095 / 16) + 1 = 257 sliding = 769.
  CHECK(l.decode_blocks(8192) == 769);
  // ... and at the prefill chunk reaching 8192: 512 + min(512, 769) = 1024.
  CHECK(l.peak_blocks(8192) == 1024);
  // 100,000 tokens: 6250 full + 257 sliding decoding; 6250 + 769 at the peak.
  CHECK(l.decode_blocks(100'000) == 6507);
  CHECK(l.peak_blocks(100'000) == 7019);
  // The longest sequence 2000 blocks hold: 2000 >= 2 x 769, so (2000 - 769) x 16 = 19,696
  // tokens; 1000 blocks hold 1000 / 2 x 16 = 8000 (below the cap every token costs both).
  CHECK(l.longest_sequence(2000) == 19'696);
  CHECK(l.longest_sequence(1000) == 8000);
  // Full attention (the default layout): blocks x 16.
  CHECK(KvLayout{}.longest_sequence(2000) == 32'000);
  CHECK(KvLayout{}.decode_blocks(8192) == 512);
}

TEST_CASE("memory: gemma-2-9b's local layers hold only their window", "[llm][memory][sliding]") {
  // gemma-2-9b: 42 layers, 21 local (window 4096) and 21 global; 8 KV heads x head_dim 256:
  // 2 x 8 x 256 x 2 B = 8192 B per layer per token in bf16. A pool block holds 16 tokens of
  // one 21-layer group: 16 x 21 x 8192 = 2,752,512 B (full attention's block of all 42 layers
  // would be 5,505,024 B).
  Deployment d = deploy("gemma-2-9b", "h100-sxm");
  const MemoryPlan base = plan_memory(d, 8192);
  CHECK(base.layout.layers_per_group == 21);
  CHECK(base.layout.full_groups == 1);
  CHECK(base.layout.sliding_groups == 1);
  CHECK(base.layout.sliding_window == 4096);
  CHECK(base.layout.sliding_peak_blocks == 769);  // H100 default: 8192 batched tokens
  CHECK(base.kv_block_bytes == 2'752'512.0);
  CHECK(base.kv_blocks == static_cast<long long>(std::floor(base.kv_cache / 2'752'512.0)));

  // A card that leaves exactly 2000.5 blocks for KV (gpu_memory_utilization 1).
  d.limits.gpu_memory_utilization = 1.0;
  d.card.visible_memory_bytes = base.weights + base.activations + base.runtime + 2000.5 * 2'752'512.0;
  const MemoryPlan p = plan_memory(d, 8192);
  CHECK(p.kv_blocks == 2000);
  // Sequences of 8192 tokens decoding take 769 blocks each: 2000 / 769 = 2. With full attention
  // the same bytes are 1000.25 blocks of 5,505,024 B -> 1000 / 512 = 1 sequence.
  CHECK(p.max_sequences_at_context == 2);
  // Sequences of 4096 tokens: 256 + min(256, 257) = 512 blocks -> 3 (full attention: 1000/256 = 3
  // too: within the window sliding layers hold every token).
  CHECK(plan_memory(d, 4096).max_sequences_at_context == 3);
  // vLLM's logged "GPU KV cache size": 2000 blocks / 2 groups x 16 = 16,000 tokens (what full
  // attention holds in the same bytes). Effective capacity: the longest one sequence,
  // (2000 - 769) x 16 = 19,696 tokens. max_model_len unset: the context, 8192.
  CHECK(p.kv_tokens == 16'000);
  CHECK(p.kv_longest_sequence == 19'696);
  CHECK(p.max_model_len == 8192);
  CHECK(p.fits);
}

TEST_CASE("memory: --max-model-len must fit one sequence in the KV cache", "[llm][memory]") {
  // The 64.5-block card of "sequences at a context count whole blocks": 1024 tokens of KV.
  Deployment d = deploy("llama-3.1-8b", "h100-sxm");
  d.limits.gpu_memory_utilization = 1.0;
  d.card.visible_memory_bytes = kLlama8bWeights + kLlama8bActivations + kRuntime + 64.5 * kLlama8bBlock;
  SECTION("unset: the model's 131072 context capped by the KV cache, 1024") {
    const MemoryPlan p = plan_memory(d, 512);
    CHECK(p.fits);
    CHECK(p.max_model_len == 1024);
  }
  SECTION("1024 fits exactly (64 blocks)") {
    d.limits.max_model_len = 1024;
    const MemoryPlan p = plan_memory(d, 512);
    CHECK(p.fits);
    CHECK(p.max_model_len == 1024);
  }
  SECTION("1025 needs 65 blocks: vLLM refuses to start, naming both sizes") {
    d.limits.max_model_len = 1025;
    const MemoryPlan p = plan_memory(d, 512);
    CHECK_FALSE(p.fits);
    // 65 x 2,097,152 = 136,314,880 B = 0.127 GiB needed; 64.5 x 2,097,152 = 135,266,304 B
    // = 0.126 GiB available; short by 0.5 block = 1,048,576 B.
    CHECK(p.shortfall == Approx(1'048'576.0).margin(1e-3));
    CHECK(p.reason ==
          "to serve one request of max_model_len 1025 tokens, 136314880 B (0.13 GiB) of KV cache "
          "is needed per GPU, more than the 135266304 B (0.13 GiB) available; the estimated "
          "maximum model length is 1024 tokens (raise --gpu-memory-utilization or lower "
          "--max-model-len)");
  }
}

TEST_CASE("memory: --max-model-len above the model's context is refused", "[llm][memory][errors]") {
  Deployment d = deploy("llama-3.1-8b", "h100-sxm");
  d.limits.max_model_len = 131'073;
  try {
    d.validate();
    FAIL("validate() accepted 131073");
  } catch (const capsim::Error& e) {
    CHECK(std::string(e.what()) ==
          "--max-model-len: 131073 exceeds llama-3.1-8b's context of 131072 tokens "
          "(max_position_embeddings in " + d.model.config_path + "); accepted: 1 to 131072 tokens");
  }
  d.limits.max_model_len = 131'072;
  CHECK_NOTHROW(d.validate());
}

TEST_CASE("memory: TensorRT-LLM's decoder buffers for max_num_seqs x vocab come out of the KV cache",
          "[llm][memory][trtllm]") {
  // calibration/engines/tensorrt-llm.yaml: memory.decoder_per_sequence_vocab 19.9 B per slot per
  // vocabulary entry (NVIDIA/TensorRT-LLM issue #1188 log: 5.76 GiB for 2048 slots x 151,936),
  // runtime 1.0 GiB, gpu_memory_utilization 0.9, block size 64.
  const EngineProfile& trt = capsim_test::engine_profile("tensorrt-llm");
  REQUIRE(trt.decoder_bytes_per_seq_vocab == 19.9);
  CHECK(vllm().decoder_bytes_per_seq_vocab == 0);  // vLLM's sampler is in the activation peak

  Deployment d = deploy("llama-3.1-8b", "h100-sxm");
  d.engine = trt;
  d.limits.block_size = 64;
  d.limits.gpu_memory_utilization = 0.9;
  d.limits.max_num_seqs = 2048;
  d.limits.max_num_batched_tokens = 8192;
  d.validate();
  const MemoryPlan p = plan_memory(d, 4096);

  // decoder = 19.9 x 2048 x 128,256 = 19.9 x 262,668,288 = 5,227,098,931.2 B (4.87 GiB)
  // runtime = 1 GiB + decoder = 1,073,741,824 + 5,227,098,931.2 = 6,300,840,755.2 B
  CHECK(p.runtime == Approx(6'300'840'755.2).epsilon(1e-12));
  // activations = max(forward 8192 x 55,296 x 2 = 905,969,664,
  //                   sampler min(2048, 8192) x 128,256 x 8 = 2,101,346,304) = 2,101,346,304
  CHECK(p.activations == Approx(2'101'346'304.0).epsilon(1e-12));
  const double budget = 0.9 * d.card.visible_memory_bytes;
  const double kv = budget - kLlama8bWeights - 2'101'346'304.0 - 6'300'840'755.2;
  CHECK(p.kv_cache == Approx(kv).epsilon(1e-12));
  // A block of 64 tokens x 131,072 B = 8,388,608 B.
  CHECK(p.kv_blocks == static_cast<long long>(std::floor(kv / 8'388'608.0)));

  // The same deployment without the decoder term has exactly 5,227,098,931.2 B more KV cache:
  // floor(5,227,098,931.2 / 8,388,608) = 623 blocks, give or take the one the floors split.
  Deployment bare = d;
  bare.engine.decoder_bytes_per_seq_vocab = 0;
  const MemoryPlan q = plan_memory(bare, 4096);
  CHECK(q.runtime == Approx(1'073'741'824.0).epsilon(1e-12));
  CHECK(q.kv_cache - p.kv_cache == Approx(5'227'098'931.2).epsilon(1e-9));
  CHECK(q.kv_blocks - p.kv_blocks >= 623);
  CHECK(q.kv_blocks - p.kv_blocks <= 624);

  // It scales with the slots: 256 slots leave 7/8 of those bytes to the KV cache.
  d.limits.max_num_seqs = 256;
  const MemoryPlan r = plan_memory(d, 4096);
  // runtime = 1 GiB + 19.9 x 256 x 128,256 = 1,073,741,824 + 653,387,366.4 = 1,727,129,190.4 B
  CHECK(r.runtime == Approx(1'727'129'190.4).epsilon(1e-12));
}
