// Simulated time.
//
// SimTime is an integer count of nanoseconds since the start of a run. Integer time makes
// event ordering exact and identical on every platform: two events computed to happen "at the
// same time" compare equal, and adding durations never drifts the way summing doubles does.
// A signed 64-bit count spans about +/-292 years, far beyond any simulated horizon.
//
// Convert at the edges only: parse and report in seconds (double), simulate in SimTime.
#pragma once

#include <cstdint>

namespace capsim {

using SimTime = std::int64_t;  // nanoseconds

inline constexpr SimTime kNsPerSecond = 1'000'000'000;

// Seconds -> nanoseconds, rounded to the nearest nanosecond (halves away from zero).
// Precondition: `seconds` is finite and |seconds| < ~9.2e9 (the SimTime range); callers that
// take durations from users validate them first.
constexpr SimTime from_seconds(double seconds) {
  const double ns = seconds * static_cast<double>(kNsPerSecond);
  // std::llround is not constexpr in C++20, so round by hand.
  return static_cast<SimTime>(ns < 0 ? ns - 0.5 : ns + 0.5);
}

// Nanoseconds -> seconds: the double nearest t / 1e9 while |t| < 2^53 ns (~104 days); beyond
// that t itself is first rounded to a double, so the result may be off by one more rounding.
constexpr double to_seconds(SimTime t) {
  return static_cast<double>(t) / static_cast<double>(kNsPerSecond);
}

}  // namespace capsim
