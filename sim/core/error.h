// capsim's error type for bad user input (files, flags, values).
//
// Contract: the message names where (file:field, file:line or --flag), what was wrong and what
// is accepted, e.g.
//   "calibration/cards/x.yaml: memory: '80' has no unit; accepted units: B, KB, MB, GB, ..."
// Broken internal invariants are assert()s, never capsim::Error.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace capsim {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Levenshtein distance, for "did you mean" suggestions.
std::size_t edit_distance(std::string_view a, std::string_view b);

// Up to `max` candidates closest to `wanted` (by edit distance, then substring match), in
// a stable order. Empty when nothing is reasonably close.
std::vector<std::string> closest_matches(std::string_view wanted,
                                         const std::vector<std::string>& candidates,
                                         std::size_t max = 3);

// "unknown card 'h100'; did you mean: h100-sxm, h100-pcie? accepted: a10, ..." style text.
std::string unknown_name_message(std::string_view what, std::string_view wanted,
                                 const std::vector<std::string>& accepted);

}  // namespace capsim
