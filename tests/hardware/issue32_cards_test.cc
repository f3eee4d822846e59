// The cards issue 32 adds because AIConfigurator's kernel databases and the public benchmarks
// cover them: B300 (HGX), GB200 (one GPU of an NVL72), MI325X, MI355X and the RTX PRO 6000
// Blackwell Server Edition. Each loads with the numbers worked from its cited sources
// (calibration/cards/<name>.yaml, references), its efficiencies are marked as borrowed, and `fit`
// uses the new memory sizes. Their kernel tables: tests/cost/measured_kernels_test.cc.
#include <catch2/catch.hpp>

#include <string>

#include "sim/core/error.h"
#include "sim/hardware/card.h"
#include "sim/hardware/precision_support.h"
#include "sim/llm/deployment.h"
#include "sim/llm/engine_profile.h"
#include "sim/llm/model_spec.h"
#include "tests/check/cli_run.h"
#include "tests/support/catalogues.h"

namespace {

using namespace capsim;
using capsim_test::has;
using capsim_test::run_capsim;

constexpr auto& cards = capsim_test::card_catalogue;
constexpr double kGiB = 1073741824.0;  // 2^30

std::string refusal(const std::string& card, Precision w) {
  Deployment d;
  d.model = capsim_test::model_catalogue().find("mistral-7b");
  d.card = cards().find(card);
  d.engine = capsim_test::engine_catalogue().find("vllm");
  d.weights = w;
  d.kv_cache = Precision::kBf16;
  d.limits = default_limits(d.card, d.engine);
  try {
    d.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("cards: b300 carries the HGX B300 per-GPU figures", "[hardware][cards][issue32]") {
  const Card& c = cards().find("hgx-b300");
  CHECK(c.name == "b300");
  CHECK(c.architecture == "blackwell");
  CHECK(c.card_class == "datacenter");
  // 288 GB HBM3e (decimal); visible: nvidia-smi 275040 MiB = 268.59 GiB less the B200's 0.71 GiB
  // driver gap = 267.88 GiB = 267.88 x 2^30 B.
  CHECK(c.memory_bytes == 288e9);
  CHECK(c.visible_memory_bytes == Approx(267.88 * kGiB).epsilon(1e-13));
  // 62 TB/s over 8 GPUs = 7.75 TB/s; dense = sparse / 2: BF16 4.5 / 2, FP8 9 / 2 PFLOPS,
  // INT8 307 / 2 TOPS; FP4 14 PFLOPS dense (both NVFP4 and MXFP4).
  CHECK(c.memory_bandwidth == Approx(7.75e12).epsilon(1e-15));
  CHECK(c.peak(Precision::kBf16) == Approx(2250e12).epsilon(1e-15));
  CHECK(c.peak(Precision::kFp8) == Approx(4500e12).epsilon(1e-15));
  CHECK(c.peak(Precision::kInt8) == Approx(153.5e12).epsilon(1e-15));
  CHECK(c.peak(Precision::kNvfp4) == Approx(14000e12).epsilon(1e-15));
  CHECK(c.peak(Precision::kMxfp4) == Approx(14000e12).epsilon(1e-15));
  CHECK(c.nvlink_bandwidth == 1800e9);
  CHECK(c.nvlink_gpus == 8);
  // PCIe Gen6 x16 per direction: 16 x 7.563 GB/s = 121.008 GB/s.
  CHECK(c.pcie_bandwidth() == Approx(121.008e9).epsilon(1e-15));
  CHECK(c.tdp_watts == 1100);
  // Efficiencies: the B200 card's, borrowed (B300 not measured).
  CHECK(c.bandwidth_efficiency == 0.75);
  CHECK(c.compute_efficiency == 0.73);
  CHECK(c.efficiency_data == "assumed");
  CHECK(has(c.sources.at("efficiency.memory_bandwidth"), "capsim's B200 card"));
}

TEST_CASE("cards: gb200 is one GPU of a GB200 NVL72", "[hardware][cards][issue32]") {
  const Card& c = cards().find("gb200");
  // 13.4 TB over 72 GPUs = 186 GB; visible 189471 MiB = 185.03 GiB less 0.71 GiB = 184.32 GiB.
  CHECK(c.memory_bytes == 186e9);
  CHECK(c.visible_memory_bytes == Approx(184.32 * kGiB).epsilon(1e-13));
  CHECK(c.memory_bandwidth == 8e12);
  // Rack FP4 1440 PFLOPS sparse / 72 / 2 = 10 PFLOPS dense per GPU; FP8 720 / 72 / 2 = 5.
  CHECK(c.peak(Precision::kNvfp4) == Approx(10000e12).epsilon(1e-15));
  CHECK(c.peak(Precision::kFp8) == Approx(5000e12).epsilon(1e-15));
  CHECK(c.peak(Precision::kBf16) == Approx(2500e12).epsilon(1e-15));
  // One NVLink domain of 72 GPUs: TP 16 stays on NVLink, where a B200 board (8) goes to PCIe.
  CHECK(c.nvlink_gpus == 72);
  CHECK(c.tp_link(16).name() == "NVLink");
  CHECK(cards().find("b200").tp_link(16).name() != "NVLink");
  CHECK(c.tdp_watts == 1200);
  CHECK(c.efficiency_data == "assumed");
}

TEST_CASE("cards: mi325x is the MI300X's compute with 256 GB of HBM3e", "[hardware][cards][issue32]") {
  const Card& c = cards().find("amd-mi325x");
  const Card& mi300x = cards().find("mi300x");
  CHECK(c.name == "mi325x");
  CHECK(c.architecture == "cdna3");
  CHECK(c.memory_bytes == 256e9);
  // torch: 'total capacity of 255.98 GiB' (vllm issue #41962).
  CHECK(c.visible_memory_bytes == Approx(255.98 * kGiB).epsilon(1e-13));
  CHECK(c.memory_bandwidth == 6e12);
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kBf16, Precision::kFp8, Precision::kInt8}) {
    INFO(precision_name(p));
    CHECK(c.peak(p) == mi300x.peak(p));
  }
  CHECK(c.peak(Precision::kFp8) == Approx(2614.9e12).epsilon(1e-15));
  CHECK_FALSE(c.supports(Precision::kNvfp4));  // CDNA 3 has no FP4 matrix math
  CHECK(c.nvlink_bandwidth == 896e9);          // Infinity Fabric 7 x 128 GB/s
  CHECK(c.tdp_watts == 1000);
  CHECK(c.bandwidth_efficiency == mi300x.bandwidth_efficiency);
  CHECK(c.efficiency_data == "assumed");
}

TEST_CASE("cards: mi355x's rates are worked from CUs, clock and per-CU rate", "[hardware][cards][issue32]") {
  const Card& c = cards().find("mi355x");
  CHECK(c.architecture == "cdna4");
  CHECK(c.memory_bytes == 288e9);
  CHECK(c.visible_memory_bytes == Approx(287.98 * kGiB).epsilon(1e-13));
  CHECK(c.memory_bandwidth == 8e12);
  // FP8: 256 CUs x 2.4 GHz x 8192 FLOPS per clock = 5033.16 TFLOPS, written 5033.2; BF16 half,
  // FP4 twice (the card file rounds each to 0.1 TFLOPS).
  CHECK(256 * 2.4e9 * 8192 == Approx(5033.2e12).epsilon(1e-5));
  CHECK(c.peak(Precision::kFp8) == Approx(5033.2e12).epsilon(1e-15));
  CHECK(c.peak(Precision::kBf16) == Approx(2516.6e12).epsilon(1e-15));
  CHECK(c.peak(Precision::kMxfp4) == Approx(10066.3e12).epsilon(1e-15));
  CHECK(c.nvlink_bandwidth == Approx(1075.2e9).epsilon(1e-15));  // 7 x 153.6 GB/s
  CHECK(c.tdp_watts == 1400);
  CHECK(c.efficiency_data == "assumed");
}

TEST_CASE("cards: rtx-pro-6000 is a PCIe card with GDDR7 and no NVLink", "[hardware][cards][issue32]") {
  const Card& c = cards().find("rtx-pro-6000-server");
  CHECK(c.name == "rtx-pro-6000");
  CHECK(c.card_class == "datacenter");
  CHECK(c.memory_bytes == 96e9);
  CHECK(c.visible_memory_bytes == Approx(94.97 * kGiB).epsilon(1e-13));
  CHECK(c.memory_bandwidth == 1792e9);
  // NVIDIA's '4,000 TOPS' FP4 is sparse: 2000 dense, FP8 1000, BF16 500.
  CHECK(c.peak(Precision::kNvfp4) == Approx(2000e12).epsilon(1e-15));
  CHECK(c.peak(Precision::kFp8) == Approx(1000e12).epsilon(1e-15));
  CHECK(c.peak(Precision::kBf16) == Approx(500e12).epsilon(1e-15));
  CHECK(c.nvlink_bandwidth == 0);
  CHECK(c.nvlink_gpus == 0);
  CHECK(c.peer_to_peer);  // vLLM's custom all-reduce (P2P only) was timed on 8 of them
  CHECK(c.tp_link(2).name() == "PCIe P2P");
  CHECK(c.tdp_watts == 600);
  // The L40S's efficiencies (fitted bandwidth and fp8 compute), borrowed.
  CHECK(c.bandwidth_efficiency == cards().find("l40s").bandwidth_efficiency);
  CHECK(c.compute_efficiency_fp8 == 0.60);
  CHECK(c.efficiency_data == "assumed");
}

TEST_CASE("precision support: CDNA 4 (mi355x) runs FP4 weights, CDNA 3 (mi325x) does not",
          "[hardware][precision][issue32]") {
  CHECK(architecture_support("cdna4") != nullptr);
  CHECK(refusal("mi355x", Precision::kMxfp4).empty());
  CHECK(refusal("mi355x", Precision::kFp8).empty());
  CHECK(has(refusal("mi355x", Precision::kInt4), "--weights: int4 is not supported on mi355x: cdna4 has no INT4 AWQ/GPTQ kernel"));
  CHECK(has(refusal("mi325x", Precision::kMxfp4), "--weights: mxfp4 is not supported on mi325x"));
}

TEST_CASE("fit: qwen3-235b-a22b in fp8 fits one mi355x, not one b200", "[cli][fit][issue32]") {
  // Weights: 236.74 GB = 220.48 GiB in fp8, plus activations 1.16 GiB and runtime 1.79 GiB =
  // 223.43 GiB needed per GPU (the fit table's rows).
  // mi355x: budget 0.90 x 287.98 GiB = 259.18 GiB; KV cache 259.18 - 223.43 = 35.75 GiB
  //   = 35.75 x 2^30 / (188 KiB per token) = 199,4xx tokens -> 12463 blocks of 16 = 199408 tokens.
  // b200: budget 0.90 x 178.35 GiB = 160.51 GiB < 223.43 GiB: does not fit.
  const auto mi355x = run_capsim("fit --model qwen3-235b-a22b --weights fp8 --card mi355x");
  REQUIRE(mi355x.status == 0);
  CHECK(has(mi355x.out, "visible memory  287.98"));
  CHECK(has(mi355x.out, "budget          259.18"));
  CHECK(has(mi355x.out, "fits. KV cache: 12463 blocks of 16 tokens = 199408 tokens"));
  const auto b200 = run_capsim("fit --model qwen3-235b-a22b --weights fp8 --card b200");
  CHECK(b200.status == 1);
  CHECK(has(b200.out, "does not fit: weights (220.48 GiB), activations (1.16 GiB) and runtime (1.79 GiB) "
                      "exceed the budget of 160.51 GiB per GPU."));
  // Its suggestions now name the larger new cards.
  CHECK(has(b200.out, "--card mi355x: 199408 KV tokens"));
}
