// Checked conversion of numbers entering capsim (flags, YAML, JSON, CSV) and the hard limits of
// the types that hold them.
//
// Contract: every function returns the value converted, or throws capsim::Error naming `where`
// (the flag, file: field or file:line: column), the text or value given and the accepted range.
// NaN and infinities are never accepted. No conversion here rounds silently: a fractional value
// where a whole one is expected is an error.
//
// The hard limits are what the simulator's types can carry without overflow (SimTime is int64
// nanoseconds; token counts are summed and multiplied by per-token bytes in int64 and double).
// They are far above any real deployment; what one run may reasonably ask for is a separate,
// lower and liftable limit (sim/core/run_limits.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sim/core/time.h"

namespace capsim::checked {

// Longest simulated time: ~31.7 years. SimTime holds ~292 years; the margin keeps sums of a time
// and a duration (arrival + step time) from overflowing.
inline constexpr double kMaxSimSeconds = 1e9;
// Most tokens in one request's prompt or output (the longest published contexts are ~1e7).
inline constexpr std::int64_t kMaxTokens = 1'000'000'000;

// `value` if it is finite and within [lo, hi]; otherwise an Error "where: 'VALUE' is not a
// number in LO..HI[ unit]". `unit` (may be empty) is appended to the range in the message.
double finite_in(double value, double lo, double hi, std::string_view where,
                 std::string_view unit = "");

// `value` as int64 if it is finite, whole and within [lo, hi]; otherwise an Error as above with
// "a whole number".
std::int64_t whole_in(double value, std::int64_t lo, std::int64_t hi, std::string_view where,
                      std::string_view unit = "");

// A token count (prompt, output, system prompt): whole, in [lo, kMaxTokens].
std::int64_t tokens(double value, std::int64_t lo, std::string_view where);

// Seconds -> SimTime, for durations and instants in [0, kMaxSimSeconds].
SimTime sim_time(double seconds, std::string_view where);

// The text form of a double for messages ("nan", "1e+300", "0.5").
std::string show(double value);

// a * b and a + b for non-negative int64 operands; Error naming `where` on overflow.
std::int64_t mul(std::int64_t a, std::int64_t b, std::string_view where);
std::int64_t add(std::int64_t a, std::int64_t b, std::string_view where);

}  // namespace capsim::checked
