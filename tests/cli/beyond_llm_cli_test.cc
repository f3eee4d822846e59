// `capsim finetune` and `capsim batch-serve` run as a user runs them: the built binary with its
// stdout, stderr and exit status (0 ok, 1 a negative answer, 2 bad input).
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include "tests/check/cli_run.h"

#ifndef CAPSIM_BINARY
#error "CAPSIM_BINARY must name the built capsim executable (the build defines it)"
#endif

namespace {

using Result = capsim_test::Run;
using capsim_test::run_capsim;

bool contains(const std::string& text, const std::string& part) { return capsim_test::has(text, part); }

}  // namespace

TEST_CASE("cli: finetune full Llama-2-13B fits no single card and says by how much", "[cli]") {
  const Result r =
      run_capsim("finetune --model llama-2-13b --cards rtx-4090,a100-80gb-sxm --json -");
  CHECK(r.status == 1);
  CHECK(r.err.empty());
  const nlohmann::json j = nlohmann::json::parse(r.out);
  // Hand-worked in tests/plan/finetune_test.cc: 2 B x 13,015,864,320 parameters of bf16
  // weights, 16 B per parameter with gradients and AdamW states.
  CHECK(j["per_gpu"]["weights_bytes"].get<double>() == 26'031'728'640.0);
  CHECK(j["per_gpu"]["weights_bytes"].get<double>() +
            j["per_gpu"]["gradients_bytes"].get<double>() +
            j["per_gpu"]["optimizer_bytes"].get<double>() ==
        208'253'829'120.0);
  CHECK(j["largest_term"] == "optimizer states");
  CHECK(j["fits_any"] == false);
  REQUIRE(j["cards"].size() == 2);
  CHECK(j["cards"][1]["card"] == "a100-80gb-sxm");
  CHECK(j["cards"][1]["fits"] == false);
  // ZeRO-3 over 3 GPUs: 208.25 GB / 3 = 64.65 GiB of states + 5.36 GiB of activations and
  // logits + 1.79 GiB runtime = 71.80 GiB, within the 79.25 GiB CUDA reports on an A100 80GB
  // (its card file's memory_visible); over 2 GPUs 104.4 GiB.
  CHECK(j["cards"][1]["zero3_gpus_needed"] == 3);
  CHECK(j["cards"][1]["missing_bytes"].get<double>() > 100e9);
}

TEST_CASE("cli: finetune QLoRA Llama-2-13B fits a 24 GB card, LoRA does not", "[cli]") {
  Result r = run_capsim("finetune --model llama-2-13b --method qlora --cards rtx-4090");
  CHECK(r.status == 0);
  CHECK(contains(r.out, "  fits on: rtx-4090\n"));
  r = run_capsim("finetune --model llama-2-13b --method lora --cards rtx-4090");
  CHECK(r.status == 1);
  CHECK(contains(r.out, "fits on none of these cards with 1 GPU; the largest term is weights"));
}

TEST_CASE("cli: finetune bad input is pinned", "[cli]") {
  Result r = run_capsim("finetune --method qlora4");
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err ==
        "capsim: error: --method: 'qlora4' is not a fine-tuning method; accepted: full, lora, "
        "qlora\n");
  r = run_capsim("finetune --method lora --lora-rank 0");
  CHECK(r.status == 2);
  CHECK(r.err ==
        "capsim: error: --lora-rank: 0 is not a LoRA rank; accepted: a whole number from 1 to "
        "65536 (PEFT's default is 8; 8-64 are common)\n");
  r = run_capsim("finetune --batch 0");
  CHECK(r.status == 2);
  CHECK(r.err ==
        "capsim: error: --batch: 0 is not a batch size; accepted: a whole number from 1 to "
        "1000000 (sequences per GPU per step)\n");
  r = run_capsim("finetune --optimizer adam");
  CHECK(r.status == 2);
  CHECK(
      r.err ==
      "capsim: error: --optimizer: 'adam' is not an optimizer; accepted: adamw, adamw-8bit, sgd\n");
  r = run_capsim("finetune --cards h100x");
  CHECK(r.status == 2);
  CHECK(r.err.rfind("capsim: error: --cards: unknown card 'h100x'; did you mean: ", 0) == 0);
}

TEST_CASE("cli: finetune --tokens gives each card's training time and rent from its measured rate", "[cli][training]") {
  // Llama-2-7B, full, 2048 tokens, 8 x A100 80GB: 3 x (13,214,154,752 + 1,073,741,824) = 42,863,689,728
  // FLOPs per token (tests/plan/training_speed_test.cc); the nearest A100 80GB run without
  // checkpointing is MPT-7B at 2048 tokens, HFU 64.23% of 312 TFLOP/s = 200.4 TFLOP/s: 4675 tokens/s
  // per GPU (the run itself measured 4641 for MPT-7B's own FLOPs).
  const Result r = run_capsim("finetune --model llama-2-7b --seq-len 2048 --gpus 8 --cards a100-80gb-sxm,l4 "
                              "--price a100-80gb-sxm=1.5 --tokens 1e9 --json -");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const double flops = j["training"]["flops_per_token"].get<double>();
  CHECK(flops == Approx(3 * (13'214'154'752.0 + 1'073'741'824.0)).epsilon(1e-12));
  CHECK(j["training"]["tokens"] == 1e9);
  const nlohmann::json& a100 = j["cards"][0]["training"];
  CHECK(a100["measured"] == true);
  CHECK(a100["basis"] == "measured: mpt-7b at 2048 tokens on a100-80gb-sxm");
  CHECK(a100["hfu"].get<double>() == Approx(0.6423).epsilon(1e-12));
  const double tps = 0.6423 * 312e12 / flops;
  CHECK(a100["tokens_per_s_per_gpu"].get<double>() == Approx(tps).epsilon(1e-9));
  // 1e9 tokens over 8 GPUs, and 8 x $1.50 an hour for that long.
  CHECK(a100["seconds"].get<double>() == Approx(1e9 / (8 * tps)).epsilon(1e-9));
  CHECK(a100["usd"].get<double>() == Approx(1e9 / (8 * tps) / 3600 * 8 * 1.5).epsilon(1e-9));
  // The L4 has no measured run: its rate is borrowed and says so.
  CHECK(j["cards"][1]["training"]["measured"] == false);
  CHECK(j["cards"][1]["training"]["basis"].get<std::string>().rfind("assumed: mpt-7b at 2048 tokens on ", 0) == 0);
  CHECK(j["training"]["out_of_sample"]["runs"] == 209);
  // The text says the same.
  const Result text = run_capsim("finetune --model llama-2-7b --seq-len 2048 --gpus 8 --cards a100-80gb-sxm "
                                 "--price a100-80gb-sxm=1.5 --tokens 1e9");
  CHECK(contains(text.out, "training speed: 42.9 GFLOP per trained token"));
  CHECK(contains(text.out, "measured: mpt-7b at 2048 tokens on a100-80gb-sxm"));
  CHECK(a100["step"]["bound"] == "compute");  // 2048 tokens a step hide NVLink's weight gathers
  const Result bad = run_capsim("finetune --tokens 0");
  CHECK(bad.status == 2);
  CHECK(bad.err == "capsim: error: --tokens: 0 is not a token count in 1..1e14 (dataset tokens x epochs)\n");
}

TEST_CASE("cli: finetune on two GPUs over PCIe waits for ZeRO-3's weight gathers", "[cli][training]") {
  // LoRA of Llama-2-7B on 2 x RTX 4090, 512 tokens a step: each GPU gathers the other half of the
  // bf16 weights for the forward and again for the backward pass, 2 x W x 1/2 = W bytes, over
  // PCIe 4.0 x16 (16 x 1.969 GB/s) staged through host memory (no P2P on GeForce: half of it) at
  // NCCL's 0.8 of the line rate.
  const Result r = run_capsim("finetune --model llama-2-7b --method lora --cards rtx-4090 --gpus 2 --json -");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const double weights = 2 * j["per_gpu"]["weights_bytes"].get<double>();  // both shards
  const double comm_s = weights / (16 * 1.969e9 * 0.5 * 0.8);
  const nlohmann::json& step = j["cards"][0]["training"]["step"];
  CHECK(step["link"] == "PCIe via host (no P2P)");
  CHECK(step["bound"] == "link");
  CHECK(step["communication_seconds"].get<double>() == Approx(comm_s).epsilon(1e-9));
  CHECK(step["compute_seconds"].get<double>() < comm_s);
  CHECK(j["cards"][0]["training"]["tokens_per_s_per_gpu"].get<double>() == Approx(512 / comm_s).epsilon(1e-9));
  // Eight sequences a step: compute grows 8x, the gathers stay (the speed is given whether or not
  // the activations of 8 sequences fit).
  const Result big = run_capsim("finetune --model llama-2-7b --method lora --cards rtx-4090 --gpus 2 --batch 8 --json -");
  const nlohmann::json big_doc = nlohmann::json::parse(big.out);
  const nlohmann::json& big_step = big_doc["cards"][0]["training"]["step"];
  CHECK(big_step["compute_seconds"].get<double>() == Approx(8 * step["compute_seconds"].get<double>()).epsilon(1e-9));
  CHECK(big_step["communication_seconds"].get<double>() == Approx(comm_s).epsilon(1e-9));
}

TEST_CASE("cli: batch-serve one item alone takes one batch of one, worked by hand", "[cli]") {
  // 1 TFLOP per item, 1 GB of weights, fp16 on a T4, 1 ms overhead (the default):
  // sqrt(27.972028^2 + 4.166667^2) + 1 = 29.280655 ms (tests/batchserve/batch_server_test.cc).
  const Result r = run_capsim(
      "batch-serve --flops-per-item 1e12 --weights-bytes 1GB --card t4 --precision fp16 "
      "--rate 1 --requests 1 --max-batch 1 --json -");
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["items"] == 1);
  CHECK(j["latency_s"]["max"].get<double>() == Approx(0.029280655).margin(1e-9));
  CHECK(j["batch_seconds_1"].get<double>() == Approx(0.029280655).epsilon(1e-8));
  CHECK(j["cost"]["usd_per_hour"].get<double>() == Approx(0.5904));
}

TEST_CASE("cli: batch-serve reports the SLO and exits 1 when it is missed", "[cli]") {
  Result r = run_capsim(
      "batch-serve --model bert-base-uncased --card t4 --precision fp16 --rate 5 --requests 500 "
      "--slo 'p95<=3s'");
  CHECK(r.status == 0);
  CHECK(contains(r.out, "  SLO p95<=3s: met ("));
  r = run_capsim(
      "batch-serve --model bert-base-uncased --card t4 --precision fp16 --rate 5 --requests 500 "
      "--slo 'p95<=1ms'");
  CHECK(r.status == 1);
  CHECK(contains(r.out, "  SLO p95<=1ms: MISSED ("));
}

TEST_CASE("cli: batch-serve bad input is pinned", "[cli]") {
  Result r = run_capsim("batch-serve --card t4 --rate 1");
  CHECK(r.status == 2);
  CHECK(r.err ==
        "capsim: error: batch-serve: no model; give --model NAME (an encoder-only catalogue "
        "model such as bert-base-uncased) or --flops-per-item F with --weights-bytes SIZE\n");
  r = run_capsim("batch-serve --model bert-base-uncased --card t4 --precision bf16 --rate 1");
  CHECK(r.status == 2);
  CHECK(r.err.rfind("capsim: error: --precision bf16: t4 has no bf16 peak (", 0) == 0);
  CHECK(contains(r.err, "t4.yaml dense_peak); supported: fp32, fp16, int8, int4\n"));
  r = run_capsim("batch-serve --model bert-base-uncased --card t4 --rate 1 --slo 'p95<3s'");
  CHECK(r.status == 2);
  CHECK(r.err ==
        "capsim: error: --slo: 'p95<3s' is not a latency SLO; accepted: STAT<=DURATION with STAT "
        "one of mean, p50, p90, p95, p99 and a duration with a unit, e.g. --slo 'p95<=3s'\n");
  r = run_capsim("batch-serve --model bert-base-uncased --card t4 --rate 1 --max-batch 0");
  CHECK(r.status == 2);
  CHECK(r.err ==
        "capsim: error: --max-batch: 0 is not a batch size; accepted: a whole number from 1 to "
        "65536\n");
  r = run_capsim("batch-serve --model llama-3.1-8b --card t4 --rate 1");
  CHECK(r.status == 2);
  CHECK(r.err ==
        "capsim: error: --model: llama-3.1-8b is a decoder LLM; batch-serve runs one forward "
        "pass per item (encoder-only models such as bert-base-uncased, or any model via "
        "--flops-per-item and --weights-bytes); use capsim simulate for LLM serving\n");
  r = run_capsim("batch-serve --model bert-base-uncased --card t4");
  CHECK(r.status == 2);
  CHECK(r.err ==
        "capsim: error: batch-serve: no load; give --rate ITEMS_PER_SECOND or --per-day ITEMS\n");
  r = run_capsim("batch-serve --flops-per-item 1e12 --card t4 --rate 1");
  CHECK(r.status == 2);
  CHECK(r.err ==
        "capsim: error: --weights-bytes: missing; --flops-per-item needs the bytes of weights "
        "each batch reads, e.g. --weights-bytes 500MB\n");
  r = run_capsim("batch-serve --model bert-base-uncased --card t4 --rate 1 --price t4=0");
  CHECK(r.status == 2);
  CHECK(r.err ==
        "capsim: error: --price: t4=0: a price must be in (0, 1000] US dollars per card-hour; "
        "accepted form: --price "
        "CARD=USD_PER_HOUR, e.g. --price h100-sxm=2.49 (US dollars per GPU-hour, a plain number "
        "in (0, 1000]; repeat the flag for several cards)\n");
}
