#include "sim/core/checked.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "sim/core/error.h"

namespace capsim::checked {
namespace {

// Appends rather than `a + b` chains: GCC 12 warns falsely (-Wrestrict) on those.
std::string range_text(double lo, double hi, std::string_view unit) {
  std::string out = show(lo);
  out += "..";
  out += show(hi);
  if (!unit.empty()) {
    out += ' ';
    out += unit;
  }
  return out;
}

}  // namespace

std::string show(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", value);
  return buf;
}

double finite_in(double value, double lo, double hi, std::string_view where,
                 std::string_view unit) {
  if (!std::isfinite(value) || value < lo || value > hi) {
    throw Error(std::string(where) + ": '" + show(value) + "' is not a number in " +
                range_text(lo, hi, unit));
  }
  return value;
}

std::int64_t whole_in(double value, std::int64_t lo, std::int64_t hi, std::string_view where,
                      std::string_view unit) {
  // Both bounds are int64, so a value inside them converts without overflow; the comparison in
  // double is exact for every bound this project uses (below 2^53).
  if (!std::isfinite(value) || value != std::floor(value) || value < static_cast<double>(lo) ||
      value > static_cast<double>(hi)) {
    throw Error(std::string(where) + ": '" + show(value) + "' is not a whole number in " +
                range_text(static_cast<double>(lo), static_cast<double>(hi), unit));
  }
  return static_cast<std::int64_t>(value);
}

std::int64_t tokens(double value, std::int64_t lo, std::string_view where) {
  return whole_in(value, lo, kMaxTokens, where, "tokens");
}

SimTime sim_time(double seconds, std::string_view where) {
  return from_seconds(finite_in(seconds, 0, kMaxSimSeconds, where, "s"));
}

std::int64_t mul(std::int64_t a, std::int64_t b, std::string_view where) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    throw Error(std::string(where) + ": " + std::to_string(a) + " x " + std::to_string(b) +
                " overflows a 64-bit count");
  }
  return out;
}

std::int64_t add(std::int64_t a, std::int64_t b, std::string_view where) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    throw Error(std::string(where) + ": " + std::to_string(a) + " + " + std::to_string(b) +
                " overflows a 64-bit count");
  }
  return out;
}

}  // namespace capsim::checked
