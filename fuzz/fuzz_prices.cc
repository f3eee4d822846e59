// Price files (calibration/prices.yaml).
#include "fuzz/fuzz_support.h"
#include "sim/plan/prices.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = capsim::fuzz::write_input(data, size, "-prices.yaml");
  capsim::fuzz::expect_clean([&] { (void)capsim::load_prices(path); });
  return 0;
}
