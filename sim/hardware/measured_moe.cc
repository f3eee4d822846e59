#include "sim/hardware/measured_moe.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "sim/core/error.h"
#include "sim/hardware/kernel_table_text.h"

namespace capsim {
namespace {

using kernel_table::split_commas;
using kernel_table::trim;

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Log time at x along one ascending series, linear in log x between the two neighbours of x.
// REQUIRES: x inside [xs.front(), xs.back()].
double log_interpolate(const std::vector<double>& xs, const std::vector<double>& ys, double x) {
  const auto it = std::lower_bound(xs.begin(), xs.end(), x);
  const std::size_t hi = std::min(static_cast<std::size_t>(it - xs.begin()), xs.size() - 1);
  if (xs[hi] == x || hi == 0) return ys[hi];
  const std::size_t lo = hi - 1;
  const double w = (std::log(x) - std::log(xs[lo])) / (std::log(xs[hi]) - std::log(xs[lo]));
  return std::exp((1 - w) * std::log(ys[lo]) + w * std::log(ys[hi]));
}

}  // namespace

MeasuredRows read_measured_rows(const std::string& path, const std::string& op,
                                const std::vector<std::string>& columns) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot read the measured-kernel table");
  MeasuredRows out;
  std::map<std::string, std::string> meta;
  std::vector<std::string> header;
  std::vector<int> where_col;  // columns[i] (then "us") is header[where_col[i]]
  std::set<std::vector<double>> seen;
  std::string line;
  int line_no = 0;
  const auto where = [&](int n) { return path + ":" + std::to_string(n); };
  std::vector<std::string> wanted = columns;
  wanted.push_back("us");
  while (std::getline(in, line)) {
    ++line_no;
    const std::string s = trim(line);
    if (s.empty()) continue;
    if (s[0] == '#') {
      if (!header.empty()) throw Error(where(line_no) + ": a '# key: value' line after the column header");
      const auto colon = s.find(':');
      if (colon == std::string::npos) throw Error(where(line_no) + ": expected '# key: value'");
      meta[trim(s.substr(1, colon - 1))] = trim(s.substr(colon + 1));
      continue;
    }
    if (header.empty()) {
      header = split_commas(s);
      for (const auto& h : header) {
        if (std::find(wanted.begin(), wanted.end(), h) == wanted.end()) {
          throw Error(where(line_no) + ": unknown column '" + h + "'; a " + op + " table has " + joined(wanted));
        }
      }
      for (const auto& w : wanted) {
        const auto it = std::find(header.begin(), header.end(), w);
        if (it == header.end()) {
          throw Error(where(line_no) + ": the column header must name " + joined(wanted) + " (got '" + s + "')");
        }
        where_col.push_back(static_cast<int>(it - header.begin()));
      }
      continue;
    }
    const std::vector<std::string> cells = split_commas(s);
    if (cells.size() != header.size()) {
      throw Error(where(line_no) + ": " + std::to_string(cells.size()) + " values, the header has " +
                  std::to_string(header.size()));
    }
    std::vector<double> row;
    for (std::size_t i = 0; i < wanted.size(); ++i) {
      const std::string& c = cells[static_cast<std::size_t>(where_col[i])];
      char* end = nullptr;
      const double v = std::strtod(c.c_str(), &end);
      if (c.empty() || *end != '\0' || !std::isfinite(v) || v <= 0) {
        throw Error(where(line_no) + ": " + wanted[i] + " '" + c + "' is not a positive number");
      }
      if (i + 1 < wanted.size() && v != std::floor(v)) {
        throw Error(where(line_no) + ": " + wanted[i] + " '" + c + "' is not a whole number");
      }
      row.push_back(i + 1 < wanted.size() ? v : v * 1e-6);
    }
    if (!seen.insert(std::vector<double>(row.begin(), row.end() - 1)).second) {
      throw Error(where(line_no) + ": the shape '" + s.substr(0, s.rfind(',')) + "' is given twice");
    }
    out.rows.push_back(std::move(row));
  }
  out.info = kernel_table::table_info(path, meta);
  if (out.info.op != op) throw Error(path + ": op '" + out.info.op + "' is not a " + op + " table; accepted: " + op);
  if (out.rows.empty()) throw Error(path + ": no measurements under the column header");
  return out;
}

MeasuredMoeTable MeasuredMoeTable::load(const std::string& path) {
  static const std::set<std::string> dtypes = {"bf16", "fp8", "fp8_block", "nvfp4"};
  MeasuredRows r = read_measured_rows(path, "moe", {"tokens", "hidden", "inter", "experts", "topk", "tp", "ep"});
  if (!dtypes.count(r.info.dtype)) {
    throw Error(path + ": dtype '" + r.info.dtype + "' is not supported; accepted: bf16, fp8, fp8_block, nvfp4");
  }
  MeasuredMoeTable t;
  t.info_ = r.info;
  std::map<MoeLayout, std::vector<std::pair<double, double>>> by_layout;
  for (const auto& row : r.rows) {
    const MoeLayout l{row[1], row[2], row[3], row[4], row[5], row[6]};
    if (l.topk > l.experts) {
      std::ostringstream msg;
      msg << path << ": topk " << l.topk << " exceeds experts " << l.experts;
      throw Error(msg.str());
    }
    by_layout[l].push_back({row[0], row[7]});
  }
  for (auto& [layout, pts] : by_layout) {
    std::sort(pts.begin(), pts.end());
    Series s;
    for (const auto& [tokens, sec] : pts) {
      s.tokens.push_back(tokens);
      s.seconds.push_back(sec);
    }
    t.points_ += pts.size();
    t.series_.emplace(layout, std::move(s));
  }
  return t;
}

double MeasuredMoeTable::seconds(double tokens, const MoeLayout& layout,
                                 const std::function<double(double)>& roofline) const {
  const Series& s = series_.at(layout);
  const double clamped = std::clamp(tokens, s.tokens.front(), s.tokens.back());
  double t = log_interpolate(s.tokens, s.seconds, clamped);
  if (clamped != tokens) t *= roofline(tokens) / roofline(clamped);
  return t;
}

bool MeasuredMoeTable::covers(double tokens, const MoeLayout& layout) const {
  const auto it = series_.find(layout);
  return it != series_.end() && tokens >= it->second.tokens.front() && tokens <= it->second.tokens.back();
}

}  // namespace capsim
