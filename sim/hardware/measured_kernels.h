// Kernel times measured on a card, read from calibration/kernels/<card>/<op>-<dtype>.csv
// (format: docs/data-formats.md#measured-kernel-tables; sources: calibration/kernels/SOURCES.md),
// and the rule that turns them into the time of a shape that was not measured
// (docs/cost-model.md#measured-kernels).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "sim/hardware/precision.h"

namespace capsim {

class MeasuredMoeTable;        // sim/hardware/measured_moe.h
class MeasuredAllReduceTable;  // sim/hardware/measured_allreduce.h
class MeasuredAttentionTable;  // sim/hardware/measured_attention.h

// Where a table's numbers come from: its header lines.
struct KernelTableInfo {
  std::string file;                         // the path it was read from
  std::string op, dtype, card, framework;   // "gemm", "bf16", "h100-sxm", "vllm 0.24.0"
  std::string device, kernel, source, licence;
};

// The roofline time of one GEMM, Y[m,n] = X[m,k] W[n,k]^T: the same rule as the cost model's
// (sim/cost/roofline_group.h) for one kernel. Used by MeasuredGemmTable only to carry a measured
// point to a shape outside the measured range.
struct GemmRoofline {
  double flops_per_s = 0;       // achieved
  double bytes_per_s = 0;       // achieved
  double weight_bytes = 2;      // per weight element
  double activation_bytes = 2;  // per input element (the output is not counted, as in the cost model)
  double kernel_floor_s = 0;
  double seconds(double m, double n, double k) const;
};

// GEMM times over a complete (n, k) grid, each (n, k) with its own ascending list of m.
class MeasuredGemmTable {
 public:
  // Throws capsim::Error naming the file and line for anything docs/data-formats.md refuses.
  static MeasuredGemmTable load(const std::string& path);

  // Seconds of one GEMM of m tokens, n outputs and k inputs (the rule of
  // docs/cost-model.md#measured-kernels):
  //  - inside the grid, log time is interpolated linearly in log m along each (n, k) point's own
  //    measurements, then bilinearly in (log n, log k) between the four grid points around (n, k);
  //  - outside it, the shape is clamped to the grid's edge in each coordinate, and the time there
  //    is scaled by roofline(shape) / roofline(clamped shape): the nearest measurement's
  //    efficiency, carried to the shape by the roofline.
  // REQUIRES: m, n, k > 0.
  double seconds(double m, double n, double k, const GemmRoofline& roofline) const;
  // True when (m, n, k) lies inside the measured ranges (no roofline scaling).
  bool covers(double m, double n, double k) const;

  const KernelTableInfo& info() const { return info_; }
  std::size_t points() const { return points_; }

 private:
  struct Series {
    std::vector<double> m, seconds;  // ascending m
  };
  double series_seconds(const Series& s, double n, double k, double m, const GemmRoofline& r) const;

  KernelTableInfo info_;
  std::vector<double> n_, k_;  // ascending grid values
  std::vector<Series> series_;  // [i * k_.size() + j] for n_[i], k_[j]
  std::size_t points_ = 0;
};

// The tables of one card, by op and precision.
class MeasuredKernels {
 public:
  // Reads every <op>-<dtype>.csv in `dir` (calibration/kernels/<card>/); each file's `card`
  // must be `card`. The gemm, attention, moe and allreduce tables are read. Throws capsim::Error
  // for a bad file or name.
  static MeasuredKernels load_dir(const std::string& dir, const std::string& card);
  // The same tables, read when first asked for: the file names are checked now, each file's
  // contents on the first call of an accessor below (which then throws what load_dir would
  // have). The card catalogue uses this: every command reads a card, few of them a table (the
  // tables are off by default), and reading them all took most of a short run's start-up.
  // nullptr when `dir` has no table. Safe to share between threads (read once).
  static std::shared_ptr<const MeasuredKernels> on_demand(const std::string& dir, const std::string& card);

  // The GEMM table for linear layers run in precision `p`: fp16 uses the bf16 table (the same
  // tensor-core rate on every card that has both). nullptr when there is none.
  const MeasuredGemmTable* gemm(Precision p) const;
  // The fused-MoE table of `dtype` ("bf16", "fp8", "fp8_block", "nvfp4") and the custom
  // all-reduce table; nullptr when the card has none.
  const MeasuredMoeTable* moe(const std::string& dtype) const;
  const MeasuredAllReduceTable* allreduce() const { return tables().allreduce.get(); }
  // The decode / prefill attention table for a KV cache in precision `kv` (fp16 uses bf16's).
  // nullptr when there is none.
  const MeasuredAttentionTable* attention_decode(Precision kv) const;
  const MeasuredAttentionTable* attention_prefill(Precision kv) const;
  // From the file names alone (nothing is read): whether there is any table, any attention table.
  bool empty() const { return files_.empty(); }
  bool has_attention() const;
  // "h100-sxm vllm 0.24.0 GEMM tables (bf16, fp8)".
  std::string describe() const;

  // Whether the cost model times kernels from the tables (docs/cost-model.md#measured-kernels):
  // the engine profile's `kernels.measured_kernels` (`engine_default`) unless overridden for the
  // process: set_enabled (`capsim --measured-kernels`), else CAPSIM_MEASURED_KERNELS=1 (on) or 0
  // (off). The tables are read either way when asked for (`capsim kernels` reads them). enabled() with no
  // argument is enabled(false): the override alone.
  static void set_enabled(bool on);
  static void clear_override();  // back to the engine's field (tests)
  static bool enabled(bool engine_default);
  static bool enabled() { return enabled(false); }

 private:
  struct Tables {
    std::map<Precision, MeasuredGemmTable> gemm;
    std::map<std::string, std::shared_ptr<const MeasuredMoeTable>> moe;
    std::shared_ptr<const MeasuredAllReduceTable> allreduce;
    std::map<Precision, std::shared_ptr<const MeasuredAttentionTable>> attention_decode, attention_prefill;
  };
  // Not std::call_once: with g++ 12's libstdc++ an exception out of it (a bad table) aborts.
  struct Lazy {
    std::mutex mutex;
    std::atomic<bool> ready{false};
    Tables tables;
  };
  // Lists `dir`'s tables, checking their names; reads none.
  static MeasuredKernels list_dir(const std::string& dir, const std::string& card);
  void read_tables(Tables& into) const;
  const Tables& tables() const;  // read on the first call

  std::string card_;
  std::vector<std::string> files_;  // the table files' paths, sorted
  std::unique_ptr<Lazy> lazy_ = std::make_unique<Lazy>();
};

}  // namespace capsim
