// The small languages of flags and fields: quantities with units, SLO expressions, length and
// time distributions, precisions and trace-format names. The first byte picks the parser.
#include <cmath>
#include <cstdlib>
#include <string>

#include "fuzz/fuzz_support.h"
#include "sim/scenario/scenario.h"
#include "sim/core/units.h"
#include "sim/hardware/precision.h"
#include "sim/workload/distributions.h"
#include "sim/workload/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  // empirical:FILE reads a file named by the input; the trace fuzzer covers file parsing.
  if (text.find("empirical") != std::string::npos) return 0;
  capsim::fuzz::expect_clean([&] {
    using capsim::Distribution;
    switch (data[0] % 8) {
      case 0:
      case 1: {
        const auto kind = static_cast<capsim::units::Kind>(data[0] / 8 % 5);
        const double v = capsim::units::parse(text, kind, "--x");
        if (!std::isfinite(v) || v < 0) std::abort();
        break;
      }
      case 2: {
        const auto s = capsim::scenario::parse_slo_expression(text, "--slo");
        if (!(s.seconds > 0) || !std::isfinite(s.seconds)) std::abort();
        break;
      }
      case 3:
      case 4:
      case 5: {
        const auto unit = static_cast<Distribution::Unit>(data[0] % 8 - 3);
        const Distribution d = Distribution::parse(text, unit, "--x");
        capsim::Rng rng(data[0]);
        for (int i = 0; i < 16; ++i) {
          const double v = d.sample(rng);
          if (!std::isfinite(v) || v < 0) std::abort();
          if (unit != Distribution::Unit::kSeconds && v < 1) std::abort();
        }
        (void)d.describe();
        break;
      }
      case 6: (void)capsim::parse_precision(text, "--weights"); break;
      default: (void)capsim::parse_trace_format(text); break;
    }
  });
  return 0;
}
