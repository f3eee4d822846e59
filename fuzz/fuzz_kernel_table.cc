// Measured-kernel table readers (calibration/kernels/<card>/<op>-<dtype>.csv; a user's own tables
// from `capsim calibrate tables` or capsim-calibrate) and the measured training runs
// (calibration/training/llm-foundry.csv): the first byte picks the table, the rest is the file.
// A table that loads must answer inside its contract: a finite, positive time for shapes inside
// and far outside its measured range; a training rate in (0, 1] of the peak.
#include <cmath>
#include <cstdlib>

#include "fuzz/fuzz_support.h"
#include "sim/hardware/measured_allreduce.h"
#include "sim/hardware/measured_attention.h"
#include "sim/hardware/measured_kernels.h"
#include "sim/hardware/measured_moe.h"
#include "sim/plan/training_speed.h"

namespace {

void require_time(double s) {
  if (!std::isfinite(s) || !(s > 0)) std::abort();  // a loaded table answered outside its contract
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string& path = capsim::fuzz::write_input(data + 1, size - 1, ".csv");
  capsim::fuzz::expect_clean([&] {
    switch (data[0] % 5) {
      case 0: {
        const capsim::MeasuredGemmTable t = capsim::MeasuredGemmTable::load(path);
        capsim::GemmRoofline r;
        r.flops_per_s = 1e15;
        r.bytes_per_s = 3e12;
        r.kernel_floor_s = 2e-6;
        for (const double m : {1.0, 37.0, 1e6}) {
          for (const double nk : {1.0, 4096.0, 1e6}) require_time(t.seconds(m, nk, nk, r));
        }
        break;
      }
      case 1: (void)capsim::MeasuredAttentionTable::load(path); break;
      case 2: (void)capsim::MeasuredMoeTable::load(path); break;
      case 4: {
        const capsim::TrainingTable t = capsim::load_training_table(path);
        capsim::Card card;
        card.name = t.runs.front().card;
        card.dense_peak[capsim::Precision::kBf16] = 1e15;
        for (const double params : {1e6, 7e9, 1e13}) {
          for (const double seq : {1.0, 2048.0, 1e7}) {
            const auto r = capsim::training_rate(t, card, params, seq, seq > 1000);
            if (!r || !(r->hfu > 0 && r->hfu <= 1) || !(r->flops_per_s > 0)) std::abort();
          }
        }
        (void)capsim::check_training_rates(t);
        break;
      }
      default: {
        const capsim::MeasuredAllReduceTable t = capsim::MeasuredAllReduceTable::load(path);
        for (const int gpus : {2, 4, 8}) {
          if (!t.has(gpus)) continue;
          for (const double bytes : {0.0, 1.0, 1e6, 1e12}) require_time(t.seconds(gpus, bytes));
        }
        break;
      }
    }
  });
  return 0;
}
