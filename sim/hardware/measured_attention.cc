#include "sim/hardware/measured_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "sim/core/error.h"
#include "sim/hardware/kernel_table_text.h"

namespace capsim {
namespace {

using kernel_table::Bracket;
using kernel_table::bracket;

AttentionShape at_layout(AttentionShape s, const MeasuredAttentionTable::Layout& l) {
  s.heads = l.heads;
  s.kv_heads = l.kv_heads;
  s.head_dim = l.head_dim;
  s.window = l.window;
  return s;
}

}  // namespace

MeasuredAttentionTable MeasuredAttentionTable::load(const std::string& path) {
  MeasuredAttentionTable t;
  std::vector<std::string> columns;
  const auto where = [&](int n) { return path + ":" + std::to_string(n); };
  // Column indices, in the order the rows' values are kept: batch, length, heads, kv_heads,
  // head_dim, window (optional: tables without it are full attention), us.
  enum { kBatch, kLength, kHeads, kKvHeads, kHeadDim, kWindow, kUs, kColumns };
  int col[kColumns];
  std::fill(col, col + kColumns, -1);
  using Key = std::tuple<double, double, double, double>;  // head_dim, window, heads, kv_heads
  std::map<Key, std::map<double, std::vector<std::pair<double, double>>>> rows;  // -> batch -> (length, s)
  std::string length_name;
  const auto on_columns = [&](int line_no, const std::vector<std::string>& header, const std::string& s,
                              const std::map<std::string, std::string>& meta) {
    const auto op = meta.find("op");
    if (op == meta.end() || (op->second != "attention_decode" && op->second != "attention_prefill")) {
      throw Error(path + ": op '" + (op == meta.end() ? "" : op->second) +
                  "' is not an attention table; accepted: attention_decode, attention_prefill");
    }
    length_name = op->second == "attention_decode" ? "context" : "tokens";
    columns = header;
    for (int i = 0; i < static_cast<int>(columns.size()); ++i) {
      const std::string& c = columns[static_cast<std::size_t>(i)];
      if (c == "batch") col[kBatch] = i;
      else if (c == length_name) col[kLength] = i;
      else if (c == "heads") col[kHeads] = i;
      else if (c == "kv_heads") col[kKvHeads] = i;
      else if (c == "head_dim") col[kHeadDim] = i;
      else if (c == "window") col[kWindow] = i;
      else if (c == "us") col[kUs] = i;
      else {
        throw Error(where(line_no) + ": unknown column '" + c + "'; an " + op->second + " table has batch, " +
                    length_name + ", heads, kv_heads, head_dim, window (optional), us");
      }
    }
    for (int k : {kBatch, kLength, kHeads, kKvHeads, kHeadDim, kUs}) {
      if (col[k] < 0) {
        throw Error(where(line_no) + ": the column header must name batch, " + length_name +
                    ", heads, kv_heads, head_dim and us (got '" + s + "')");
      }
    }
  };
  const auto on_row = [&](int line_no, const std::vector<std::string>& cells, const std::string&) {
    double v[kColumns] = {0, 0, 0, 0, 0, 0, 0};
    for (int k = 0; k < kColumns; ++k) {
      if (col[k] < 0) continue;
      const std::string& c = cells[static_cast<std::size_t>(col[k])];
      // An imported table whose source recorded no window (AIConfigurator's A100 database) says
      // NaN: those kernels ran full attention. A window of 0 is full attention too.
      if (k == kWindow && c == "NaN") continue;
      v[k] = kernel_table::table_number(c, columns[static_cast<std::size_t>(col[k])], kernel_table::At{path, line_no}, k != kUs,
                                        k == kWindow);
    }
    rows[{v[kHeadDim], v[kWindow], v[kHeads], v[kKvHeads]}][v[kBatch]].push_back({v[kLength], v[kUs] * 1e-6});
  };
  const std::map<std::string, std::string> meta = kernel_table::scan_table(path, on_columns, on_row);
  t.info_ = kernel_table::table_info(path, meta);
  if (t.info_.dtype != "bf16" && t.info_.dtype != "fp8") {
    throw Error(path + ": dtype '" + t.info_.dtype + "' is not supported for attention (the KV cache's); accepted: bf16, fp8");
  }
  if (rows.empty()) throw Error(path + ": no measurements under the column header");

  for (auto& [key, batches] : rows) {
    LayoutGrid g;
    g.layout = {std::get<2>(key), std::get<3>(key), std::get<0>(key), std::get<1>(key)};
    for (auto& [batch, pts] : batches) {
      std::sort(pts.begin(), pts.end());
      Series s;
      s.batch = batch;
      // A shape measured more than once (AIConfigurator's A100 prefill database times 306 MHA
      // shapes twice, a few percent apart) is read as the geometric mean of its times.
      for (std::size_t i = 0; i < pts.size();) {
        std::size_t j = i;
        double log_sum = 0;
        for (; j < pts.size() && pts[j].first == pts[i].first; ++j) log_sum += std::log(pts[j].second);
        s.length.push_back(pts[i].first);
        s.seconds.push_back(std::exp(log_sum / static_cast<double>(j - i)));
        i = j;
      }
      t.points_ += s.length.size();
      g.batches.push_back(batch);
      g.by_batch.push_back(std::move(s));
    }
    t.layouts_.push_back(std::move(g));
  }
  return t;
}

std::size_t MeasuredAttentionTable::nearest_layout(const AttentionShape& s) const {
  bool any_head_dim = false, any_window = false;
  for (const LayoutGrid& g : layouts_) {
    const Layout& l = g.layout;
    if (l.heads == s.heads && l.kv_heads == s.kv_heads && l.head_dim == s.head_dim && l.window == s.window) {
      return static_cast<std::size_t>(&g - layouts_.data());
    }
    if (l.head_dim == s.head_dim) any_head_dim = true;
    if (l.window == s.window) any_window = true;
  }
  const double window = any_window ? s.window : 0;
  std::size_t best = layouts_.size();
  double best_distance = 0;
  for (std::size_t i = 0; i < layouts_.size(); ++i) {
    const Layout& l = layouts_[i].layout;
    if (any_head_dim && l.head_dim != s.head_dim) continue;
    if (l.window != window) continue;
    const double d = std::abs(std::log(l.heads / s.heads)) + std::abs(std::log(l.kv_heads / s.kv_heads));
    if (best == layouts_.size() || d < best_distance) {
      best = i;
      best_distance = d;
    }
  }
  if (best == layouts_.size()) {
    // No full-attention layout of that head_dim either: the nearest of any window.
    for (std::size_t i = 0; i < layouts_.size(); ++i) {
      const Layout& l = layouts_[i].layout;
      if (any_head_dim && l.head_dim != s.head_dim) continue;
      const double d = std::abs(std::log(l.heads / s.heads)) + std::abs(std::log(l.kv_heads / s.kv_heads));
      if (best == layouts_.size() || d < best_distance) {
        best = i;
        best_distance = d;
      }
    }
  }
  return best;
}

double MeasuredAttentionTable::series_seconds(const Series& s, const AttentionShape& at,
                                              const AttentionRoofline& r) const {
  const double lc = std::clamp(at.length, s.length.front(), s.length.back());
  const Bracket b = bracket(s.length, lc);
  double t = std::exp((1 - b.w) * std::log(s.seconds[b.lo]) + b.w * std::log(s.seconds[b.hi]));
  if (lc != at.length) {
    AttentionShape clamped = at;
    clamped.length = lc;
    t *= r(at) / r(clamped);
  }
  return t;
}

double MeasuredAttentionTable::seconds(std::size_t layout, const AttentionShape& s,
                                       const AttentionRoofline& r) const {
  const LayoutGrid& g = layouts_[layout];
  const AttentionShape measured = at_layout(s, g.layout);
  const double bc = std::clamp(s.batch, g.by_batch.front().batch, g.by_batch.back().batch);
  const std::vector<double>& batches = g.batches;
  const Bracket bb = bracket(batches, bc);
  double log_t = 0;
  for (int a = 0; a < 2; ++a) {
    const std::size_t i = a == 0 ? bb.lo : bb.hi;
    const double w = a == 0 ? 1 - bb.w : bb.w;
    if (w == 0) continue;
    AttentionShape at = measured;
    at.batch = batches[i];
    log_t += w * std::log(series_seconds(g.by_batch[i], at, r));
  }
  double t = std::exp(log_t);
  if (bc != s.batch) {
    AttentionShape clamped = measured;
    clamped.batch = bc;
    t *= r(measured) / r(clamped);
  }
  const Layout& l = g.layout;
  if (l.heads != s.heads || l.kv_heads != s.kv_heads || l.head_dim != s.head_dim || l.window != s.window) {
    t *= r(s) / r(measured);
  }
  return t;
}

bool MeasuredAttentionTable::covers(const AttentionShape& s) const {
  const std::size_t i = nearest_layout(s);
  const LayoutGrid& g = layouts_[i];
  const Layout& l = g.layout;
  if (l.heads != s.heads || l.kv_heads != s.kv_heads || l.head_dim != s.head_dim || l.window != s.window) {
    return false;
  }
  if (s.batch < g.by_batch.front().batch || s.batch > g.by_batch.back().batch) return false;
  const Bracket bb = bracket(g.batches, s.batch);
  for (std::size_t b : {bb.lo, bb.hi}) {
    const Series& series = g.by_batch[b];
    if (s.length < series.length.front() || s.length > series.length.back()) return false;
  }
  return true;
}

}  // namespace capsim
