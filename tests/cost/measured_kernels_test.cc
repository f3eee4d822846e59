// Measured kernel tables (sim/hardware/measured_kernels.h) and their use by the roofline cost
// model (docs/cost-model.md#measured-kernels). The numbers are worked by hand from rows of
// calibration/kernels/h100-sxm/gemm-bf16.csv (AIConfigurator, vLLM 0.24.0, H100 SXM), quoted
// where used, and from h100-sxm.yaml's roofline constants (989.4 TFLOPS bf16 x 0.76,
// 3.35 TB/s x 0.78, kernel floor 4 us) with vllm.yaml's scales of 1.0.
#include "sim/hardware/measured_kernels.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "sim/core/error.h"
#include "sim/cost/batch_shape.h"
#include "sim/llm/engine_profile.h"
#include "sim/cost/roofline_cost.h"
#include "sim/hardware/card.h"
#include "sim/llm/deployment.h"
#include "sim/llm/model_spec.h"
#include "tests/support/catalogues.h"
#include "tests/cost/breakdown_groups.h"
#include "tests/support/temp_dir.h"

#ifndef CAPSIM_DATA_DIR
#error "CAPSIM_DATA_DIR must name the repository root (the build defines it)"
#endif

namespace {

using namespace capsim;
using capsim::test::group;
using capsim_test::TempDir;

// A function, not a global std::string: nothing of this file allocates before main (the
// allocator-tuning test reads the heap as the process starts it).
std::string data_dir() { return CAPSIM_DATA_DIR; }

const CardCatalogue& cards() { return capsim_test::card_catalogue(); }
const ModelCatalogue& models() { return capsim_test::model_catalogue(); }
const EngineCatalogue& engines() { return capsim_test::engine_catalogue(); }

const MeasuredGemmTable& h100_bf16() {
  static const MeasuredGemmTable t = MeasuredGemmTable::load(data_dir() + "/calibration/kernels/h100-sxm/gemm-bf16.csv");
  return t;
}

GemmRoofline h100_roofline() {
  return linear_layer_roofline(cards().find("h100-sxm"), engines().find("vllm"), Precision::kBf16);
}

// Turns the tables on for one test and restores the default (the engine's field) after it.
struct MeasuredKernelsOn {
  MeasuredKernelsOn() { MeasuredKernels::set_enabled(true); }
  ~MeasuredKernelsOn() { MeasuredKernels::clear_override(); }
};

Deployment deploy(const std::string& model, const std::string& card, const std::string& engine = "vllm") {
  Deployment d;
  d.model = models().find(model);
  d.card = cards().find(card);
  d.engine = engines().find(engine);
  d.tp = 1;
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

const char* kHeader =
    "# capsim measured-kernel table: 1\n# op: gemm\n# dtype: bf16\n# card: h100-sxm\n"
    "# framework: vllm 0.24.0\n# source: test\n# unit: us\n";

}  // namespace

TEST_CASE("a measured shape's time is its table row", "[kernels]") {
  // Row "8192,8192,128,48.67".
  CHECK(h100_bf16().seconds(128, 8192, 8192, h100_roofline()) == Approx(48.67e-6).epsilon(1e-9));
  CHECK(h100_bf16().covers(128, 8192, 8192));
  CHECK(h100_bf16().info().framework == "vllm 0.24.0");
  CHECK(h100_bf16().info().device == "NVIDIA H100 80GB HBM3");
  CHECK(h100_bf16().info().licence == "Apache-2.0");
}

TEST_CASE("between measured token counts the time is interpolated log-log in m", "[kernels]") {
  // Rows 8192,8192,128 -> 48.67 us and 8192,8192,160 -> 49.62 us. At m = 144:
  // w = ln(144/128) / ln(160/128) = 0.527835; t = 48.67^(1-w) x 49.62^w = 49.169 us.
  CHECK(h100_bf16().seconds(144, 8192, 8192, h100_roofline()) == Approx(49.1692e-6).epsilon(1e-5));
}

TEST_CASE("between measured weight shapes the time is bilinear in log n and log k", "[kernels]") {
  // m = 64 rows: (6144, 4096) 23.07, (6144, 5120) 27.96, (7168, 4096) 26.45, (7168, 5120) 32.37 us.
  // n = 6656: wn = ln(6656/6144) / ln(7168/6144) = 0.519250; k = 4608: wk = ln(4608/4096) /
  // ln(5120/4096) = 0.527835; exp of the weighted mean of the logs = 27.486 us.
  CHECK(h100_bf16().seconds(64, 6656, 4608, h100_roofline()) == Approx(27.4857e-6).epsilon(1e-5));
  CHECK(h100_bf16().covers(64, 6656, 4608));
}

TEST_CASE("outside the measured range the nearest measurement is carried by the roofline", "[kernels]") {
  // m = 65536 > 32768, the largest measured: row 8192,8192,32768 -> 5577 us, times
  // roofline(65536) / roofline(32768). Compute 2mnk / (989.4e12 x 0.76) and memory
  // (2nk + 2mk) / (3.35e12 x 0.78), combined as a 2-norm: 11.7070 ms / 5.85458 ms = 1.99963,
  // so 11152 us.
  CHECK_FALSE(h100_bf16().covers(65536, 8192, 8192));
  CHECK(h100_bf16().seconds(65536, 8192, 8192, h100_roofline()) == Approx(11151.96e-6).epsilon(1e-5));
  // n = 128256 > 65536 (Llama 3's LM head): row 65536,4096,1 -> 218 us x 1.95703 = 426.63 us
  // (memory-bound: (2 x 128256 x 4096 + 2 x 4096) / (2 x 65536 x 4096 + 2 x 4096)).
  CHECK(h100_bf16().seconds(1, 128256, 4096, h100_roofline()) == Approx(426.630e-6).epsilon(1e-5));
}

TEST_CASE("a step's linear layers come from the card's table when the tables are on", "[kernels]") {
  BatchShape b;
  b.add_decode(1024);
  const Deployment d = deploy("llama-3.1-8b", "h100-sxm");
  SECTION("off (the default): the roofline, saying the tables exist") {
    const RooflineCost cost(d);
    CHECK(cost.gemm_source().find("roofline") == 0);
    CHECK(cost.gemm_source().find("has measured GEMM tables, off") != std::string::npos);
    CHECK_FALSE(group(cost.breakdown(b), "qkv_proj").measured);
  }
  SECTION("on") {
    MeasuredKernelsOn on;
    const RooflineCost cost(d);
    CHECK(cost.gemm_source() == "measured: h100-sxm vllm 0.24.0 GEMM table (bf16)");
    const StepBreakdown s = cost.breakdown(b);
    // Llama-3.1-8B: qkv n = (32 + 2 x 8) x 128 = 6144, k = 4096; row 6144,4096,1 -> 19.9 us
    // x 32 layers = 636.8 us. o_proj n = k = 4096: row 4096,4096,1 -> 15.05 us x 32 = 481.6 us.
    CHECK(group(s, "qkv_proj").seconds == Approx(32 * 19.9e-6).epsilon(1e-9));
    CHECK(group(s, "qkv_proj").measured);
    CHECK(group(s, "o_proj").seconds == Approx(32 * 15.05e-6).epsilon(1e-9));
    CHECK(group(s, "mlp").measured);
    // LM head n = 128256, one sampled row: 426.63 us (worked above).
    CHECK(group(s, "lm_head").seconds == Approx(426.630e-6).epsilon(1e-5));
    // Attention from its own tables (tests/cost/measured_attention_test.cc): row
    // 1,1024,32,8,128,0 of attention_decode-bf16.csv, 13.58 us x 32 = 434.56 us.
    CHECK(group(s, "attention_decode").measured);
    CHECK(group(s, "attention_decode").seconds == Approx(32 * 13.58e-6).epsilon(1e-9));
  }
}

TEST_CASE("another engine's steps keep the roofline: the tables time vLLM's kernels", "[kernels]") {
  MeasuredKernelsOn on;
  const RooflineCost cost(deploy("llama-3.1-8b", "h100-sxm", "tensorrt-llm"));
  CHECK(cost.gemm_source().find("the measured tables time vllm 0.24.0, not tensorrt-llm") != std::string::npos);
  BatchShape b;
  b.add_decode(1024);
  CHECK_FALSE(group(cost.breakdown(b), "qkv_proj").measured);
}

TEST_CASE("a card without tables says so and keeps the roofline", "[kernels]") {
  MeasuredKernelsOn on;
  const RooflineCost cost(deploy("llama-3.1-8b", "rtx-4090"));
  CHECK(cost.gemm_source() ==
        "roofline (rtx-4090 datasheet peak x card-file efficiencies): no measured kernel tables for rtx-4090");
}

TEST_CASE("malformed measured-kernel tables are refused with file, line and what is accepted", "[kernels]") {
  TempDir dir;
  SECTION("a shape given twice") {
    const auto p = write_file(dir, "t.csv", std::string(kHeader) + "n,k,m,us\n256,256,1,3\n256,256,1,4\n");
    CHECK_THROWS_WITH(MeasuredGemmTable::load(p), p + ":10: the shape n=256 k=256 m=1 is given twice");
  }
  SECTION("an incomplete (n, k) grid") {
    const auto p = write_file(dir, "t.csv", std::string(kHeader) + "n,k,m,us\n256,256,1,3\n512,512,1,4\n");
    CHECK_THROWS_WITH(MeasuredGemmTable::load(p),
                      p + ": the (n, k) grid is incomplete: n=256 k=512 has no row; every n must be measured with every k");
  }
  SECTION("a time that is not positive") {
    const auto p = write_file(dir, "t.csv", std::string(kHeader) + "n,k,m,us\n256,256,1,0\n");
    CHECK_THROWS_WITH(MeasuredGemmTable::load(p), p + ":9: us '0' is not a positive number");
  }
  SECTION("another unit") {
    std::string text = kHeader;
    text.replace(text.find("unit: us"), 8, "unit: ms");
    const auto p = write_file(dir, "t.csv", text + "n,k,m,us\n256,256,1,3\n");
    CHECK_THROWS_WITH(MeasuredGemmTable::load(p), p + ": unit 'ms' is not supported; accepted: us");
  }
  SECTION("a missing header line") {
    const auto p = write_file(dir, "t.csv", "# capsim measured-kernel table: 1\n# op: gemm\nn,k,m,us\n256,256,1,3\n");
    CHECK_THROWS_WITH(MeasuredGemmTable::load(p),
                      p + ": the header lacks '# dtype: ...' (required: op, dtype, card, framework, source, unit)");
  }
  SECTION("a table filed under another card") {
    write_file(dir, "gemm-bf16.csv", std::string(kHeader) + "n,k,m,us\n256,256,1,3\n");
    CHECK_THROWS_WITH(MeasuredKernels::load_dir(dir.path(), "h200"),
                      dir.path() + "/gemm-bf16.csv: card 'h100-sxm' differs from its folder's card 'h200'");
  }
}

TEST_CASE("the card catalogue's tables are read when first asked for, with load_dir's errors", "[kernels]") {
  // The catalogue reads a card's tables on demand (most commands never time a kernel from them):
  // a bad file's name is refused at once, its contents when a table is asked for, in the words
  // load_dir uses; asked again, the same error (nothing half-read is kept).
  TempDir dir;
  CHECK(MeasuredKernels::on_demand(dir.path(), "h200") == nullptr);  // no table: no tables object
  write_file(dir, "gemm-bf16.csv", std::string(kHeader) + "n,k,m,us\n256,256,1,3\n256,256,2,0\n");
  const auto lazy = MeasuredKernels::on_demand(dir.path(), "h100-sxm");
  REQUIRE(lazy);
  CHECK_FALSE(lazy->empty());
  CHECK_FALSE(lazy->has_attention());
  const std::string bad = dir.path() + "/gemm-bf16.csv:10: us '0' is not a positive number";
  CHECK_THROWS_WITH(lazy->gemm(Precision::kBf16), bad);
  CHECK_THROWS_WITH(lazy->describe(), bad);
  CHECK_THROWS_WITH(MeasuredKernels::load_dir(dir.path(), "h100-sxm"), bad);
  write_file(dir, "attention_decode-bf16.csv", "not read until asked for\n");
  CHECK(MeasuredKernels::on_demand(dir.path(), "h100-sxm")->has_attention());
  write_file(dir, "softmax-bf16.csv", "");
  CHECK_THROWS_WITH(MeasuredKernels::on_demand(dir.path(), "h100-sxm"),
                    Catch::Contains("softmax-bf16.csv: the name must be <op>-<dtype>.csv with op one of:"));
}

TEST_CASE("every card's shipped tables read without error, as load_dir reads them", "[kernels]") {
  // The catalogue no longer reads them at start-up, so this is where a bad shipped file shows.
  int cards_with_tables = 0;
  for (const Card& c : cards().cards()) {
    if (!c.measured_kernels) continue;
    INFO(c.name);
    ++cards_with_tables;
    CHECK_NOTHROW(MeasuredKernels::load_dir(data_dir() + "/calibration/kernels/" + c.name, c.name));
    CHECK(c.measured_kernels->describe().rfind(c.name + " ", 0) == 0);
  }
  CHECK(cards_with_tables >= 8);  // a100, h100, h200, b200, b300, gb200, l40s, rtx-pro-6000
}

TEST_CASE("the shipped tables cover the five cards of issue 32 with their provenance", "[kernels]") {
  for (const char* name : {"a100-80gb-sxm", "h100-sxm", "h200", "b200", "l40s"}) {
    INFO(name);
    const Card& c = cards().find(name);
    REQUIRE(c.measured_kernels);
    const MeasuredGemmTable* t = c.measured_kernels->gemm(Precision::kBf16);
    REQUIRE(t);
    CHECK(t->info().source.find("github.com/ai-dynamo/aiconfigurator@095f58a51c4ca8e61b66ec108d86f223f8d559ce") == 0);
    CHECK(t->info().framework.rfind("vllm ", 0) == 0);
  }
}

TEST_CASE("the shipped tables of b300, gb200 and rtx-pro-6000 are AIConfigurator's vLLM 0.24.0 GEMMs",
          "[kernels][issue32]") {
  // Issue 32's new NVIDIA cards: bf16, fp8 and nvfp4 GEMM tables each, imported at the same
  // commit as the other cards', with the GPU's own name as AIConfigurator recorded it.
  const struct {
    const char* card;
    const char* device;
  } expected[] = {{"b300", "NVIDIA B300 SXM6 AC"},
                  {"gb200", "NVIDIA GB200"},
                  {"rtx-pro-6000", "NVIDIA RTX PRO 6000 Blackwell Server Edition"}};
  for (const auto& e : expected) {
    INFO(e.card);
    const Card& c = cards().find(e.card);
    REQUIRE(c.measured_kernels);
    for (Precision p : {Precision::kBf16, Precision::kFp8, Precision::kNvfp4}) {
      INFO(precision_name(p));
      const MeasuredGemmTable* t = c.measured_kernels->gemm(p);
      REQUIRE(t);
      CHECK(t->info().card == e.card);
      CHECK(t->info().device == e.device);
      CHECK(t->info().framework == "vllm 0.24.0");
      CHECK(t->info().source.rfind("github.com/ai-dynamo/aiconfigurator@095f58a51c4ca8e61b66ec108d86f223f8d559ce", 0) == 0);
    }
  }
}
