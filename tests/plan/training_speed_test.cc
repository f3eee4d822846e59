// Training speed (capsim finetune --tokens; docs/beyond-llm.md#training-speed): FLOPs per trained
// token worked by hand for Llama-2-7B, the nearest-run rule on the repository's measured table
// (calibration/training/llm-foundry.csv) and on a small table of our own, its out-of-sample check,
// and a bad table refused by file and line.
//
// Llama-2-7B (models/llama-2-7b/config.json): hidden 4096, 32 layers, 32 heads of 128, no GQA,
// intermediate 11008 (SwiGLU), vocab 32000.
//   matmuls per token, forward: 2 x 32 x (4 x 4096^2 + 3 x 4096 x 11008) + 2 x 32000 x 4096
//                             = 2 x 32 x 202,375,168 + 262,144,000 = 13,214,154,752
//   attention at 2048 tokens:  4 x 32 x 128 x 2048 x 32 = 1,073,741,824
#include "sim/plan/training_speed.h"

#include <catch2/catch.hpp>
#include <functional>
#include <string>

#include "sim/core/error.h"
#include "tests/support/error_message.h"
#include "tests/support/catalogues.h"
#include "tests/support/temp_dir.h"

using namespace capsim;
using capsim_test::message_of;

namespace {

constexpr double kMatmul = 13'214'154'752.0;
constexpr double kAttention2048 = 1'073'741'824.0;

const TrainingTable& repo_table() {
  static const TrainingTable t = load_training_table(std::string(CAPSIM_DATA_DIR) + "/calibration/training/llm-foundry.csv");
  return t;
}

const char* const kHeader =
    "# source: a test\n"
    "card,model,params,seq_len,gpus,mfu_percent,hfu_percent,activation_checkpointing,tokens_per_s_per_gpu\n";

}  // namespace

TEST_CASE("training FLOPs per token: full 3 x, LoRA 2 x matmuls, checkpointing one forward more", "[finetune][training]") {
  const ModelSpec m = capsim_test::model_catalogue().find("llama-2-7b");
  FinetuneSetup s;
  s.seq_len = 2048;
  const TrainingFlops full = training_flops_per_token(m, s, 0);
  CHECK(full.forward == Approx(kMatmul + kAttention2048).epsilon(1e-12));
  CHECK(full.hardware == Approx(3 * (kMatmul + kAttention2048)).epsilon(1e-12));  // 42.86 GFLOP
  s.gradient_checkpointing = true;
  CHECK(training_flops_per_token(m, s, 0).hardware == Approx(4 * (kMatmul + kAttention2048)).epsilon(1e-12));
  // LoRA r = 8 on q, k, v, o, gate, up, down: 32 x 8 x (4 x 8192 + 2 x (4096 + 11008) + (11008 + 4096))
  // = 32 x 8 x 78,080 = 19,988,480 adapter parameters.
  s = FinetuneSetup{};
  s.seq_len = 2048;
  s.method = FinetuneMethod::kLora;
  const std::int64_t adapters = lora_adapter_params(m, 8);
  REQUIRE(adapters == 19'988'480);
  const TrainingFlops lora = training_flops_per_token(m, s, adapters);
  CHECK(lora.forward == Approx(kMatmul + kAttention2048 + 2.0 * adapters).epsilon(1e-12));
  CHECK(lora.hardware == Approx(2 * kMatmul + 3 * kAttention2048 + 6.0 * adapters).epsilon(1e-12));
  // An encoder has no LM head over its vocabulary: BERT-base (hidden 768, 12 layers, 12 heads of
  // 64, intermediate 3072, biases on every linear layer) at 512 tokens:
  // 2 x 12 x (4 x 768^2 + 4 x 768 + 2 x 768 x 3072 + 3072 + 768) = 170,035,200 matmul FLOPs and
  // 4 x 12 x 64 x 512 x 12 = 18,874,368 of attention per token; full fine-tuning 3 x their sum.
  const ModelSpec bert = capsim_test::model_catalogue().find("bert-base-uncased");
  FinetuneSetup b;
  b.seq_len = 512;
  CHECK(training_flops_per_token(bert, b, 0).hardware == Approx(3 * (170'035'200.0 + 18'874'368.0)).epsilon(1e-12));
}

TEST_CASE("training rate: the nearest measured run of the card, its HFU times the card's bf16 peak", "[finetune][training]") {
  const TrainingTable& t = repo_table();
  CHECK(t.runs.size() == 209);
  CHECK(t.licence == "Apache-2.0");
  CHECK(t.source.rfind("github.com/mosaicml/llm-foundry@8c8dd48f72168c5d51e2f7b151595892a8fba43d", 0) == 0);
  const Card& h100 = capsim_test::card_catalogue().find("h100-sxm");
  // MPT-7B (6,658,859,008 parameters) at 2048 tokens without checkpointing has four H100 runs:
  // HFU 46.44% (8 GPUs), 42.2% (512), 44.15% (256), 45.71% (128): the median is 44.93%.
  const auto r = training_rate(t, h100, 6'658'859'008.0, 2048, false);
  REQUIRE(r);
  CHECK(r->measured);
  CHECK(r->ties == 4);
  CHECK(r->hfu == Approx((0.4415 + 0.4571) / 2).epsilon(1e-12));
  CHECK(r->flops_per_s == Approx(r->hfu * h100.peak(Precision::kBf16)).epsilon(1e-12));
  CHECK(r->basis == "measured: mpt-7b at 2048 tokens on h100-sxm (median of 4 runs)");
  // Checkpointed, the same question finds the checkpointed runs, nearest MPT-13B at 2048 tokens
  // (12,853,954,560 parameters: ln(12.854 / 6.659) = 0.658 away; MPT-7B at 1024 or 4096 tokens are
  // ln 2 = 0.693 and more): HFU 54.83%, 55.23%, 56.24% (512, 256, 128 GPUs), median 55.23%.
  const auto ck = training_rate(t, h100, 6'658'859'008.0, 2048, true);
  REQUIRE(ck);
  CHECK(ck->ties == 3);
  CHECK(ck->hfu == Approx(0.5523).epsilon(1e-12));
  CHECK(ck->basis == "measured: mpt-13b at 2048 tokens on h100-sxm, checkpointed (median of 3 runs)");
  // A card without runs borrows every card's; a CPU gets none.
  const auto l4 = training_rate(t, capsim_test::card_catalogue().find("l4"), 6'658'859'008.0, 2048, false);
  REQUIRE(l4);
  CHECK_FALSE(l4->measured);
  CHECK(l4->basis.rfind("assumed: mpt-7b at 2048 tokens on ", 0) == 0);
  CHECK_FALSE(training_rate(t, capsim_test::card_catalogue().find("cpu-server-ddr5"), 7e9, 2048, false));
}

TEST_CASE("training rate check: each run predicted without its model, and without its card", "[finetune][training]") {
  capsim_test::TempDir dir("training");
  // Card a: two models at one length, HFU 50% and 60%; card b: one run, HFU 40%.
  const std::string path = dir.write("t.csv", std::string(kHeader) +
                                                  "a,x,1e9,2048,8,50,50,0,1\n"
                                                  "a,y,2e9,2048,8,60,60,0,1\n"
                                                  "b,x,1e9,2048,8,40,40,0,1\n");
  const TrainingRateCheck c = check_training_rates(load_training_table(path));
  CHECK(c.runs == 3);
  // Without its model: x on a from y (0.6 / 0.5 - 1 = 0.2), y on a from x (|0.5 / 0.6 - 1| = 0.1667);
  // b has no other model. Median 0.18333.
  CHECK(c.model_out_median == Approx((0.2 + 1.0 / 6) / 2).epsilon(1e-12));
  // Without its card: a's x from b's x (|0.4 / 0.5 - 1| = 0.2), a's y from b's x (|0.4 / 0.6 - 1| = 0.3333),
  // b's x from a's x (0.5 / 0.4 - 1 = 0.25). Card a's median 0.26667 is the worst.
  CHECK(c.card_out_median == Approx(0.25).epsilon(1e-12));
  CHECK(c.worst_card == "a");
  CHECK(c.card_out_worst_median == Approx((0.2 + 1.0 / 3) / 2).epsilon(1e-12));
  // The repository's table: a measured card's rate for another model size stays within 10% (median).
  const TrainingRateCheck repo = check_training_rates(repo_table());
  CHECK(repo.runs == 209);
  CHECK(repo.model_out_median < 0.10);
  CHECK(repo.card_out_median > repo.model_out_median);  // borrowing a rate is the less sure answer
}

TEST_CASE("a bad training-throughput table is refused by file, line and column", "[finetune][training]") {
  capsim_test::TempDir dir("training-bad");
  const std::string header_only = std::string(kHeader);
  CHECK(message_of([&] { load_training_table(dir.write("a.csv", "card,model\nx,y\n")); })
            .find("a.csv:1: the header must be card, model, params, seq_len, gpus, mfu_percent") != std::string::npos);
  CHECK(message_of([&] { load_training_table(dir.write("b.csv", header_only + "h,m,1e9,2048,8,50,50,yes,1\n")); })
            .find("b.csv:3: activation_checkpointing: 'yes' is not 0 or 1") != std::string::npos);
  CHECK(message_of([&] { load_training_table(dir.write("c.csv", header_only + "h,m,1e9,2048,8,150,50,0,1\n")); })
            .find("c.csv:3: mfu_percent: 150 is not in 0.1..100") != std::string::npos);
  CHECK(message_of([&] { load_training_table(dir.write("d.csv", header_only + "h,m,1e9,2048\n")); })
            .find("d.csv:3: 4 values, the header has 9") != std::string::npos);
  CHECK(message_of([&] {
          load_training_table(dir.write("e.csv", "card,model,params,seq_len,gpus,mfu_percent,hfu_percent,"
                                                 "activation_checkpointing,tokens_per_s_per_gpu\nh,m,1e9,2048,8,50,50,0,1\n"));
        }).find("e.csv: no '# source:' line") != std::string::npos);
  CHECK(message_of([&] { load_training_table(dir.write("f.csv", header_only)); }).find("f.csv: no runs") != std::string::npos);
}
