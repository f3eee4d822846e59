// Least-squares fit of the roofline cost model's kernel equation to measured kernel times.
//
// The cost model (sim/cost/roofline_cost.cc, docs/cost-model.md#step-time) times one kernel as
//
//   t = max( sqrt( (F / (P·e_c))² + (B / (BW·e_b))² ),  floor )
//
// with F FLOPs at peak P, B bytes at peak bandwidth BW, e_c and e_b the card's compute and
// bandwidth efficiencies and `floor` its kernel floor. Writing U = 1/e_c² and V = 1/e_b², the
// part above the floor is LINEAR in (U, V):
//
//   t² = (F/P)²·U + (B/BW)²·V
//
// so the fit is an ordinary linear least-squares problem (Eigen), weighted to relative error
// (each row divided by the measured t², since times span five orders of magnitude), alternated
// with a one-dimensional fit of the floor over the samples the floor dominates. The constants it
// returns are exactly the ones the cost model consumes; nothing is re-parametrised in between.
//
// The floor is fitted only when at least `min_samples` samples have a roofline time under half
// of it: a floor is a kernel's minimum time, and samples just under a fitted "floor" are rather a
// misfit of the roofline terms, which a free floor would otherwise absorb.
//
// Several compute groups (e.g. bf16, fp16 and fp8 GEMMs) each get their own e_c and share e_b
// and the floor. A parameter the samples cannot determine (fewer than `min_samples` samples where
// its term is at least half the other) is held at its prior and reported as not fitted.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace capsim::calibration {

// One measured kernel, reduced to what the roofline needs.
struct KernelSample {
  std::string label;      // "bf16 m=1 n=6144 k=4096 (llama-3.1-8b qkv_proj)"
  int group = -1;         // index into FitSpec::groups; -1 = no FLOPs (pure streaming)
  double flops = 0;
  double bytes = 0;
  double peak_flops = 0;  // peak of the group's precision, FLOP/s (unused when flops = 0)
  double seconds = 0;     // measured: the median of the repetitions
};

struct GroupSpec {
  std::string name;     // "bf16"
  double prior = 0.7;   // used when fixed or not identifiable
  bool fixed = false;
};

struct FitSpec {
  std::vector<GroupSpec> groups;
  double peak_bandwidth = 0;   // bytes/s (datasheet)
  double bandwidth_prior = 0.75;
  bool bandwidth_fixed = false;
  double floor_prior = 0;      // seconds
  bool floor_fixed = false;
  int min_samples = 3;         // samples a parameter needs to be fitted
};

struct ParamFit {
  std::string name;
  double value = 0;            // efficiency (fraction of peak) or seconds (floor)
  bool fitted = false;         // false: held at its prior (fixed or not identifiable)
  double ci_low = 0, ci_high = 0;  // 95% interval (normal approximation); = value when not fitted
  int samples = 0;             // samples that inform it
  std::string note;            // why it was not fitted, or what it came from
};

struct RegimeStats {
  std::string regime;          // memory, ridge, compute, floor
  int samples = 0;
  double median_ape = 0, p90_ape = 0;
  double bias = 0;             // median of predicted / measured - 1 (signed)
};

struct FitQuality {
  int samples = 0;
  double r2_log = 0;           // R² of log(t): every size counts alike
  double r2 = 0;               // R² of t itself (dominated by the longest kernels)
  double median_ape = 0, p90_ape = 0, max_ape = 0;
  std::vector<RegimeStats> regimes;  // memory, ridge, compute, floor (only those with samples)
};

struct RooflineFit {
  std::vector<ParamFit> compute;  // one per FitSpec group
  ParamFit bandwidth;
  ParamFit floor;
  std::vector<double> predicted;     // per sample, seconds
  std::vector<std::string> regime;   // per sample
  FitQuality quality;
  int iterations = 0;
};

// The cost model's kernel time: max(hypot(F/(P·e_c), B/(BW·e_b)), floor). F = 0 skips the
// compute term (its peak and efficiency are then ignored).
double roofline_seconds(double flops, double peak_flops, double compute_eff, double bytes,
                        double peak_bandwidth, double bandwidth_eff, double floor_s);

// Regime of a kernel: "floor" when the floor exceeds the roofline time, else by c/m: "compute"
// above 2, "memory" below 1/2, "ridge" between.
std::string regime_of(double compute_s, double memory_s, double floor_s);

// Fits; throws capsim::Error when samples are empty or hold a non-positive time, or a sample's
// group is out of range.
RooflineFit fit_roofline(const std::vector<KernelSample>& samples, const FitSpec& spec);

// Quality of given predictions against samples (used by fit_roofline and the reports).
FitQuality fit_quality(const std::vector<KernelSample>& samples, const std::vector<double>& predicted,
                       const std::vector<std::string>& regime);

}  // namespace capsim::calibration
