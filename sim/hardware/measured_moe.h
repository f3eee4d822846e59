// Fused MoE layer times measured on a card, read from calibration/kernels/<card>/moe-<dtype>.csv
// (format: docs/data-formats.md#measured-kernel-tables), and the rule that turns them into the
// time of a step's MoE layer (docs/cost-model.md#measured-kernels).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "sim/hardware/measured_kernels.h"

namespace capsim {

// The rows of one measured-kernel table: its header lines and, per row, the values of `columns`
// (in that order; the table's own column order may differ) followed by the time in seconds.
// Throws capsim::Error naming the file and line for anything docs/data-formats.md refuses: a
// missing or unknown column, a non-positive value, a shape column that is not a whole number
// (`whole` columns), a shape given twice, an `op` other than `op`, a missing required header.
struct MeasuredRows {
  KernelTableInfo info;
  std::vector<std::vector<double>> rows;  // columns..., seconds
};
MeasuredRows read_measured_rows(const std::string& path, const std::string& op,
                                const std::vector<std::string>& columns);

// One fused MoE layer's model shape and GPU layout, as the table's columns name them: `hidden`
// and `inter` (one expert's intermediate size, before the TP split) of the model, `experts`
// routed experts, `topk` per token; `tp` slices every expert's intermediate size over tp GPUs,
// `ep` spreads whole experts over ep GPUs (the tables hold one or the other, never both).
struct MoeLayout {
  double hidden = 0, inter = 0, experts = 0, topk = 0, tp = 1, ep = 1;
  auto key() const { return std::tie(hidden, inter, experts, topk, tp, ep); }
  bool operator<(const MoeLayout& o) const { return key() < o.key(); }
};

// MoE layer times of the model shapes and layouts the table measured (they are models, not a
// grid: AIConfigurator times the MoE shapes of the models it supports), each with its own
// ascending list of token counts.
class MeasuredMoeTable {
 public:
  static MeasuredMoeTable load(const std::string& path);

  // Whether `layout` was measured exactly; only such layouts are timed from the table (a model
  // shape the table lacks keeps the roofline: no rule carries one model's kernel to another's).
  bool has(const MoeLayout& layout) const { return series_.count(layout) != 0; }
  // Seconds of one MoE layer (routing, both grouped GEMMs, activation and combine; no shared
  // expert, no router GEMM) of `tokens` tokens in `layout`:
  //  - inside the measured token range, log time is interpolated linearly in log tokens between
  //    the two measured neighbours;
  //  - outside it, the token count is clamped to the range's edge and the time there is scaled
  //    by roofline(tokens) / roofline(clamped): the nearest measurement's efficiency, carried by
  //    the cost model's own roofline of the layer (`roofline` gives its seconds at a token count).
  // REQUIRES: has(layout), tokens > 0.
  double seconds(double tokens, const MoeLayout& layout, const std::function<double(double)>& roofline) const;
  // True when `tokens` lies inside the layout's measured range (no roofline scaling).
  bool covers(double tokens, const MoeLayout& layout) const;

  const KernelTableInfo& info() const { return info_; }
  std::size_t points() const { return points_; }

 private:
  struct Series {
    std::vector<double> tokens, seconds;  // ascending tokens
  };
  KernelTableInfo info_;
  std::map<MoeLayout, Series> series_;
  std::size_t points_ = 0;
};

}  // namespace capsim
