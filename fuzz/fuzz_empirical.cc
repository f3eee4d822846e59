// Empirical distributions (`{dist: empirical, file: F.csv, column: C}` in a scenario, or
// `empirical:F.csv:C`): a user's CSV of measured lengths or times. The first byte picks the unit
// (tokens, seconds, counts), the rest is the file, read by its column "x". A distribution that
// loads must draw inside its contract: token counts and counts whole, >= 1 and within capsim's
// token limit; times finite, >= 0 and within the simulated-time limit; a finite mean.
#include <cmath>
#include <cstdlib>

#include "fuzz/fuzz_support.h"
#include "sim/core/checked.h"
#include "sim/core/rng.h"
#include "sim/workload/distributions.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const capsim::Distribution::Unit unit = data[0] % 3 == 0   ? capsim::Distribution::Unit::kTokens
                                          : data[0] % 3 == 1 ? capsim::Distribution::Unit::kSeconds
                                                             : capsim::Distribution::Unit::kCount;
  const std::string& path = capsim::fuzz::write_input(data + 1, size - 1, ".csv");
  capsim::fuzz::expect_clean([&] {
    const capsim::Distribution d = capsim::Distribution::parse("empirical:" + path + ":x", unit, "fuzz");
    if (!std::isfinite(d.mean())) std::abort();
    capsim::Rng rng(7);
    for (int i = 0; i < 64; ++i) {
      const double v = d.sample(rng);
      const bool ok = unit == capsim::Distribution::Unit::kSeconds
                          ? std::isfinite(v) && v >= 0 && v <= capsim::checked::kMaxSimSeconds
                          : v >= 1 && v == std::floor(v) && v <= capsim::checked::kMaxTokens;
      if (!ok) std::abort();  // a draw outside the contract
    }
  });
  return 0;
}
