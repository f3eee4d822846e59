// Card YAML (calibration/cards/*.yaml): an accepted card has positive memory, bandwidth and
// peaks.
#include <cmath>
#include <cstdlib>

#include "fuzz/fuzz_support.h"
#include "sim/hardware/card.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = capsim::fuzz::write_input(data, size, "-card.yaml");
  capsim::fuzz::expect_clean([&] {
    const capsim::Card c = capsim::CardCatalogue::load_file(path);
    if (!(c.memory_bytes > 0) || !(c.memory_bandwidth > 0) || !std::isfinite(c.memory_bytes) ||
        !std::isfinite(c.memory_bandwidth)) {
      std::abort();
    }
  });
  return 0;
}
