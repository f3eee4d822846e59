// Internal to sim/check's assumptions files: the one helper that both reading an assumptions file
// (assumptions.cc, which checks a baseline's metric names) and running it (assumptions_run.cc,
// which reads the baseline's values) need. Not part of the check library's interface.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace capsim::check::detail {

// The value at a dotted path ("a.b.c") in `j`, or nullptr where a part is missing or the value
// on the way is not an object.
const nlohmann::json* lookup(const nlohmann::json& j, const std::string& dotted);

}  // namespace capsim::check::detail
