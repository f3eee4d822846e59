// Assumption files (`capsim check`): read and validated, nothing simulated.
#include "fuzz/fuzz_support.h"
#include "sim/check/assumptions.h"
#include "sim/scenario/catalogues.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool once = (capsim::scenario::set_data_dir(CAPSIM_DATA_DIR), true);
  (void)once;
  const std::string& path = capsim::fuzz::write_input(data, size, "-assumptions.yaml");
  capsim::fuzz::expect_clean([&] {
    (void)capsim::check::load_assumptions(path, CAPSIM_DATA_DIR "/calibration/prices.yaml");
  });
  return 0;
}
