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
      v[i] = kernel_table::table_number(cells[c], columns[c], kernel_table::At{path, line_no}, i < 3);
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

MeasuredKernels MeasuredKernels::list_dir(const std::string& dir, const std::string& card) {
  namespace fs = std::filesystem;
  MeasuredKernels out;
  out.card_ = card;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".csv") continue;
    const std::string stem = e.path().stem().string();
    const auto dash = stem.find('-');
    static const std::set<std::string> ops = {"gemm", "attention_decode", "attention_prefill", "moe", "allreduce"};
    if (dash == std::string::npos || !ops.count(stem.substr(0, dash))) {
      throw Error(e.path().string() + ": the name must be <op>-<dtype>.csv with op one of: " + joined(ops));
    }
    out.files_.push_back(e.path().string());
  }
  std::sort(out.files_.begin(), out.files_.end());
  return out;
}

MeasuredKernels MeasuredKernels::load_dir(const std::string& dir, const std::string& card) {
  MeasuredKernels out = list_dir(dir, card);
  out.tables();
  return out;
}

std::shared_ptr<const MeasuredKernels> MeasuredKernels::on_demand(const std::string& dir, const std::string& card) {
  MeasuredKernels listed = list_dir(dir, card);
  if (listed.empty()) return nullptr;
  return std::make_shared<const MeasuredKernels>(std::move(listed));
}

bool MeasuredKernels::has_attention() const {
  namespace fs = std::filesystem;
  return std::any_of(files_.begin(), files_.end(), [](const std::string& f) {
    return fs::path(f).stem().string().rfind("attention_", 0) == 0;
  });
}

const MeasuredKernels::Tables& MeasuredKernels::tables() const {
  if (!lazy_->ready.load(std::memory_order_acquire)) {
    const std::lock_guard<std::mutex> lock(lazy_->mutex);
    if (!lazy_->ready.load(std::memory_order_relaxed)) {
      Tables read;
      read_tables(read);  // a bad file throws here, leaving nothing half-read
      lazy_->tables = std::move(read);
      lazy_->ready.store(true, std::memory_order_release);
    }
  }
  return lazy_->tables;
}

void MeasuredKernels::read_tables(Tables& out) const {
  namespace fs = std::filesystem;
  for (const std::string& path : files_) {
    const fs::path f(path);
    const std::string stem = f.stem().string();
    const auto dash = stem.find('-');
    const std::string op = stem.substr(0, dash);
    const std::string dtype = stem.substr(dash + 1);
    const auto check = [&](const KernelTableInfo& info) {
      if (info.dtype != dtype) {
        throw Error(path + ": dtype '" + info.dtype + "' differs from the file name's '" + dtype + "'");
      }
      if (info.card != card_) {
        throw Error(path + ": card '" + info.card + "' differs from its folder's card '" + card_ + "'");
      }
    };
    if (op == "moe") {
      auto t = std::make_shared<const MeasuredMoeTable>(MeasuredMoeTable::load(path));
      check(t->info());
      out.moe.emplace(dtype, std::move(t));
      continue;
    }
    if (op == "allreduce") {
      auto t = std::make_shared<const MeasuredAllReduceTable>(MeasuredAllReduceTable::load(path));
      check(t->info());
      out.allreduce = std::move(t);
      continue;
    }
    if (op == "attention_decode" || op == "attention_prefill") {
      auto t = std::make_shared<const MeasuredAttentionTable>(MeasuredAttentionTable::load(path));
      if (t->info().op != op) throw Error(path + ": op '" + t->info().op + "' differs from the file name's '" + op + "'");
      check(t->info());
      (op == "attention_decode" ? out.attention_decode : out.attention_prefill)[parse_precision(dtype, path)] = std::move(t);
      continue;
    }
    MeasuredGemmTable t = MeasuredGemmTable::load(path);
    check(t.info());
    out.gemm.emplace(parse_precision(dtype, path), std::move(t));
  }
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
  const auto& tables = this->tables().attention_decode;
  const auto it = tables.find(kv);
  return it == tables.end() ? nullptr : it->second.get();
}

const MeasuredAttentionTable* MeasuredKernels::attention_prefill(Precision kv) const {
  if (kv == Precision::kFp16) kv = Precision::kBf16;
  const auto& tables = this->tables().attention_prefill;
  const auto it = tables.find(kv);
  return it == tables.end() ? nullptr : it->second.get();
}

const MeasuredMoeTable* MeasuredKernels::moe(const std::string& dtype) const {
  const auto& tables = this->tables().moe;
  const auto it = tables.find(dtype);
  return it == tables.end() ? nullptr : it->second.get();
}

const MeasuredGemmTable* MeasuredKernels::gemm(Precision p) const {
  if (p == Precision::kFp16) p = Precision::kBf16;
  const auto& tables = this->tables().gemm;
  const auto it = tables.find(p);
  return it == tables.end() ? nullptr : &it->second;
}

std::string MeasuredKernels::describe() const {
  const auto& gemm = tables().gemm;
  if (gemm.empty()) return "";
  const KernelTableInfo& first = gemm.begin()->second.info();
  std::string dtypes;
  for (const auto& [p, t] : gemm) dtypes += (dtypes.empty() ? "" : ", ") + t.info().dtype;
  return first.card + " " + first.framework + " GEMM tables (" + dtypes + ")";
}

}  // namespace capsim
