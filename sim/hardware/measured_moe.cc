#include "sim/hardware/measured_moe.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "sim/core/error.h"
#include "sim/hardware/kernel_table_text.h"

namespace capsim {

using kernel_table::joined;

MeasuredRows read_measured_rows(const std::string& path, const std::string& op,
                                const std::vector<std::string>& columns) {
  MeasuredRows out;
  std::vector<int> where_col;  // columns[i] (then "us") is the header's column where_col[i]
  std::set<std::vector<double>> seen;
  const auto where = [&](int n) { return path + ":" + std::to_string(n); };
  std::vector<std::string> wanted = columns;
  wanted.push_back("us");
  const auto on_columns = [&](int line_no, const std::vector<std::string>& header, const std::string& s,
                              const std::map<std::string, std::string>&) {
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
  };
  const auto on_row = [&](int line_no, const std::vector<std::string>& cells, const std::string& s) {
    std::vector<double> row;
    for (std::size_t i = 0; i < wanted.size(); ++i) {
      const bool is_time = i + 1 == wanted.size();
      const double v = kernel_table::table_number(cells[static_cast<std::size_t>(where_col[i])], wanted[i],
                                                  kernel_table::At{path, line_no}, !is_time);
      row.push_back(is_time ? v * 1e-6 : v);
    }
    if (!seen.insert(std::vector<double>(row.begin(), row.end() - 1)).second) {
      throw Error(where(line_no) + ": the shape '" + s.substr(0, s.rfind(',')) + "' is given twice");
    }
    out.rows.push_back(std::move(row));
  };
  out.info = kernel_table::table_info(path, kernel_table::scan_table(path, on_columns, on_row));
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
  double t = kernel_table::log_interpolate(s.tokens, s.seconds, clamped);
  if (clamped != tokens) t *= roofline(tokens) / roofline(clamped);
  return t;
}

bool MeasuredMoeTable::covers(double tokens, const MoeLayout& layout) const {
  const auto it = series_.find(layout);
  return it != series_.end() && tokens >= it->second.tokens.front() && tokens <= it->second.tokens.back();
}

}  // namespace capsim
