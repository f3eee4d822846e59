// HTML reports (--report) and charts (--plot), drawn by gnuplot: one self-contained page per
// command, offline (no URL, nothing loaded), its charts inline SVG; the page opened in headless
// Chromium renders every chart with no console error; a missing gnuplot is a clear error that
// names the package and leaves no file behind. Also the sampled KV/queue timeline the charts use.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"
#include "sim/report/plot.h"
#include "tests/check/cli_run.h"
#include "tests/support/skip.h"

using capsim_test::run_capsim;
using capsim_test::has;
using capsim_test::read_all;
using capsim_test::Run;
using capsim_test::Scratch;

namespace {

const char* kSmall =
    "-q --model llama-3.1-8b --card h100-sxm --rate 6 --requests 400 "
    "--input-tokens lognormal:300:2000 --output-tokens uniform:10:200 --slo 'ttft_p95<=1s' --seed 3";

std::string q(const std::string& path) { return "'" + path + "'"; }

int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (auto p = text.find(part); p != std::string::npos; p = text.find(part, p + 1)) ++n;
  return n;
}

// A page is self-contained: no URL anywhere, no external script, style sheet, image or font.
void check_self_contained(const std::string& html, int charts) {
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(count(html, "<figure class=\"plot\"") == charts);
  CHECK(count(html, "<svg") == charts);
  CHECK(count(html, "</svg>") == charts);
  CHECK_FALSE(has(html, "http://"));
  CHECK_FALSE(has(html, "https://"));
  CHECK_FALSE(has(html, "src="));
  CHECK_FALSE(has(html, "<link"));
  CHECK_FALSE(has(html, "@import"));
  CHECK_FALSE(has(html, "<?xml"));  // the SVG prologs are stripped
  // Each chart's element ids carry its own prefix (c1-, c2-, ...), so references stay inside it.
  std::regex id_re(R"re(\bid=['"]([^'"]+)['"])re");
  std::set<std::string> prefixes;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), id_re); it != std::sregex_iterator(); ++it) {
    const std::string id = (*it)[1].str();
    INFO(id);
    REQUIRE(std::regex_match(id, std::regex("c[0-9]+-.+")));
    prefixes.insert(id.substr(0, id.find('-')));
  }
  CHECK(static_cast<int>(prefixes.size()) == charts);
}

std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    const std::string cmd = std::string("command -v ") + name + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return name;
  }
  return "";
}

// Opens `page` in headless Chromium; returns the DOM after load (stdout) and the log (stderr).
Run open_in_chromium(const std::string& chromium, const std::string& page) {
  Scratch profile("chromium");
  Scratch out("chromium_out");
  const std::string cmd =
      "timeout 120 " + chromium +
      " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking"
      " --disable-component-update --disable-sync --user-data-dir=" + q(profile.path()) +
      " --enable-logging=stderr --v=0 --dump-dom " +
      q("file://" + std::filesystem::absolute(page).string()) + " >" + q(out.file("dom")) + " 2>" +
      q(out.file("log"));
  const int raw = std::system(cmd.c_str());
  Run r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_all(out.file("dom"));
  r.err = read_all(out.file("log"));
  return r;
}

// The page's own check (sim/report/html.cc) ran and found every chart drawn, and the console
// shows nothing else: Chromium logs every console message, errors and uncaught exceptions
// included, as "INFO:CONSOLE(...)" lines, so the page's one summary line must be the only one.
// Returns what is wrong, or "" when the page rendered as it should.
std::string render_problem(const Run& r, int charts) {
  if (r.status != 0) return "chromium exited with status " + std::to_string(r.status);
  if (!has(r.out, "data-plots=\"ok " + std::to_string(charts) + "\"")) return "the page's check did not pass";
  if (count(r.out, "<svg") != charts) return "not " + std::to_string(charts) + " <svg> in the DOM";
  if (has(r.err, "Uncaught")) return "an uncaught exception";
  const std::string summary = "\"capsim-report: " + std::to_string(charts) + " plots, 0 empty\"";
  int console = 0;
  std::stringstream lines(r.err);
  for (std::string line; std::getline(lines, line);) {
    if (!has(line, "CONSOLE")) continue;
    ++console;
    if (!has(line, summary)) return "console: " + line;
  }
  return console == 1 ? "" : std::to_string(console) + " console lines, expected the summary alone";
}

void check_rendered(const Run& r, int charts) {
  INFO(r.err);
  CHECK(render_problem(r, charts) == "");
}

}  // namespace

TEST_CASE("report: simulate --report writes one self-contained page with three charts", "[report]") {
  Scratch tmp("report");
  const std::string page = tmp.file("sim.html"), json = tmp.file("sim.json");
  const Run r = run_capsim(std::string("simulate ") + kSmall + " --report " + q(page) + " --json " + q(json));
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string html = read_all(page);
  check_self_contained(html, 3);
  CHECK(has(html, "<title>capsim simulate: llama-3.1-8b on 1 x h100-sxm (command-line)</title>"));
  CHECK(has(html, "Latency CDF"));
  CHECK(has(html, "KV-cache use over time"));
  CHECK(has(html, "Requests waiting and running over time"));
  CHECK(has(html, "<table>"));
  CHECK(has(html, "ttft_p95"));
  CHECK(std::distance(std::filesystem::directory_iterator(tmp.path()), std::filesystem::directory_iterator()) ==
        2);  // the page and the JSON: no temporary left
}

TEST_CASE("report: the HTML reports render their charts in headless Chromium with no console error "
          "(requires chromium)",
          "[report][chromium]") {
  const std::string chromium = find_chromium();
  if (chromium.empty()) {
    CAPSIM_SKIP("chromium is not installed: the report is not rendered (scripts/setup.sh installs it for CI)");
  }
  Scratch tmp("render");
  const std::string sim = tmp.file("sim.html");
  REQUIRE(run_capsim(std::string("simulate ") + kSmall + " --report " + q(sim)).status == 0);
  check_rendered(open_in_chromium(chromium, sim), 3);
  // The detector itself: an emptied chart and a script error are caught.
  std::string broken = read_all(sim);
  const auto first = broken.find("<svg");
  broken.replace(first, broken.find("</svg>", first) + 6 - first, "<svg viewBox='0 0 10 10'></svg>");
  broken.replace(broken.find("<script>"), 8, "<script>undefined_function();</script><script>");
  const std::string broken_page = tmp.write("broken.html", broken);
  const std::string why = render_problem(open_in_chromium(chromium, broken_page), 3);
  CHECK(why == "the page's check did not pass");

  tmp.write("s.yaml",
            "name: render\nmodel: llama-3.1-8b\ndeployment: {card: h100-sxm}\n"
            "workload: {rate: 4, requests: 200, prompt_tokens: 256, output_tokens: 64}\nseed: 1\n");
  const std::string file = tmp.write("a.yaml",
                                     "assertions:\n"
                                     "  - name: fast\n    scenario: s.yaml\n    expect: {slo: {ttft_p95: 5s}}\n"
                                     "  - name: too-fast\n    scenario: s.yaml\n    expect: {slo: {tpot_p95: 1ms}}\n");
  const std::string check = tmp.file("check.html");
  REQUIRE(run_capsim("check -q " + q(file) + " --report " + q(check)).status == 1);
  // The margin chart, and each simulated assertion's three.
  check_self_contained(read_all(check), 7);
  check_rendered(open_in_chromium(chromium, check), 7);
}

TEST_CASE("report: capacity, compare and plan reports, --plot svg and png", "[report]") {
  Scratch tmp("reports");
  const std::string scenario =
      " -q --model llama-3.1-8b --rate 2 --requests 200 --input-tokens 256 --output-tokens 64 "
      "--slo 'ttft_p95<=500ms' --seed 2";
  SECTION("capacity: the curve as a page, as svg and as png") {
    const std::string page = tmp.file("cap.html"), svg = tmp.file("cap.svg"), png = tmp.file("cap.png");
    // capacity varies a rate over a duration (a fixed request count would not sustain the load).
    const Run r = run_capsim("capacity --card h100-sxm --points 4 --duration 1min" + scenario + " --report " + q(page) + " --plot " + q(svg));
    INFO(r.err);
    REQUIRE(r.status == 0);
    check_self_contained(read_all(page), 2);
    CHECK(has(read_all(page), "Latency percentiles against load"));
    const std::string s = read_all(svg);
    CHECK(s.rfind("<?xml", 0) == 0);  // a standalone file keeps its prolog
    CHECK(has(s, "<svg"));
    const Run p = run_capsim("capacity --card h100-sxm --points 4 --duration 1min" + scenario + " --plot " + q(png));
    REQUIRE(p.status == 0);
    CHECK(read_all(png).rfind("\x89PNG\r\n", 0) == 0);
  }
  SECTION("compare: cost and TTFT bar charts") {
    const std::string page = tmp.file("cmp.html");
    const Run r = run_capsim("compare" + scenario + " --deployment '1x h100-sxm' --deployment '1x a100-80gb-sxm' --report " +
                         q(page));
    INFO(r.err);
    REQUIRE(r.status == 0);
    const std::string html = read_all(page);
    check_self_contained(html, 3);
    CHECK(has(html, "Cost per deployment"));
    CHECK(has(html, "TPOT p95 per deployment"));  // TPOT as well as TTFT
    // The title names the model, the scenario and the verdict's cards and replicas.
    CHECK(has(html, "<title>capsim compare: llama-3.1-8b, command-line (verdict 1x "));
  }
  SECTION("plan: cost per option") {
    const std::string page = tmp.file("plan.html");
    const Run r = run_capsim("plan" + scenario + " --cards h100-sxm,a100-80gb-sxm --tp 1 --report " + q(page));
    INFO(r.err);
    REQUIRE(r.status == 0);
    const std::string html = read_all(page);
    check_self_contained(html, 2);
    CHECK(has(html, "Cost per option"));
    CHECK(has(html, "Latency against cost"));
    CHECK(has(html, "<title>capsim plan: llama-3.1-8b for command-line (best 1 x "));
  }
  SECTION("--plot with another extension is bad input") {
    const Run r = run_capsim(std::string("simulate ") + kSmall + " --plot " + q(tmp.file("x.pdf")));
    CHECK(r.status == 2);
    CHECK(r.err == "capsim: error: --plot: '" + tmp.file("x.pdf") + "' must end in .svg or .png (the chart's format)\n");
  }
}

TEST_CASE("report: without gnuplot, --report and --plot fail naming the package, and write nothing",
          "[report][errors]") {
  Scratch tmp("nognuplot");
  const std::string page = tmp.file("r.html"), json = tmp.file("r.json");
  const Run r = run_capsim(std::string("simulate ") + kSmall + " --json " + q(json) + " --report " + q(page),
                       "PATH=/nonexistent");
  CHECK(r.status == 2);
  CHECK(r.err ==
        "capsim: error: --report: gnuplot is not installed (not found on PATH); install the Debian package "
        "gnuplot-nox (apt-get install gnuplot-nox)\n");
  CHECK_FALSE(std::filesystem::exists(page));
  CHECK_FALSE(std::filesystem::exists(json));
  const Run p = run_capsim(std::string("simulate ") + kSmall + " --plot " + q(tmp.file("p.svg")), "PATH=/nonexistent");
  CHECK(p.status == 2);
  CHECK(has(p.err, "--plot: gnuplot is not installed (not found on PATH); install the Debian package gnuplot-nox"));
  CHECK_FALSE(std::filesystem::exists(tmp.file("p.svg")));
}

TEST_CASE("report: the simulation samples KV use and queues at most once per simulated second",
          "[report][timeline]") {
  capsim::scenario::ScenarioSpec s;
  s.deployment.model = "llama-3.1-8b";
  s.deployment.card = "h100-sxm";
  s.replicas = 2;
  s.rate = "20";
  s.requests = 3000;
  s.input_tokens = "lognormal:500:3000";
  s.output_tokens = "uniform:20:300";
  capsim::scenario::BuiltScenario b = capsim::scenario::build_scenario(s);
  const capsim::SimulationResult r = capsim::simulate(b.config, *b.workload);
  REQUIRE(r.replicas.size() == 2);
  for (const auto& rep : r.replicas) {
    const auto& t = rep.stats.timeline;
    REQUIRE(t.size() >= 10);
    CHECK(t.size() <= capsim::ReplicaStats::kMaxTimelineSamples);
    for (std::size_t i = 1; i < t.size(); ++i) {
      // One sample per simulated second at most: consecutive samples fall in different seconds.
      CHECK(std::floor(t[i].time_s) > std::floor(t[i - 1].time_s));
      CHECK(t[i].kv_used_fraction >= 0);
      CHECK(t[i].kv_used_fraction <= 1);
      CHECK(t[i].running >= 0);
      CHECK(t[i].waiting >= 0);
    }
  }
  // The cluster timeline: a point per simulated second, KV averaged, requests summed.
  REQUIRE(r.timeline.size() == static_cast<std::size_t>(r.simulated_s) + 1);
  double peak_running = 0;
  for (std::size_t k = 0; k < r.timeline.size(); ++k) {
    CHECK(r.timeline[k].time_s == Approx(static_cast<double>(k)));
    CHECK(r.timeline[k].kv_used_fraction <= 1);
    peak_running = std::max(peak_running, r.timeline[k].running);
  }
  CHECK(peak_running > 0);
  CHECK(peak_running <= static_cast<double>(r.max_concurrent_requests));
}

TEST_CASE("report: gnuplot scripts quote titles and skip points a log axis cannot show", "[report]") {
  capsim::plot::Chart c;
  c.title = "it's a 'test'";
  c.logx = true;
  c.series.push_back({"a", {0, 1, 10}, {0.1, 0.5, 1}, "lines", false});
  const std::string g = capsim::plot::gnuplot_script(c);
  CHECK(has(g, "set title 'it''s a ''test'''"));
  CHECK(has(g, "set logscale x"));
  CHECK_FALSE(has(g, "\n0 0.1\n"));  // x = 0 cannot be on a log axis
  CHECK(has(g, "\n1 0.5\n10 1\n"));
  capsim::plot::Chart empty;
  empty.title = "nothing";
  CHECK(has(capsim::plot::gnuplot_script(empty), "set label 'no data'"));
}
