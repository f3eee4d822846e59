// A fitted card profile (calibration/profiles/<card>.yaml, written by `capsim calibrate fit`:
// sim/calibration/card_profile.h) applied to a Card as the card catalogue loads it, and the GPU
// name check that fitting and applying share. In the hardware layer because the catalogue
// applies it (docs/design.md); the fitting that writes a profile sits above, in sim/calibration/.
#pragma once

#include <string>

#include "sim/hardware/card.h"

namespace capsim::calibration {

inline constexpr const char* kCardProfileFormat = "capsim-card-calibration";
inline constexpr int kCardProfileVersion = 1;

// Whether a GPU named as the driver names it ("NVIDIA H100 80GB HBM3") is the card: the model
// token (h100, a100, 4090, l40s, ...) must be one of the card's name/alias/display-name tokens,
// and where both name a form factor (sxm, pcie, nvl) or a memory size (80gb) they must agree.
// On false, *why says what did not match.
bool gpu_matches_card(const std::string& gpu_name, const Card& card, std::string* why = nullptr);

// Applies calibration/profiles/<card>.yaml to `card`: sets bandwidth_efficiency,
// compute_efficiency, compute_efficiency_fp8 and kernel_floor_s for every value marked applied,
// records the source in card.sources and card.calibration. Throws capsim::Error naming the file,
// the field, what is wrong and what is accepted, for a malformed profile, one for another card,
// or one measured on a GPU that does not match the card (unless it was fitted with --force).
void apply_calibration_profile(Card& card, const std::string& path);

}  // namespace capsim::calibration
