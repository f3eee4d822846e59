#include "sim/core/units.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "sim/core/error.h"

namespace capsim::units {
namespace {

struct Unit {
  const char* name;
  double factor;
};

const std::vector<Unit>& units_of(Kind kind) {
  static const std::vector<Unit> bytes = {
      {"B", 1},        {"KB", 1e3},  {"MB", 1e6},  {"GB", 1e9},  {"TB", 1e12},
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  static const std::vector<Unit> bandwidth = {
      {"B/s", 1}, {"KB/s", 1e3}, {"MB/s", 1e6}, {"GB/s", 1e9}, {"TB/s", 1e12}, {"GiB/s", 1073741824.0}};
  // Integer "operations per second" (TOPS) share the compute kind with FLOPS: the cost model
  // only needs operations per second at a precision.
  static const std::vector<Unit> compute = {
      {"FLOPS", 1},  {"GFLOPS", 1e9}, {"TFLOPS", 1e12}, {"PFLOPS", 1e15},
      {"OPS", 1},    {"GOPS", 1e9},   {"TOPS", 1e12},   {"POPS", 1e15}};
  static const std::vector<Unit> power = {{"W", 1}, {"kW", 1e3}};
  static const std::vector<Unit> time = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1},
                                         {"min", 60},  {"h", 3600}};
  switch (kind) {
    case Kind::kBytes: return bytes;
    case Kind::kBandwidth: return bandwidth;
    case Kind::kCompute: return compute;
    case Kind::kPower: return power;
    case Kind::kTime: return time;
  }
  return bytes;
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kBytes: return "a size";
    case Kind::kBandwidth: return "a bandwidth";
    case Kind::kCompute: return "a compute rate";
    case Kind::kPower: return "a power";
    case Kind::kTime: return "a duration";
  }
  return "a quantity";
}

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

std::string accepted_units(Kind kind) {
  std::string out;
  for (const auto& u : units_of(kind)) out += (out.empty() ? "" : ", ") + std::string(u.name);
  return out;
}

double parse(std::string_view raw, Kind kind, std::string_view where) {
  const std::string text = trim(raw);
  const auto fail = [&](const std::string& why) -> double {
    throw Error(std::string(where) + ": '" + text + "' " + why + "; expected " + kind_name(kind) +
                " such as '" + (kind == Kind::kTime ? "20ms" : kind == Kind::kBytes ? "80GB"
                                : kind == Kind::kBandwidth ? "3.35TB/s"
                                : kind == Kind::kCompute ? "989TFLOPS" : "700W") +
                "'; accepted units: " + accepted_units(kind));
  };
  double value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr == begin) return fail("is not a number with a unit");
  if (!std::isfinite(value)) return fail("is not finite");
  if (value < 0) return fail("is negative");
  const std::string unit = trim(std::string_view(ptr, static_cast<std::size_t>(end - ptr)));
  if (unit.empty()) return fail("has no unit");
  for (const auto& u : units_of(kind)) {
    if (unit == u.name) {
      if (!std::isfinite(value * u.factor)) return fail("is out of range");
      return value * u.factor;
    }
  }
  return fail("has an unknown unit '" + unit + "'");
}

namespace {
std::string printf_string(const char* fmt, double v, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v, unit);
  return buf;
}
}  // namespace

std::string format_bytes(double bytes) {
  const std::array<std::pair<double, const char*>, 4> steps = {
      {{1e12, "TB"}, {1e9, "GB"}, {1e6, "MB"}, {1e3, "KB"}}};
  for (const auto& [f, name] : steps) {
    if (std::fabs(bytes) >= f) return printf_string("%.2f %s", bytes / f, name);
  }
  return printf_string("%.0f %s", bytes, "B");
}

std::string format_bytes_gib(double bytes) {
  return printf_string("%.2f %s", bytes / 1073741824.0, "GiB");
}

std::string format_time(double s) {
  const double a = std::fabs(s);
  if (a >= 1) return printf_string("%.2f %s", s, "s");
  if (a >= 1e-3) return printf_string("%.2f %s", s * 1e3, "ms");
  if (a >= 1e-6) return printf_string("%.1f %s", s * 1e6, "us");
  return printf_string("%.0f %s", s * 1e9, "ns");
}

std::string format_rate(double v, std::string_view unit) {
  const std::array<std::pair<double, const char*>, 4> steps = {
      {{1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}}};
  for (const auto& [f, prefix] : steps) {
    if (std::fabs(v) >= f) {
      return printf_string("%.2f %s", v / f, (std::string(prefix) + std::string(unit)).c_str());
    }
  }
  return printf_string("%.2f %s", v, std::string(unit).c_str());
}

}  // namespace capsim::units
