// `capsim emulate`'s flags: the deployment share of the scenario flags (sim/flags/), not the
// workload's. Its clients are the workload, so --rate, --requests, --trace and the like would do
// nothing there; until issue #34 it linked the CLI's ScenarioFlags and --help listed them.
#include <catch2/catch.hpp>
#include <string>

#include "tests/check/cli_run.h"

using capsim_test::has;
using capsim_test::run_capsim;

TEST_CASE("emulate flags: --help lists the deployment flags and no workload flag", "[emulate][cli]") {
  const auto r = run_capsim("emulate --help");
  REQUIRE(r.status == 0);
  INFO(r.out);
  for (const char* kept : {"--model", "--card", "--tp", "--replicas", "--max-num-seqs", "--max-model-len",
                           "--engine", "--router", "--scheduler", "--prefix-caching", "--prefill-pool",
                           "--output-tokens", "--seed", "--port", "--served-model-name"}) {
    INFO(kept);
    CHECK(has(r.out, std::string(kept) + " "));
  }
  for (const char* gone : {"--rate", "--requests", "--trace", "--trace-format", "--users", "--concurrency",
                           "--arrival", "--duration", "--warmup", "--request-timeout", "--input-tokens",
                           "--think-time", "--turns", "--lora-adapters", "--slo"}) {
    INFO(gone);
    CHECK_FALSE(has(r.out, std::string(gone) + " "));
  }
  // One --time-scale, the emulator's: not the trace's gap multiplier.
  CHECK(has(r.out, "simulated seconds per wall-clock second"));
  CHECK_FALSE(has(r.out, "inter-arrival gaps"));
}

TEST_CASE("emulate flags: a workload flag is refused (exit 2, named) before anything is served", "[emulate][cli]") {
  // --model no-such-model would stop the run with exit 2 too, but only once the flags parsed: the
  // error must be the unknown flag (on 6a35aa9 each was accepted and the model named instead).
  for (const std::string flag : {"--rate", "--requests", "--trace"}) {
    INFO(flag);
    const auto r = run_capsim("emulate --model no-such-model " + flag + " 5");
    CHECK(r.status == 2);
    // CLI11's words for a flag the command does not have.
    CHECK(r.err == "The following argument was not expected: " + flag + "\nRun with --help for more information.\n");
  }
}

TEST_CASE("emulate flags: the deployment flags it keeps reach the deployment", "[emulate][cli]") {
  // Each is checked where the deployment is built, so an error naming it shows it was applied.
  const auto tp = run_capsim("emulate --model llama-3.1-8b --card h100-sxm --tp 64");
  CHECK(tp.status == 2);
  CHECK(tp.err == "capsim: error: --tp: 64 does not divide the 32 attention heads of llama-3.1-8b; accepted: a divisor of 32\n");
  const auto out = run_capsim("emulate --model llama-3.1-8b --card h100-sxm --output-tokens nonsense");
  CHECK(out.status == 2);
  CHECK(has(out.err, "--output-tokens: 'nonsense'"));
  const auto pool = run_capsim("emulate --model llama-3.1-8b --prefill-pool '2x h100-sxm' --decode-pool '1x no-such-card'");
  CHECK(pool.status == 2);
  CHECK(has(pool.err, "unknown card 'no-such-card'"));
}
