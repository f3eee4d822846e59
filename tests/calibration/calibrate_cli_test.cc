// `capsim calibrate` as a user runs it (the built binary): fit a synthetic profile and apply the
// result, refuse a foreign one, compare measured step times, and turn calibration off.
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

#include "sim/calibration/card_profile.h"
#include "sim/cost/roofline_cost.h"
#include "sim/hardware/card.h"
#include "sim/hardware/measured_kernels.h"
#include "sim/llm/deployment.h"
#include "sim/llm/engine_profile.h"
#include "sim/llm/model_spec.h"
#include "tests/calibration/synthetic.h"
#include "tests/support/temp_dir.h"

#ifndef CAPSIM_BINARY
#error "CAPSIM_BINARY must name the built capsim executable (the build defines it)"
#endif
#ifndef CAPSIM_DATA_DIR
#error "CAPSIM_DATA_DIR must name the repository root (the build defines it)"
#endif

namespace {

const std::string kData = CAPSIM_DATA_DIR;

using capsim_test::TempDir;

struct Result {
  int status = -1;
  std::string out, err;
};

// Runs `[env] capsim <args>` with CAPSIM_DATA_DIR and CAPSIM_NO_CALIBRATION unset unless `env`
// sets them.
Result run(const std::string& args, const std::string& env = "") {
  TempDir tmp;
  const std::string err = tmp.path() + "/stderr";
  const std::string cmd = "env -u CAPSIM_DATA_DIR -u CAPSIM_NO_CALIBRATION " + env + " '" +
                          std::string(CAPSIM_BINARY) + "' " + args + " 2>'" + err + "'";
  Result r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int raw = ::pclose(pipe);
  REQUIRE(WIFEXITED(raw));
  r.status = WEXITSTATUS(raw);
  std::ifstream in(err);
  std::stringstream s;
  s << in.rdbuf();
  r.err = s.str();
  return r;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("cli: calibrate fit writes a profile that applies the fitted values", "[calibration][cli]") {
  TempDir dir;
  const std::string profile = dir.write("h100.json", capsim::test::synthetic_profile({}, 11).dump());
  const std::string out = dir.path() + "/h100-sxm.yaml";
  const Result r = run("calibrate fit '" + profile + "' --card h100-sxm --out '" + out + "' --json -");
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const auto& e = j.at("efficiency");
  CHECK(e.at("memory_bandwidth").at("value").get<double>() == Approx(0.83).epsilon(0.01));
  CHECK(e.at("compute").at("value").get<double>() == Approx(0.71).epsilon(0.01));
  CHECK(e.at("compute_dtype") == "bf16");
  CHECK(e.at("compute_fp8").at("value").get<double>() == Approx(0.58).epsilon(0.01));
  CHECK(e.at("kernel_floor").at("value").get<double>() == Approx(5e-6).epsilon(0.03));
  CHECK(j.at("gemm").size() == 360);

  capsim::Card c = capsim::CardCatalogue::load_file(kData + "/calibration/cards/h100-sxm.yaml");
  capsim::calibration::apply_calibration_profile(c, out);
  CHECK(c.bandwidth_efficiency == Approx(e.at("memory_bandwidth").at("value").get<double>()).epsilon(1e-5));
  CHECK(c.compute_efficiency == Approx(e.at("compute").at("value").get<double>()).epsilon(1e-5));
  CHECK(c.compute_efficiency_fp8 == Approx(e.at("compute_fp8").at("value").get<double>()).epsilon(1e-5));
  CHECK(c.kernel_floor_s == Approx(e.at("kernel_floor").at("value").get<double>()).epsilon(1e-5));
  CHECK(contains(c.calibration, "h100-sxm.yaml fitted "));
  CHECK(contains(c.calibration, " from NVIDIA H100 80GB HBM3 (driver 570.86.15, CUDA runtime 12.8, host synthetic)"));

  const Result text = run("calibrate fit '" + profile + "' --card h100-sxm --out '" + out + "'");
  REQUIRE(text.status == 0);
  CHECK(contains(text.out, "  GEMM fit: 360 GEMMs"));
  CHECK(contains(text.out, "memory_bandwidth"));
  CHECK(contains(text.out, "fit quality: R² of log t "));
  CHECK(contains(text.out, "copy it to calibration/profiles/h100-sxm.yaml to apply it"));
}

TEST_CASE("cli: calibrate fit refuses a profile from another GPU and bad input", "[calibration][cli]") {
  TempDir dir;
  const std::string profile =
      dir.write("a100.json", capsim::test::synthetic_profile({}, 1, "NVIDIA A100-SXM4-80GB").dump());
  const Result r = run("calibrate fit '" + profile + "' --card h100-sxm --out -");
  CHECK(r.status == 2);
  CHECK(r.err == "capsim: error: " + profile +
                     ": provenance.gpu_name: 'NVIDIA A100-SXM4-80GB' does not match card h100-sxm (NVIDIA H100 SXM5 "
                     "80GB): the GPU is a a100, the card's names do not include it; fit it to the card it was measured "
                     "on, or pass --force to accept it\n");
  const Result forced = run("calibrate fit '" + profile + "' --card h100-sxm --force --out -");
  CHECK(forced.status == 0);
  CHECK(contains(forced.out, "forced: true\n"));
  CHECK(contains(forced.out, "format: capsim-card-calibration\n"));

  const Result neither = run("calibrate fit --card h100-sxm");
  CHECK(neither.status == 2);
  CHECK(neither.err ==
        "capsim: error: calibrate fit: give a profile (capsim-calibrate's JSON) or --vidur DIR, not both or neither\n");
  const Result unknown = run("calibrate fit '" + profile + "' --card h100-sxn");
  CHECK(unknown.status == 2);
  CHECK(contains(unknown.err, "unknown card 'h100-sxn'"));
}

TEST_CASE("cli: calibrate compare prints predicted vs measured step times with their errors", "[calibration][cli]") {
  // Measured = 1.1 x the cost model's GPU time (its step minus engine overhead and all-reduce),
  // so every row's error is 1/1.1 - 1 = -9.09%.
  const capsim::ModelCatalogue models = capsim::ModelCatalogue::load_dir(kData + "/models");
  const capsim::EngineCatalogue engines = capsim::EngineCatalogue::load_dir(kData + "/calibration/engines");
  capsim::Deployment d;
  d.model = models.find("llama-3.1-8b");
  d.card = capsim::CardCatalogue::load_file(kData + "/calibration/cards/h100-sxm.yaml");
  d.engine = engines.find("vllm");
  d.limits = capsim::default_limits(d.card, d.engine);
  d.validate();
  const capsim::RooflineCost cost(d);
  std::string csv = "model,card,batch,context,prefill_tokens,step_ms\n";
  const auto row = [&](int batch, int context, int prefill) {
    capsim::BatchShape b;
    if (prefill == 0) {
      for (int i = 0; i < batch; ++i) b.add_decode(context);
    } else {
      for (int i = 0; i < batch; ++i) b.add_prefill_chunk(context - prefill / batch, prefill / batch, true);
    }
    const auto s = cost.totals(b);
    const double ms = 1.1 * (s.seconds - s.overhead_s - s.communication_s) * 1e3;
    csv += "llama-3.1-8b,h100-sxm," + std::to_string(batch) + "," + std::to_string(context) + "," +
           std::to_string(prefill) + "," + std::to_string(ms) + "\n";
  };
  row(1, 1024, 0);
  row(32, 2048, 0);
  row(1, 2048, 2048);
  row(4, 512, 2048);
  TempDir dir;
  const std::string file = dir.write("steps.csv", csv);
  const Result r = run("--no-calibration calibrate compare '" + file + "' --json -");
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j.at("model") == "llama-3.1-8b");
  CHECK(j.at("card") == "h100-sxm");
  CHECK(j.at("rows").size() == 4);
  CHECK(j.at("all").at("median_ape").get<double>() == Approx(1 - 1 / 1.1).epsilon(1e-4));
  CHECK(j.at("decode").at("rows") == 2);
  CHECK(j.at("prefill").at("rows") == 2);
  CHECK(j.at("rows")[2].at("kind") == "prefill");

  const Result table = run("--no-calibration calibrate compare '" + file + "'");
  REQUIRE(table.status == 0);
  CHECK(contains(table.out, "-9.1%"));
  CHECK(contains(table.out, "error: median 9.1%, p90 9.1% over 4 rows; decode median 9.1%; prefill median 9.1%"));

  const std::string bad = dir.write("bad.csv", "model,card,batch,context,step_ms\nllama-3.1-8b,h100-sxm,1,1,2\n");
  const Result b = run("calibrate compare '" + bad + "'");
  CHECK(b.status == 2);
  CHECK(b.err == "capsim: error: " + bad +
                     ":1: column prefill_tokens: missing; expected the header model,card,batch,context,prefill_tokens,"
                     "step_ms (as scripts/model_step_bench.py writes it)\n");
  const std::string odd = dir.write("odd.csv", "model,card,batch,context,prefill_tokens,step_ms\nllama-3.1-8b,h100-sxm,3,512,1000,2\n");
  const Result o = run("calibrate compare '" + odd + "'");
  CHECK(o.status == 2);
  CHECK(o.err == "capsim: error: " + odd +
                     ":2: prefill_tokens: 1000 is not a multiple of batch 3; a prefill row holds batch sequences of "
                     "equal chunks\n");
  // 1e300 was cast to int64 unchecked (undefined behaviour; UBSan flags it in the sanitizer build).
  const std::string huge = dir.write("huge.csv", "model,card,batch,context,prefill_tokens,step_ms\nllama-3.1-8b,h100-sxm,1,1e300,0,2\n");
  const Result h = run("calibrate compare '" + huge + "'");
  CHECK(h.status == 2);
  CHECK(h.err == "capsim: error: " + huge + ":2: context: '1e300' is not a whole number (at most 1e12)\n");
}

TEST_CASE("cli: --no-calibration and CAPSIM_NO_CALIBRATION=1 keep profiles from applying", "[calibration][cli]") {
  TempDir data;
  std::filesystem::create_directories(data.path() + "/calibration/cards");
  std::filesystem::copy_file(kData + "/calibration/cards/h100-sxm.yaml", data.path() + "/calibration/cards/h100-sxm.yaml");
  data.write("calibration/profiles/h100-sxm.yaml",
             "format: capsim-card-calibration\nversion: 1\ncard: h100-sxm\nfitted: \"2025-06-01T10:00:00Z\"\n"
             "provenance:\n  gpu_name: \"NVIDIA H100 80GB HBM3\"\n"
             "efficiency:\n  memory_bandwidth: {value: 0.9, applied: true}\n  compute: {value: 0.7, applied: true}\n"
             "  kernel_floor: {value: 4.0e-06, applied: false}\n");
  const std::string dd = "--data-dir '" + data.path() + "' ";
  const Result on = run(dd + "calibrate show --card h100-sxm");
  REQUIRE(on.status == 0);
  CHECK(contains(on.out, "calibration on"));
  CHECK(contains(on.out, "0.9000"));
  CHECK(contains(on.out, "calibration/profiles/h100-sxm.yaml fitted 2025-06-01T10:00:00Z from NVIDIA H100 80GB HBM3"));
  const Result flag = run(dd + "--no-calibration calibrate show --card h100-sxm");
  REQUIRE(flag.status == 0);
  CHECK(contains(flag.out, "calibration off"));
  CHECK(contains(flag.out, "0.7800"));
  CHECK(contains(flag.out, "card file h100-sxm.yaml"));
  const Result env = run(dd + "calibrate show --card h100-sxm", "CAPSIM_NO_CALIBRATION=1");
  REQUIRE(env.status == 0);
  CHECK(contains(env.out, "0.7800"));
}

// On 64e18c4 a profile whose every GEMM took 100 s fitted memory_bandwidth 3.9e-6 and wrote it
// out to be applied: every simulation on the card would have been 250,000 times too slow.
TEST_CASE("cli: calibrate fit refuses efficiencies outside the physical range, writing nothing", "[calibration][cli]") {
  TempDir dir;
  const std::string out = dir.path() + "/h100-sxm.yaml";
  const auto with_times = [](double scale, double fixed) {
    nlohmann::json p = capsim::test::synthetic_profile({}, 11);
    for (auto& g : p.at("gemm")) {
      for (auto& t : g.at("seconds")) t = fixed > 0 ? fixed : t.get<double>() * scale;
    }
    return p.dump();
  };
  const std::string slow = dir.write("slow.json", with_times(1, 100.0));
  const Result r = run("calibrate fit '" + slow + "' --card h100-sxm --out '" + out + "'");
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "capsim: error: " + slow + ": GEMMs (memory-bound and ridge samples, all dtypes): fitted "
                 "efficiency.memory_bandwidth 3.90634e-06 of card h100-sxm's datasheet peak (3.35 TB/s) is not "
                 "physical; accepted: 0.05 to 1.2 (below, no GEMM on a working GPU is that slow; above, the GPU "
                 "outran its datasheet): check the profile's time units and that it was measured on this card, "
                 "unshared\n");
  CHECK_FALSE(std::filesystem::exists(out));

  // Every GEMM 3 times faster than the synthetic H100's: bandwidth 3 x 0.83 = 2.49 of the datasheet.
  const std::string fast = dir.write("fast.json", with_times(1.0 / 3, 0));
  const Result f = run("calibrate fit '" + fast + "' --card h100-sxm --out '" + out + "'");
  CHECK(f.status == 2);
  CHECK(contains(f.err, "fitted efficiency.memory_bandwidth 2.4"));
  CHECK(contains(f.err, "is not physical; accepted: 0.05 to 1.2"));
  CHECK_FALSE(std::filesystem::exists(out));

  // 10% faster stays accepted: 0.83 / 0.9 = 0.92, applied as before.
  const std::string quick = dir.write("quick.json", with_times(0.9, 0));
  const Result q = run("calibrate fit '" + quick + "' --card h100-sxm --out '" + out + "' --json -");
  REQUIRE(q.status == 0);
  CHECK(nlohmann::json::parse(q.out).at("efficiency").at("memory_bandwidth").at("value").get<double>() ==
        Approx(0.83 / 0.9).epsilon(0.01));
}

TEST_CASE("cli: calibrate tables writes a profile's GEMMs as the card's measured-kernel tables",
          "[calibration][cli][kernels]") {
  TempDir dir;
  const std::string profile = dir.write("h100.json", capsim::test::synthetic_profile({}, 11).dump());
  const std::string out = dir.path() + "/h100-sxm";
  const Result r = run("calibrate tables '" + profile + "' --card h100-sxm --out '" + out + "'");
  REQUIRE(r.status == 0);
  // Of the synthetic profile's 10 (n, k) shapes, k = 4096 with n = 4096, 6144 and 28672 is the
  // largest complete grid: 3 shapes x 12 token counts = 36 rows per dtype; fp16 is left out.
  CHECK(contains(r.out, "wrote " + out + "/gemm-bf16.csv (36 rows)"));
  CHECK(contains(r.out, "wrote " + out + "/gemm-fp8.csv (36 rows)"));
  CHECK(contains(r.out, "left out: gemm fp16: "));
  CHECK(contains(r.out, "left out: gemm bf16 shapes (n x k) outside the largest complete grid: 512x512, 1024x1024, "
                        "1280x8192, 4096x14336, 7168x8192, 8192x1024, 8192x3584"));
  const auto kernels = capsim::MeasuredKernels::load_dir(out, "h100-sxm");
  REQUIRE(kernels.gemm(capsim::Precision::kFp8) != nullptr);
  CHECK(kernels.gemm(capsim::Precision::kFp8)->points() == 36);

  const Result unknown = run("calibrate tables '" + profile + "' --card h999 --out '" + dir.path() + "/x'");
  CHECK(unknown.status == 2);
  CHECK(contains(unknown.err, "unknown card 'h999'; accepted: "));
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/x"));
}
