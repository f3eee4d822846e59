// What the measured-kernel table readers (measured_kernels.cc, measured_attention.cc,
// measured_moe.cc) share: splitting a CSV line and placing a value between two measured points.
// Internal to sim/hardware/.
#pragma once

#include <algorithm>
#include <map>
#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/hardware/measured_kernels.h"

namespace capsim::kernel_table {

inline std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// The cells of one CSV line, trimmed; a trailing comma gives a last, empty cell.
inline std::vector<std::string> split_commas(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) out.push_back(trim(cell));
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

// Where x falls in the ascending `v` (x already inside [v.front(), v.back()]): the two
// neighbours and x's weight on the upper one, linear in log x.
struct Bracket {
  std::size_t lo = 0, hi = 0;
  double w = 0;
};

inline Bracket bracket(const std::vector<double>& v, double x) {
  const auto it = std::lower_bound(v.begin(), v.end(), x);
  Bracket b;
  b.hi = static_cast<std::size_t>(it - v.begin());
  if (b.hi >= v.size()) b.hi = v.size() - 1;
  if (v[b.hi] == x || b.hi == 0) {
    b.lo = b.hi;
    return b;
  }
  b.lo = b.hi - 1;
  b.w = (std::log(x) - std::log(v[b.lo])) / (std::log(v[b.hi]) - std::log(v[b.lo]));
  return b;
}

// A table's header lines ("# key: value", in `meta`) as its provenance: the format version (1),
// the required op, dtype, card, framework, source and unit (us), and the optional device, kernel
// and licence. Throws capsim::Error naming `path` and the missing or unsupported key; what each
// op accepts for op and dtype its reader checks after.
inline KernelTableInfo table_info(const std::string& path, const std::map<std::string, std::string>& meta) {
  const auto value = [&](const char* key) {
    const auto it = meta.find(key);
    return it == meta.end() ? std::string() : it->second;
  };
  const auto required = [&](const char* key) {
    std::string v = value(key);
    if (v.empty()) {
      throw Error(path + ": the header lacks '# " + std::string(key) +
                  ": ...' (required: op, dtype, card, framework, source, unit)");
    }
    return v;
  };
  if (required("capsim measured-kernel table") != "1") {
    throw Error(path + ": capsim measured-kernel table version '" + value("capsim measured-kernel table") +
                "' is not supported; accepted: 1");
  }
  KernelTableInfo info;
  info.file = path;
  info.op = required("op");
  info.dtype = required("dtype");
  info.card = required("card");
  info.framework = required("framework");
  info.source = required("source");
  if (required("unit") != "us") throw Error(path + ": unit '" + value("unit") + "' is not supported; accepted: us");
  info.device = value("device");
  info.kernel = value("kernel");
  info.licence = value("licence");
  return info;
}

}  // namespace capsim::kernel_table
