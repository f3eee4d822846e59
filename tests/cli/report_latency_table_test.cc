// The latency table is one table: `simulate --report` shows the rows the text report prints
// (answers::latency_rows), so the two cannot drift apart again (the HTML once lacked "TTFT:
// front end" and called queueing by another name).
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/check/cli_run.h"

TEST_CASE("report: the HTML latency table has every row of the text report's", "[cli][report]") {
  capsim_test::Scratch dir("latency_table");
  const std::string html_path = dir.file("r.html");
  const capsim_test::Run r =
      capsim_test::run_capsim("simulate -n 50 --rate 1 --model llama-3.1-8b --card h100-sxm --report '" + html_path + "'");
  REQUIRE(r.status == 0);
  std::ifstream in(html_path);
  std::stringstream html;
  html << in.rdbuf();
  // An open-loop run measures TTFT, TPOT, ITL and E2E and splits TTFT into its four parts.
  const std::vector<std::string> rows = {"TTFT",           "TPOT",           "ITL",           "E2E latency",
                                         "TTFT: front end", "TTFT: queueing", "TTFT: prefill", "TTFT: return"};
  for (const std::string& name : rows) {
    INFO(name);
    CHECK(r.out.find("\n  " + name + "  ") != std::string::npos);
    CHECK(html.str().find("<td>" + name + "</td>") != std::string::npos);
  }
}
