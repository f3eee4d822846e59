// capsim-calibrate profiles as measured-kernel tables (sim/calibration/kernel_tables.h): the
// written file reads back through the cost model's own table reader with the profile's medians.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "sim/calibration/kernel_tables.h"
#include "sim/core/error.h"
#include "sim/hardware/measured_kernels.h"
#include "tests/support/temp_dir.h"

namespace {

using capsim::calibration::kernel_tables_from_profile;
using capsim::calibration::parse_profile;
using nlohmann::json;

json gemm(const char* dtype, int m, int n, int k, std::vector<double> us) {
  json reps = json::array();
  for (const double u : us) reps.push_back(u * 1e-6);
  return {{"dtype", dtype}, {"m", m}, {"n", n}, {"k", k}, {"seconds", reps}};
}

json profile_with(json gemms) {
  return {{"format", "capsim-calibration-profile"},
          {"version", 1},
          {"provenance",
           {{"gpu_name", "NVIDIA H100 80GB HBM3"},
            {"compute_capability", "9.0"},
            {"date", "2026-12-06T15:00:00Z"},
            {"driver", "570.86.15"},
            {"hostname", "gpu-1"}}},
          {"gemm", gemms}};
}

}  // namespace

TEST_CASE("kernel tables: a profile's bf16 GEMMs on a complete grid read back with their medians",
          "[calibration][kernels]") {
  json g = json::array();
  // A 2 x 2 grid of (n, k) at m = 1 and 16, each 10/12/11 us (median 11), plus a lone 4096 x 4096
  // shape that no other n or k completes.
  for (const int n : {1024, 2048}) {
    for (const int k : {1024, 2048}) {
      for (const int m : {1, 16}) g.push_back(gemm("bf16", m, n, k, {10, 12, 11}));
    }
  }
  g.push_back(gemm("bf16", 1, 4096, 4096, {50, 50, 50}));
  // The same shape measured again under another label: its repetitions are pooled,
  // {10, 12, 11} + {20} -> median of 10, 11, 12, 20 = 11.5 us.
  g.push_back(gemm("bf16", 1, 1024, 1024, {20}));
  g.push_back(gemm("fp16", 1, 1024, 1024, {9}));
  const auto tables = kernel_tables_from_profile(parse_profile(profile_with(g), "h100.json"), "h100-sxm");

  REQUIRE(tables.tables.size() == 1);
  CHECK(tables.tables[0].file == "gemm-bf16.csv");
  CHECK(tables.tables[0].rows == 8);  // 4 grid shapes x 2 token counts
  REQUIRE(tables.left_out.size() == 2);
  CHECK(tables.left_out[0].find("gemm fp16") == 0);
  CHECK(tables.left_out[1].find("outside the largest complete grid: 4096x4096") != std::string::npos);

  capsim_test::TempDir dir("kernel_tables");
  const std::string path = dir.write("h100-sxm/gemm-bf16.csv", tables.tables[0].text);
  const capsim::MeasuredGemmTable t = capsim::MeasuredGemmTable::load(path);
  CHECK(t.points() == 8);
  CHECK(t.info().card == "h100-sxm");
  CHECK(t.info().device == "NVIDIA H100 80GB HBM3");
  CHECK(t.info().framework == "capsim-calibrate");
  const capsim::GemmRoofline unused{1e15, 3e12, 2, 2, 0};
  CHECK(t.seconds(1, 1024, 1024, unused) == Approx(11.5e-6).epsilon(1e-9));
  CHECK(t.seconds(16, 2048, 2048, unused) == Approx(11e-6).epsilon(1e-9));
  // The whole folder reads as the card's tables.
  const auto kernels = capsim::MeasuredKernels::load_dir(dir.path() + "/h100-sxm", "h100-sxm");
  CHECK(kernels.gemm(capsim::Precision::kBf16) != nullptr);
}

TEST_CASE("kernel tables: nothing to write, or a card that is a path, is refused", "[calibration][kernels]") {
  const auto fp16_only = parse_profile(profile_with(json::array({gemm("fp16", 1, 1024, 1024, {9})})), "p.json");
  CHECK_THROWS_WITH(kernel_tables_from_profile(fp16_only, "h100-sxm"),
                    "p.json: gemm: no bf16 or fp8 GEMM forms a table (1 GEMMs; accepted dtypes: bf16, fp8)");
  const auto ok = parse_profile(profile_with(json::array({gemm("bf16", 1, 1024, 1024, {9})})), "p.json");
  CHECK_THROWS_WITH(kernel_tables_from_profile(ok, "../h100-sxm"),
                    Catch::Contains("--card: '../h100-sxm' is not a card name"));
  // One shape is a complete 1 x 1 grid.
  CHECK(kernel_tables_from_profile(ok, "h100-sxm").tables.at(0).rows == 1);
}
