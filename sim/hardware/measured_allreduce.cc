#include "sim/hardware/measured_allreduce.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/core/error.h"
#include "sim/hardware/kernel_table_text.h"
#include "sim/hardware/measured_moe.h"

namespace capsim {

MeasuredAllReduceTable MeasuredAllReduceTable::load(const std::string& path) {
  MeasuredRows r = read_measured_rows(path, "allreduce", {"gpus", "bytes"});
  if (r.info.dtype != "bf16") {
    throw Error(path + ": dtype '" + r.info.dtype + "' is not supported; accepted: bf16");
  }
  MeasuredAllReduceTable t;
  t.info_ = r.info;
  std::map<int, std::vector<std::pair<double, double>>> by_gpus;
  for (const auto& row : r.rows) {
    // Checked before the cast: a count past int's range was undefined behaviour (found by
    // fuzz_kernel_table). 65536 GPUs is far past any all-reduce group measured.
    if (row[0] < 2 || row[0] > 65536) {
      char shown[32];
      std::snprintf(shown, sizeof shown, "%g", row[0]);
      throw Error(path + ": gpus " + shown + " is not a GPU count in 2..65536 (an all-reduce over one GPU is no kernel)");
    }
    by_gpus[static_cast<int>(row[0])].push_back({row[1], row[2]});
  }
  for (auto& [gpus, pts] : by_gpus) {
    std::sort(pts.begin(), pts.end());
    Series s;
    for (const auto& [bytes, sec] : pts) {
      s.bytes.push_back(bytes);
      s.seconds.push_back(sec);
    }
    t.points_ += pts.size();
    t.series_.emplace(gpus, std::move(s));
  }
  return t;
}

double MeasuredAllReduceTable::seconds(int gpus, double bytes) const {
  const Series& s = series_.at(gpus);
  if (bytes <= s.bytes.front()) return s.seconds.front();
  if (bytes >= s.bytes.back()) return s.seconds.back() * bytes / s.bytes.back();
  return kernel_table::log_interpolate(s.bytes, s.seconds, bytes);
}

bool MeasuredAllReduceTable::covers(int gpus, double bytes) const {
  const auto it = series_.find(gpus);
  return it != series_.end() && bytes >= it->second.bytes.front() && bytes <= it->second.bytes.back();
}

}  // namespace capsim
