// Fitting a card's efficiency constants to a measured profile, and the fitted card profile
// (calibration/profiles/<card>.yaml) that records them. Applying a profile to a Card is the card
// catalogue's (sim/hardware/calibration_profile.h).
//
// What is fitted, per docs/calibration.md#fit:
//   efficiency.compute         e_c of the card's 16-bit type (bf16, else fp16) from cuBLASLt GEMMs
//   efficiency.compute_fp8     e_c of fp8 GEMMs (cards with fp8 in dense_peak)
//   efficiency.memory_bandwidth e_b shared by all GEMMs (their memory-bound and ridge samples)
//   efficiency.kernel_floor    the floor of the GEMM fit, else the launch benchmark's small kernel
// jointly, by roofline_fit.h on the cost model's own equation. Stream, attention, launch and
// all-reduce results are diagnostics: written to the profile, not applied to the card.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/calibration/profile.h"
#include "sim/calibration/roofline_fit.h"
#include "sim/hardware/calibration_profile.h"
#include "sim/hardware/card.h"

namespace capsim::calibration {

struct CardFitOptions {
  bool force = false;        // accept a profile measured on a GPU that does not match the card
  std::string fitted_date;   // ISO 8601; empty = now (UTC)
  std::string command_line;  // the capsim command that fitted it
};

struct AllReduceFit {
  bool fitted = false;
  int gpus = 0;
  int samples = 0;
  double latency_s = 0;
  double bus_bytes_per_s = 0;  // bytes / (t - latency) x 2(n-1)/n
  double median_ape = 0;
  std::string note;
};

struct LaunchSummary {
  bool present = false;
  double launch_s = 0, graph_kernel_s = 0, small_kernel_graph_s = 0;  // medians, 0 = not measured
  std::string small_kernel;
};

struct CardFit {
  std::string card;                 // catalogue name
  std::string card_display_name;
  std::string profile_path;
  std::string source;               // capsim-calibrate or vidur
  Provenance provenance;
  bool forced = false;
  std::string fitted_date;
  std::string command_line;

  // The GEMM fit (compute groups = the GEMM dtypes measured that the card supports).
  std::vector<KernelSample> gemm_samples;
  RooflineFit gemm;

  // What the card gets (applied when fitted and in range) and what the card file says.
  ParamFit compute;              // the card's 16-bit type
  std::string compute_dtype;     // bf16 or fp16
  std::optional<ParamFit> compute_fp8;
  ParamFit bandwidth;
  ParamFit floor;
  std::string floor_method;
  double card_compute = 0, card_compute_fp8 = 0, card_bandwidth = 0, card_floor = 0;
  double card_peak_bandwidth = 0;  // bytes/s, datasheet

  // Diagnostics, not applied.
  std::optional<ParamFit> compute_other_half;  // fp16 on a bf16 card, and vice versa
  std::vector<KernelSample> read_samples, copy_samples, decode_samples, prefill_samples;
  std::optional<RooflineFit> stream_read, stream_copy, attention_decode, attention_prefill;
  std::string decode_kernel, prefill_kernel;
  AllReduceFit allreduce;
  LaunchSummary launch;
  std::vector<std::string> notes;
};

// A parameter is applied when it was fitted and lies in range (efficiencies in (0, 1], the
// floor in [0, 1 ms]).
bool applied(const ParamFit& p, bool is_floor = false);

// Throws capsim::Error when the profile's GPU does not match the card (unless options.force),
// or when no GEMM sample is usable on the card.
CardFit fit_card(const Profile& profile, const Card& card, const CardFitOptions& options);

// The text of calibration/profiles/<card>.yaml (docs/calibration.md#card-profile).
std::string card_profile_yaml(const CardFit& fit);

}  // namespace capsim::calibration
