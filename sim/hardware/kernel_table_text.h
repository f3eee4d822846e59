// What the measured-kernel table readers (measured_kernels.cc, measured_attention.cc,
// measured_moe.cc, measured_allreduce.cc) share: the file's line structure, its provenance
// header, number cells and placing a value between two measured points. Internal to sim/hardware/.
#pragma once

#include <algorithm>
#include <map>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <functional>
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

// The names, in their container's order, joined by ", " (for "accepted: ..." messages).
template <typename Names>
std::string joined(const Names& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Reads a table file: blank lines skipped; '# key: value' lines (only before the column header)
// returned as the header map; the first other line is the column header, handed to on_columns
// with its line number and the header lines read so far; each later line is handed to on_row as cells, after checking it has as
// many cells as the header. Throws capsim::Error naming path:line for a malformed line or an
// unreadable file. `where(line_no)` in the callbacks' messages is "path:line_no".
inline std::map<std::string, std::string> scan_table(
    const std::string& path,
    const std::function<void(int line_no, const std::vector<std::string>& columns, const std::string& line,
                             const std::map<std::string, std::string>& meta)>& on_columns,
    const std::function<void(int line_no, const std::vector<std::string>& cells, const std::string& line)>& on_row) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot read the measured-kernel table");
  std::map<std::string, std::string> meta;
  std::vector<std::string> columns;
  std::string line;
  int line_no = 0;
  const auto where = [&](int n) { return path + ":" + std::to_string(n); };
  while (std::getline(in, line)) {
    ++line_no;
    const std::string s = trim(line);
    if (s.empty()) continue;
    if (s[0] == '#') {
      if (!columns.empty()) throw Error(where(line_no) + ": a '# key: value' line after the column header");
      const auto colon = s.find(':');
      if (colon == std::string::npos) throw Error(where(line_no) + ": expected '# key: value'");
      meta[trim(s.substr(1, colon - 1))] = trim(s.substr(colon + 1));
      continue;
    }
    if (columns.empty()) {
      columns = split_commas(s);
      on_columns(line_no, columns, s, meta);
      continue;
    }
    const std::vector<std::string> cells = split_commas(s);
    if (cells.size() != columns.size()) {
      throw Error(where(line_no) + ": " + std::to_string(cells.size()) + " values, the header has " +
                  std::to_string(columns.size()));
    }
    on_row(line_no, cells, s);
  }
  return meta;
}

// The number in `cell` of column `name`: finite and positive (or, with allow_zero, not negative),
// and a whole number when `whole`. Throws capsim::Error "<at>: <name> '<cell>' is not a ...".
inline double table_number(const std::string& cell, const std::string& name, const std::string& at, bool whole,
                           bool allow_zero = false) {
  char* end = nullptr;
  const double v = std::strtod(cell.c_str(), &end);
  const bool in_range = allow_zero ? v >= 0 : v > 0;
  if (cell.empty() || *end != '\0' || !std::isfinite(v) || !in_range) {
    throw Error(at + ": " + name + " '" + cell + "' is not a " + (allow_zero ? "non-negative" : "positive") + " number");
  }
  if (whole && v != std::floor(v)) throw Error(at + ": " + name + " '" + cell + "' is not a whole number");
  return v;
}

// y at x along an ascending series xs (x inside [xs.front(), xs.back()]), linear in log x and
// log y between the two neighbours of x.
inline double log_interpolate(const std::vector<double>& xs, const std::vector<double>& ys, double x);

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

inline double log_interpolate(const std::vector<double>& xs, const std::vector<double>& ys, double x) {
  const Bracket b = bracket(xs, x);
  if (b.lo == b.hi) return ys[b.hi];
  return std::exp((1 - b.w) * std::log(ys[b.lo]) + b.w * std::log(ys[b.hi]));
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
