// JSON inputs other than configs: `capsim diff` results (read, recognised, diffed against
// themselves) and calibration profiles; the first byte picks which.
#include "fuzz/fuzz_support.h"
#include "sim/calibration/profile.h"
#include "sim/report/diff.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string& path = capsim::fuzz::write_input(data + 1, size - 1, "-result.json");
  capsim::fuzz::expect_clean([&] {
    if (data[0] % 2 == 0) {
      const capsim::diff::Input in = capsim::diff::load_result(path);
      const capsim::diff::Diff d = capsim::diff::compare(in, in, 0.0);
      (void)capsim::diff::diff_json(in, in, d);
    } else {
      (void)capsim::calibration::load_profile(path);
    }
  });
  return 0;
}
