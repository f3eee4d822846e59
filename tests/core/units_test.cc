// Quantities with units (sim/core/units.h) as capsim's data files and flags write them.
//
// Specification: parse_* returns SI base units (bytes, bytes/s, operations/s, watts, seconds);
// decimal prefixes k/M/G/T/P = 1e3..1e15 as datasheets use them, binary prefixes only where
// spelled KiB/MiB/GiB/TiB. A bad quantity throws capsim::Error whose message starts with `where`,
// says what is wrong, gives an example and lists every accepted unit of that kind.
#include "sim/core/units.h"

#include <catch2/catch.hpp>
#include <string>

#include "sim/core/error.h"

namespace units = capsim::units;

namespace {

// The message of the capsim::Error `f` throws ("" when it throws nothing).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const capsim::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("units: sizes are decimal unless spelled with an i", "[core][units]") {
  // "80GB" is a datasheet's 80 x 10^9 bytes.
  CHECK(units::parse_bytes("80GB", "t") == 80e9);
  // "79.22GiB" (vLLM's log of an H100) = 79.22 x 2^30 = 79 x 1,073,741,824 + 0.22 x 1,073,741,824
  //   = 84,825,604,096 + 236,223,201.28 = 85,061,827,297.28 bytes.
  CHECK(units::parse_bytes("79.22GiB", "t") == Approx(85'061'827'297.28).epsilon(1e-13));
  CHECK(units::parse_bytes("1.79GiB", "t") == Approx(1.79 * 1073741824.0).epsilon(1e-15));
  CHECK(units::parse_bytes("512B", "t") == 512);
  CHECK(units::parse_bytes("4KiB", "t") == 4096);
  CHECK(units::parse_bytes("4KB", "t") == 4000);
  CHECK(units::parse_bytes("1TiB", "t") == 1099511627776.0);  // 2^40
  // Spaces around and between number and unit are allowed.
  CHECK(units::parse_bytes("  80 GB ", "t") == 80e9);
}

TEST_CASE("units: bandwidth, compute rates, power and durations", "[core][units]") {
  // 3.35 TB/s = 3.35 x 10^12 bytes/s (H100 SXM HBM3).
  CHECK(units::parse_bandwidth("3.35TB/s", "t") == Approx(3.35e12).epsilon(1e-15));
  CHECK(units::parse_bandwidth("900GB/s", "t") == 900e9);
  // 989.4 TFLOPS = 9.894 x 10^14 operations/s; integer TOPS share the kind.
  CHECK(units::parse_compute("989.4TFLOPS", "t") == Approx(989.4e12).epsilon(1e-15));
  CHECK(units::parse_compute("1978.9TOPS", "t") == Approx(1978.9e12).epsilon(1e-15));
  CHECK(units::parse_compute("67TFLOPS", "t") == 67e12);
  CHECK(units::parse_power("700W", "t") == 700);
  CHECK(units::parse_power("1.2kW", "t") == Approx(1200).epsilon(1e-15));
  // 17 us = 1.7 x 10^-5 s; 30 min = 30 x 60 = 1800 s.
  CHECK(units::parse_time("17us", "t") == Approx(17e-6).epsilon(1e-15));
  CHECK(units::parse_time("30min", "t") == 1800);
  CHECK(units::parse_time("0.6ms", "t") == Approx(0.6e-3).epsilon(1e-15));
  CHECK(units::parse_time("20s", "t") == 20);
  CHECK(units::parse_time("2h", "t") == 7200);
  CHECK(units::parse_time("250ns", "t") == Approx(250e-9).epsilon(1e-15));
}

TEST_CASE("units: the accepted units of each kind, in the order messages list them",
          "[core][units]") {
  CHECK(units::accepted_units(units::Kind::kBytes) == "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB");
  CHECK(units::accepted_units(units::Kind::kBandwidth) == "B/s, KB/s, MB/s, GB/s, TB/s, GiB/s");
  CHECK(units::accepted_units(units::Kind::kCompute) ==
        "FLOPS, GFLOPS, TFLOPS, PFLOPS, OPS, GOPS, TOPS, POPS");
  CHECK(units::accepted_units(units::Kind::kPower) == "W, kW");
  CHECK(units::accepted_units(units::Kind::kTime) == "ns, us, ms, s, min, h");
}

TEST_CASE("units: a number without a unit names where and lists the accepted units",
          "[core][units][errors]") {
  CHECK(error_of([] { units::parse_bytes("80", "cards/x.yaml: memory"); }) ==
        "cards/x.yaml: memory: '80' has no unit; expected a size such as '80GB'; "
        "accepted units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB");
  CHECK(error_of([] { units::parse_time("20", "--slo-ttft"); }) ==
        "--slo-ttft: '20' has no unit; expected a duration such as '20ms'; "
        "accepted units: ns, us, ms, s, min, h");
}

TEST_CASE("units: an unknown unit is quoted back", "[core][units][errors]") {
  CHECK(error_of([] { units::parse_bandwidth("3.35TBps", "--bw"); }) ==
        "--bw: '3.35TBps' has an unknown unit 'TBps'; expected a bandwidth such as '3.35TB/s'; "
        "accepted units: B/s, KB/s, MB/s, GB/s, TB/s, GiB/s");
  // Units are case-sensitive: "gb" is not "GB".
  CHECK(error_of([] { units::parse_bytes("80gb", "m"); }) ==
        "m: '80gb' has an unknown unit 'gb'; expected a size such as '80GB'; "
        "accepted units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB");
  // Kinds do not mix: a bandwidth is not a size, a size is not a rate.
  CHECK(error_of([] { units::parse_bytes("3.35TB/s", "memory"); }) ==
        "memory: '3.35TB/s' has an unknown unit 'TB/s'; expected a size such as '80GB'; "
        "accepted units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB");
  CHECK(error_of([] { units::parse_compute("989TFLOP", "peak"); }) ==
        "peak: '989TFLOP' has an unknown unit 'TFLOP'; expected a compute rate such as "
        "'989TFLOPS'; accepted units: FLOPS, GFLOPS, TFLOPS, PFLOPS, OPS, GOPS, TOPS, POPS");
}

TEST_CASE("units: negative quantities are rejected", "[core][units][errors]") {
  CHECK(error_of([] { units::parse_time("-5ms", "overhead.step"); }) ==
        "overhead.step: '-5ms' is negative; expected a duration such as '20ms'; "
        "accepted units: ns, us, ms, s, min, h");
  CHECK(error_of([] { units::parse_bandwidth("-1TB/s", "b"); }) ==
        "b: '-1TB/s' is negative; expected a bandwidth such as '3.35TB/s'; "
        "accepted units: B/s, KB/s, MB/s, GB/s, TB/s, GiB/s");
  // Zero is a quantity, not an error.
  CHECK(units::parse_bytes("0GB", "z") == 0);
}

TEST_CASE("units: text that is not a number", "[core][units][errors]") {
  CHECK(error_of([] { units::parse_power("fast", "tdp"); }) ==
        "tdp: 'fast' is not a number with a unit; expected a power such as '700W'; "
        "accepted units: W, kW");
  CHECK(error_of([] { units::parse_bytes("GB", "memory"); }) ==
        "memory: 'GB' is not a number with a unit; expected a size such as '80GB'; "
        "accepted units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB");
  CHECK(error_of([] { units::parse_bytes("", "memory"); }) ==
        "memory: '' is not a number with a unit; expected a size such as '80GB'; "
        "accepted units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB");
  CHECK(error_of([] { units::parse_power("infW", "tdp"); }) ==
        "tdp: 'infW' is not finite; expected a power such as '700W'; accepted units: W, kW");
}

TEST_CASE("units: human-readable formatting", "[core][units]") {
  // 16,060,522,496 B = 16.06 GB = 16,060,522,496 / 2^30 = 14.957 GiB.
  CHECK(units::format_bytes(16'060'522'496.0) == "16.06 GB");
  CHECK(units::format_bytes_gib(16'060'522'496.0) == "14.96 GiB");
  CHECK(units::format_bytes(512) == "512 B");
  CHECK(units::format_time(6.12e-3) == "6.12 ms");
  CHECK(units::format_time(1.5) == "1.50 s");
  CHECK(units::format_time(17e-6) == "17.0 us");
  CHECK(units::format_time(250e-9) == "250 ns");
  CHECK(units::format_rate(2.613e12, "B/s") == "2.61 TB/s");
  CHECK(units::format_rate(751.944e12, "FLOP/s") == "751.94 TFLOP/s");
}
