// `simulate --replications N --report`: the page shows the verdicts decided over the N seeds (the
// ones the text report says to act on), not only the first seed's.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/check/cli_run.h"

namespace {

using capsim_test::has;
using capsim_test::run_capsim;

}  // namespace

TEST_CASE("simulate --replications --report: the page carries the over-seeds verdicts of the JSON",
          "[answers][report][cli]") {
  capsim_test::Scratch tmp("replications_report");
  // 20 requests/s of 512/128 tokens on one H100 for 2 minutes: a few seconds per seed. The TPOT
  // bound is far above any step time (PASS on every seed); the TTFT bound of 1 us is below any
  // prefill (FAIL on every seed).
  const std::string file = tmp.write("s.yaml",
                                     "name: replications-report\n"
                                     "model: llama-3.1-8b\n"
                                     "deployment: {card: h100-sxm, tp: 1, replicas: 1}\n"
                                     "workload: {rate: 20, duration: 2min, warmup: 20s, prompt_tokens: 512, output_tokens: 128}\n"
                                     "slo: {ttft_p95: 1us, tpot_p95: 10s}\n"
                                     "seed: 3\n");
  const std::string page = tmp.file("r.html"), json = tmp.file("r.json");
  const auto r = run_capsim("simulate " + file + " -q --replications 3 --report '" + page + "' --json '" + json + "'");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string html = capsim_test::read_all(page);
  const auto j = nlohmann::json::parse(capsim_test::read_all(json));
  const auto& stats = j["capsim"]["over_seeds"]["statistics"];
  REQUIRE(stats.size() == 2);
  const auto over = html.find("SLOs over 3 seeds");
  const auto alone = html.find("Seed 3 alone");
  REQUIRE(over != std::string::npos);
  REQUIRE(alone != std::string::npos);
  CHECK(over < alone);
  for (const auto& s : stats) {
    const std::string statistic = s["statistic"], decision = s["decision"];
    INFO(statistic);
    // The row of the over-seeds table (between the two headings) names the JSON's verdict.
    const auto row = html.find("<td>" + statistic + "</td>", over);
    REQUIRE(row < alone);
    const std::string cells = html.substr(row, html.find("</tr>", row) - row);
    CHECK(has(cells, "<td>" + decision + "</td>"));
  }
  CHECK(stats[0]["decision"] == "FAIL");
  CHECK(stats[1]["decision"] == "PASS");
  CHECK(has(html, "<tr class=\"fail\"><td>ttft_p95</td>"));
}
