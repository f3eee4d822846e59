// Fine-tuning memory, worked by hand for Llama-2-13B (domain notes, scenario 4) and BERT.
//
// Llama-2-13B (models/llama-2-13b/config.json): hidden h = 5120, 40 layers, 40 heads (a) of 128,
// no GQA, intermediate 13824 (SwiGLU), vocab 32000, untied head.
//   parameters P = 13,015,864,320 (the model card's 13,015,864,320)
//   linear (quantisable) parameters Q = 40 x (4 x 5120^2 + 3 x 5120 x 13824)
//                                     = 40 x (104,857,600 + 212,336,640) = 12,687,769,600
//   the rest (embeddings, head, norms) = 328,094,720
#include "sim/plan/finetune.h"

#include <catch2/catch.hpp>
#include <functional>
#include <string>

#include "sim/core/error.h"
#include "sim/hardware/card.h"
#include "sim/llm/model_spec.h"
#include "tests/support/error_message.h"
#include "tests/support/catalogues.h"

using namespace capsim;
using capsim_test::message_of;

namespace {

constexpr auto& catalogue = capsim_test::card_catalogue;

ModelSpec model(const std::string& name) { return capsim_test::model_catalogue().find(name); }

constexpr double kP = 13'015'864'320.0;
constexpr double kQ = 12'687'769'600.0;
constexpr double kRuntime = 1.79 * 1073741824.0;  // CUDA context etc., one GPU
// Activations at s = 512, b = 1 without recomputation (Korthikanti et al. eq. 1):
// sbh = 512 x 5120 = 2,621,440; 5as/h = 5 x 40 x 512 / 5120 = 20;
// per layer 2,621,440 x (34 + 20) = 141,557,760; x 40 layers = 5,662,310,400 B.
constexpr double kActivations = 5'662'310'400.0;
// Logits: 512 x 32000 x (2 + 4) = 98,304,000 B.
constexpr double kLogits = 98'304'000.0;

}  // namespace

TEST_CASE(
    "finetune: Llama-2-13B full fine-tuning with AdamW needs ~208 GB of weights, "
    "gradients and optimizer states",
    "[plan][finetune]") {
  const ModelSpec m = model("llama-2-13b");
  REQUIRE(m.total_params() == 13'015'864'320);
  REQUIRE(m.quantizable_params() == 12'687'769'600);
  FinetuneSetup s;  // full, AdamW, batch 1 x 512, one GPU
  const FinetuneMemory mem = plan_finetune(m, s, catalogue().find("a100-80gb-sxm"));
  // Domain notes: "at least 26 GB of VRAM for weights": bf16 weights alone are 2 B x P.
  CHECK(mem.weights == 2 * kP);  // 26,031,728,640 B
  CHECK(mem.weights >= 26e9);
  CHECK(mem.gradients == 2 * kP);
  CHECK(mem.optimizer == 12 * kP);
  // ZeRO's 16 B per parameter for mixed-precision Adam: 208,253,829,120 B = 208.25 GB.
  CHECK(mem.weights + mem.gradients + mem.optimizer == 16 * kP);
  CHECK((mem.weights + mem.gradients + mem.optimizer) / 1e9 == Approx(208.25).margin(0.01));
  CHECK(mem.activations == Approx(kActivations));
  CHECK(mem.logits == Approx(kLogits));
  CHECK(mem.runtime == Approx(kRuntime));
  CHECK(mem.gather == 0);
  // 208,253,829,120 + 5,662,310,400 + 98,304,000 + 1,921,997,865 = 215,936,441,385 B.
  CHECK(mem.total() == Approx(215'936'441'385.0));
  CHECK(mem.largest_term() == "optimizer states");

  // No single card holds it; the biggest (MI300X, 192 GB = 178.81 GiB usable) misses by
  // 215.94 - 192 = 23.94 GB, and ZeRO-3 over two of them fits.
  const FinetuneFit f = fit_finetune(m, s, catalogue().find("mi300x"));
  CHECK_FALSE(f.fits);
  CHECK(f.missing == Approx(mem.total() - 192e9));
  CHECK(f.gpus_needed == 2);
}

TEST_CASE("finetune: ZeRO-3 divides weights, gradients and optimizer states by the GPUs",
          "[plan][finetune]") {
  const ModelSpec m = model("llama-2-13b");
  FinetuneSetup s;
  s.gpus = 8;
  s.gradient_checkpointing = true;
  const FinetuneMemory mem = plan_finetune(m, s, catalogue().find("a100-40gb-sxm"));
  CHECK(mem.weights + mem.gradients + mem.optimizer == Approx(16 * kP / 8));  // 26.03 GB
  // Two unsharded bf16 layers: 2 x (4 x 5120^2 + 3 x 5120 x 13824) x 2 B = 1,268,776,960 B.
  CHECK(mem.gather == Approx(2.0 * 317'194'240 * 2));
  // Checkpointing keeps 2sbh per layer and rebuilds one layer:
  // 40 x 2 x 2,621,440 + 141,557,760 = 351,272,960 B.
  CHECK(mem.activations == Approx(351'272'960.0));
  CHECK(mem.runtime == Approx(2 * kRuntime));  // + NCCL buffers
  CHECK(fit_finetune(m, s, catalogue().find("a100-40gb-sxm")).fits);
}

TEST_CASE("finetune: LoRA on Llama-2-13B fits a 24 GB card only with a 4-bit base (QLoRA)",
          "[plan][finetune]") {
  const ModelSpec m = model("llama-2-13b");
  // Rank 8 on q, k, v, o (5120 -> 5120 each: 8 x 10240) and gate, up (5120 -> 13824: 8 x 18944)
  // and down (13824 -> 5120: 8 x 18944): per layer 8 x (4 x 10240 + 3 x 18944) = 782,336;
  // x 40 layers = 31,293,440 trainable parameters (0.24% of P).
  CHECK(lora_adapter_params(m, 8) == 31'293'440);
  CHECK(lora_adapter_params(m, 64) == 8 * 31'293'440);
  const Card& rtx4090 = catalogue().find("rtx-4090");  // 23.65 GiB = 25.39 GB usable

  FinetuneSetup lora;
  lora.method = FinetuneMethod::kLora;
  const FinetuneMemory l = plan_finetune(m, lora, rtx4090);
  // Weights: the frozen bf16 base 26,031,728,640 + adapters 62,586,880 = 26,094,315,520 B:
  // more than the card holds before anything else.
  CHECK(l.weights == Approx(2 * kP + 2 * 31'293'440.0));
  CHECK(l.weights > rtx4090.visible_memory_bytes);
  CHECK(l.gradients == Approx(2 * 31'293'440.0));
  CHECK(l.optimizer == Approx(12 * 31'293'440.0));
  CHECK_FALSE(fit_finetune(m, lora, rtx4090).fits);

  FinetuneSetup qlora;
  qlora.method = FinetuneMethod::kQlora;
  const FinetuneMemory q = plan_finetune(m, qlora, rtx4090);
  // NF4 weights with double-quantised constants: Q x (0.5 + 0.127/8) = 6,545,303,142 B;
  // the rest in bf16: 656,189,440 B; adapters 62,586,880 B. Sum 7,264,079,462 B (7.26 GB).
  CHECK(q.weights == Approx(kQ * (0.5 + 0.127 / 8) + (kP - kQ) * 2 + 2 * 31'293'440.0));
  CHECK(q.weights / 1e9 == Approx(7.264).margin(0.001));
  // Total 7,264,079,462 + 62,586,880 + 375,521,280 + 5,662,310,400 + 98,304,000
  // + 1,921,997,865 = 15,384,799,887 B (14.33 GiB) < 23.65 GiB.
  CHECK(q.total() == Approx(15'384'799'887.0));
  CHECK(fit_finetune(m, qlora, rtx4090).fits);
  // The domain notes' "LoRA cuts training VRAM by up to about 70%": here QLoRA uses
  // 15.38 / 215.94 = 7% of full fine-tuning, LoRA 34.22 / 215.94 = 16%.
}

TEST_CASE("finetune: 8-bit AdamW and SGD states, BERT has no logits term, no runtime on a CPU",
          "[plan][finetune]") {
  const ModelSpec m = model("llama-2-13b");
  FinetuneSetup s;
  s.optimizer = FinetuneOptimizer::kAdamW8bit;
  CHECK(plan_finetune(m, s, catalogue().find("h100-sxm")).optimizer == 6 * kP);
  s.optimizer = FinetuneOptimizer::kSgd;
  CHECK(plan_finetune(m, s, catalogue().find("h100-sxm")).optimizer == 4 * kP);
  s.flash_attention = true;
  // Without the 5as/h scores term: 40 x 2,621,440 x 34 = 3,565,158,400 B.
  CHECK(plan_finetune(m, s, catalogue().find("h100-sxm")).activations == Approx(3'565'158'400.0));

  const ModelSpec bert = model("bert-base-uncased");
  FinetuneSetup b;
  b.seq_len = 128;
  b.batch = 32;
  const FinetuneMemory bm = plan_finetune(bert, b, catalogue().find("cpu-server-ddr5"));
  CHECK(bm.logits == 0);
  CHECK(bm.runtime == 0);
  // sbh = 128 x 32 x 768 = 3,145,728; 5as/h = 5 x 12 x 128 / 768 = 10; x 44 x 12 layers.
  CHECK(bm.activations == Approx(3'145'728.0 * 44 * 12));
}

TEST_CASE("finetune: bad input is pinned", "[plan][finetune]") {
  CHECK(message_of([] { parse_finetune_method("qlora4"); }) ==
        "--method: 'qlora4' is not a fine-tuning method; accepted: full, lora, qlora");
  CHECK(message_of([] { parse_finetune_optimizer("adam"); }) ==
        "--optimizer: 'adam' is not an optimizer; accepted: adamw, adamw-8bit, sgd");
  FinetuneSetup s;
  s.batch = 0;
  CHECK(message_of([&] { s.validate(); }) ==
        "--batch: 0 is not a batch size; accepted: a whole number from 1 to 1000000 (sequences "
        "per GPU per step)");
  s = {};
  s.seq_len = 0;
  CHECK(message_of([&] { s.validate(); }) ==
        "--seq-len: 0 is not a sequence length; accepted: a whole number of tokens from 1 to "
        "10000000");
  s = {};
  s.method = FinetuneMethod::kLora;
  s.lora_rank = 0;
  CHECK(message_of([&] { s.validate(); }) ==
        "--lora-rank: 0 is not a LoRA rank; accepted: a whole number from 1 to 65536 (PEFT's "
        "default is 8; 8-64 are common)");
  s = {};
  s.lora_rank = 16;  // with --method full
  CHECK(message_of([&] { s.validate(); }) ==
        "--lora-rank: applies to --method lora and --method qlora only; full fine-tuning trains "
        "every weight and has no rank");
  s = {};
  s.gpus = 0;
  CHECK(message_of([&] { s.validate(); }) == "--gpus: 0 is not a GPU count; accepted: 1 to 512");
  CHECK(message_of([] { lora_adapter_params(model("deepseek-v2-lite"), 8); }) ==
        "--method lora/qlora: deepseek-v2-lite uses multi-head latent attention, whose LoRA "
        "adapter shapes capsim does not model; accepted: --method full, or a model with "
        "multi-head/grouped-query attention");
}
