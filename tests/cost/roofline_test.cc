// The roofline step cost (sim/cost/roofline_cost.h), operator group by operator group, worked out
// by hand. Peak rates and efficiencies are read from the Card and EngineProfile objects (they are
// data: calibration/cards/*.yaml, calibration/engines/vllm.yaml) and each test says which; the
// model arithmetic is done here.
#include "sim/cost/roofline_cost.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "sim/cost/batch_shape.h"
#include "sim/hardware/card.h"
#include "sim/llm/deployment.h"
#include "sim/llm/engine_profile.h"
#include "sim/llm/model_spec.h"
#include "tests/cost/breakdown_groups.h"
#include "tests/support/catalogues.h"
#include "tests/support/temp_dir.h"

#ifndef CAPSIM_DATA_DIR
#error "CAPSIM_DATA_DIR must name the repository root (the build defines it)"
#endif

namespace {

using namespace capsim;

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

BatchShape decodes(int batch, int context) {
  BatchShape b;
  for (int i = 0; i < batch; ++i) b.add_decode(context);
  return b;
}

BatchShape prefill(int tokens, int cached = 0) {
  BatchShape b;
  b.add_prefill_chunk(cached, tokens, true);
  return b;
}

using test::group;
using test::has_group;

}  // namespace

TEST_CASE("roofline: the data the hand calculations below rely on", "[cost][roofline]") {
  // Stated once, so that a change of the data files shows up here and not as a puzzle below.
  const Card& h100 = cards().find("h100-sxm");
  CHECK(h100.memory_bandwidth == Approx(3.35e12).epsilon(1e-15));
  CHECK(h100.peak(Precision::kBf16) == Approx(989.4e12).epsilon(1e-15));
  CHECK(vllm().bandwidth_efficiency_scale == 1.0);
  CHECK(vllm().compute_efficiency_scale == 1.0);
  CHECK(vllm().step_overhead_s == Approx(0.6e-3).epsilon(1e-15));
  CHECK(vllm().per_sequence_overhead_s == Approx(1.1e-6).epsilon(1e-15));
  CHECK(vllm().allreduce_latency_nvlink_s == Approx(10e-6).epsilon(1e-15));
  CHECK(vllm().allreduce_latency_pcie_s == Approx(30e-6).epsilon(1e-15));
}

TEST_CASE("roofline: llama-3.1-8b batch-1 decode streams the MLP weights", "[cost][roofline]") {
  const Deployment d = deploy("llama-3.1-8b", "h100-sxm");
  const RooflineCost cost(d);
  const StepBreakdown s = cost.breakdown(decodes(1, 1024));
  const OperatorCost& mlp = group(s, "mlp");
  // Achieved bandwidth = 3.35 TB/s x the card's bandwidth efficiency (card.bandwidth_efficiency,
  // 0.78 in h100-sxm.yaml) x the engine's scale (1.0 for vLLM).
  const double eff = d.card.bandwidth_efficiency * d.engine.bandwidth_efficiency_scale;
  CHECK(cost.bytes_per_s() == Approx(3.35e12 * eff).epsilon(1e-14));
  // Bytes: the MLP weights of 32 layers, 32 x 3 x 4096 x 14336 x 2 B = 11,274,289,152, plus the
  // activations read and written, 32 x 2 x 4096 x 2 B = 524,288. Total 11,274,813,440 B.
  const double bytes = 32.0 * 3 * 4096 * 14336 * 2 + 32.0 * 2 * 4096 * 2;
  CHECK(bytes == 11'274'813'440.0);
  CHECK(mlp.bytes == bytes);
  CHECK(mlp.memory_s == Approx(bytes / (3.35e12 * eff)).epsilon(1e-12));
  // FLOPs: 2 x 1 token x 176,160,768 x 32 = 11,274,289,152, a few microseconds of compute.
  CHECK(mlp.flops == 2.0 * 3 * 4096 * 14336 * 32);
  CHECK(mlp.bound == Bound::kMemory);
  // The group's time is the 2-norm of its compute and memory times (docs/cost-model.md#step-time);
  // with compute ~1000x smaller it is the memory time to within 1e-6.
  const double compute = 2.0 * 3 * 4096 * 14336 * 32 / (989.4e12 * d.card.compute_efficiency);
  CHECK(mlp.seconds == Approx(std::sqrt(compute * compute + mlp.memory_s * mlp.memory_s)).epsilon(1e-12));
  CHECK(mlp.seconds == Approx(bytes / (3.35e12 * eff)).epsilon(1e-5));
  // ~4.3 ms with the catalogue's 0.78.
  CHECK(mlp.seconds > 4e-3);
}

TEST_CASE("roofline: an 8192-token prefill is compute-bound in the MLP", "[cost][roofline]") {
  const Deployment d = deploy("llama-3.1-8b", "h100-sxm");
  const RooflineCost cost(d);
  const StepBreakdown s = cost.breakdown(prefill(8192));
  const OperatorCost& mlp = group(s, "mlp");
  // Achieved rate = 989.4 TFLOPS (dense bf16) x the card's compute efficiency
  // (card.compute_efficiency, 0.76 in h100-sxm.yaml) x the engine's scale (1.0).
  const double eff = d.card.compute_efficiency * d.engine.compute_efficiency_scale;
  CHECK(cost.gemm_flops_per_s() == Approx(989.4e12 * eff).epsilon(1e-14));
  // 2 x 8192 tokens x (3 x 4096 x 14336 = 176,160,768) x 32 layers = 92,358,976,733,184 FLOPs;
  // at 989.4e12 x 0.76 = 751.9 TFLOPS that is 122.8 ms.
  const double flops = 2.0 * 8192 * 3 * 4096 * 14336 * 32;
  CHECK(flops == 92'358'976'733'184.0);
  CHECK(mlp.flops == flops);
  CHECK(mlp.compute_s == Approx(flops / (989.4e12 * eff)).epsilon(1e-12));
  CHECK(mlp.bound == Bound::kCompute);
  // Memory side: (352,321,536 weights + 2 x 8192 x 4096 x 2 activations) x 32 B at the achieved
  // bandwidth; the step combines both as sqrt(compute^2 + memory^2).
  const double bytes = (352'321'536.0 + 2.0 * 8192 * 4096 * 2) * 32;
  const double memory = bytes / (3.35e12 * d.card.bandwidth_efficiency);
  CHECK(mlp.memory_s == Approx(memory).epsilon(1e-12));
  CHECK(mlp.seconds == Approx(std::sqrt(std::pow(flops / (989.4e12 * eff), 2) + memory * memory)).epsilon(1e-12));
  // Memory side for comparison: far less time.
  CHECK(mlp.memory_s < mlp.compute_s / 10);
  // The step has a prefill attention group and no decode attention.
  CHECK(has_group(s, "attention_prefill"));
  CHECK_FALSE(has_group(s, "attention_decode"));
}

TEST_CASE("roofline: tensor-parallel all-reduce over NVLink", "[cost][roofline]") {
  // llama-3.1-70b, TP 4 on h100-sxm (NVLink 900 GB/s total = 450 GB/s a direction), batch 64.
  const Deployment d = deploy("llama-3.1-70b", "h100-sxm", 4);
  const RooflineCost cost(d);
  // NCCL reaches 80% of the per-direction rate: 900e9 / 2 x 0.8 = 360 GB/s.
  CHECK(cost.link_bytes_per_s() == Approx(900e9 / 2 * 0.8).epsilon(1e-15));
  // Latency 10 us + 3 us per GPU beyond the second: 10 + 3 x 2 = 16 us at TP 4.
  CHECK(cost.allreduce_latency_s() == Approx(16e-6).epsilon(1e-12));
  const StepBreakdown s = cost.breakdown(decodes(64, 2048));
  // Each all-reduce: 64 tokens x 8192 x 2 B = 1,048,576 B; ring traffic 2 x 3/4 of it over the link.
  //   16 us + 2 x 3/4 x 64 x 8192 x 2 / (900e9/2 x 0.8) = 16 us + 1,572,864 / 360e9 = 20.369 us
  // Two per layer over 80 layers, plus the embedding's: 20.369 us x 160 + 16 us = 3.275 ms.
  const double per = 16e-6 + 2.0 * 3 / 4 * 64 * 8192 * 2 / (900e9 / 2 * 0.8);
  const double expected = per * 2 * 80 + 16e-6;
  const OperatorCost& ar = group(s, "all_reduce");
  CHECK(ar.seconds == Approx(expected).epsilon(1e-12));
  CHECK(ar.bound == Bound::kCommunication);
  CHECK(s.communication_s == Approx(expected).epsilon(1e-12));
  CHECK(expected == Approx(3.275e-3).epsilon(1e-3));
}

TEST_CASE("roofline: without NVLink or P2P the link is PCIe through host memory",
          "[cost][roofline]") {
  // rtx-4090: PCIe gen4 x16 = 16 x 1.969 GB/s = 31.504 GB/s a direction; x 0.8 (NCCL) x 0.5
  // (no peer-to-peer: staged through host memory) = 12.6016 GB/s; NCCL latency over PCIe 30 us.
  const Deployment d = deploy("llama-3.1-8b", "rtx-4090", 2);
  const RooflineCost cost(d);
  CHECK(cost.link_bytes_per_s() == Approx(16 * 1.969e9 * 0.8 * 0.5).epsilon(1e-14));
  CHECK(cost.allreduce_latency_s() == Approx(30e-6).epsilon(1e-15));
  // Batch 1: each all-reduce 30 us + 2 x 1/2 x 4096 x 2 B / 12.6016e9 = 30 us + 0.650 us;
  // x 2 x 32 layers + 30 us.
  const double per = 30e-6 + 2.0 * 1 / 2 * 4096 * 2 / (16 * 1.969e9 * 0.8 * 0.5);
  const StepBreakdown s = cost.breakdown(decodes(1, 1024));
  CHECK(group(s, "all_reduce").seconds == Approx(per * 2 * 32 + 30e-6).epsilon(1e-12));

  // h100-sxm at TP 16 leaves its 8-GPU NVLink domain: PCIe gen5 x16 with P2P,
  // 16 x 3.938 GB/s x 0.8 = 50.4064 GB/s.
  const RooflineCost wide(deploy("llama-3.1-8b", "h100-sxm", 16));
  CHECK(wide.link_bytes_per_s() == Approx(16 * 3.938e9 * 0.8).epsilon(1e-14));
  // PCIe latency 30 us + 3 us x (16 - 2) GPUs beyond the second = 72 us.
  CHECK(wide.allreduce_latency_s() == Approx(72e-6).epsilon(1e-12));
  // TP 1: no all-reduce at all.
  const RooflineCost single(deploy("llama-3.1-8b", "h100-sxm"));
  CHECK_FALSE(has_group(single.breakdown(decodes(1, 1024)), "all_reduce"));
}

TEST_CASE("roofline: a single token reads 2 of mixtral's 8 experts", "[cost][roofline]") {
  const Deployment d = deploy("mixtral-8x7b", "h100-sxm");
  const RooflineCost cost(d);
  const StepBreakdown one = cost.breakdown(decodes(1, 1024));
  const OperatorCost& moe = group(one, "moe_mlp");
  // Expected experts read: 8 x (1 - (1 - 2/8)^1) = 2. Per layer: 2 experts x 3 x 4096 x 14336
  // x 2 B = 704,643,072; router 4096 x 8 x 2 B = 65,536; activations 2 x 1 x 4096 x 2 B = 16,384.
  // x 32 layers = 32 x 704,724,992 = 22,551,199,744 B.
  CHECK(moe.bytes == 22'551'199'744.0);
  // FLOPs: 2 x 1 x (2 x 176,160,768 + 32,768) x 32.
  CHECK(moe.flops == 2.0 * (2 * 176'160'768.0 + 32'768) * 32);
  CHECK_FALSE(has_group(one, "mlp"));  // no dense layers
  // Two tokens: 8 x (1 - (3/4)^2) = 3.5 experts expected.
  //   (3.5 x 176,160,768 x 2 + 65,536 + 2 x 2 x 4096 x 2) x 32
  //   = (1,233,125,376 + 65,536 + 32,768) x 32 = 39,463,157,760 B.
  // The breakdown is kept in a variable: group() returns a reference into it.
  const StepBreakdown two_tokens = cost.breakdown(decodes(2, 1024));
  const OperatorCost& two = group(two_tokens, "moe_mlp");
  CHECK(two.bytes == Approx(39'463'157'760.0).epsilon(1e-15));
}

TEST_CASE("roofline: fp8 weights run fp8 math only where the card has it", "[cost][roofline]") {
  // A100: no fp8 tensor cores; fp8 weights are dequantised to the card's 16-bit type (bf16 on
  // A100: 312 TFLOPS dense, the same as fp16).
  const Deployment a100 = deploy("llama-3.1-8b", "a100-80gb-sxm", 1, Precision::kFp8);
  CHECK(a100.compute_precision() == Precision::kBf16);
  const RooflineCost a(a100);
  CHECK(a.peak_flops() == 312e12);
  // The weights are still read at 1 B each: the MLP of a batch-1 decode reads
  // 32 x (3 x 4096 x 14336 x 1 + 2 x 4096 x 2) B = 32 x 176,177,152 = 5,637,668,864 B.
  CHECK(group(a.breakdown(decodes(1, 1024)), "mlp").bytes == 5'637'668'864.0);
  // H100: fp8 math at 1978.9 TFLOPS dense.
  const Deployment h100 = deploy("llama-3.1-8b", "h100-sxm", 1, Precision::kFp8);
  CHECK(h100.compute_precision() == Precision::kFp8);
  const RooflineCost h(h100);
  CHECK(h.peak_flops() == Approx(1978.9e12).epsilon(1e-15));
  // fp8 GEMMs use the card's fp8 efficiency (efficiency.compute_fp8, 0.67 in h100-sxm.yaml).
  REQUIRE(h100.card.compute_efficiency_fp8 > 0);
  CHECK(h.gemm_flops_per_s() == Approx(1978.9e12 * h100.card.compute_efficiency_fp8).epsilon(1e-14));
  // int4 is weight-only everywhere: 16-bit math (fp16 on a T4, which lacks bf16).
  CHECK(deploy("llama-3.1-8b", "t4", 1, Precision::kInt4, Precision::kFp16).compute_precision() ==
        Precision::kFp16);
}

TEST_CASE("roofline: the overhead group is per step plus per sequence", "[cost][roofline]") {
  const RooflineCost cost(deploy("llama-3.1-8b", "h100-sxm"));
  // vLLM: 0.6 ms a step + 1.1 us a sequence. 64 decodes: 0.6 ms + 64 x 1.1 us = 0.6704 ms.
  const StepBreakdown s = cost.breakdown(decodes(64, 1024));
  CHECK(group(s, "overhead").seconds == Approx(0.6e-3 + 64 * 1.1e-6).epsilon(1e-12));
  CHECK(s.overhead_s == Approx(0.6704e-3).epsilon(1e-12));
  // 3 decodes and one prefill chunk: 4 sequences.
  BatchShape mixed = decodes(3, 1024);
  mixed.add_prefill_chunk(0, 512, true);
  CHECK(cost.breakdown(mixed).overhead_s == Approx(0.6e-3 + 4 * 1.1e-6).epsilon(1e-12));
  // The step is the sum of its groups.
  double sum = 0;
  for (const auto& g : s.groups) sum += g.seconds;
  CHECK(s.seconds == Approx(sum).epsilon(1e-12));
  CHECK(cost.seconds(decodes(64, 1024)) == s.seconds);
  // An empty step costs nothing.
  CHECK(cost.seconds(BatchShape{}) == 0);
}

TEST_CASE("roofline: a step cannot beat streaming the weights at peak bandwidth",
          "[cost][roofline][physics]") {
  struct Case {
    const char* model;
    const char* card;
    int tp;
    double weight_bytes_per_gpu;  // by hand: 2 B x parameters / TP
  };
  const std::vector<Case> cases = {
      {"llama-3.1-8b", "h100-sxm", 1, 16'060'522'496.0},
      {"llama-3.1-8b", "rtx-4090", 1, 16'060'522'496.0},
      {"llama-3.1-70b", "h100-sxm", 4, 141'107'412'992.0 / 4},
      {"mixtral-8x7b", "h100-sxm", 2, 2 * 46'702'792'704.0 / 2},
  };
  for (const auto& c : cases) {
    INFO(c.model << " on " << c.tp << " x " << c.card);
    const Deployment d = deploy(c.model, c.card, c.tp);
    const RooflineCost cost(d);
    const double floor = c.weight_bytes_per_gpu / d.card.memory_bandwidth;
    if (!d.model.is_moe()) {
      // A dense model reads all its weights every step.
      CHECK(cost.seconds(decodes(1, 1)) >= floor);
    } else {
      // An MoE step at batch 1 reads 2 of 8 experts; at a large batch all of them.
      CHECK(cost.seconds(decodes(256, 1)) >= floor);
    }
  }
}

TEST_CASE("roofline: time never falls as the batch or the context grows",
          "[cost][roofline][physics]") {
  for (const char* model : {"llama-3.1-8b", "mixtral-8x7b", "deepseek-v2-lite"}) {
    INFO(model);
    const RooflineCost cost(deploy(model, "h100-sxm", model == std::string("mixtral-8x7b") ? 2 : 1));
    double last = 0;
    for (int batch : {1, 2, 3, 4, 8, 16, 32, 64, 100, 128, 256, 512, 1024}) {
      const double t = cost.seconds(decodes(batch, 2048));
      CHECK(t >= last);
      last = t;
    }
    last = 0;
    for (int context : {1, 16, 128, 1024, 4096, 16384, 65536, 131072}) {
      const double t = cost.seconds(decodes(8, context));
      CHECK(t >= last);
      last = t;
    }
    last = 0;
    for (int tokens : {1, 16, 128, 512, 2048, 8192, 16384}) {
      const double t = cost.seconds(prefill(tokens));
      CHECK(t >= last);
      last = t;
    }
  }
}

TEST_CASE("roofline: MFU and MBU lie above 0 and at most 1", "[cost][roofline][physics]") {
  struct Case {
    const char* model;
    const char* card;
    int tp;
    Precision weights, kv;
  };
  const std::vector<Case> cases = {
      {"llama-3.1-8b", "h100-sxm", 1, Precision::kBf16, Precision::kBf16},
      {"llama-3.1-8b", "h100-sxm", 1, Precision::kFp8, Precision::kFp8},
      {"llama-3.1-8b", "a100-80gb-sxm", 1, Precision::kInt4, Precision::kBf16},
      {"llama-3.1-70b", "h100-sxm", 4, Precision::kBf16, Precision::kBf16},
      {"mixtral-8x7b", "h100-sxm", 2, Precision::kBf16, Precision::kBf16},
      {"deepseek-v2-lite", "h100-sxm", 1, Precision::kBf16, Precision::kBf16},
      {"llama-3.2-1b", "t4", 1, Precision::kFp16, Precision::kFp16},
      {"llama-3.1-8b", "rtx-4090", 2, Precision::kBf16, Precision::kBf16},
  };
  for (const auto& c : cases) {
    const RooflineCost cost(deploy(c.model, c.card, c.tp, c.weights, c.kv));
    std::vector<std::pair<std::string, BatchShape>> shapes;
    for (int batch : {1, 8, 64, 512}) {
      for (int context : {128, 4096, 32768}) {
        shapes.emplace_back("decode " + std::to_string(batch) + " @ " + std::to_string(context),
                            decodes(batch, context));
      }
    }
    for (int tokens : {1, 512, 8192}) {
      for (int cached : {0, 30000}) {
        shapes.emplace_back("prefill " + std::to_string(tokens) + " after " +
                                std::to_string(cached),
                            prefill(tokens, cached));
      }
    }
    for (const auto& [label, b] : shapes) {
      INFO(c.model << " on " << c.tp << " x " << c.card << ", " << label);
      const StepBreakdown s = cost.breakdown(b);
      CHECK(s.mfu > 0);
      CHECK(s.mfu <= 1);
      CHECK(s.mbu > 0);
      CHECK(s.mbu <= 1);
    }
  }
}

// With fp32 weights both GEMMs and attention run at the fp32 peak, so MFU (relative to the fp32
// peak) stays <= 1 even for an attention-heavy step.
TEST_CASE("roofline: MFU stays <= 1 with fp32 weights", "[cost][roofline][physics]") {
  const RooflineCost cost(deploy("llama-3.2-1b", "h100-sxm", 1, Precision::kFp32, Precision::kFp32));
  // A 512-token chunk after 100,000 cached tokens: attention dominates the FLOPs.
  const StepBreakdown s = cost.breakdown(prefill(512, 100000));
  CHECK(s.mfu <= 1);
}

TEST_CASE("roofline: an RTX 3090's P2P ends at its NVLink bridge pair", "[cost][roofline][p2p]") {
  // rtx-3090.yaml: a 2-way NVLink bridge (112.5 GB/s both directions, nvlink_gpus 2) and no PCIe
  // peer-to-peer. TP 2 runs over the bridge: 112.5e9 / 2 x 0.8 = 45 GB/s, NVLink latency 10 us.
  const RooflineCost pair(deploy("llama-3.1-8b", "rtx-3090", 2, Precision::kBf16, Precision::kBf16));
  CHECK(pair.link_bytes_per_s() == Approx(112.5e9 / 2 * 0.8).epsilon(1e-14));
  CHECK(pair.allreduce_latency_s() == Approx(10e-6).epsilon(1e-15));
  // TP 8 leaves the pair: PCIe gen4 x16 staged through host memory, exactly as on a 4090 (which
  // has no P2P at all): 16 x 1.969e9 x 0.8 x 0.5 = 12.6016 GB/s, PCIe latency 30 us. Before the
  // fix the 3090 was costed with P2P (twice this bandwidth).
  const RooflineCost r3090(deploy("llama-3.1-8b", "rtx-3090", 8));
  const RooflineCost r4090(deploy("llama-3.1-8b", "rtx-4090", 8));
  CHECK(r3090.link_bytes_per_s() == Approx(16 * 1.969e9 * 0.8 * 0.5).epsilon(1e-14));
  CHECK(r3090.link_bytes_per_s() == r4090.link_bytes_per_s());
  CHECK(r3090.allreduce_latency_s() == r4090.allreduce_latency_s());
  // Same model, same batch, same link: the all-reduce groups take the same time on both cards.
  CHECK(group(r3090.breakdown(decodes(32, 1024)), "all_reduce").seconds ==
        Approx(group(r4090.breakdown(decodes(32, 1024)), "all_reduce").seconds).epsilon(1e-12));
  CHECK(cards().find("rtx-3090").tp_link(2).kind == Card::TpLink::Kind::kNvlink);
  CHECK(cards().find("rtx-3090").tp_link(4).kind == Card::TpLink::Kind::kPcieHost);
  CHECK(cards().find("l4").tp_link(4).kind == Card::TpLink::Kind::kPcieP2p);
}

TEST_CASE("roofline: the all-reduce's fixed cost grows by 3 us per GPU beyond the second (vllm)",
          "[cost][roofline]") {
  // calibration/engines/vllm.yaml: allreduce_latency_nvlink 10 us + allreduce_latency_per_peer
  // 3 us x (TP - 2): 10 us at TP 2, 16 us at TP 4, 28 us at TP 8 (fitted on the dev runs).
  CHECK(vllm().allreduce_latency_per_peer_s == Approx(3e-6).epsilon(1e-15));
  // llama-3.1-70b, 64 decodes: each all-reduce moves 64 x 8192 x 2 = 1,048,576 B; NVLink link
  // 900e9 / 2 x 0.8 = 360e9 B/s; 2 per layer x 80 layers + the embedding's one.
  const double bytes = 64.0 * 8192 * 2;
  for (const auto& [tp, latency] : {std::pair{2, 10e-6}, std::pair{4, 16e-6}, std::pair{8, 28e-6}}) {
    INFO("TP " << tp);
    const RooflineCost cost(deploy("llama-3.1-70b", "h100-sxm", tp));
    CHECK(cost.allreduce_latency_s() == Approx(latency).epsilon(1e-12));
    const double one = latency + 2.0 * (tp - 1) / tp * bytes / 360e9;
    // TP 4: (16 + 4.369) us x 160 + 16 us = 3,275.05 us (docs/cost-model.md#tensor-parallel).
    CHECK(group(cost.breakdown(decodes(64, 2048)), "all_reduce").seconds ==
          Approx(one * 160 + latency).epsilon(1e-12));
  }
  CHECK(RooflineCost(deploy("llama-3.1-70b", "h100-sxm", 4)).breakdown(decodes(64, 2048)).communication_s ==
        Approx(3275.0506e-6).epsilon(1e-7));
}

// gpt-oss-20b (models/gpt-oss-20b/config.json): 24 layers, layer_types alternate sliding/full, so
// 12 sliding layers with a 128-token window; 64 query heads and 8 KV heads of 64 dims. Per layer:
// KV bytes per token (bf16) = 2 (K and V) x 8 x 64 x 2 B = 2,048 B; attention FLOPs per
// query-key pair = 4 x 64 heads x 64 = 16,384.
TEST_CASE("roofline: sliding-window layers attend over the window only", "[cost][sliding]") {
  const RooflineCost cost(deploy("gpt-oss-20b", "h100-sxm"));

  // Four decodes at context 2,000. Full layers read all 4 x 2,000 = 8,000 tokens: 8,000 x 2,048
  // = 16,384,000 B per layer, x 12 layers = 196,608,000 B. Sliding layers read 4 x 128 = 512
  // tokens: 1,048,576 B per layer, x 12 = 12,582,912 B; FLOPs 512 x 16,384 x 12 = 100,663,296.
  const StepBreakdown d = cost.breakdown(decodes(4, 2000));
  CHECK(test::group(d, "attention_decode").bytes == Approx(196608000.0));
  CHECK(test::group(d, "attention_decode_window").bytes == Approx(12582912.0));
  CHECK(test::group(d, "attention_decode_window").flops == Approx(100663296.0));

  // Contexts below the window: every token is within reach, so both halves read the same.
  const StepBreakdown s = cost.breakdown(decodes(4, 100));
  CHECK(test::group(s, "attention_decode_window").bytes ==
        Approx(test::group(s, "attention_decode").bytes));

  // A 2,000-token prompt in one chunk. Full layers: 2,000 x (0 + 2,001 / 2) = 2,001,000 pairs.
  // Sliding layers: each query reaches at most 128 keys, bounded by 2,000 x 128 = 256,000 pairs
  // (the exact count, 128 x 129 / 2 + 1,872 x 128 = 247,872, is 3.3% lower: BatchShape keeps
  // sums); FLOPs 256,000 x 16,384 x 12 = 50,331,648,000. The chunk's own 2,000 tokens are read
  // and written in both: (2,000 + 2,000) x 2,048 x 12 = 98,304,000 B.
  BatchShape p;
  p.add_prefill_chunk(0, 2000, true);
  const StepBreakdown f = cost.breakdown(p);
  CHECK(test::group(f, "attention_prefill").flops == Approx(2001000.0 * 16384 * 12));
  CHECK(test::group(f, "attention_prefill_window").flops == Approx(50331648000.0));
  CHECK(test::group(f, "attention_prefill_window").bytes == Approx(98304000.0));

  // A later 512-token chunk after 2,000 cached tokens: a sliding layer reads the 127 tokens
  // before the chunk and the chunk itself, (127 + 512) + 512 written = 1,151 tokens x 2,048 x 12.
  BatchShape c;
  c.add_prefill_chunk(2000, 512, true);
  CHECK(test::group(cost.breakdown(c), "attention_prefill_window").bytes ==
        Approx(1151.0 * 2048 * 12));
}

// A model without sliding windows keeps one attention group per phase over all its layers.
TEST_CASE("roofline: full-attention models have no window groups", "[cost][sliding]") {
  const RooflineCost cost(deploy("llama-3.1-8b", "h100-sxm"));
  const StepBreakdown d = cost.breakdown(decodes(2, 1000));
  CHECK_FALSE(test::has_group(d, "attention_decode_window"));
  // 32 layers x 2,000 tokens x (2 x 8 x 128 x 2 B = 4,096 B) = 262,144,000 B.
  CHECK(test::group(d, "attention_decode").bytes == Approx(262144000.0));
}

// A card's attention_bandwidth efficiency sets the rate of decode attention's KV reads alone;
// weight reads keep memory_bandwidth. Card: 1 TB/s, memory_bandwidth 0.8, attention_bandwidth
// 0.6; the vllm profile scales bandwidth by bandwidth_efficiency_scale (1.0) and attention reads
// further by attention_bandwidth_scale (1.1): weights 1e12 x 0.8 = 800 GB/s, KV reads 1e12 x 0.6
// x 1.1 = 660 GB/s (without the field: 1e12 x 0.8 x 1.1 = 880 GB/s).
TEST_CASE("roofline: a card's attention_bandwidth rates the KV reads apart from the weights",
          "[cost][roofline][cards]") {
  capsim_test::TempDir dir;
  const std::string base =
      "name: test-card\nreferences:\n  ds: \"a datasheet\"\nmemory: {value: 24GB, source: ds}\n"
      "memory_bandwidth: {value: 1TB/s, source: ds}\ndense_peak:\n  bf16: {value: 100TFLOPS, source: ds}\n"
      "tdp: {value: 300W, source: ds}\necc: {value: true, source: ds}\nefficiency:\n"
      "  memory_bandwidth: {value: 0.8, source: ds}\n  compute: {value: 0.7, source: ds}\n";
  const std::string with_attention = dir.write("att.yaml", base + "  attention_bandwidth: {value: 0.6, source: ds}\n");
  const std::string without = dir.write("plain.yaml", base);
  REQUIRE(vllm().bandwidth_efficiency_scale == 1.0);
  REQUIRE(vllm().attention_bandwidth_scale == Approx(1.1));
  const RooflineCost a(deploy("llama-3.2-1b", with_attention));
  CHECK(a.bytes_per_s() == Approx(800e9));
  CHECK(a.attention_bytes_per_s() == Approx(660e9));
  const RooflineCost b(deploy("llama-3.2-1b", without));
  CHECK(b.bytes_per_s() == Approx(800e9));
  CHECK(b.attention_bytes_per_s() == Approx(880e9));
}

// TensorRT-LLM's decode attention reads each KV head once per step at every TP (#9). TRT-LLM
// v0.12 runs a generation step's attention with its XQA kernel whenever the config is supported
// (FP16/BF16 compute; FP16/BF16/FP8/INT8 KV; head size a multiple of 16 up to 256; query heads
// per KV head up to 32; paged KV) and its heuristic sees enough work: kv_heads_per_gpu x batch x
// multi_block_count x 4 >= SM count (DecoderXQAImplJIT::mayHavePerfGain, kEnableMinBlockFactor =
// 4.0 in decoderXQAConstants.h, NVIDIA/TensorRT-LLM cpp/tensorrt_llm/kernels/
// decoderMaskedMultiheadAttention/; the same rule in the older precompiled runner). Its grid is
// (multi_block, kv_heads_per_gpu, batch): one CTA streams one sequence's KV head for the whole
// query group, so GQA's KV is read once. The masked-MHA fallback (one CTA per query head) would
// read it once per query head, up to `group` times. Llama-3.1-70B at TP8 on an H100 (132 SMs),
// batch 256: 1 x 256 x 1 x 4 = 1,024 >= 132, so XQA; it stays XQA down to batch 33.
//
// Hand numbers (models/llama-3.1-70b: 80 layers, 64 query heads, 8 KV heads of 128 dims):
//   KV heads per GPU = 8 / 8 = 1; KV bytes per token per layer per GPU = 2 (K, V) x 1 x 128 x 2 B
//   = 512 B. Batch 256 at context 2,048: 524,288 tokens x 512 B x 80 layers = 21,474,836,480 B
//   (XQA). Masked MHA would stream it once per query head, 64 / 8 = 8 per GPU: 171,798,691,840 B
//   before L2 hits. At TP1 the GPU holds all 8 KV heads: 8 x 21,474,836,480 B, so per-GPU bytes
//   scale as 1/TP with no re-read factor.
//   FLOPs: 4 x (64 / 8 = 8 heads per GPU) x 128 x 524,288 x 80 = 171,798,691,840.
TEST_CASE("roofline: TensorRT-LLM decode attention reads each KV head once per step at TP8 (XQA)",
          "[cost][roofline][attention]") {
  Deployment d8 = deploy("llama-3.1-70b", "h100-sxm", 8);
  d8.engine = capsim_test::engine_profile("tensorrt-llm");
  d8.limits = default_limits(d8.card, d8.engine);
  d8.validate();
  const RooflineCost cost8(d8);
  const StepBreakdown s8 = cost8.breakdown(decodes(256, 2048));
  const OperatorCost& a8 = group(s8, "attention_decode");
  CHECK(a8.bytes == Approx(21474836480.0));
  CHECK(a8.flops == Approx(171798691840.0));
  // Memory-bound: the time is the KV bytes over TRT-LLM's attention read rate (the FLOPs at the
  // attention rate add under 1% through the 2-norm).
  CHECK(a8.bound == Bound::kMemory);
  CHECK(a8.memory_s == Approx(21474836480.0 / cost8.attention_bytes_per_s()));

  Deployment d1 = deploy("llama-3.1-70b", "h200", 1, Precision::kFp8, Precision::kFp8);
  d1.engine = d8.engine;
  d1.limits = default_limits(d1.card, d1.engine);
  d1.validate();
  // TP1, fp8 KV (1 B): 8 KV heads x 2 x 128 x 1 B = 2,048 B per token per layer, x 524,288 x 80
  // = 85,899,345,920 B = 4 x the TP8 bf16 figure (8x the heads, half the bytes per element).
  const StepBreakdown s1 = RooflineCost(d1).breakdown(decodes(256, 2048));
  CHECK(group(s1, "attention_decode").bytes == Approx(85899345920.0));
}

TEST_CASE("roofline: memoized step totals equal a fresh breakdown, bit for bit",
          "[cost][roofline][memo]") {
  // totals() keeps the groups that depend on the token count alone (and the LM head by sampled
  // rows) from one step to the next; breakdown() computes every group afresh. Both must add the
  // same doubles in the same order, for every kind of model and step, the first time a token
  // count is seen and every time after.
  const std::vector<Deployment> deployments = {
      deploy("llama-3.1-8b", "h100-sxm"),
      deploy("mistral-7b", "rtx-3090", 2, Precision::kBf16, Precision::kFp8),  // TP over PCIe
      deploy("mixtral-8x7b", "h100-sxm", 2),                                    // routed experts
      deploy("gemma-2-9b", "h100-sxm"),                                         // sliding window
      deploy("llama-3.1-70b", "h100-sxm", 4)};
  std::vector<BatchShape> shapes = {decodes(1, 1024), decodes(7, 300), decodes(64, 100),
                                    decodes(64, 5000), decodes(256, 2048), prefill(1),
                                    prefill(100, 600), prefill(2048), prefill(20000)};
  BatchShape mixed = decodes(30, 900);
  mixed.add_prefill_chunk(1200, 512, false);
  shapes.push_back(mixed);
  for (const Deployment& d : deployments) {
    const RooflineCost memo(d);
    for (int round = 0; round < 2; ++round) {
      for (const BatchShape& b : shapes) {
        const StepBreakdown fresh = RooflineCost(d).breakdown(b);
        const StepBreakdown m = memo.totals(b);
        INFO(d.model.name << " round " << round << " tokens " << b.tokens());
        CHECK(m.seconds == fresh.seconds);
        CHECK(m.flops == fresh.flops);
        CHECK(m.bytes == fresh.bytes);
        CHECK(m.compute_s == fresh.compute_s);
        CHECK(m.memory_s == fresh.memory_s);
        CHECK(m.communication_s == fresh.communication_s);
        CHECK(m.overhead_s == fresh.overhead_s);
        CHECK(m.mfu == fresh.mfu);
        CHECK(m.mbu == fresh.mbu);
        CHECK(m.groups.empty());
        CHECK(memo.seconds(b) == fresh.seconds);
      }
    }
    // 64 decodes over 100 or 5000 tokens of context share their token terms, not their
    // attention: the longer context reads more KV.
    CHECK(memo.totals(decodes(64, 5000)).seconds > memo.totals(decodes(64, 100)).seconds);
  }
  // By hand, llama-3.1-8b, one decode over 1024 tokens: per layer qkv 4096 x (4096 + 2 x 1024)
  // = 25,165,824, o 4096 x 4096 = 16,777,216, MLP 3 x 4096 x 14336 = 176,160,768 parameters:
  // 2 x 218,103,808 x 32 layers = 13,958,643,712 FLOPs; attention 4 x 32 heads x 128 x 1024
  // pairs x 32 layers = 536,870,912; LM head 2 x 128256 x 4096 = 1,050,673,152. Sum
  // 15,546,187,776, memoized or not.
  const RooflineCost llama(deployments[0]);
  CHECK(llama.totals(decodes(1, 1024)).flops == 15'546'187'776.0);
  CHECK(llama.totals(decodes(1, 1024)).flops == 15'546'187'776.0);
}
