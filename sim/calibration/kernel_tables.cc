#include "sim/calibration/kernel_tables.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "sim/core/error.h"
#include "sim/report/table.h"

namespace capsim::calibration {
namespace {

using Shape = std::pair<std::int64_t, std::int64_t>;  // (n, k)

// A header value on one line: provenance strings come from the measured machine.
std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s.empty() ? "unknown" : s;
}

// The largest complete grid the reader accepts: the sets N of n and K of k with every (n, k) in
// N x K measured and |N| x |K| largest (ties: more k, then the smaller k values). Exhaustive over
// the subsets of the shorter side, which a profile keeps small (capsim-calibrate times under 40
// distinct n or k); past 16 values that side is cut to its 16 most-measured ones first.
std::set<Shape> complete_grid(const std::set<Shape>& shapes) {
  std::map<std::int64_t, std::set<std::int64_t>> by_n, by_k;
  for (const auto& [n, k] : shapes) {
    by_n[n].insert(k);
    by_k[k].insert(n);
  }
  const bool k_shorter = by_k.size() <= by_n.size();
  const auto& side = k_shorter ? by_k : by_n;  // value -> its partners on the other side
  std::vector<std::pair<std::int64_t, std::set<std::int64_t>>> values(side.begin(), side.end());
  constexpr std::size_t kMaxSide = 16;
  if (values.size() > kMaxSide) {
    std::stable_sort(values.begin(), values.end(),
                     [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
    values.resize(kMaxSide);
    std::sort(values.begin(), values.end());
  }
  std::size_t best_size = 0, best_mask = 0;
  std::set<std::int64_t> best_partners;
  for (std::size_t mask = 1; mask < (std::size_t{1} << values.size()); ++mask) {
    std::set<std::int64_t> partners;
    bool first = true;
    std::size_t chosen = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (!(mask >> i & 1)) continue;
      ++chosen;
      if (first) {
        partners = values[i].second;
        first = false;
      } else {
        std::set<std::int64_t> kept;
        std::set_intersection(partners.begin(), partners.end(), values[i].second.begin(), values[i].second.end(),
                              std::inserter(kept, kept.begin()));
        partners.swap(kept);
      }
    }
    const std::size_t size = chosen * partners.size();
    if (size > best_size) {
      best_size = size;
      best_mask = mask;
      best_partners = partners;
    }
  }
  std::set<Shape> grid;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!(best_mask >> i & 1)) continue;
    for (const std::int64_t other : best_partners) {
      grid.insert(k_shorter ? Shape{other, values[i].first} : Shape{values[i].first, other});
    }
  }
  return grid;
}

std::string header(const Profile& p, const std::string& op, const std::string& dtype, const std::string& card,
                   const std::string& kernel) {
  const Provenance& v = p.provenance;
  std::ostringstream h;
  h << "# capsim measured-kernel table: 1\n"
    << "# op: " << op << "\n"
    << "# dtype: " << dtype << "\n"
    << "# card: " << card << "\n"
    << "# device: " << one_line(v.gpu_name) << "\n"
    << "# framework: " << one_line(p.source) << "\n"
    << "# kernel: " << kernel << "\n"
    << "# source: " << one_line(p.path) << " (" << one_line(p.source) << " on " << one_line(v.hostname) << ", "
    << one_line(v.date) << ", driver " << one_line(v.driver) << ", CUDA runtime " << one_line(v.cuda_runtime)
    << ", compute capability " << one_line(v.compute_capability) << ")\n"
    << "# licence: measured by the user of capsim; no third-party data\n"
    << "# unit: us\n";
  return h.str();
}

}  // namespace

KernelTablesFromProfile kernel_tables_from_profile(const Profile& profile, const std::string& card) {
  if (card.empty() || card.find_first_of("/\\") != std::string::npos || card == "." || card == "..") {
    throw Error("--card: '" + card + "' is not a card name (capsim list cards); the tables go to "
                "calibration/kernels/<card>/");
  }
  KernelTablesFromProfile out;
  // dtype -> (n, k) -> m -> every repetition, pooled over labels.
  std::map<std::string, std::map<Shape, std::map<std::int64_t, std::vector<double>>>> gemm;
  std::set<std::string> fp16_left;
  for (const GemmSample& g : profile.gemm) {
    const std::string dtype(precision_name(g.dtype));
    if (dtype != "bf16" && dtype != "fp8") {
      fp16_left.insert(dtype);
      continue;
    }
    auto& reps = gemm[dtype][{g.n, g.k}][g.m];
    reps.insert(reps.end(), g.seconds.begin(), g.seconds.end());
  }
  for (const std::string& dtype : fp16_left) {
    out.left_out.push_back("gemm " + dtype + ": capsim's GEMM tables are bf16, fp8 and nvfp4 (what vLLM runs)");
  }
  for (const auto& [dtype, by_shape] : gemm) {
    std::set<Shape> shapes;
    for (const auto& [shape, _] : by_shape) shapes.insert(shape);
    const std::set<Shape> grid = complete_grid(shapes);
    std::ostringstream rows;
    std::size_t count = 0;
    for (const Shape& s : grid) {
      for (const auto& [m, reps] : by_shape.at(s)) {
        rows << s.first << "," << s.second << "," << m << "," << fmt("%.4g", median(reps) * 1e6) << "\n";
        ++count;
      }
    }
    std::vector<std::string> dropped;
    for (const Shape& s : shapes) {
      if (!grid.count(s)) dropped.push_back(std::to_string(s.first) + "x" + std::to_string(s.second));
    }
    if (!dropped.empty()) {
      std::string list;
      for (const auto& d : dropped) list += (list.empty() ? "" : ", ") + d;
      out.left_out.push_back("gemm " + dtype + " shapes (n x k) outside the largest complete grid: " + list +
                             " (the table needs every n with every k; capsim-calibrate --gemm-grid measures one)");
    }
    if (count == 0) continue;
    out.tables.push_back({"gemm-" + dtype + ".csv",
                          header(profile, "gemm", dtype, card, "cuBLASLt matmul (capsim-calibrate)") + "n,k,m,us\n" +
                              rows.str(),
                          count});
  }
  if (!profile.attention_decode.empty() || !profile.attention_prefill.empty()) {
    out.left_out.push_back("attention: capsim-calibrate's attention kernels are its own simple ones, not the "
                           "FlashAttention/FlashInfer kernels engines run; `capsim calibrate fit` reports them as "
                           "diagnostics");
  }
  if (!profile.allreduce.empty()) {
    out.left_out.push_back("allreduce: capsim-calibrate times NCCL's all-reduce, while capsim reads an allreduce "
                           "table as vLLM's custom all-reduce");
  }
  if (out.tables.empty()) {
    throw Error(profile.path + ": gemm: no bf16 or fp8 GEMM forms a table (" +
                std::to_string(profile.gemm.size()) + " GEMMs; accepted dtypes: bf16, fp8)");
  }
  return out;
}

}  // namespace capsim::calibration
