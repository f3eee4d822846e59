// Attention kernel times measured on a card, read from
// calibration/kernels/<card>/attention_decode-<dtype>.csv and attention_prefill-<dtype>.csv
// (format: docs/data-formats.md#measured-kernel-tables), and the rule that turns them into the
// time of a shape that was not measured (docs/cost-model.md#measured-kernels).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "sim/hardware/measured_kernels.h"

namespace capsim {

// One attention kernel call on one GPU, as the tables key it: `batch` sequences of `length`
// tokens each (decode: KV tokens each new query reads, the new one included; prefill: new tokens
// per sequence, no cached prefix), `heads` query heads and `kv_heads` KV heads per GPU of
// `head_dim`, `window` the sliding window (0 = full attention). Fractional batch and length are
// allowed (a step's mean context).
struct AttentionShape {
  double batch = 1, length = 1;
  double heads = 1, kv_heads = 1, head_dim = 128, window = 0;
};

// The roofline time of one attention call of a shape: carries a measured time to a shape the
// table does not hold (another head layout, a batch or length outside the measured range).
using AttentionRoofline = std::function<double(const AttentionShape&)>;

// Decode or prefill attention times, one (batch, length) grid per measured head layout
// (heads, kv_heads, head_dim, window); each batch has its own ascending list of lengths.
class MeasuredAttentionTable {
 public:
  // Throws capsim::Error naming the file and line for anything docs/data-formats.md refuses.
  static MeasuredAttentionTable load(const std::string& path);

  struct Layout {
    double heads = 0, kv_heads = 0, head_dim = 0, window = 0;
  };
  // The measured layout that times a model's `s` (batch and length are ignored):
  //  1. the same (heads, kv_heads, head_dim, window) when measured;
  //  2. else, among the layouts with s's head_dim (all, when none has it) and s's window (else
  //     full attention, window 0), the nearest in |log heads ratio| + |log kv_heads ratio|,
  //     the first (fewest heads) on a tie.
  std::size_t nearest_layout(const AttentionShape& s) const;
  const Layout& layout(std::size_t i) const { return layouts_[i].layout; }
  std::size_t layouts() const { return layouts_.size(); }

  // Seconds of one call of shape `s` timed from layout `layout` (the rule of
  // docs/cost-model.md#measured-kernels, as the GEMM tables'):
  //  - log time is linear in log length along each batch's measured lengths, then linear in
  //    log batch between the two measured batches around s.batch;
  //  - outside the measured range the batch (or length) is clamped to the grid's edge and the
  //    time there scaled by roofline(shape) / roofline(clamped shape);
  //  - a layout other than s's own is carried by roofline(s) / roofline(s at the layout's heads,
  //    kv_heads, head_dim and window).
  // REQUIRES: s.batch, s.length > 0; layout < layouts().
  double seconds(std::size_t layout, const AttentionShape& s, const AttentionRoofline& roofline) const;
  double seconds(const AttentionShape& s, const AttentionRoofline& roofline) const {
    return seconds(nearest_layout(s), s, roofline);
  }
  // True when s's own layout is measured and (batch, length) lie inside its measured ranges
  // (no roofline scaling).
  bool covers(const AttentionShape& s) const;

  const KernelTableInfo& info() const { return info_; }
  bool decode() const { return info_.op == "attention_decode"; }
  std::size_t points() const { return points_; }

 private:
  struct Series {
    double batch = 0;
    std::vector<double> length, seconds;  // ascending length
  };
  struct LayoutGrid {
    Layout layout;
    std::vector<Series> by_batch;  // ascending batch
    std::vector<double> batches;   // by_batch's batches, for the bracket
  };
  double series_seconds(const Series& s, const AttentionShape& at, const AttentionRoofline& r) const;

  KernelTableInfo info_;
  std::vector<LayoutGrid> layouts_;  // ordered by (head_dim, window, heads, kv_heads)
  std::size_t points_ = 0;
};

}  // namespace capsim
