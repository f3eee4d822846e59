// `capsim kernels` and the --measured-kernels switch through the command line: a card's tables
// and where they come from, roofline vs table times of given shapes, bad input refused with
// exit status 2 and nothing printed on stdout.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/check/cli_run.h"
#include "tests/support/temp_dir.h"

using capsim_test::has;
using capsim_test::run_capsim;

TEST_CASE("kernels: a card's tables are listed with their source", "[cli][kernels]") {
  const auto r = run_capsim("kernels --card h200");
  REQUIRE(r.status == 0);
  CHECK(has(r.out, "h200 vllm 0.24.0 GEMM tables (bf16, fp8)"));
  CHECK(has(r.out, "source github.com/ai-dynamo/aiconfigurator@095f58a51c4ca8e61b66ec108d86f223f8d559ce"));
  const auto j = nlohmann::json::parse(run_capsim("kernels --card h200 --json -").out);
  CHECK(j["tables"][0]["dtype"] == "bf16");
  CHECK(j["tables"][0]["framework"] == "vllm 0.24.0");
  CHECK(j["tables"][0]["licence"] == "Apache-2.0");
  const auto none = run_capsim("kernels --card rtx-4090");
  REQUIRE(none.status == 0);
  CHECK(has(none.out, "no measured kernel tables (calibration/kernels/rtx-4090/): its kernels come from the roofline"));
}

TEST_CASE("kernels: shape times from the table and the roofline", "[cli][kernels]") {
  capsim_test::TempDir dir;
  const std::string shapes = dir.write("shapes.csv", "n,k,m\n8192,8192,144\n");
  const auto r = run_capsim("kernels --card h100-sxm --shapes '" + shapes + "'");
  REQUIRE(r.status == 0);
  // Table: rows m = 128 (48.67 us) and 160 (49.62 us), log-log at 144 -> 49.1692 us
  // (tests/cost/measured_kernels_test.cc). Roofline: compute 2 x 144 x 8192^2 / 751.944e12 =
  // 25.70 us, memory (2 x 8192^2 + 2 x 144 x 8192) / 2.613e12 = 52.27 us, 2-norm 58.2463 us.
  CHECK(r.out == "n,k,m,roofline_us,table_us,in_range\n8192,8192,144,58.2463,49.1692,1\n");
}

TEST_CASE("kernels: bad input is refused with exit 2 and nothing on stdout", "[cli][kernels]") {
  capsim_test::TempDir dir;
  const std::string bad = dir.write("bad.csv", "n,k\n1,2\n");
  const auto r = run_capsim("kernels --card h100-sxm --shapes '" + bad + "'");
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(has(r.err, bad + ":1: the header must name columns n, k and m"));
  const auto no_table = run_capsim("kernels --card rtx-4090 --shapes '" + bad + "'");
  CHECK(no_table.status == 2);
  CHECK(has(no_table.err, "--dtype: rtx-4090 has no measured bf16 GEMM table (calibration/kernels/rtx-4090/gemm-bf16.csv); give --table FILE"));
}

TEST_CASE("roofline says where its linear layers' times come from", "[cli][kernels]") {
  const std::string args = "roofline --model llama-3.1-8b --card h100-sxm --batch 1 --context 1024 --json -";
  const auto off = run_capsim(args);
  REQUIRE(off.status == 0);
  CHECK(nlohmann::json::parse(off.out)["gemm_source"].get<std::string>().rfind("roofline (h100-sxm", 0) == 0);
  for (const auto& on : {run_capsim("--measured-kernels " + args), run_capsim(args, "CAPSIM_MEASURED_KERNELS=1")}) {
    REQUIRE(on.status == 0);
    const auto j = nlohmann::json::parse(on.out);
    CHECK(j["gemm_source"] == "measured: h100-sxm vllm 0.24.0 GEMM table (bf16)");
    CHECK(j["groups"][0]["group"] == "qkv_proj");
    CHECK(j["groups"][0]["source"] == "measured");
    // 32 layers x 19.9 us (row 6144,4096,1).
    CHECK(j["groups"][0]["seconds"].get<double>() == Approx(636.8e-6).epsilon(1e-9));
  }
}

TEST_CASE("roofline takes b300's linear layers from its measured table when the tables are on",
          "[cli][kernels][issue32]") {
  const auto r = run_capsim(
      "--measured-kernels roofline --model llama-3.1-8b --card b300 --batch 1 --context 1024 --json -");
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["gemm_source"] == "measured: b300 vllm 0.24.0 GEMM table (bf16)");
}
