// What the measured-table readers share: the file's line structure, its provenance header, number
// cells and placing a value between two measured points. The measured-kernel tables
// (measured_kernels.cc, measured_attention.cc, measured_moe.cc, measured_allreduce.cc), the
// training runs (sim/plan/training_speed.cc) and the shapes `capsim kernels` times
// (sim/answers/kernels_answer.cc) read with it.
#pragma once

#include <algorithm>
#include <charconv>
#include <iterator>
#include <string_view>
#include <system_error>
#include <map>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <functional>
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

// The cells of one CSV line, trimmed, into `out` (cleared first; its strings' storage reused
// from line to line); a trailing comma gives a last, empty cell.
inline void split_commas(std::string_view line, std::vector<std::string>& out) {
  std::size_t n = 0;
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = line.find(',', begin);
    std::string_view cell = line.substr(begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin);
    const auto b = cell.find_first_not_of(" \t\r");
    cell = b == std::string_view::npos ? std::string_view() : cell.substr(b, cell.find_last_not_of(" \t\r") - b + 1);
    if (n < out.size()) out[n].assign(cell.data(), cell.size());
    else out.emplace_back(cell);
    ++n;
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  out.resize(n);
}

// A table line's place in its file, for error messages: "path:line". Built only when a message
// needs it (the readers check every cell of tens of thousands of lines at start-up).
struct At {
  const std::string& path;
  int line = 0;
  std::string str() const { return path + ":" + std::to_string(line); }
};

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
    const std::function<void(int line_no, const std::vector<std::string>& cells, const std::string& line)>& on_row,
    const std::string& what = "measured-kernel table") {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read the " + what);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(path + ": cannot read the " + what);
  std::map<std::string, std::string> meta;
  std::vector<std::string> columns, cells;
  std::string s;
  int line_no = 0;
  const auto where = [&](int n) { return At{path, n}.str(); };
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t eol = std::min(text.find('\n', at), text.size());
    std::string_view line(text.data() + at, eol - at);
    at = eol + 1;
    ++line_no;
    const auto b = line.find_first_not_of(" \t\r");
    if (b == std::string_view::npos) continue;
    s.assign(line.substr(b, line.find_last_not_of(" \t\r") - b + 1));
    if (s[0] == '#') {
      if (!columns.empty()) throw Error(where(line_no) + ": a '# key: value' line after the column header");
      const auto colon = s.find(':');
      if (colon == std::string::npos) throw Error(where(line_no) + ": expected '# key: value'");
      meta[trim(s.substr(1, colon - 1))] = trim(s.substr(colon + 1));
      continue;
    }
    if (columns.empty()) {
      split_commas(s, columns);
      on_columns(line_no, columns, s, meta);
      continue;
    }
    split_commas(s, cells);
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
inline double table_number(const std::string& cell, const std::string& name, const At& at, bool whole,
                           bool allow_zero = false) {
  // from_chars first (no locale, no allocation); strtod for what it alone accepts (a leading
  // '+', hexadecimal), so a file is read as before.
  double v = 0;
  const char* const last = cell.data() + cell.size();
  auto [end, ec] = std::from_chars(cell.data(), last, v);
  if (ec != std::errc() || end != last) {
    char* e = nullptr;
    v = std::strtod(cell.c_str(), &e);
    end = e;
  }
  const bool in_range = allow_zero ? v >= 0 : v > 0;
  if (cell.empty() || end != last || !std::isfinite(v) || !in_range) {
    throw Error(at.str() + ": " + name + " '" + cell + "' is not a " + (allow_zero ? "non-negative" : "positive") +
                " number");
  }
  if (whole && v != std::floor(v)) throw Error(at.str() + ": " + name + " '" + cell + "' is not a whole number");
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
