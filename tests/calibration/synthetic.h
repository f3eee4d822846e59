// Synthetic calibration profiles for the tests: GEMM times generated from the cost model's own
// kernel equation (roofline_fit.h: max(hypot(F/(P e_c), B/(BW e_b)), floor)) with known
// constants and deterministic noise from capsim::Rng, written as capsim-calibrate would.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/calibration/roofline_fit.h"
#include "sim/core/rng.h"

namespace capsim::test {

struct TrueConstants {
  double bandwidth = 0.83;
  std::map<std::string, double> compute = {{"bf16", 0.71}, {"fp16", 0.69}, {"fp8", 0.58}};
  double floor_s = 5e-6;
  double noise = 0.02;  // relative standard deviation of each repetition
};

// H100 SXM datasheet peaks (calibration/cards/h100-sxm.yaml).
inline double h100_peak(const std::string& dtype) { return dtype == "fp8" ? 1978.9e12 : 989.4e12; }
constexpr double kH100Bandwidth = 3.35e12;

// The GEMM shapes capsim-calibrate --quick measures: Llama-3.1-8B, Llama-3.1-70B at TP 8, and
// two floor probes, at 12 token counts, in three dtypes.
inline nlohmann::json synthetic_profile(const TrueConstants& k, std::uint64_t seed,
                                        const std::string& gpu = "NVIDIA H100 80GB HBM3") {
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {
      {6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336},  // 8B
      {1280, 8192}, {8192, 1024}, {7168, 8192}, {8192, 3584},    // 70B TP8
      {512, 512},   {1024, 1024}};                                // floor probes
  const std::vector<std::int64_t> ms = {1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  capsim::Rng rng(seed);
  nlohmann::json gemm = nlohmann::json::array();
  for (const std::string dt : {"bf16", "fp16", "fp8"}) {
    const double in = dt == "fp8" ? 1.0 : 2.0;
    for (const auto& [n, kk] : shapes) {
      for (const std::int64_t m : ms) {
        const double flops = 2.0 * m * n * kk;
        const double bytes = (static_cast<double>(m) * kk + static_cast<double>(n) * kk) * in + 2.0 * m * n;
        const double t = calibration::roofline_seconds(flops, h100_peak(dt), k.compute.at(dt), bytes,
                                                       kH100Bandwidth, k.bandwidth, k.floor_s);
        nlohmann::json reps = nlohmann::json::array();
        for (int r = 0; r < 5; ++r) reps.push_back(t * (1 + rng.normal(0, k.noise)));
        gemm.push_back({{"dtype", dt}, {"m", m}, {"n", n}, {"k", kk}, {"seconds", reps}});
      }
    }
  }
  return {{"format", "capsim-calibration-profile"},
          {"version", 1},
          {"provenance",
           {{"gpu_name", gpu},
            {"compute_capability", "9.0"},
            {"date", "2025-01-01T00:00:00Z"},
            {"driver", "570.86.15"},
            {"cuda_runtime", "12.8"},
            {"hostname", "synthetic"},
            {"l2_bytes", 52428800.0}}},
          {"gemm", gemm}};
}

}  // namespace capsim::test
