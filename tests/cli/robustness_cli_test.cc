// Bad input through the capsim command line (issue #11), one case per example of the issue:
// exit status 2 and a message naming the flag or file and field, never a crash, a hang or a
// silently different run. Each command here stops before simulating, so each takes well under
// a second; the wall time of each is also checked, so a regression to "runs for minutes" fails.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>

#include "tests/check/cli_run.h"

namespace {

using capsim_test::has;
using capsim_test::Run;
using capsim_test::Scratch;
using Catch::Matchers::Contains;

// Runs capsim and checks it answered within `seconds` (sanitizer builds run ~10x slower; the
// bound is for "no hang", not speed).
Run timed(const std::string& args, double seconds = 60) {
  const auto t0 = std::chrono::steady_clock::now();
  Run r = capsim_test::run_capsim(args);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(s < seconds);
  return r;
}

const char* kSmallLlama =
    R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "vocab_size": 100, "intermediate_size": 128)";

}  // namespace

TEST_CASE("cli robustness: num_key_value_heads 0 is exit 2 with the field, in every command",
          "[cli][robust]") {
  Scratch dir("robust");
  const std::string cfg = dir.write("m/config.json", std::string(kSmallLlama) + R"(, "num_key_value_heads": 0})");
  for (const std::string cmd : {"fit", "roofline", "simulate --requests 5",
                                "compare -d '1x h100-sxm' --rate 1 --requests 5"}) {
    const Run r = timed(cmd + " --model " + cfg);
    INFO(cmd << ": " << r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Contains("config.json: num_key_value_heads: 0 is not in 1..num_attention_heads (4)"));
  }
}

TEST_CASE("cli robustness: head_dim 0 is bad input (2), not 'does not fit' (1)", "[cli][robust]") {
  Scratch dir("robust");
  const std::string cfg = dir.write("config.json", std::string(kSmallLlama) + R"(, "head_dim": 0})");
  const Run r = timed("fit --model " + cfg);
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Contains("head_dim: 0 must be > 0"));
}

TEST_CASE("cli robustness: a missing config path is a missing file, not an unknown model",
          "[cli][robust]") {
  const Run r = timed("fit --model ./no/such/dir/config.json");
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Contains("./no/such/dir/config.json: no such file"));
  CHECK_FALSE(has(r.err, "unknown model"));
}

TEST_CASE("cli robustness: NaN and infinities fail the range checks of flags", "[cli][robust]") {
  for (const std::string v : {"nan", "NaN"}) {
    const Run r = timed("fit --gpu-memory-utilization " + v);
    INFO(v << ": " << r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Contains("--gpu-memory-utilization: '" + v + "' is not a finite number"));
  }
  // Infinities too: an engine option's range check (sim/flags/engine_flags.cc) leaves
  // non-finite numbers to this one, which names them as such.
  for (const std::string v : {"inf", "1e999"}) {
    const Run r = timed("fit --gpu-memory-utilization " + v);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Contains("--gpu-memory-utilization: '" + v + "' is not a finite number"));
  }
  // A flag without a range check: only the finite check stands between NaN and the run.
  const Run b = timed("simulate --arrival gamma --burstiness nan --rate 1 --requests 5");
  CHECK(b.status == 2);
  CHECK_THAT(b.err, Contains("--burstiness: 'nan' is not a finite number"));
  const Run t = timed("simulate --trace workloads/traces/azure-sample.csv --time-scale nan");
  CHECK(t.status == 2);
  CHECK_THAT(t.err, Contains("--time-scale"));
}

TEST_CASE("cli robustness: an unknown precision is exit 2", "[cli][robust]") {
  for (const std::string args : {"fit --weights fp7", "fit --kv-cache int3", "roofline --weights fp7",
                                 "simulate --weights fp7 --requests 5",
                                 "compare -d '1x h100-sxm fp7' --rate 1 --requests 5",
                                 "plan --cards h100-sxm --weights bf16,fp7 --rate 1 --slo 'ttft_p95<=1s'"}) {
    const Run r = timed(args);
    INFO(args << ": " << r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Contains("unknown precision"));
  }
}

TEST_CASE("cli robustness: numbers that overflowed on the way in are refused with the flag",
          "[cli][robust]") {
  const Run tokens = timed("simulate --input-tokens 1e20 --requests 5");
  CHECK(tokens.status == 2);
  CHECK_THAT(tokens.err, Contains("--input-tokens: '1e+20' is not a number in 0..1000000000 tokens"));
  const Run rate = timed("simulate --rate 1e-300 --requests 5");
  CHECK(rate.status == 2);
  CHECK_THAT(rate.err, Contains("--rate: '1e-300' is not a rate in 1e-06..1e+07 requests/s"));
  const Run dur = timed("simulate --rate 1 --duration 1e300s");
  CHECK(dur.status == 2);
  CHECK_THAT(dur.err, Contains("--duration: '1e+300' is not a number in 0..1000000000 s"));
  Scratch dir("robust");
  const std::string trace = dir.write("t.jsonl",
      "{\"timestamp\": 0, \"input_length\": 9223372036854775807, \"output_length\": 5}\n");
  const Run tr = timed("simulate --trace " + trace);
  CHECK(tr.status == 2);
  CHECK_THAT(tr.err, Contains("t.jsonl:1: field 'input_length': '9223372036854775807' is out of range"));
}

TEST_CASE("cli robustness: runs that ask for too much stop at once, and --allow-large lifts it",
          "[cli][robust]") {
  const Run cards = timed("compare -d '1000000000x h100-sxm' --rate 1 --requests 5", 30);
  CHECK(cards.status == 2);
  CHECK_THAT(cards.err, Contains("1000000000 replicas is more than one run may ask for (at most 1000"));
  CHECK_THAT(cards.err, Contains("pass --allow-large"));
  const Run requests = timed("simulate --rate 100 --requests 2000000000", 30);
  CHECK(requests.status == 2);
  CHECK_THAT(requests.err, Contains("--requests: 2000000000 requests is more than one run may ask for"));
  const Run expected = timed("simulate --rate 10000 --duration 24h", 30);
  CHECK(expected.status == 2);
  CHECK_THAT(expected.err, Contains("--rate x --duration: 864000000 requests"));
  const Run users = timed("simulate --users 10000000 --duration 1min", 30);
  CHECK(users.status == 2);
  CHECK_THAT(users.err, Contains("--users: 10000000 users is more than one run may ask for (at most 1000000"));
  // Lifted deliberately: 1,000,001 users, of whom the first 20 send a request.
  const Run lifted = timed("simulate --users 1000001 --requests 20 --allow-large --json -", 120);
  INFO(lifted.err);
  CHECK(lifted.status == 0);
  CHECK(has(lifted.out, "\"completed\": 20"));
}

TEST_CASE("cli robustness: scenario fields are reported under the file and field, not a flag",
          "[cli][robust]") {
  Scratch dir("robust");
  const std::string s = dir.write("s.yaml", "workload:\n  rate: 1\n  duration: 5 parsecs\n");
  const Run r = timed("simulate " + s);
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Contains("s.yaml: workload.duration: '5 parsecs'"));
  CHECK_FALSE(has(r.err, "--duration"));
  // The same field given as a flag is reported under the flag.
  const Run f = timed("simulate " + s + " --duration '6 parsecs'");
  CHECK_THAT(f.err, Contains("--duration: '6 parsecs'"));
  // A scalar where a mapping belongs: yaml-cpp's "operator[] call on a scalar" before.
  const std::string scalar = dir.write("scalar.yaml", "workload: 5\n");
  const Run sc = timed("simulate " + scalar);
  CHECK(sc.status == 2);
  CHECK_THAT(sc.err, Contains("scalar.yaml: workload: expected a mapping with fields among: users"));
  const std::string list_value = dir.write("list.yaml", "workload: {rate: [1, 2], requests: 5}\n");
  const Run lv = timed("simulate " + list_value);
  CHECK(lv.status == 2);
  CHECK_THAT(lv.err, Contains("list.yaml: workload.rate: expected a single value"));
}

TEST_CASE("cli robustness: --json through a symlink writes its target and keeps the link",
          "[cli][robust]") {
  Scratch dir("robust");
  const std::string target = dir.write("results/fit.json", "");
  const std::string link = dir.file("latest.json");
  std::filesystem::create_symlink(target, link);
  const Run r = timed("fit --json " + link);
  CHECK(r.status == 0);
  CHECK(std::filesystem::is_symlink(std::filesystem::symlink_status(link)));
  CHECK(has(capsim_test::read_all(target), "\"kv_tokens\""));
}
