// The roofline of an MoE layer (sim/cost/roofline_cost.cc routed_experts_term and
// shared_router_term, docs/cost-model.md#moe): the routed experts run as vLLM's fused-MoE grouped
// GEMMs at the engine's MoE rates, the router GEMM as a dense kernel. Worked by hand for
// Mixtral-8x7B on one H100 SXM; the card's and the engine's efficiencies are read from their
// objects (data files), the arithmetic is here.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "sim/core/error.h"
#include "sim/cost/batch_shape.h"
#include "sim/cost/roofline_cost.h"
#include "sim/llm/deployment.h"
#include "sim/llm/engine_profile.h"
#include "tests/cost/breakdown_groups.h"
#include "tests/support/catalogues.h"
#include "tests/support/temp_dir.h"

#ifndef CAPSIM_DATA_DIR
#error "CAPSIM_DATA_DIR must name the repository root (the build defines it)"
#endif

namespace {

using namespace capsim;
using test::group;

// The vllm profile with fused-MoE scales from its kernel tables (0.625 and 1.1: the fit without
// b300, h100-sxm or h200; docs/kernel-validation.md#moe-scales), set here so that the worked
// numbers hold whatever the profile ships.
Deployment mixtral_h100() {
  Deployment d;
  d.model = capsim_test::model_catalogue().find("mixtral-8x7b");
  d.card = capsim_test::card_catalogue().find("h100-sxm");
  d.engine = capsim_test::engine_profile("vllm");
  d.engine.moe_compute_scale = 0.625;
  d.engine.moe_bandwidth_scale = 1.1;
  d.tp = 1;
  d.weights = Precision::kBf16;
  d.kv_cache = Precision::kBf16;
  d.limits = default_limits(d.card, d.engine);
  d.validate();
  return d;
}

BatchShape decodes(int batch) {
  BatchShape b;
  for (int i = 0; i < batch; ++i) b.add_decode(1024);
  return b;
}

}  // namespace

TEST_CASE("MoE roofline: engines whose MoE kernels were not measured keep the dense rates", "[cost][moe]") {
  CHECK(capsim_test::engine_profile("tensorrt-llm").moe_compute_scale == 1.0);
  CHECK(capsim_test::engine_profile("tensorrt-llm").moe_bandwidth_scale == 1.0);
  CHECK(capsim_test::engine_profile("lmdeploy").moe_compute_scale == 1.0);
}

TEST_CASE("MoE roofline: Mixtral on H100, 4 decodes read 5.47 of 8 experts at the fused-MoE stream rate",
          "[cost][moe]") {
  const Deployment d = mixtral_h100();
  const Card& c = d.card;
  const EngineProfile& e = d.engine;
  // H100 SXM: 3.35 TB/s x min(1, 0.78 x 1.0 x 1.1 = 0.858) = 2.8743 TB/s for the experts' weights
  // (2.613 TB/s for the dense kernels); bf16 989.4 TFLOPS x 0.76 x 0.625 = 469.965 TFLOPS for
  // the grouped GEMMs.
  const double moe_bw = c.memory_bandwidth * std::min(1.0, c.bandwidth_efficiency * e.bandwidth_efficiency_scale *
                                                               e.moe_bandwidth_scale);
  const double dense_bw = c.memory_bandwidth * std::min(1.0, c.bandwidth_efficiency * e.bandwidth_efficiency_scale);
  const double moe_rate = c.peak(Precision::kBf16) * std::min(1.0, c.compute_efficiency * e.compute_efficiency_scale) *
                          e.moe_compute_scale;
  const double floor = c.kernel_floor_s;
  const RooflineCost cost(d);
  const StepBreakdown s = cost.breakdown(decodes(4));
  const OperatorCost& moe = group(s, "moe_mlp");

  // Uniform routing, top-2 of 8: 8 x (1 - (6/8)^4) = 8 x 0.68359375 = 5.46875 experts expected.
  // One expert: 3 x 4096 x 14336 = 176,160,768 parameters.
  // Routed bytes per layer: 5.46875 x 176,160,768 x 2 B + 2 x 4 x 4096 x 2 B (activations in and
  // out) = 1,926,758,400 + 65,536 = 1,926,823,936 B -> / 2.8743e12 = 670.36 us.
  // Routed FLOPs: 2 x 4 tokens x 2 experts x 176,160,768 = 2,818,572,288 -> / 469.965e12 = 6.00 us.
  const double routed_bytes = 5.46875 * 176'160'768.0 * 2 + 2 * 4 * 4096 * 2.0;
  const double routed_flops = 2.0 * 4 * 2 * 176'160'768.0;
  CHECK(routed_bytes == 1'926'823'936.0);
  const double routed = std::max(std::hypot(routed_flops / moe_rate, routed_bytes / moe_bw), 3 * floor);
  CHECK(routed == Approx(std::hypot(2'818'572'288.0 / moe_rate, 1'926'823'936.0 / moe_bw)));
  // Router: 4096 x 8 = 32,768 parameters at 16-bit, 65,536 B at the dense 2.613 TB/s = 0.025 us
  // (its kernel counts in the routed group's floor of 3 x 4 us, far below 670 us).
  const double dense_rate = c.peak(Precision::kBf16) * c.compute_efficiency;
  const double router = std::hypot(2.0 * 4 * 32'768 / dense_rate, 65'536.0 / dense_bw);
  CHECK(router < 0.03e-6);
  // 32 MoE layers: 32 x (670.39 + 0.03) us = 21.45 ms. The bytes and FLOPs are the layer's as before.
  CHECK(moe.seconds == Approx(32 * (routed + router)).epsilon(1e-12));
  CHECK(moe.bytes == Approx(32 * (routed_bytes + 65'536.0)).epsilon(1e-15));
  CHECK(moe.flops == Approx(32 * (routed_flops + 2.0 * 4 * 32'768)).epsilon(1e-15));
  // At the card's dense rates (scales 1, the profile's default) the same step reads at
  // 2.613 TB/s: 32 x 737.4 us = 23.60 ms, 10% longer.
  CHECK(moe.seconds < 0.93 * 32 * (routed_bytes + 65'536.0) / dense_bw);
}

TEST_CASE("MoE roofline: a Mixtral prefill of 8192 tokens is compute-bound at the fused-MoE rate", "[cost][moe]") {
  const Deployment d = mixtral_h100();
  const Card& c = d.card;
  const EngineProfile& e = d.engine;
  const double moe_rate = c.peak(Precision::kBf16) * std::min(1.0, c.compute_efficiency * e.compute_efficiency_scale) *
                          e.moe_compute_scale;
  const double moe_bw = c.memory_bandwidth * std::min(1.0, c.bandwidth_efficiency * e.bandwidth_efficiency_scale *
                                                               e.moe_bandwidth_scale);
  BatchShape b;
  b.add_prefill_chunk(0, 8192, true);
  const RooflineCost cost(d);
  const StepBreakdown s = cost.breakdown(b);
  const OperatorCost& moe = group(s, "moe_mlp");
  // Every expert is hit (8 x (1 - 0.75^8192) = 8). Routed FLOPs: 2 x 8192 x 2 x 176,160,768 =
  // 5,772,436,045,824 -> / 469.965e12 = 12.282 ms; bytes 8 x 176,160,768 x 2 + 2 x 8192 x 4096 x 2
  // = 2,818,572,288 + 134,217,728 = 2,952,790,016 -> / 2.8743e12 = 1.027 ms; 2-norm 12.325 ms.
  const double flops = 2.0 * 8192 * 2 * 176'160'768.0;
  const double bytes = 8 * 176'160'768.0 * 2 + 2.0 * 8192 * 4096 * 2;
  CHECK(flops == 5'772'436'045'824.0);
  CHECK(bytes == 2'952'790'016.0);
  const double routed = std::hypot(flops / moe_rate, bytes / moe_bw);
  // Router GEMM: 2 x 8192 x 32,768 FLOPs at the dense bf16 rate (752 TFLOPS): 0.71 us.
  const double router = std::hypot(2.0 * 8192 * 32'768 / (c.peak(Precision::kBf16) * c.compute_efficiency),
                                   65'536.0 / (c.memory_bandwidth * c.bandwidth_efficiency));
  CHECK(moe.seconds == Approx(32 * (routed + router)).epsilon(1e-12));
  // Compute time: the routed FLOPs at 0.625 x the GEMM rate, the router's at the dense rate.
  CHECK(moe.compute_s == Approx(32 * (flops / moe_rate + 2.0 * 8192 * 32'768 / (moe_rate / e.moe_compute_scale)))
                             .epsilon(1e-12));
}

TEST_CASE("MoE roofline: an engine profile's MoE scale of 0 or above 1.5 is refused naming the field",
          "[cost][moe]") {
  const capsim_test::TempDir dir("moe_scale");
  std::ifstream in(std::string(CAPSIM_DATA_DIR) + "/calibration/engines/vllm.yaml");
  std::stringstream text;
  text << in.rdbuf();
  const std::string original = text.str();
  // The profile with its moe_compute_scale line (if any) replaced by `field`, or left out.
  const auto with_line = [&](const std::string& field) {
    std::string text_out = original;
    const std::size_t at = text_out.find("  moe_compute_scale:");
    if (at != std::string::npos) text_out.erase(at, text_out.find('\n', at) + 1 - at);
    const std::string anchor = "  moe_dispatch_kernels:";
    const std::size_t after = text_out.find('\n', text_out.find(anchor)) + 1;
    return text_out.insert(after, field);
  };
  REQUIRE(original.find("  moe_dispatch_kernels:") != std::string::npos);
  const std::string bad = with_line("  moe_compute_scale: {value: 2, source: moe-tables}\n");
  const std::string path = dir.write("vllm.yaml", bad);
  try {
    EngineCatalogue::load_file(path);
    FAIL("a moe_compute_scale of 2 was accepted");
  } catch (const Error& err) {
    const std::string what = err.what();
    CHECK(what.find(path) != std::string::npos);
    CHECK(what.find("kernels.moe_compute_scale") != std::string::npos);
    CHECK(what.find("outside the accepted range (0, 1.5]") != std::string::npos);
  }
  // Absent: 1, the dense GEMMs' rates; 0.625 read as written.
  CHECK(EngineCatalogue::load_file(dir.write("absent.yaml", with_line(""))).moe_compute_scale == 1.0);
  CHECK(EngineCatalogue::load_file(dir.write("set.yaml", with_line("  moe_compute_scale: {value: 0.625, source: moe-tables}\n")))
            .moe_compute_scale == 0.625);
}
