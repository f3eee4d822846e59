// Checked conversions (sim/core/checked.h), input-file bounds (sim/core/input_limits.h) and run
// limits (sim/core/run_limits.h): each refusal names where, what was given and what is accepted.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/input_limits.h"
#include "sim/core/run_limits.h"
#include "tests/support/temp_dir.h"

namespace {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const capsim::Error& e) {
    return e.what();
  }
  return "(no error)";
}

using Catch::Matchers::Contains;
namespace checked = capsim::checked;

}  // namespace

TEST_CASE("checked: whole numbers in range convert, others are refused with the range",
          "[core][checked]") {
  CHECK(checked::whole_in(4096, 1, 1 << 20, "--x") == 4096);
  CHECK(checked::whole_in(0, 0, 5, "--x") == 0);
  // 2^53 is exact in a double and within int64.
  CHECK(checked::whole_in(9007199254740992.0, 0, std::numeric_limits<std::int64_t>::max(), "--x") ==
        9007199254740992LL);
  CHECK_THAT(error_of([] { checked::whole_in(1e20, 1, 100, "a.yaml: workload.requests"); }),
             Contains("a.yaml: workload.requests: '1e+20' is not a whole number in 1..100"));
  CHECK_THAT(error_of([] { checked::whole_in(2.5, 1, 100, "--x"); }), Contains("'2.5' is not a whole"));
  CHECK_THAT(error_of([] { checked::whole_in(std::nan(""), 1, 100, "--x"); }), Contains("'nan'"));
  CHECK_THAT(error_of([] { checked::whole_in(-INFINITY, 1, 100, "--x"); }), Contains("'-inf'"));
}

TEST_CASE("checked: finite ranges refuse NaN, infinities and values outside", "[core][checked]") {
  CHECK(checked::finite_in(0.9, 0.05, 1, "--gpu-memory-utilization") == 0.9);
  CHECK_THAT(error_of([] { checked::finite_in(std::nan(""), 0.05, 1, "--gpu-memory-utilization"); }),
             Contains("--gpu-memory-utilization: 'nan' is not a number in 0.05..1"));
  CHECK_THAT(error_of([] { checked::finite_in(1e300, 0, 1e9, "t.csv:3: column 'arrival_s'", "s"); }),
             Contains("t.csv:3: column 'arrival_s': '1e+300' is not a number in 0..1000000000 s"));
}

TEST_CASE("checked: token counts and simulated times stop at the hard limits", "[core][checked]") {
  CHECK(checked::tokens(1e9, 1, "--input-tokens") == 1'000'000'000);
  CHECK_THAT(error_of([] { checked::tokens(1e20, 1, "--input-tokens"); }),
             Contains("--input-tokens: '1e+20' is not a whole number in 1..1000000000 tokens"));
  CHECK(checked::sim_time(1.5, "--duration") == 1'500'000'000);
  CHECK(checked::sim_time(1e9, "--duration") == 1'000'000'000LL * 1'000'000'000LL);
  CHECK_THAT(error_of([] { checked::sim_time(1e300, "--duration"); }), Contains("0..1000000000 s"));
  CHECK_THAT(error_of([] { checked::sim_time(-1, "--duration"); }), Contains("'-1'"));
}

TEST_CASE("checked: 64-bit products and sums that overflow are refused", "[core][checked]") {
  const std::int64_t big = std::numeric_limits<std::int64_t>::max() / 2 + 1;
  CHECK(checked::mul(3'000'000'000LL, 3'000'000'000LL, "x") == 9'000'000'000'000'000'000LL);
  CHECK_THAT(error_of([&] { checked::mul(big, 2, "layers x params"); }),
             Contains("layers x params: 4611686018427387904 x 2 overflows"));
  CHECK_THAT(error_of([&] { checked::add(big, big, "sum"); }), Contains("overflows"));
}

TEST_CASE("input limits: JSON nesting is measured outside strings, with the line it passes the limit",
          "[core][input]") {
  CHECK(capsim::json_depth(R"({"a": [1, {"b": [2]}]})").depth == 4);
  CHECK(capsim::json_depth(R"({"a": "[[[[[[[[", "b": "\"[["})").depth == 1);
  const std::string deep = "{\"x\":\n" + std::string(100'000, '[') + std::string(100'000, ']') + "}";
  const capsim::JsonDepth d = capsim::json_depth(deep);
  CHECK(d.depth == 100'001);
  CHECK(d.line_over == 2);
  // Parsing it is refused before nlohmann builds (and later recursively destroys) the value.
  CHECK_THAT(error_of([&] { capsim::parse_json(deep, "r.json"); }),
             Contains("r.json:2: JSON nested deeper than 128 levels"));
  CHECK(capsim::parse_json(std::string(128, '[') + std::string(128, ']'), "ok.json").is_array());
  CHECK_THAT(error_of([] { capsim::parse_json("{\"a\":\n 1,,}", "bad.json"); }),
             Contains("bad.json:2: malformed JSON: "));
  // Found by fuzz_json_results: nlohmann reports a number beyond double's range as out_of_range,
  // not parse_error, and it escaped as "number overflow" without a file.
  CHECK_THAT(error_of([] { capsim::parse_json("{\"capsim\": {\"arrived\": 0.113046972e021331}}", "r.json"); }),
             Contains("r.json: malformed JSON: [json.exception.out_of_range.406] number overflow parsing "
                      "'0.113046972e021331'"));
}

TEST_CASE("input limits: a file over the size limit is refused, a directory is named",
          "[core][input]") {
  capsim_test::TempDir dir("input");
  const std::string f = dir.write("big.yaml", std::string(3000, 'x'));
  CHECK(capsim::read_input_file(f, "YAML file", 3000).size() == 3000);
  CHECK_THAT(error_of([&] { capsim::read_input_file(f, "YAML file", 2999); }),
             Contains(f + ": larger than 2999 bytes, the limit for a YAML file"));
  CHECK_THAT(error_of([&] { capsim::read_input_file(dir.path(), "config.json"); }),
             Contains("is a directory, not a config.json"));
  CHECK_THAT(error_of([&] { capsim::read_input_file(dir.file("none.json"), "config.json"); }),
             Contains("none.json: cannot read file"));
}

TEST_CASE("run limits: the message names the limit and the flag that lifts it", "[core][limits]") {
  if (capsim::run_limits_lifted()) return;  // process-wide; no test lifts it in this binary
  CHECK(capsim::run_limit(capsim::RunLimit::kRequests) == 2'000'000);
  CHECK_NOTHROW(capsim::check_run_limit(capsim::RunLimit::kRequests, 2e6, "--requests"));
  CHECK_THAT(error_of([] { capsim::check_run_limit(capsim::RunLimit::kRequests, 2e9, "--requests"); }),
             Contains("--requests: 2000000000 requests is more than one run may ask for (at most "
                      "2000000 requests; such a run takes minutes and gigabytes); pass "
                      "--allow-large"));
  CHECK_THAT(error_of([] { capsim::check_run_limit(capsim::RunLimit::kCards, 1e9, "the cluster"); }),
             Contains("the cluster: 1000000000 cards"));
}
