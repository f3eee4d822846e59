// Measured fused-MoE and custom all-reduce tables (sim/hardware/measured_moe.h,
// measured_allreduce.h) and their use by the roofline cost model
// (docs/cost-model.md#measured-kernels). The numbers are worked by hand from rows of
// calibration/kernels/h100-sxm/moe-bf16.csv and allreduce-bf16.csv (AIConfigurator, vLLM 0.24.0,
// H100 SXM), quoted where used.
#include "sim/hardware/measured_moe.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <string>

#include "sim/core/error.h"
#include "sim/cost/batch_shape.h"
#include "sim/cost/roofline_cost.h"
#include "sim/hardware/card.h"
#include "sim/hardware/measured_allreduce.h"
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
using capsim::test::group;
using capsim::test::has_group;
using capsim_test::TempDir;

std::string data_dir() { return CAPSIM_DATA_DIR; }

const MeasuredMoeTable& h100_moe() {
  static const MeasuredMoeTable t = MeasuredMoeTable::load(data_dir() + "/calibration/kernels/h100-sxm/moe-bf16.csv");
  return t;
}

const MeasuredAllReduceTable& h100_allreduce() {
  static const MeasuredAllReduceTable t =
      MeasuredAllReduceTable::load(data_dir() + "/calibration/kernels/h100-sxm/allreduce-bf16.csv");
  return t;
}

// Mixtral-8x7B's MoE layer with every expert sliced over 2 GPUs.
const MoeLayout kMixtralTp2{4096, 14336, 8, 2, 2, 1};

// A roofline for the outside-range rule, linear in tokens from a fixed 10 us: easy to work by hand.
double linear_roofline(double tokens) { return 10e-6 + 1e-6 * tokens; }

struct MeasuredKernelsOn {
  MeasuredKernelsOn() { MeasuredKernels::set_enabled(true); }
  ~MeasuredKernelsOn() { MeasuredKernels::set_enabled(false); }
};

Deployment mixtral(const std::string& card, int tp, bool expert_parallel = false) {
  Deployment d;
  d.model = capsim_test::model_catalogue().find("mixtral-8x7b");
  d.card = capsim_test::card_catalogue().find(card);
  d.engine = capsim_test::engine_catalogue().find("vllm");
  d.tp = tp;
  d.expert_parallel = expert_parallel;
  d.weights = Precision::kBf16;
  d.kv_cache = Precision::kBf16;
  d.limits = default_limits(d.card, d.engine);
  d.validate();
  return d;
}

std::string write_file(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.path() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("a measured MoE layout's time at a measured token count is its row", "[kernels][moe]") {
  // Row "16,4096,14336,8,2,2,1,490.3".
  REQUIRE(h100_moe().has(kMixtralTp2));
  CHECK(h100_moe().seconds(16, kMixtralTp2, linear_roofline) == Approx(490.3e-6).epsilon(1e-9));
  CHECK(h100_moe().covers(16, kMixtralTp2));
  CHECK(h100_moe().info().kernel == "vllm_unquantizedfusedmoe_triton_tritonexperts");
  // Mixtral with TP 3 was not measured: no row carries to it.
  CHECK_FALSE(h100_moe().has(MoeLayout{4096, 14336, 8, 2, 3, 1}));
}

TEST_CASE("between measured token counts the MoE time is interpolated log-log", "[kernels][moe]") {
  // Rows 16 -> 490.3 us and 32 -> 493.5 us; at the log midpoint sqrt(16 x 32) = 22.627 tokens
  // the time is the geometric mean sqrt(490.3 x 493.5) = 491.897 us.
  CHECK(h100_moe().seconds(std::sqrt(16.0 * 32.0), kMixtralTp2, linear_roofline) == Approx(491.8974e-6).epsilon(1e-6));
}

TEST_CASE("beyond the measured token counts the MoE time is carried by the roofline ratio", "[kernels][moe]") {
  // The largest measured count is 16384 -> 8583 us; at 32768 tokens the linear roofline gives
  // (10 + 32768) / (10 + 16384) = 1.999390, so 17161.8 us.
  CHECK_FALSE(h100_moe().covers(32768, kMixtralTp2));
  CHECK(h100_moe().seconds(32768, kMixtralTp2, linear_roofline) == Approx(8583e-6 * 32778.0 / 16394.0).epsilon(1e-9));
}

TEST_CASE("the all-reduce table: rows, log-log midpoint and the rule outside its sizes", "[kernels][allreduce]") {
  const MeasuredAllReduceTable& t = h100_allreduce();
  // Row "2,131072,5.18".
  CHECK(t.seconds(2, 131072) == Approx(5.18e-6).epsilon(1e-9));
  // Rows 131072 -> 5.18 us and 262144 -> 6.315 us: at sqrt(131072 x 262144) bytes,
  // sqrt(5.18 x 6.315) = 5.71941 us.
  CHECK(t.seconds(2, std::sqrt(131072.0 * 262144.0)) == Approx(5.71941e-6).epsilon(1e-5));
  // Below 128 bytes: the 128-byte row "2,128,4.292" (latency-bound).
  CHECK(t.seconds(2, 16) == Approx(4.292e-6).epsilon(1e-9));
  CHECK_FALSE(t.covers(2, 16));
  // Above 512 MiB: row "8,536870912,4009" x 2 for 1 GiB.
  CHECK(t.seconds(8, 1073741824.0) == Approx(8018e-6).epsilon(1e-9));
  // 2, 4 and 8 GPUs were measured; 16 was not.
  CHECK(t.has(4));
  CHECK_FALSE(t.has(16));
}

TEST_CASE("Mixtral-8x7B decode at batch 16 on TP2 H100s: MoE and all-reduce from the tables", "[kernels][moe][allreduce]") {
  BatchShape b;
  for (int i = 0; i < 16; ++i) b.add_decode(1000);
  SECTION("off (the default): the roofline, saying the tables exist") {
    const RooflineCost cost(mixtral("h100-sxm", 2));
    CHECK(cost.moe_source().find("roofline: h100-sxm has measured tables, off") == 0);
    CHECK(cost.allreduce_source().find("roofline: h100-sxm has measured tables, off") == 0);
    const StepBreakdown s = cost.breakdown(b);
    CHECK_FALSE(group(s, "moe_mlp").measured);
    CHECK(has_group(s, "moe_dispatch"));
    CHECK_FALSE(group(s, "all_reduce").measured);
  }
  SECTION("on") {
    MeasuredKernelsOn on;
    const RooflineCost cost(mixtral("h100-sxm", 2));
    CHECK(cost.moe_source() ==
          "measured: h100-sxm vllm 0.24.0 MoE table (bf16), hidden 4096, inter 14336, 8 experts, top-2, TP 2");
    CHECK(cost.allreduce_source() == "measured: h100-sxm vllm 0.24.0 custom all-reduce table, 2 GPUs over NVLink");
    const StepBreakdown s = cost.breakdown(b);
    // The MoE layer: row "16,4096,14336,8,2,2,1,490.3", plus the router GEMM on the roofline
    // (4096 x 8 weights: 25 ns of memory, so its one kernel's 4 us floor), x 32 layers =
    // (490.3 + 4) x 32 = 15817.6 us. The routing kernels are in the table's layer.
    CHECK(group(s, "moe_mlp").seconds == Approx(32 * (490.3e-6 + 4e-6)).epsilon(1e-6));
    CHECK(group(s, "moe_mlp").measured);
    CHECK_FALSE(has_group(s, "moe_dispatch"));
    // The all-reduce: 2 x 4096 x 16 = 131072 bytes, row "2,131072,5.18"; two per layer and the
    // embedding's: 65 x 5.18 = 336.7 us.
    CHECK(group(s, "all_reduce").seconds == Approx(65 * 5.18e-6).epsilon(1e-9));
    CHECK(group(s, "all_reduce").measured);
  }
}

TEST_CASE("expert parallelism reads the table's ep rows at the busiest GPU's imbalance", "[kernels][moe]") {
  MeasuredKernelsOn on;
  const RooflineCost cost(mixtral("h100-sxm", 2, true));
  CHECK(cost.moe_source() ==
        "measured: h100-sxm vllm 0.24.0 MoE table (bf16), hidden 4096, inter 14336, 8 experts, top-2, EP 2");
  BatchShape b;
  for (int i = 0; i < 16; ++i) b.add_decode(1000);
  // 16 tokens x imbalance 1.3 = 20.8 balanced tokens: rows "16,...,1,2,503.7" and
  // "32,...,1,2,510.2", w = ln(20.8/16) / ln 2 = 0.378512, 503.7^(1-w) x 510.2^w = 506.151 us;
  // + the router's 4 us floor, x 32 layers.
  CHECK(group(cost.breakdown(b), "moe_mlp_ep").seconds == Approx(32 * (506.1505e-6 + 4e-6)).epsilon(1e-6));
  CHECK(group(cost.breakdown(b), "moe_mlp_ep").measured);
}

TEST_CASE("cards and layouts the tables do not match keep the roofline, saying why", "[kernels][moe][allreduce]") {
  MeasuredKernelsOn on;
  SECTION("L40S: vLLM's custom all-reduce needs peer-to-peer, which the L40S card file says PCIe lacks") {
    const RooflineCost cost(mixtral("l40s", 2));
    CHECK(cost.allreduce_source() ==
          "roofline: the table times vLLM's custom all-reduce, which TP 2 over PCIe via host (no P2P) does not run (NCCL)");
  }
  SECTION("a model shape the MoE table did not measure (DeepSeek-V2-Lite)") {
    Deployment d = mixtral("h100-sxm", 1);
    d.model = capsim_test::model_catalogue().find("deepseek-v2-lite");
    d.validate();
    const RooflineCost cost(d);
    CHECK(cost.moe_source() ==
          "roofline: the h100-sxm bf16 MoE table did not measure hidden 2048, inter 1408, 64 experts, top-6, TP 1");
    BatchShape b;
    b.add_decode(1000);
    CHECK_FALSE(group(cost.breakdown(b), "moe_mlp").measured);
  }
}

TEST_CASE("fp8 experts: block-scaled checkpoints read the fp8_block table, per-tensor fp8 keeps the roofline", "[kernels][moe]") {
  MeasuredKernelsOn on;
  SECTION("DeepSeek-V3 (quant_method fp8, 128x128 blocks), expert-parallel over 8 H100s") {
    Deployment d = mixtral("h100-sxm", 8, true);
    d.model = capsim_test::model_catalogue().find("deepseek-v3");
    d.weights = Precision::kFp8;
    d.validate();
    const RooflineCost cost(d);
    CHECK(cost.moe_source() ==
          "measured: h100-sxm vllm 0.24.0 MoE table (fp8_block), hidden 7168, inter 2048, 256 experts, top-8, EP 8");
  }
  SECTION("Mixtral re-quantised with --weights fp8: the fp8 table times ModelOpt's kernel, not this one") {
    Deployment d = mixtral("h100-sxm", 2);
    d.weights = Precision::kFp8;
    d.validate();
    const RooflineCost cost(d);
    CHECK(cost.moe_source() ==
          "roofline: the fp8 MoE tables time block-scaled (quant_method fp8) and ModelOpt checkpoints' kernels, "
          "not these per-tensor fp8 experts");
  }
}

TEST_CASE("malformed MoE and all-reduce tables are refused with file, line and what is accepted", "[kernels][moe][allreduce]") {
  TempDir dir;
  const std::string head = "# capsim measured-kernel table: 1\n# dtype: bf16\n# card: h100-sxm\n"
                           "# framework: vllm 0.24.0\n# source: test\n# unit: us\n";
  SECTION("a missing column") {
    const auto p = write_file(dir, "moe-bf16.csv", "# op: moe\n" + head + "tokens,hidden,inter,experts,topk,tp,us\n1,2,3,4,1,1,5\n");
    CHECK_THROWS_WITH(MeasuredMoeTable::load(p), p + ":8: the column header must name tokens, hidden, inter, experts, "
                                                     "topk, tp, ep, us (got 'tokens,hidden,inter,experts,topk,tp,us')");
  }
  SECTION("a GPU count that is not whole") {
    const auto p = write_file(dir, "allreduce-bf16.csv", "# op: allreduce\n" + head + "gpus,bytes,us\n2.5,128,4\n");
    CHECK_THROWS_WITH(MeasuredAllReduceTable::load(p), p + ":9: gpus '2.5' is not a whole number");
  }
  SECTION("a GPU count past any group (and past int: undefined behaviour before, found by fuzz_kernel_table)") {
    const auto p = write_file(dir, "allreduce-bf16.csv", "# op: allreduce\n" + head + "gpus,bytes,us\n2,128,4\n5e48,128,4\n");
    CHECK_THROWS_WITH(MeasuredAllReduceTable::load(p),
                      p + ": gpus 5e+48 is not a GPU count in 2..65536 (an all-reduce over one GPU is no kernel)");
  }
  SECTION("an all-reduce table filed as MoE") {
    const auto p = write_file(dir, "moe-bf16.csv", "# op: allreduce\n" + head + "gpus,bytes,us\n2,128,4\n");
    CHECK_THROWS_WITH(MeasuredMoeTable::load(p), p + ":8: unknown column 'gpus'; a moe table has tokens, hidden, inter, "
                                                     "experts, topk, tp, ep, us");
  }
}
