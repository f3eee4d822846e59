// Scenario flags and SLO strings (sim/flags/scenario_flags.h over sim/scenario/scenario.h): SLOs
// written as people write them, and command-line flags over a scenario file, where a new card
// brings its own defaults.
#include "sim/flags/scenario_flags.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "sim/core/error.h"

namespace {

using capsim::scenario::parse_slo_expression;
using capsim::flags::ScenarioFlags;
using capsim::scenario::ScenarioSpec;

const std::string kChatbot = std::string(CAPSIM_DATA_DIR) + "/workloads/chatbot-500-users.yaml";

ScenarioSpec resolve(const std::vector<std::string>& args, const std::string& file) {
  CLI::App app("test");
  ScenarioFlags flags;
  flags.add_to(app);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a reversed vector
  app.parse(reversed);
  return flags.resolve(file);
}

}  // namespace

TEST_CASE("slo: spaces, upper case and long unit names as people write them", "[cli][slo]") {
  // Each is ttft_p95 <= 1 s; before, 'ttft_p95 <= 1 s' was refused ("'ttft_p95 ' is not an SLO").
  for (const std::string text : {"ttft_p95<=1s", "ttft_p95 <= 1 s", "TTFT p95 <= 1s", "ttft-p95 <= 1 sec",
                                 "ttft_p95 <= 1000 ms", " ttft_p95<=1 second ", "ttft_p95 < 1s",
                                 "ttft_p95 <= 1000 msec"}) {
    INFO(text);
    const auto s = parse_slo_expression(text, "--slo");
    CHECK(s.metric == "ttft");
    CHECK(s.statistic == "p95");
    CHECK(s.seconds == Approx(1.0));
  }
  const auto m = parse_slo_expression("e2e median <= 20 s", "--slo");
  CHECK(m.metric == "e2el");
  CHECK(m.statistic == "p50");
  CHECK(m.seconds == 20);
  // Still refused, with the accepted forms: an unknown metric, a missing unit, no comparison.
  const auto refused = [](const std::string& t) {
    try {
      parse_slo_expression(t, "--slo");
    } catch (const capsim::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(refused("latency_p95 <= 1s").find("accepted: METRIC_STAT<=TIME") != std::string::npos);
  CHECK(refused("ttft_p95 <= 1").find("has no unit") != std::string::npos);
  CHECK(refused("ttft_p95 = 1s").find("cannot be parsed") != std::string::npos);
}

TEST_CASE("flags over a scenario file: a new card brings its own 16-bit type", "[cli][scenario]") {
  // chatbot-500-users.yaml pins weights bf16 and kv_cache bf16 (the H100's defaults). A T4 has no
  // bf16: `--card t4 --weights fp16` used to fail on the file's kv_cache bf16. The KV cache now
  // follows the card (fp16), since the file pinned only the old card's default.
  const ScenarioSpec s = resolve({"--card", "t4", "--weights", "fp16"}, kChatbot);
  const capsim::Deployment d = s.deployment.resolve();
  CHECK(d.card.name == "t4");
  CHECK(d.weights == capsim::Precision::kFp16);
  CHECK(d.kv_cache == capsim::Precision::kFp16);
  // vLLM's limits follow the card too: a 16 GB T4 gets 2048 tokens / 256 sequences.
  CHECK(d.limits.max_num_batched_tokens == 2048);
  CHECK(d.limits.max_num_seqs == 256);
  // --card alone: weights follow the card as well.
  CHECK(resolve({"--card", "t4"}, kChatbot).deployment.resolve().weights == capsim::Precision::kFp16);
  // A KV precision given on the command line is kept, and validated against the new card.
  CHECK(resolve({"--card", "l4", "--kv-cache", "fp8"}, kChatbot).deployment.resolve().kv_cache ==
        capsim::Precision::kFp8);
  // Without --card the file's pins stand.
  CHECK(resolve({}, kChatbot).deployment.resolve().kv_cache == capsim::Precision::kBf16);
}
