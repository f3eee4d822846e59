#include "sim/hardware/measured_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <tuple>

#include "sim/core/error.h"
#include "sim/hardware/kernel_table_text.h"
#include "sim/hardware/measured_allreduce.h"
#include "sim/hardware/measured_moe.h"
#include "sim/hardware/measured_attention.h"

namespace capsim {
namespace {

using kernel_table::Bracket;
using kernel_table::bracket;
using kernel_table::joined;

const std::set<std::string>& gemm_dtypes() {
  static const std::set<std::string> names = {"bf16", "fp8", "nvfp4"};
  return names;
}

}  // namespace

double GemmRoofline::seconds(double m, double n, double k) const {
  const double compute = 2.0 * m * n * k / flops_per_s;
  // The weights and the input activations, as the cost model counts a linear layer's bytes.
  const double memory = (n * k * weight_bytes + m * k * activation_bytes) / bytes_per_s;
  return std::max(std::hypot(compute, memory), kernel_floor_s);
}

MeasuredGemmTable MeasuredGemmTable::load(const std::string& path) {
  MeasuredGemmTable t;
  std::vector<std::string> columns;
  std::map<std::pair<double, double>, std::vector<std::pair<double, double>>> rows;  // (n,k) -> (m, s)
  std::set<std::tuple<double, double, double>> seen;
  const auto where = [&](int n) { return path + ":" + std::to_string(n); };
  int col_n = -1, col_k = -1, col_m = -1, col_us = -1;
  const auto on_columns = [&](int line_no, const std::vector<std::string>& header, const std::string& s,
                              const std::map<std::string, std::string>&) {
    columns = header;
    for (int i = 0; i < static_cast<int>(columns.size()); ++i) {
      if (columns[i] == "n") col_n = i;
      else if (columns[i] == "k") col_k = i;
      else if (columns[i] == "m") col_m = i;
      else if (columns[i] == "us") col_us = i;
      else throw Error(where(line_no) + ": unknown column '" + columns[i] + "'; a gemm table has n, k, m, us");
    }
    if (col_n < 0 || col_k < 0 || col_m < 0 || col_us < 0) {
      throw Error(where(line_no) + ": the column header must name n, k, m and us (got '" + s + "')");
    }
  };
  const auto on_row = [&](int line_no, const std::vector<std::string>& cells, const std::string&) {
    double v[4];
    const int cols[4] = {col_n, col_k, col_m, col_us};
    for (int i = 0; i < 4; ++i) {
      const auto c = static_cast<std::size_t>(cols[i]);
      v[i] = kernel_table::table_number(cells[c], columns[c], where(line_no), i < 3);
    }
    if (!seen.insert({v[0], v[1], v[2]}).second) {
      throw Error(where(line_no) + ": the shape n=" + cells[static_cast<std::size_t>(col_n)] + " k=" +
                  cells[static_cast<std::size_t>(col_k)] + " m=" + cells[static_cast<std::size_t>(col_m)] +
                  " is given twice");
    }
    rows[{v[0], v[1]}].push_back({v[2], v[3] * 1e-6});
  };
  const std::map<std::string, std::string> meta = kernel_table::scan_table(path, on_columns, on_row);
  t.info_ = kernel_table::table_info(path, meta);
  if (t.info_.op != "gemm") throw Error(path + ": op '" + t.info_.op + "' is not a GEMM table; accepted: gemm");
  if (!gemm_dtypes().count(t.info_.dtype)) {
    throw Error(path + ": dtype '" + t.info_.dtype + "' is not supported; accepted: " + joined(gemm_dtypes()));
  }
  if (rows.empty()) throw Error(path + ": no measurements under the column header");

  std::set<double> ns, ks;
  for (const auto& [nk, _] : rows) {
    ns.insert(nk.first);
    ks.insert(nk.second);
  }
  t.n_.assign(ns.begin(), ns.end());
  t.k_.assign(ks.begin(), ks.end());
  for (double n : t.n_) {
    for (double k : t.k_) {
      const auto it = rows.find({n, k});
      if (it == rows.end()) {
        std::ostringstream msg;
        msg << path << ": the (n, k) grid is incomplete: n=" << n << " k=" << k
            << " has no row; every n must be measured with every k";
        throw Error(msg.str());
      }
      auto pts = it->second;
      std::sort(pts.begin(), pts.end());
      Series s;
      for (const auto& [m, sec] : pts) {
        s.m.push_back(m);
        s.seconds.push_back(sec);
      }
      t.points_ += pts.size();
      t.series_.push_back(std::move(s));
    }
  }
  return t;
}

double MeasuredGemmTable::series_seconds(const Series& s, double n, double k, double m,
                                         const GemmRoofline& r) const {
  const double mc = std::clamp(m, s.m.front(), s.m.back());
  const Bracket b = bracket(s.m, mc);
  const double log_t = (1 - b.w) * std::log(s.seconds[b.lo]) + b.w * std::log(s.seconds[b.hi]);
  double t = std::exp(log_t);
  if (mc != m) t *= r.seconds(m, n, k) / r.seconds(mc, n, k);
  return t;
}

double MeasuredGemmTable::seconds(double m, double n, double k, const GemmRoofline& r) const {
  const double nc = std::clamp(n, n_.front(), n_.back());
  const double kc = std::clamp(k, k_.front(), k_.back());
  const Bracket bn = bracket(n_, nc);
  const Bracket bk = bracket(k_, kc);
  double log_t = 0;
  for (int a = 0; a < 2; ++a) {
    const std::size_t i = a == 0 ? bn.lo : bn.hi;
    const double wn = a == 0 ? 1 - bn.w : bn.w;
    for (int c = 0; c < 2; ++c) {
      const std::size_t j = c == 0 ? bk.lo : bk.hi;
      const double wk = c == 0 ? 1 - bk.w : bk.w;
      if (wn * wk == 0) continue;
      log_t += wn * wk * std::log(series_seconds(series_[i * k_.size() + j], n_[i], k_[j], m, r));
    }
  }
  double t = std::exp(log_t);
  if (nc != n || kc != k) t *= r.seconds(m, n, k) / r.seconds(m, nc, kc);
  return t;
}

bool MeasuredGemmTable::covers(double m, double n, double k) const {
  if (n < n_.front() || n > n_.back() || k < k_.front() || k > k_.back()) return false;
  const Bracket bn = bracket(n_, n);
  const Bracket bk = bracket(k_, k);
  for (std::size_t i : {bn.lo, bn.hi}) {
    for (std::size_t j : {bk.lo, bk.hi}) {
      const Series& s = series_[i * k_.size() + j];
      if (m < s.m.front() || m > s.m.back()) return false;
    }
  }
  return true;
}

MeasuredKernels MeasuredKernels::load_dir(const std::string& dir, const std::string& card) {
  namespace fs = std::filesystem;
  MeasuredKernels out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".csv") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const std::string stem = f.stem().string();
    const auto dash = stem.find('-');
    const std::string op = stem.substr(0, dash);
    static const std::set<std::string> ops = {"gemm", "attention_decode", "attention_prefill", "moe", "allreduce"};
    if (dash == std::string::npos || !ops.count(op)) {
      throw Error(f.string() + ": the name must be <op>-<dtype>.csv with op one of: " + joined(ops));
    }
    const std::string dtype = stem.substr(dash + 1);
    const auto check = [&](const KernelTableInfo& info) {
      if (info.dtype != dtype) {
        throw Error(f.string() + ": dtype '" + info.dtype + "' differs from the file name's '" + dtype + "'");
      }
      if (info.card != card) {
        throw Error(f.string() + ": card '" + info.card + "' differs from its folder's card '" + card + "'");
      }
    };
    if (op == "moe") {
      auto t = std::make_shared<const MeasuredMoeTable>(MeasuredMoeTable::load(f.string()));
      check(t->info());
      out.moe_.emplace(dtype, std::move(t));
      continue;
    }
    if (op == "allreduce") {
      auto t = std::make_shared<const MeasuredAllReduceTable>(MeasuredAllReduceTable::load(f.string()));
      check(t->info());
      out.allreduce_ = std::move(t);
      continue;
    }
    if (op == "attention_decode" || op == "attention_prefill") {
      auto t = std::make_shared<const MeasuredAttentionTable>(MeasuredAttentionTable::load(f.string()));
      if (t->info().op != op) throw Error(f.string() + ": op '" + t->info().op + "' differs from the file name's '" + op + "'");
      check(t->info());
      (op == "attention_decode" ? out.attention_decode_ : out.attention_prefill_)[parse_precision(dtype, f.string())] = std::move(t);
      continue;
    }
    MeasuredGemmTable t = MeasuredGemmTable::load(f.string());
    check(t.info());
    out.gemm_.emplace(parse_precision(dtype, f.string()), std::move(t));
  }
  return out;
}

namespace {
// -1: never set (the environment decides), 0: off, 1: on.
int& enabled_setting() {
  static int setting = -1;
  return setting;
}
}  // namespace

void MeasuredKernels::set_enabled(bool on) { enabled_setting() = on ? 1 : 0; }

void MeasuredKernels::clear_override() { enabled_setting() = -1; }

bool MeasuredKernels::enabled(bool engine_default) {
  if (enabled_setting() >= 0) return enabled_setting() == 1;
  const char* env = std::getenv("CAPSIM_MEASURED_KERNELS");
  if (env && std::string(env) == "1") return true;
  if (env && std::string(env) == "0") return false;
  return engine_default;
}

const MeasuredAttentionTable* MeasuredKernels::attention_decode(Precision kv) const {
  if (kv == Precision::kFp16) kv = Precision::kBf16;
  const auto it = attention_decode_.find(kv);
  return it == attention_decode_.end() ? nullptr : it->second.get();
}

const MeasuredAttentionTable* MeasuredKernels::attention_prefill(Precision kv) const {
  if (kv == Precision::kFp16) kv = Precision::kBf16;
  const auto it = attention_prefill_.find(kv);
  return it == attention_prefill_.end() ? nullptr : it->second.get();
}

const MeasuredMoeTable* MeasuredKernels::moe(const std::string& dtype) const {
  const auto it = moe_.find(dtype);
  return it == moe_.end() ? nullptr : it->second.get();
}

const MeasuredGemmTable* MeasuredKernels::gemm(Precision p) const {
  if (p == Precision::kFp16) p = Precision::kBf16;
  const auto it = gemm_.find(p);
  return it == gemm_.end() ? nullptr : &it->second;
}

std::string MeasuredKernels::describe() const {
  if (gemm_.empty()) return "";
  const KernelTableInfo& first = gemm_.begin()->second.info();
  std::string dtypes;
  for (const auto& [p, t] : gemm_) dtypes += (dtypes.empty() ? "" : ", ") + t.info().dtype;
  return first.card + " " + first.framework + " GEMM tables (" + dtypes + ")";
}

}  // namespace capsim
