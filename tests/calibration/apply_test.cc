// Applying a fitted card profile (calibration/profiles/<card>.yaml) to a Card, by hand and
// through CardCatalogue::load_dir: the cost model then predicts exactly as the fitted values say;
// malformed or foreign profiles are refused with pinned messages.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "sim/calibration/card_profile.h"
#include "sim/core/error.h"
#include "sim/cost/batch_shape.h"
#include "sim/cost/roofline_cost.h"
#include "sim/hardware/card.h"
#include "sim/llm/deployment.h"
#include "sim/llm/engine_profile.h"
#include "sim/llm/model_spec.h"
#include "tests/support/temp_dir.h"

#ifndef CAPSIM_DATA_DIR
#error "CAPSIM_DATA_DIR must name the repository root (the build defines it)"
#endif

namespace {

using capsim::Card;
using capsim::CardCatalogue;
using capsim::Precision;
using capsim::calibration::apply_calibration_profile;

const std::string kData = CAPSIM_DATA_DIR;

using capsim_test::TempDir;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const capsim::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

Card raw_h100() { return CardCatalogue::load_file(kData + "/calibration/cards/h100-sxm.yaml"); }

// A fitted profile as `capsim calibrate fit` writes it (fields the loader reads, plus some it
// ignores).
std::string profile_yaml(const std::string& card = "h100-sxm", const std::string& gpu = "NVIDIA H100 80GB HBM3",
                         const std::string& bandwidth = "0.9", const std::string& forced = "false") {
  return "format: capsim-card-calibration\n"
         "version: 1\n"
         "card: " + card + "\n"
         "fitted: \"2025-06-01T10:00:00Z\"\n"
         "forced: " + forced + "\n"
         "provenance:\n"
         "  source: \"capsim-calibrate\"\n"
         "  gpu_name: \"" + gpu + "\"\n"
         "  driver: \"570.86.15\"\n"
         "  cuda_runtime: \"12.8\"\n"
         "  hostname: \"gpu-07\"\n"
         "efficiency:\n"
         "  memory_bandwidth: {value: " + bandwidth + ", applied: true, card_file_value: 0.78, samples: 120}\n"
         "  compute: {value: 0.7, applied: true, dtype: bf16}\n"
         "  compute_fp8: {value: 0.6, applied: true}\n"
         "  kernel_floor: {value: 5.0e-06, applied: true}\n";
}

capsim::Deployment deploy(const Card& card, Precision weights = Precision::kBf16) {
  static const capsim::ModelCatalogue models = capsim::ModelCatalogue::load_dir(kData + "/models");
  static const capsim::EngineCatalogue engines = capsim::EngineCatalogue::load_dir(kData + "/calibration/engines");
  capsim::Deployment d;
  d.model = models.find("llama-3.1-8b");
  d.card = card;
  d.engine = engines.find("vllm");
  d.weights = weights;
  d.kv_cache = Precision::kBf16;
  d.limits = capsim::default_limits(d.card, d.engine);
  d.validate();
  return d;
}

const capsim::OperatorCost& group(const capsim::StepBreakdown& s, const std::string& name) {
  for (const auto& g : s.groups) {
    if (g.group == name) return g;
  }
  FAIL("no group " << name);
  static capsim::OperatorCost none;
  return none;
}

// Restores the calibration setting a test changes.
struct CalibrationSetting {
  bool before = CardCatalogue::use_calibration();
  ~CalibrationSetting() { CardCatalogue::set_use_calibration(before); }
};

}  // namespace

TEST_CASE("apply: a fitted profile sets the card's efficiencies and records its source", "[calibration]") {
  TempDir dir;
  const std::string path = dir.write("calibration/profiles/h100-sxm.yaml", profile_yaml());
  Card c = raw_h100();
  REQUIRE(c.bandwidth_efficiency == 0.78);
  apply_calibration_profile(c, path);
  CHECK(c.bandwidth_efficiency == 0.9);
  CHECK(c.compute_efficiency == 0.7);
  CHECK(c.compute_efficiency_fp8 == 0.6);
  CHECK(c.kernel_floor_s == 5e-6);
  const std::string label =
      "calibration/profiles/h100-sxm.yaml fitted 2025-06-01T10:00:00Z from NVIDIA H100 80GB HBM3 (driver 570.86.15, "
      "CUDA runtime 12.8, host gpu-07)";
  CHECK(c.calibration == label);
  CHECK(c.sources.at("efficiency.memory_bandwidth") == label);
  CHECK(c.sources.at("efficiency.kernel_floor") == label);
}

TEST_CASE("apply: the cost model predicts exactly as the fitted values say", "[calibration]") {
  TempDir dir;
  const std::string path = dir.write("p/h100-sxm.yaml", profile_yaml());
  const Card before = raw_h100();
  Card after = before;
  apply_calibration_profile(after, path);
  capsim::BatchShape b;
  b.add_decode(1024);  // Llama-3.1-8B, one decode at context 1024 (docs/cost-model.md#step-time)
  const capsim::RooflineCost c0(deploy(before)), c1(deploy(after));
  const auto s0 = c0.breakdown(b), s1 = c1.breakdown(b);
  // Memory time of the (memory-bound) MLP scales by 0.78 / 0.9: 352,337,920 B per layer x 32
  // layers at 3.35e12 x 0.9 B/s = 3.7395733 ms instead of 4.3148922 ms at 0.78.
  CHECK(group(s0, "mlp").memory_s == Approx(4.314892246e-3).epsilon(1e-9));
  CHECK(group(s1, "mlp").memory_s == Approx(3.739573280e-3).epsilon(1e-9));
  CHECK(group(s1, "mlp").memory_s / group(s0, "mlp").memory_s == Approx(0.78 / 0.9).epsilon(1e-12));
  CHECK(c1.bytes_per_s() == Approx(3.35e12 * 0.9).epsilon(1e-12));
  // Compute: 989.4e12 x 0.7 for bf16 GEMMs, 1978.9e12 x 0.6 for fp8 ones.
  CHECK(c1.gemm_flops_per_s() == Approx(989.4e12 * 0.7).epsilon(1e-12));
  CHECK(capsim::RooflineCost(deploy(after, Precision::kFp8)).gemm_flops_per_s() == Approx(1978.9e12 * 0.6).epsilon(1e-12));
  // Kernel floor 5 us: decode attention (1.6 us of KV reads per layer) and the three elementwise
  // kernels sit at the floor: 32 x 5 us = 160 us and 32 x 3 x 5 us = 480 us (128 and 384 at 4 us).
  CHECK(group(s0, "attention_decode").seconds == Approx(128e-6).epsilon(1e-12));
  CHECK(group(s1, "attention_decode").seconds == Approx(160e-6).epsilon(1e-12));
  CHECK(group(s1, "elementwise").seconds == Approx(480e-6).epsilon(1e-12));
}

TEST_CASE("apply: values not marked applied leave the card as it is", "[calibration]") {
  TempDir dir;
  const std::string text =
      replace_once(profile_yaml(), "compute: {value: 0.7, applied: true", "compute: {value: 0.7, applied: false");
  const std::string path = dir.write("h100-sxm.yaml", text);
  Card c = raw_h100();
  apply_calibration_profile(c, path);
  CHECK(c.compute_efficiency == 0.76);
  CHECK(c.bandwidth_efficiency == 0.9);
  CHECK(c.sources.at("efficiency.compute") != c.calibration);
}

TEST_CASE("apply: malformed and foreign profiles are refused with pinned messages", "[calibration]") {
  TempDir dir;
  const auto refuse = [&](const std::string& text) {
    const std::string p = dir.write("h100-sxm.yaml", text);
    Card c = raw_h100();
    return error_of([&] { apply_calibration_profile(c, p); });
  };
  const std::string p = dir.path() + "/h100-sxm.yaml";
  CHECK(refuse("card: h100-sxm\n") ==
        p + ": format: missing; this is not a capsim card calibration (accepted: capsim-card-calibration (written by "
            "`capsim calibrate fit`))");
  CHECK(refuse("format: capsim-calibration-profile\n") ==
        p + ": format: 'capsim-calibration-profile' is not a capsim card calibration; accepted: capsim-card-calibration "
            "(written by `capsim calibrate fit`)");
  CHECK(refuse(replace_once(profile_yaml(), "version: 1", "version: 2")) == p + ": version: '2' is not a supported version; accepted: 1");
  CHECK(refuse(profile_yaml("a100-80gb-sxm")) ==
        p + ": card: this calibration is for card 'a100-80gb-sxm', not 'h100-sxm'; a profile is named <card>.yaml after "
            "the card it calibrates");
  CHECK(refuse(profile_yaml("h100-sxm", "NVIDIA A100-SXM4-80GB")) ==
        p + ": provenance.gpu_name: 'NVIDIA A100-SXM4-80GB' does not match card h100-sxm (NVIDIA H100 SXM5 80GB): the GPU "
            "is a a100, the card's names do not include it; refit on the right GPU, or refit with `capsim calibrate fit "
            "--force` to accept it");
  CHECK(refuse(profile_yaml("h100-sxm", "NVIDIA A100-SXM4-80GB", "0.9", "true")) == "(no error)");
  CHECK(refuse(profile_yaml("h100-sxm", "NVIDIA H100 80GB HBM3", "1.2")) ==
        p + ": efficiency.memory_bandwidth.value: 1.2 is not a fraction in (0, 1]");
  CHECK(refuse(profile_yaml("h100-sxm", "NVIDIA H100 80GB HBM3", "fast")) ==
        p + ": efficiency.memory_bandwidth.value: 'fast' is not a number; expected a fraction in (0, 1]");
  std::string no_floor = profile_yaml();
  no_floor.erase(no_floor.find("  kernel_floor:"));
  CHECK(refuse(no_floor) ==
        p + ": efficiency.kernel_floor: missing (required); expected {value: seconds in [0, 0.001], applied: true|false}");
  CHECK(refuse(replace_once(profile_yaml(), "{value: 0.7, applied: true, dtype: bf16}", "0.7")) ==
        p + ": efficiency.compute: expected {value: a fraction in (0, 1], applied: true|false}");
  CHECK(refuse(replace_once(profile_yaml(), "5.0e-06", "0.5")) == p + ": efficiency.kernel_floor.value: 0.5 is not a kernel floor; accepted: 0 to 0.001 (seconds)");
}

TEST_CASE("apply: CardCatalogue::load_dir applies profiles/<card>.yaml unless calibration is off", "[calibration]") {
  CalibrationSetting restore;
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/calibration/cards");
  for (const char* name : {"h100-sxm.yaml", "a100-80gb-sxm.yaml"}) {
    std::filesystem::copy_file(kData + "/calibration/cards/" + name, dir.path() + "/calibration/cards/" + name);
  }
  dir.write("calibration/profiles/h100-sxm.yaml", profile_yaml());
  const std::string cards = dir.path() + "/calibration/cards";

  CardCatalogue::set_use_calibration(true);
  CHECK(CardCatalogue::use_calibration());
  const CardCatalogue on = CardCatalogue::load_dir(cards);
  CHECK(on.find("h100-sxm").bandwidth_efficiency == 0.9);
  CHECK(on.find("h100-sxm").calibration.rfind("calibration/profiles/h100-sxm.yaml fitted 2025-06-01T10:00:00Z from ", 0) == 0);
  CHECK(on.find("a100-80gb-sxm").calibration.empty());  // no profile: the card file's values
  CHECK(CardCatalogue::load_dir(cards + "/").find("h100-sxm").bandwidth_efficiency == 0.9);

  CardCatalogue::set_use_calibration(false);
  const CardCatalogue off = CardCatalogue::load_dir(cards);
  CHECK(off.find("h100-sxm").bandwidth_efficiency == 0.78);
  CHECK(off.find("h100-sxm").calibration.empty());

  // A broken profile stops the catalogue, as a broken card file does.
  CardCatalogue::set_use_calibration(true);
  dir.write("calibration/profiles/h100-sxm.yaml", profile_yaml("a100-80gb-sxm"));
  CHECK(error_of([&] { CardCatalogue::load_dir(cards); })
            .find("h100-sxm.yaml: card: this calibration is for card 'a100-80gb-sxm', not 'h100-sxm'") !=
        std::string::npos);
}

TEST_CASE("apply: a profile fitted on the card makes its efficiencies measured", "[calibration][cards]") {
  // The H100 PCIe's efficiencies are assumed from the SXM part's profile (its card file); a
  // profile fitted on that card, setting both efficiencies, makes them measured, with the
  // profile as their basis (plan's data column).
  CalibrationSetting restore;
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/calibration/cards");
  std::filesystem::copy_file(kData + "/calibration/cards/h100-pcie.yaml",
                             dir.path() + "/calibration/cards/h100-pcie.yaml");
  dir.write("calibration/profiles/h100-pcie.yaml", profile_yaml("h100-pcie", "NVIDIA H100 PCIe"));
  const std::string cards = dir.path() + "/calibration/cards";
  CardCatalogue::set_use_calibration(false);
  CHECK(CardCatalogue::load_dir(cards).find("h100-pcie").efficiency_data == "assumed");
  CardCatalogue::set_use_calibration(true);
  const CardCatalogue on = CardCatalogue::load_dir(cards);
  const capsim::Card& c = on.find("h100-pcie");
  CHECK(c.efficiency_data == "measured");
  CHECK_FALSE(c.calibration.empty());
  CHECK(c.efficiency_data_basis == c.calibration);
}
