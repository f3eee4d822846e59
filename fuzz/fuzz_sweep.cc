// Sweep files (`capsim sweep SWEEP.yaml`, sim/plan/sweep.h): read and expanded into their grid
// of runs against the repository's catalogues and workloads (nothing is simulated).
#include "fuzz/fuzz_support.h"
#include "sim/plan/sweep.h"
#include "sim/scenario/catalogues.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool once = (capsim::scenario::set_data_dir(CAPSIM_DATA_DIR), true);
  (void)once;
  const std::string& path = capsim::fuzz::write_input(data, size, "-sweep.yaml");
  capsim::fuzz::expect_clean([&] { (void)capsim::plan::load_sweep(path); });
  return 0;
}
