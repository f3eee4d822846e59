// Fitted card profiles (calibration/profiles/<card>.yaml, written by `capsim calibrate fit` and
// applied when the catalogue loads the card), applied to the catalogue's H100 SXM. A profile
// that applies must leave the card inside the card file's own ranges: efficiencies in (0, 1],
// a kernel floor in [0, 1 ms].
#include <cmath>
#include <cstdlib>

#include "fuzz/fuzz_support.h"
#include "sim/hardware/calibration_profile.h"
#include "sim/hardware/card.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const capsim::Card base = capsim::CardCatalogue::load_file(std::string(CAPSIM_DATA_DIR) + "/calibration/cards/h100-sxm.yaml");
  const std::string& path = capsim::fuzz::write_input(data, size, "-h100-sxm.yaml");
  capsim::fuzz::expect_clean([&] {
    capsim::Card c = base;
    capsim::calibration::apply_calibration_profile(c, path);
    const auto fraction = [](double v) { return std::isfinite(v) && v > 0 && v <= 1; };
    if (!fraction(c.bandwidth_efficiency) || !fraction(c.compute_efficiency) ||
        !(std::isfinite(c.kernel_floor_s) && c.kernel_floor_s >= 0 && c.kernel_floor_s <= 1e-3)) {
      std::abort();  // a profile left the card outside its ranges
    }
  });
  return 0;
}
