// Custom all-reduce times measured on a card, read from calibration/kernels/<card>/allreduce-<dtype>.csv
// (format: docs/data-formats.md#measured-kernel-tables), and the rule that turns them into the
// time of one tensor-parallel all-reduce (docs/cost-model.md#measured-kernels).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sim/hardware/measured_kernels.h"

namespace capsim {

// vLLM's custom all-reduce (CUDA-graph mode) of a message over a number of GPUs, per GPU count
// an ascending list of message sizes.
class MeasuredAllReduceTable {
 public:
  static MeasuredAllReduceTable load(const std::string& path);

  // Whether `gpus` GPUs were measured; other counts (TP 3, 6, 16, ...) are not timed from the
  // table: an all-reduce's algorithm and links change with the count, so no count is carried to
  // another.
  bool has(int gpus) const { return series_.count(gpus) != 0; }
  // Seconds of one all-reduce of `bytes` bytes over `gpus` GPUs:
  //  - inside the measured sizes, log time is interpolated linearly in log bytes;
  //  - below the smallest size, the smallest size's time (a small all-reduce is its latency:
  //    the tables are flat over their first decades);
  //  - above the largest, the largest size's time x bytes / largest (bandwidth-bound: the
  //    tables' last doubling of the size doubles the time).
  // REQUIRES: has(gpus), bytes >= 0.
  double seconds(int gpus, double bytes) const;
  bool covers(int gpus, double bytes) const;

  const KernelTableInfo& info() const { return info_; }
  std::size_t points() const { return points_; }

 private:
  struct Series {
    std::vector<double> bytes, seconds;  // ascending bytes
  };
  KernelTableInfo info_;
  std::map<int, Series> series_;
  std::size_t points_ = 0;
};

}  // namespace capsim
