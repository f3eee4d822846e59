// `capsim check`: a number an assertion keeps as an integer (a context in tokens, plan's
// max_cards and top) is refused as bad input (exit 2, naming file: field and the range) when it
// is out of that integer's range or fractional; before, 1e20 was cast to int64 (undefined; it
// showed as -9223372036854775808) and the check ran and failed (exit 1).
#include <catch2/catch.hpp>
#include <string>

#include "tests/check/cli_run.h"

using capsim_test::run_capsim;
using capsim_test::Run;
using capsim_test::Scratch;

namespace {

std::string q(const std::string& s) { return "'" + s + "'"; }

// An assertion on an inline scenario (no simulation runs: the file is refused when read).
const std::string kHead =
    "assertions:\n"
    "  - name: x\n"
    "    model: llama-3.1-8b\n"
    "    deployment: {card: h100-sxm}\n"
    "    workload: {rate: 1, requests: 10}\n"
    "    slo: {ttft_p95: 2s}\n"
    "    expect:\n";

void check_refused(const std::string& expect, const std::string& message) {
  Scratch tmp("check_numbers");
  const std::string file = tmp.write("a.yaml", kHead + expect);
  const Run r = run_capsim("check -q " + q(file));
  INFO(expect << "\n" << r.out << r.err);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "capsim: error: " + file + ": assertions[0].expect." + message + "\n");
}

}  // namespace

TEST_CASE("check: an integer field out of its range or fractional is refused, not cast", "[check][errors]") {
  check_refused("      fits_in_memory: {context: 1e20}\n",
                "fits_in_memory.context: '1e+20' is not a whole number in 1..1000000000 tokens");
  check_refused("      fits_in_memory: {context: 4096.5}\n",
                "fits_in_memory.context: '4096.5' is not a whole number in 1..1000000000 tokens");
  check_refused("      plan_cheapest_max_usd_per_hour: {max_usd_per_hour: 5, max_cards: 1e10}\n",
                "plan_cheapest_max_usd_per_hour.max_cards: '1e+10' is not a whole number in 1..100000");
  check_refused("      plan_cheapest_max_usd_per_hour: {max_usd_per_hour: 5, top: 3e9}\n",
                "plan_cheapest_max_usd_per_hour.top: '3000000000' is not a whole number in 1..1000");
  check_refused("      plan_cheapest_max_usd_per_hour: {max_usd_per_hour: 5, top: 2.5}\n",
                "plan_cheapest_max_usd_per_hour.top: '2.5' is not a whole number in 1..1000");
}
