// Quantities with units, as written in capsim's data files and flags ("80GB", "3.35TB/s",
// "989.4TFLOPS", "700W", "17us", "20s", "30min").
//
// Contract: every parse_* returns the value in SI base units (bytes, bytes/s, operations/s,
// watts, seconds). Decimal prefixes (k, M, G, T, P = 1e3..1e15) as datasheets use them; binary
// prefixes only where spelled (KiB, MiB, GiB, TiB). A missing or wrong unit throws capsim::Error
// whose message starts with `where` and lists the accepted units.
#pragma once

#include <string>
#include <string_view>

namespace capsim::units {

enum class Kind { kBytes, kBandwidth, kCompute, kPower, kTime };

// Parses "<number><unit>" (spaces allowed between) of the given kind.
double parse(std::string_view text, Kind kind, std::string_view where);

inline double parse_bytes(std::string_view t, std::string_view where) {
  return parse(t, Kind::kBytes, where);
}
inline double parse_bandwidth(std::string_view t, std::string_view where) {
  return parse(t, Kind::kBandwidth, where);
}
inline double parse_compute(std::string_view t, std::string_view where) {
  return parse(t, Kind::kCompute, where);
}
inline double parse_power(std::string_view t, std::string_view where) {
  return parse(t, Kind::kPower, where);
}
inline double parse_time(std::string_view t, std::string_view where) {
  return parse(t, Kind::kTime, where);
}

// The accepted unit names of a kind, comma separated (for messages and docs).
std::string accepted_units(Kind kind);

// Human-readable formatting with a sensible prefix: format_bytes(16.06e9) == "16.06 GB".
std::string format_bytes(double bytes);
std::string format_bytes_gib(double bytes);  // "14.96 GiB"
std::string format_time(double seconds);      // "6.12 ms", "1.50 s", "17.0 us"
std::string format_rate(double per_second, std::string_view unit);  // "2.61 TB/s"

}  // namespace capsim::units
