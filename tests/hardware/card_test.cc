// Cards (sim/hardware/card.h) from the real catalogue in calibration/cards, and malformed card
// files written to a temporary directory, each rejected with a message that names the file, the
// field, what is wrong and what is accepted.
#include "sim/hardware/card.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/hardware/precision.h"
#include "tests/support/catalogues.h"
#include "tests/support/temp_dir.h"

#ifndef CAPSIM_DATA_DIR
#error "CAPSIM_DATA_DIR must name the repository root (the build defines it)"
#endif

namespace {

using capsim::Card;
using capsim::CardCatalogue;
using capsim::Precision;

const std::string kCards = std::string(CAPSIM_DATA_DIR) + "/calibration/cards";
constexpr double kGiB = 1073741824.0;  // 2^30

constexpr auto& catalogue = capsim_test::card_catalogue;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const capsim::Error& e) {
    return e.what();
  }
  return "";
}

using capsim_test::TempDir;

// A minimal valid card. Line numbers (1-based) are relied on by the malformed-YAML test.
//   1 name  2 references  3 ds  4 memory  5 memory_bandwidth  6 dense_peak  7 bf16  8 tdp
//   9 ecc  10 efficiency  11 memory_bandwidth  12 compute
const std::string kValid =
    "name: test-card\n"
    "references:\n"
    "  ds: \"a datasheet\"\n"
    "memory: {value: 24GB, source: ds}\n"
    "memory_bandwidth: {value: 1TB/s, source: ds}\n"
    "dense_peak:\n"
    "  bf16: {value: 100TFLOPS, source: ds}\n"
    "tdp: {value: 300W, source: ds}\n"
    "ecc: {value: true, source: ds}\n"
    "efficiency:\n"
    "  memory_bandwidth: {value: 0.8, source: ds}\n"
    "  compute: {value: 0.7, source: ds}\n";

// kValid with the first occurrence of `from` replaced by `to` (which must exist).
std::string with(const std::string& from, const std::string& to) {
  std::string s = kValid;
  const auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  s.replace(at, from.size(), to);
  return s;
}

}  // namespace

// 23 since issue 32 added b300, gb200, mi325x, mi355x and rtx-pro-6000 (tests/hardware/issue32_cards_test.cc).
TEST_CASE("cards: the catalogue holds the 23 cards, one per file", "[hardware][cards]") {
  const std::vector<std::string> expected = {
      "a10",       "a100-40gb-pcie", "a100-40gb-sxm", "a100-80gb-pcie", "a100-80gb-sxm",
      "a10g",      "b200",           "b300",          "cpu-server-ddr5", "gb200",
      "h100-nvl",  "h100-pcie",      "h100-sxm",      "h200",           "l4",
      "l40s",      "mi300x",         "mi325x",        "mi355x",         "rtx-3090",
      "rtx-4090",  "rtx-pro-6000",   "t4"};
  CHECK(catalogue().names() == expected);  // sorted by file name
  for (const Card& c : catalogue().cards()) {
    INFO(c.name);
    CHECK(c.file == kCards + "/" + c.name + ".yaml");
    CHECK(c.memory_bytes > 0);
    CHECK(c.visible_memory_bytes > 0);
    CHECK(c.visible_memory_bytes <= c.memory_bytes * 1.1);
    CHECK(c.bandwidth_efficiency > 0);
    CHECK(c.bandwidth_efficiency <= 1);
    CHECK(c.compute_efficiency > 0);
    CHECK(c.compute_efficiency <= 1);
    CHECK(!c.dense_peak.empty());
  }
}

TEST_CASE("cards: h100-sxm carries the numbers of its YAML", "[hardware][cards]") {
  const Card& c = catalogue().find("h100-sxm");
  CHECK(c.name == "h100-sxm");
  CHECK(c.display_name == "NVIDIA H100 SXM5 80GB");
  CHECK(c.aliases == std::vector<std::string>{"h100", "h100-sxm5", "h100-80gb-sxm"});
  CHECK(c.vendor == "nvidia");
  CHECK(c.architecture == "hopper");
  CHECK_FALSE(c.is_cpu);
  // memory: 80GB (datasheet, decimal) = 80e9 B; memory_visible: 79.11GiB = 79.11 x 2^30
  //   = 79 x 1,073,741,824 + 0.11 x 1,073,741,824 = 84,825,604,096 + 118,111,600.64
  //   = 84,943,715,696.64 B.
  CHECK(c.memory_bytes == 80e9);
  CHECK(c.visible_memory_bytes == Approx(84'943'715'696.64).epsilon(1e-13));
  CHECK(c.memory_bandwidth == Approx(3.35e12).epsilon(1e-15));
  // Dense tensor rates (the whitepaper's non-sparse column).
  CHECK(c.peak(Precision::kFp32) == Approx(67e12).epsilon(1e-15));
  CHECK(c.peak(Precision::kTf32) == Approx(494.7e12).epsilon(1e-15));
  CHECK(c.peak(Precision::kFp16) == Approx(989.4e12).epsilon(1e-15));
  CHECK(c.peak(Precision::kBf16) == Approx(989.4e12).epsilon(1e-15));
  CHECK(c.supports(Precision::kFp8));
  CHECK(c.peak(Precision::kFp8) == Approx(1978.9e12).epsilon(1e-15));
  CHECK(c.peak(Precision::kInt8) == Approx(1978.9e12).epsilon(1e-15));
  CHECK_FALSE(c.supports(Precision::kInt4));  // Hopper has no INT4 tensor path
  CHECK(c.supported_precisions() == "fp32, tf32, fp16, bf16, fp8, int8");
  // NVLink 4: 900 GB/s total per GPU; nvlink_gpus is absent from the file, so 8 (an SXM board).
  CHECK(c.nvlink_bandwidth == 900e9);
  CHECK(c.nvlink_gpus == 8);
  CHECK(c.pcie_generation == 5);
  CHECK(c.pcie_lanes == 16);
  // PCIe gen5 x16 per direction: 16 lanes x 3.938 GB/s = 63.008 GB/s.
  CHECK(c.pcie_bandwidth() == Approx(63.008e9).epsilon(1e-15));
  CHECK(c.peer_to_peer);
  CHECK(c.tdp_watts == 700);
  CHECK(c.ecc);
  CHECK(c.mig_instances == 7);
  CHECK(c.bandwidth_efficiency == 0.78);
  CHECK(c.compute_efficiency == 0.76);
  CHECK(c.kernel_floor_s == Approx(4e-6).epsilon(1e-15));
  // Every number keeps its citation.
  CHECK(c.sources.at("memory").rfind("NVIDIA H100 Tensor Core GPU datasheet", 0) == 0);
  CHECK(c.sources.at("dense_peak.bf16").rfind("NVIDIA H100 Tensor Core GPU Architecture whitepaper",
                                              0) == 0);
  CHECK(c.sources.at("efficiency.compute").rfind("Vidur per-operator profiles", 0) == 0);
}

TEST_CASE("cards: which precisions other cards lack", "[hardware][cards]") {
  // Ampere: no FP8; INT4 tensor ops exist (1248 TOPS dense).
  const Card& a100 = catalogue().find("a100-80gb-sxm");
  CHECK_FALSE(a100.supports(Precision::kFp8));
  CHECK(a100.supports(Precision::kBf16));
  CHECK(a100.peak(Precision::kBf16) == 312e12);
  CHECK(a100.peak(Precision::kInt4) == 1248e12);
  CHECK(a100.memory_bandwidth == 2039e9);
  // Turing: FP16, INT8, INT4 tensor cores; no BF16, TF32 or FP8.
  const Card& t4 = catalogue().find("t4");
  CHECK_FALSE(t4.supports(Precision::kBf16));
  CHECK_FALSE(t4.supports(Precision::kTf32));
  CHECK_FALSE(t4.supports(Precision::kFp8));
  CHECK(t4.peak(Precision::kFp16) == 65e12);
  CHECK(t4.supported_precisions() == "fp32, fp16, int8, int4");
  CHECK(t4.pcie_generation == 3);
  CHECK(t4.nvlink_bandwidth == 0);  // no NVLink: field omitted
  CHECK(t4.nvlink_gpus == 0);
  // GeForce Ada: no P2P, no NVLink; PCIe gen4 x16 = 16 x 1.969 GB/s = 31.504 GB/s.
  const Card& rtx = catalogue().find("rtx-4090");
  CHECK_FALSE(rtx.peer_to_peer);
  CHECK(rtx.nvlink_bandwidth == 0);
  CHECK(rtx.pcie_bandwidth() == Approx(31.504e9).epsilon(1e-15));
  CHECK(rtx.peak(Precision::kBf16) == Approx(165.2e12).epsilon(1e-15));  // FP32 accumulate
}

TEST_CASE("cards: names and aliases resolve case-insensitively", "[hardware][cards]") {
  CHECK(catalogue().find("h100").name == "h100-sxm");
  CHECK(catalogue().find("H100-SXM5").name == "h100-sxm");
  CHECK(catalogue().find("H100-SXM").name == "h100-sxm");
  CHECK(catalogue().find("a100").name == "a100-80gb-sxm");
  CHECK(catalogue().find("4090").name == "rtx-4090");
  CHECK(catalogue().find("tesla-t4").name == "t4");
}

TEST_CASE("cards: an unknown card suggests the near names and lists the accepted ones",
          "[hardware][cards][errors]") {
  // 'h100-sxx' is one substitution from h100-sxm; h100-nvl is three (s->n, x->v, x->l), over the
  // limit of max(2, 8 / 3) = 2, and every other name is further.
  CHECK(error_of([] { catalogue().find("h100-sxx"); }) ==
        "unknown card 'h100-sxx'; did you mean: h100-sxm?; accepted: a10, a100-40gb-pcie, "
        "a100-40gb-sxm, a100-80gb-pcie, a100-80gb-sxm, a10g, b200, b300, cpu-server-ddr5, gb200, "
        "h100-nvl, h100-pcie, h100-sxm, h200, l4, l40s, mi300x, mi325x, mi355x, rtx-3090, rtx-4090, "
        "rtx-pro-6000, t4");
  // Nothing near: no "did you mean".
  CHECK(error_of([] { catalogue().find("zzzzzzzzzzzz"); }).rfind(
            "unknown card 'zzzzzzzzzzzz'; accepted: a10, ", 0) == 0);
}

TEST_CASE("cards: a .yaml name too long for the file system is an unknown card, not an exception",
          "[hardware][cards][errors]") {
  // fuzz_scenario's find (fuzz/regressions/fuzz_scenario/): a 300-character name ending in .yaml
  // made std::filesystem::exists throw ENAMETOOLONG ("File name too long") out of find().
  const std::string name = std::string(300, 'x') + ".yaml";
  CHECK(error_of([&] { catalogue().find(name); }).rfind("unknown card '" + name + "'", 0) == 0);
}

TEST_CASE("cards: a minimal card file loads, and a .yaml path works in find", "[hardware][cards]") {
  TempDir dir;
  const std::string path = dir.write("mine.yaml", kValid);
  const Card c = CardCatalogue::load_file(path);
  CHECK(c.name == "test-card");
  CHECK(c.display_name == "test-card");  // defaults to the name
  CHECK(c.memory_bytes == 24e9);
  // No memory_visible: what the driver sees is taken to be the datasheet memory.
  CHECK(c.visible_memory_bytes == 24e9);
  CHECK(c.memory_bandwidth == 1e12);
  CHECK(c.peak(Precision::kBf16) == 100e12);
  CHECK(c.supported_precisions() == "bf16");
  CHECK(c.tdp_watts == 300);
  // Defaults of the interconnect: PCIe gen4 x16, no NVLink, no P2P; no kernel floor.
  CHECK(c.pcie_generation == 4);
  CHECK(c.pcie_lanes == 16);
  CHECK(c.nvlink_gpus == 0);
  CHECK_FALSE(c.peer_to_peer);
  CHECK(c.kernel_floor_s == 0);
  CHECK(c.bandwidth_efficiency == 0.8);
  CHECK(c.compute_efficiency == 0.7);
  CHECK(catalogue().find(path).name == "test-card");
}

TEST_CASE("cards: malformed card files are rejected with exact messages",
          "[hardware][cards][errors]") {
  TempDir dir;
  const auto load_error = [&](const std::string& text) {
    const std::string p = dir.write("bad.yaml", text);
    return error_of([&] { CardCatalogue::load_file(p); });
  };
  const std::string f = dir.path() + "/bad.yaml";

  SECTION("malformed YAML: file:line:col of the offending character") {
    // Line 4 gets a stray '}' after the flow map closed. "memory: " is 8 characters and
    // "{value: 24GB, source: ds}" 25, so the stray brace is the 34th character of line 4.
    CHECK(load_error(with("source: ds}\nmemory_bandwidth", "source: ds}}\nmemory_bandwidth")) ==
          f + ":4:34: malformed YAML: illegal flow end");
  }
  SECTION("a misspelt field, which would otherwise fall back to its default unseen") {
    CHECK(load_error(with("tdp:", "memory_visble: {value: 23GiB, source: ds}\ntdp:")) ==
          f + ": unknown field 'memory_visble'; accepted: name, display_name, aliases, kind, vendor, "
              "architecture, references, card_class, memory, memory_visible, memory_bandwidth, dense_peak, interconnect, "
              "efficiency, tdp, ecc, mig_instances");
    CHECK(load_error(with("  compute: {", "  compte: {")) ==
          f + ": efficiency: unknown field 'compte'; accepted: compute, compute_fp8, compute_fp4, "
              "memory_bandwidth, memory_bandwidth_fp8, memory_bandwidth_fp4, attention_bandwidth, kernel_floor, data");
  }
  SECTION("a number without a unit") {
    CHECK(load_error(with("{value: 24GB,", "{value: 24,")) ==
          f + ": memory: '24' has no unit; expected a size such as '80GB'; "
              "accepted units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB");
  }
  SECTION("a negative number") {
    CHECK(load_error(with("{value: 1TB/s,", "{value: -1TB/s,")) ==
          f + ": memory_bandwidth: '-1TB/s' is negative; expected a bandwidth such as "
              "'3.35TB/s'; accepted units: B/s, KB/s, MB/s, GB/s, TB/s, GiB/s");
  }
  SECTION("a source that is not a key of references") {
    CHECK(load_error(with("{value: 300W, source: ds}", "{value: 300W, source: spec}")) ==
          f + ": tdp: source 'spec' is not a key of references (have: ds)");
  }
  SECTION("a number without a source") {
    CHECK(load_error(with("{value: 300W, source: ds}", "{value: 300W}")) ==
          f + ": tdp: missing source (every number needs one)");
  }
  SECTION("an unknown precision in dense_peak") {
    CHECK(load_error(with("  bf16: {value: 100TFLOPS", "  fp6: {value: 100TFLOPS")) ==
          f + ": dense_peak.fp6: unknown precision 'fp6'; accepted: fp32, tf32, fp16, bf16, "
              "fp8, int8, int4, nvfp4, mxfp4 (also float16, bfloat16, fp8_e4m3, fp8_e5m2, awq, gptq, "
              "fp4 = nvfp4)");
  }
  SECTION("an efficiency above 1") {
    CHECK(load_error(with("compute: {value: 0.7,", "compute: {value: 1.2,")) ==
          f + ": efficiency.compute: 1.200000 is not a fraction in (0, 1]");
  }
  SECTION("an attention bandwidth efficiency outside (0, 1]") {
    CHECK(load_error(kValid + "  attention_bandwidth: {value: 1.5, source: ds}\n") ==
          f + ": efficiency.attention_bandwidth: 1.500000 is not a fraction in (0, 1]");
    CHECK(load_error(kValid + "  attention_bandwidth: {value: 0, source: ds}\n") ==
          f + ": efficiency.attention_bandwidth: 0.000000 is not a fraction in (0, 1]");
  }
  SECTION("a per-format GEMM efficiency outside (0, 1], or for a format the card lacks") {
    const std::string fp8 = with("  bf16: {value: 100TFLOPS, source: ds}\n",
                                 "  bf16: {value: 100TFLOPS, source: ds}\n  fp8: {value: 200TFLOPS, source: ds}\n");
    CHECK(load_error(fp8 + "  memory_bandwidth_fp8: {value: 1.2, source: ds}\n") ==
          f + ": efficiency.memory_bandwidth_fp8: 1.200000 is not a fraction in (0, 1]");
    CHECK(load_error(kValid + "  memory_bandwidth_fp8: {value: 0.6, source: ds}\n") ==
          f + ": efficiency.memory_bandwidth_fp8: the card has no fp8 in dense_peak");
    CHECK(load_error(fp8 + "  memory_bandwidth_fp4: {value: 0.5, source: ds}\n") ==
          f + ": efficiency.memory_bandwidth_fp4: the card has no fp4 in dense_peak");
    CHECK(load_error(kValid + "  compute_fp4: {value: 0, source: ds}\n") ==
          f + ": efficiency.compute_fp4: 0.000000 is not a fraction in (0, 1]");
    const Card c = CardCatalogue::load_file(dir.write("ok.yaml", fp8 + "  memory_bandwidth_fp8: {value: 0.6, source: ds}\n"));
    CHECK(c.bandwidth_efficiency_fp8 == 0.6);
    CHECK(c.bandwidth_efficiency_fp4 == 0);  // absent: as memory_bandwidth
    CHECK(c.sources.at("efficiency.memory_bandwidth_fp8") == "a datasheet");
  }
  SECTION("numbers outside their plausible range: a unit slip is refused, naming the range") {
    // 1 PB/s: a TB/s figure typed as PB/s; the bound is 100 TB/s (= 100000 GB/s).
    CHECK(load_error(with("{value: 1TB/s,", "{value: 1000TB/s,")) ==
          f + ": memory_bandwidth: 1e+06 GB/s is outside the accepted range (0, 100000] GB/s");
    // 24 PB of memory on one card; the bound is 16 TB (= 16000 GB).
    CHECK(load_error(with("{value: 24GB,", "{value: 24000TB,")) ==
          f + ": memory: 2.4e+07 GB is outside the accepted range (0, 16000] GB");
    // A dense peak of 100 EFLOPS per card (1e6 TFLOPS bound = 1 EFLOPS).
    CHECK(load_error(with("{value: 100TFLOPS,", "{value: 100000000TFLOPS,")) ==
          f + ": dense_peak.bf16: 1e+08 TFLOPS is outside the accepted range (0, 1e+06] TFLOPS");
    CHECK(load_error(with("{value: 300W,", "{value: 300000W,")) ==
          f + ": tdp: 300000 W is outside the accepted range (0, 20000] W");
  }
  SECTION("an efficiency with a unit") {
    CHECK(load_error(with("memory_bandwidth: {value: 0.8,", "memory_bandwidth: {value: 80%,")) ==
          f + ": efficiency.memory_bandwidth: '80%' is not a plain number (no unit expected here)");
  }
  SECTION("a missing required field") {
    CHECK(load_error(with("tdp: {value: 300W, source: ds}\n", "")) == f + ": tdp: missing (required)");
  }
  SECTION("an unknown kind") {
    CHECK(load_error(with("references:", "kind: tpu\nreferences:")) ==
          f + ": kind: 'tpu' is not a card kind; accepted: gpu, cpu");
  }
  SECTION("visible memory larger than the memory") {
    CHECK(load_error(with("memory_bandwidth:", "memory_visible: {value: 30GB, source: ds}\n"
                                               "memory_bandwidth:")) ==
          f + ": memory_visible: larger than memory");
  }
  SECTION("a file that does not exist") {
    const std::string missing = dir.path() + "/none.yaml";
    CHECK(error_of([&] { CardCatalogue::load_file(missing); }) == missing + ": cannot read file");
  }
}

TEST_CASE("cards: two files may not claim the same name or alias", "[hardware][cards][errors]") {
  TempDir dir;
  const std::string a = dir.write("a.yaml", with("name: test-card\n", "name: one\naliases: [x]\n"));
  const std::string b = dir.write("b.yaml", with("name: test-card\n", "name: two\naliases: [X]\n"));
  CHECK(error_of([&] { CardCatalogue::load_dir(dir.path()); }) ==
        b + ": name or alias 'X' is also used by " + a);
}
