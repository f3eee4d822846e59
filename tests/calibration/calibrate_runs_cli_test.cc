// `capsim calibrate runs` as a user runs it (the built binary): fit the engine overheads to the
// result files of tests/data/calibrate-runs/, then simulate with the written profile; refusals.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/check/cli_run.h"

using capsim_test::has;
using capsim_test::read_all;
using capsim_test::run_capsim;
using capsim_test::Scratch;

namespace {

const std::string kRuns =
    "tests/data/calibrate-runs/conc4.json tests/data/calibrate-runs/conc16.json "
    "tests/data/calibrate-runs/rate6.json tests/data/calibrate-runs/guidellm.json";
const std::string kDeployment = " --model llama-3.1-8b --card h100-sxm --date 2026-12-06";

double mean_tpot(const std::string& engine) {
  const auto r = run_capsim("simulate --model llama-3.1-8b --card h100-sxm --engine " + engine +
                            " --concurrency 4 --requests 48 --input-tokens 512 --output-tokens 128 --seed 7 -q --json -");
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out)["mean_tpot_ms"].get<double>();
}

}  // namespace

TEST_CASE("calibrate runs writes a profile that simulate --engine takes and that matches the runs",
          "[calibrate-runs]") {
  Scratch tmp("calruns");
  const std::string out = tmp.file("mine.yaml");
  const auto r = run_capsim("calibrate runs " + kRuns + kDeployment + " --out " + out);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(has(r.out, "overhead.step: kept"));
  CHECK(has(r.out, "wrote " + out + "; use it with `capsim simulate|plan|check --engine " + out + "`"));
  const std::string yaml = read_all(out);
  CHECK(has(yaml, "source: own-runs-step}"));
  CHECK(has(yaml, "name: vllm-calibrated"));
  // conc4.json's measured TPOT (made with a 1.5 ms step) against the shipped and the written profile.
  const double measured =
      nlohmann::json::parse(read_all(std::string(CAPSIM_DATA_DIR) + "/tests/data/calibrate-runs/conc4.json"))["mean_tpot_ms"];
  CHECK(std::abs(mean_tpot("vllm") / measured - 1) > 0.08);
  CHECK(std::abs(mean_tpot(out) / measured - 1) < 0.01);
}

TEST_CASE("calibrate runs refuses bad input with exit 2 and writes nothing", "[calibrate-runs]") {
  Scratch tmp("calruns-bad");
  const std::string out = tmp.file("mine.yaml");
  const auto one = run_capsim("calibrate runs tests/data/calibrate-runs/conc4.json" + kDeployment + " --out " + out);
  CHECK(one.status == 2);
  CHECK(has(one.err, "1 run given; leaving one run out needs at least 2"));
  const std::string broken = tmp.file("broken.json");
  {
    auto j = nlohmann::json::parse(read_all(std::string(CAPSIM_DATA_DIR) + "/tests/data/calibrate-runs/rate6.json"));
    j.erase("mean_ttft_ms");
    std::ofstream(broken) << j.dump();
  }
  const auto bad = run_capsim("calibrate runs tests/data/calibrate-runs/conc4.json " + broken + kDeployment +
                              " --out " + out);
  CHECK(bad.status == 2);
  CHECK(has(bad.err, broken + ": field 'mean_ttft_ms' is missing"));
  CHECK_FALSE(std::filesystem::exists(out));
  const auto no_model = run_capsim("calibrate runs " + kRuns + " --card h100-sxm --out " + out);
  CHECK(no_model.status != 0);
  CHECK(has(no_model.err, "--model"));
}
