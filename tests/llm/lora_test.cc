// Multi-LoRA serving's model (sim/llm/lora.h) and step cost (sim/cost/lora_cost.h), worked by
// hand on Llama-3.1-8B (hidden 4096, 32 heads x 128, 8 KV heads, MLP 14336, 32 layers).
#include "sim/llm/lora.h"

#include <catch2/catch.hpp>

#include <cmath>

#include "sim/core/error.h"
#include "sim/cost/lora_cost.h"
#include "sim/cost/roofline_cost.h"
#include "sim/llm/memory_plan.h"
#include "tests/engine/test_support.h"

namespace {
using namespace capsim;
using Catch::Matchers::Contains;
}  // namespace

TEST_CASE("lora: adapter bytes and the slots vLLM reserves, by hand", "[lora]") {
  using namespace capsim::test;
  const ModelSpec m = model_catalogue().find("llama-3.1-8b");
  LoraConfig c;  // all seven linear layers, max_lora_rank 16, max_loras 1
  // Per layer, in + out: q 4096+4096, k 4096+1024, v 4096+1024, o 4096+4096, gate and up
  // 4096+14336 each, down 14336+4096 = 8192+5120+5120+8192+3x18432 = 81920; x 32 layers.
  CHECK(lora_params_per_rank(c, m) == Approx(2'621'440.0));
  // Rank 16, 16-bit: 2,621,440 x 16 x 2 = 83,886,080 B (80 MiB) per adapter.
  CHECK(lora_adapter_bytes(c, m) == Approx(83'886'080.0));
  c.rank = 8;
  CHECK(lora_adapter_bytes(c, m) == Approx(41'943'040.0));
  // Slots are sized at max_lora_rank whatever the adapters' rank: 4 slots = 335,544,320 B.
  c.max_loras = 4;
  CHECK(lora_reserved_bytes_per_gpu(c, m, 1) == Approx(335'544'320.0));
  // TP 2: column-parallel layers split their output, row-parallel (o, down) their input:
  //   q 4096+2048, k 4096+512, v 4096+512, o 2048+4096, gate/up 4096+7168, down 7168+4096
  //   = 6144+4608+4608+6144+3x11264 = 55296 per layer; x 32 x 16 x 2 B x 1 slot.
  c.max_loras = 1;
  CHECK(lora_reserved_bytes_per_gpu(c, m, 2) == Approx(55296.0 * 32 * 16 * 2));
  // q and v only (PEFT's default for Llama): (8192 + 5120) x 32 = 425,984 per rank.
  c.target_modules = {"q_proj", "v_proj"};
  CHECK(lora_params_per_rank(c, m) == Approx(425'984.0));
}

TEST_CASE("lora: the reservation comes out of the KV cache", "[lora][memory]") {
  using namespace capsim::test;
  Deployment d = deployment("llama-3.1-8b", "h100-sxm");
  const MemoryPlan plain = plan_memory(d, 2048);
  LoraConfig c;
  c.max_loras = 4;
  d.lora = c;
  d.validate();
  const MemoryPlan lora = plan_memory(d, 2048);
  CHECK(lora.lora_slots == Approx(335'544'320.0));
  CHECK(plain.kv_cache - lora.kv_cache == Approx(335'544'320.0));
  CHECK(lora.kv_blocks < plain.kv_blocks);
}

TEST_CASE("lora: vLLM's limits are checked", "[lora]") {
  LoraConfig c;
  c.max_lora_rank = 24;
  CHECK_THROWS_WITH(validate_lora(c, "--enable-lora"), Contains("max_lora_rank: 24 is not one of vLLM's ranks: 1, 8, 16, 32, 64, 128, 256, 320, 512"));
  c = LoraConfig{};
  c.max_loras = 4;
  c.max_cpu_loras = 2;
  CHECK_THROWS_WITH(validate_lora(c, "--enable-lora"), Contains("max_cpu_loras: 2 is below max_loras 4"));
  c = LoraConfig{};
  c.rank = 32;
  CHECK_THROWS_WITH(validate_lora(c, "--enable-lora"), Contains("rank: 32 is not in 1..max_lora_rank (16)"));
  c = LoraConfig{};
  c.target_modules = {"qkv"};
  using namespace capsim::test;
  CHECK_THROWS_WITH(lora_modules(c, model_catalogue().find("llama-3.1-8b")), Contains("LoRA target module 'qkv' is unknown"));
  CHECK_THROWS_WITH(lora_modules(LoraConfig{}, model_catalogue().find("deepseek-v3")), Contains("latent attention"));
}

TEST_CASE("lora: the punica kernels' cost and an adapter load, by hand", "[lora][cost]") {
  using namespace capsim::test;
  Deployment d = deployment("llama-3.1-8b", "h100-sxm");
  d.lora = LoraConfig{};
  const auto base = std::make_shared<RooflineCost>(d);
  const LoraCost cost(base, d);
  // One decode token of one adapter: per wrapper (qkv, o, gate_up, down) a shrink and an expand
  // kernel, each far below the H100's 4 us kernel floor (the largest, gate_up, reads A and B of
  // gate and up: 16 x 36864 x 2 B = 1.2 MB, ~0.4 us), so 4 wrappers x 2 x 4 us x 32 layers = 1.024 ms.
  BatchShape one;
  one.add_decode(1000);
  one.lora_tokens = 1;
  one.lora_adapters = 1;
  CHECK(d.card.kernel_floor_s == Approx(4e-6));
  CHECK(cost.lora_only(one).seconds == Approx(4 * 2 * 4e-6 * 32));
  CHECK(cost.seconds(one) == Approx(base->seconds(one) + 4 * 2 * 4e-6 * 32));
  // 1000 tokens: 2 x 1000 x 16 x 2,621,440 = 83.89 GFLOP of LoRA work.
  BatchShape many;
  for (int i = 0; i < 1000; ++i) many.add_decode(1000);
  many.lora_tokens = 1000;
  many.lora_adapters = 4;
  CHECK(cost.lora_only(many).flops == Approx(2.0 * 1000 * 16 * 2'621'440));
  // A load copies the adapter's 83,886,080 B over PCIe gen5 x16 (16 x 3.938 GB/s = 63.008 GB/s):
  // 1.3314 ms.
  CHECK(cost.load_seconds(1) == Approx(83'886'080.0 / 63.008e9));
  BatchShape load = one;
  load.lora_loads = 1;
  CHECK(cost.seconds(load) - cost.seconds(one) == Approx(83'886'080.0 / 63.008e9));
  // Without LoRA tokens the step is the base step.
  BatchShape plain;
  plain.add_decode(1000);
  CHECK(cost.seconds(plain) == base->seconds(plain));
}

TEST_CASE("lora: requests pick adapters uniformly or by Zipf, replayably", "[lora][workload]") {
  AdapterMix u{10, 0, 3};
  AdapterMix z{10, 1.0, 3};
  // Zipf(1) over 10: P(1) = 1 / H_10 = 1 / 2.928968 = 0.34142.
  const std::vector<double> cdf = z.cumulative();
  CHECK(cdf.front() == Approx(1 / 2.9289682540));
  CHECK(cdf.back() == Approx(1.0));
  int first_u = 0, first_z = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const int a = u.adapter_of(static_cast<std::uint64_t>(i));
    REQUIRE(a >= 0);
    REQUIRE(a < 10);
    first_u += a == 0;
    first_z += z.adapter_of(static_cast<std::uint64_t>(i)) == 0;
  }
  // Standard errors: sqrt(0.1 x 0.9 / 20000) = 0.0021, sqrt(0.34 x 0.66 / 20000) = 0.0034.
  CHECK(static_cast<double>(first_u) / n == Approx(0.1).margin(0.01));
  CHECK(static_cast<double>(first_z) / n == Approx(0.34142).margin(0.015));
  CHECK(u.adapter_of(42) == u.adapter_of(42));
  CHECK_THROWS_WITH(AdapterMix::parse_distribution("zipf", "--lora-distribution"), Contains("accepted: uniform, zipf:S"));
  CHECK_THROWS_WITH(AdapterMix::parse_distribution("zipf:0", "--lora-distribution"), Contains("not in (0, 10]"));
}
