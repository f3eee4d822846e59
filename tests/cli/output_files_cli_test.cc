// Output files through the command line (issue #35 item 10, #33): every output a command line
// names is checked before the command does any work, and a command's outputs are written all or
// none. Before, `--json /nonexistent/x.json` ran the whole simulation first, `--json a.json
// --report /nonexistent/r.html` left a.json behind, `check --junit /nonexistent/j.xml` printed
// its verdict and then failed, and `--json X --report X` kept only the report.
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <string>

#include "tests/check/cli_run.h"
#include "tests/support/skip.h"

namespace {

namespace fs = std::filesystem;
using capsim_test::has;
using capsim_test::Run;
using capsim_test::run_capsim;
using capsim_test::Scratch;

std::string q(const std::string& path) { return "'" + path + "'"; }

std::set<std::string> entries(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// A small open-loop scenario (a fraction of a second to simulate) and assertions it meets
// whatever the run's length (a cost and no preemption: no SLO left INCONCLUSIVE).
const char* kScenario =
    "name: outputs-test\n"
    "model: llama-3.1-8b\n"
    "deployment: {card: h100-sxm, tp: 1, replicas: 1}\n"
    "workload:\n"
    "  rate: 2\n"
    "  duration: 30s\n"
    "  prompt_tokens: 256\n"
    "  output_tokens: 32\n"
    "seed: 3\n";
const char* kHolds =
    "assertions:\n"
    "  - name: holds\n"
    "    scenario: s.yaml\n"
    "    expect:\n"
    "      max_cost_usd_per_hour: 100\n"
    "      no_preemption: true\n";

const std::string kMissing = "/nonexistent/x.out";

std::string missing_folder(const std::string& flag) {
  return "capsim: error: " + flag + ": cannot write " + kMissing + ": folder /nonexistent does not exist\n";
}

}  // namespace

TEST_CASE("outputs: a file in a missing folder is refused before the simulation runs", "[cli][outputs]") {
  REQUIRE_FALSE(fs::exists("/nonexistent"));
  // Long enough that a run would show: the report table on stdout.
  const Run r = run_capsim("simulate -q --model llama-3.1-8b --card h100-sxm --rate 5 --requests 2000 --json " + kMissing);
  CHECK(r.status == 2);
  CHECK(r.err == missing_folder("--json"));
  CHECK(r.out.empty());  // no result table: nothing was simulated
}

TEST_CASE("outputs: every command checks its output files before its work", "[cli][outputs]") {
  REQUIRE_FALSE(fs::exists("/nonexistent"));
  // Inputs that do not exist either: the outputs are checked first, so the message is theirs.
  const std::pair<const char*, const char*> cases[] = {
      {"fit --model llama-3.1-8b --card h100-sxm", "--json"},
      {"roofline --model llama-3.1-8b --card h100-sxm", "--json"},
      {"list cards", "--json"},
      {"simulate -q -n 5 --rate 1", "--json"},
      {"simulate -q -n 5 --rate 1", "--report"},
      {"simulate -q -n 5 --rate 1", "--plot"},
      {"plan -q --model llama-3.1-8b --rate 1 --cards h100-sxm", "--json"},
      {"plan -q --model llama-3.1-8b --rate 1 --cards h100-sxm", "--report"},
      {"capacity -q --model llama-3.1-8b --card h100-sxm --rate 1", "--plot"},
      {"compare -q -d '1x h100-sxm' -d '1x a100-80gb-sxm'", "--report"},
      {"finetune --model llama-3.1-8b --cards h100-sxm", "--json"},
      {"batch-serve --model bert-base-uncased --card t4 --rate 10", "--json"},
      {"diff /nonexistent/a.json /nonexistent/b.json", "--json"},
      {"sweep /nonexistent/s.yaml", "--csv"},
      {"merge /nonexistent/shard.json", "--report"},
      {"calibrate fit /nonexistent/h100.json --card h100-sxm", "--out"},
      {"calibrate compare /nonexistent/steps.csv", "--json"},
      {"check /nonexistent/assumptions.yaml", "--junit"},
  };
  for (const auto& [command, flag] : cases) {
    const std::string args = std::string(command) + " " + flag + " " + kMissing;
    INFO(args);
    const Run r = run_capsim(args);
    CHECK(r.status == 2);
    CHECK(r.err == missing_folder(flag));
    CHECK(r.out.empty());
  }
}

TEST_CASE("outputs: one bad output leaves no other behind", "[cli][outputs]") {
  Scratch dir("outputs");
  const std::string json = dir.file("a.json");
  const Run r = run_capsim("simulate -q -n 50 --rate 1 --json " + q(json) + " --report /nonexistent/r.html");
  CHECK(r.status == 2);
  CHECK(r.err == "capsim: error: --report: cannot write /nonexistent/r.html: folder /nonexistent does not exist\n");
  CHECK(r.out.empty());
  CHECK_FALSE(fs::exists(json));
  CHECK(entries(dir.path()).empty());
}

TEST_CASE("outputs: check refuses an unwritable --junit before deciding anything", "[cli][outputs]") {
  Scratch dir("outputs");
  dir.write("s.yaml", kScenario);
  const std::string file = dir.write("a.yaml", kHolds);
  const Run r = run_capsim("check -q " + q(file) + " --junit /nonexistent/j.xml");
  CHECK(r.status == 2);
  CHECK(r.err == "capsim: error: --junit: cannot write /nonexistent/j.xml: folder /nonexistent does not exist\n");
  CHECK_FALSE(has(r.out, "checks hold"));
  CHECK(r.out.empty());
  // The same file holds when the JUnit file can be written (the refusal is the output's alone).
  const Run ok = run_capsim("check -q " + q(file) + " --junit " + q(dir.file("j.xml")));
  CHECK(ok.status == 0);
  CHECK(has(ok.out, "all 2 checks hold"));
  CHECK(fs::is_regular_file(dir.file("j.xml")));
}

TEST_CASE("outputs: two outputs naming one file are refused", "[cli][outputs]") {
  Scratch dir("outputs");
  const std::string x = dir.file("x");
  const std::string both = "capsim: error: --report: cannot write " + x + ": --json writes the same file (" + x +
                           "); each output needs a file of its own\n";
  // Before, the run went ahead and X held the report alone.
  const Run same = run_capsim("simulate -q -n 50 --rate 1 --json " + q(x) + " --report " + q(x));
  CHECK(same.status == 2);
  CHECK(same.err == both);
  CHECK(same.out.empty());
  CHECK_FALSE(fs::exists(x));

  // The same file by another name: a path through "." and a link are resolved before comparing.
  const std::string dotted = dir.path() + "/./x";
  const Run via_dot = run_capsim("simulate -q -n 50 --rate 1 --json " + q(x) + " --report " + q(dotted));
  CHECK(via_dot.status == 2);
  CHECK(via_dot.err == "capsim: error: --report: cannot write " + dotted + ": --json writes the same file (" + x +
                           "); each output needs a file of its own\n");
  fs::create_symlink(x, dir.file("link"));
  const Run via_link = run_capsim("sweep workloads/sweeps/chat-grid.yaml --json " + q(dir.file("link")) + " --csv " + q(x));
  CHECK(via_link.status == 2);
  CHECK(via_link.err == "capsim: error: --csv: cannot write " + x + ": --json writes the same file (" +
                            dir.file("link") + "); each output needs a file of its own\n");
  CHECK(via_link.out.empty());  // no sweep ran
  CHECK(entries(dir.path()) == std::set<std::string>{"link"});

  // Stdout once: two outputs on it would run into each other.
  const Run twice = run_capsim("check /nonexistent/a.yaml --json - --junit -");
  CHECK(twice.status == 2);
  CHECK(twice.err ==
        "capsim: error: --json: cannot write - (stdout): --junit writes there too; each output needs a file of its own\n");
}

TEST_CASE("outputs: a write that fails after the run leaves none of the command's files", "[cli][outputs]") {
  // /dev/full takes the open and refuses the write (ENOSPC): it passes the check before the run,
  // so this is the failure the check cannot foresee. Before, a.json was written first and stayed.
  if (!fs::exists("/dev/full")) {
    CAPSIM_SKIP("no /dev/full on this system");
  }
  Scratch dir("outputs");
  dir.write("s.yaml", kScenario);
  const std::string file = dir.write("a.yaml", kHolds);
  const std::string json = dir.file("a.json");
  const Run r = run_capsim("check -q " + q(file) + " --json " + q(json) + " --junit /dev/full");
  CHECK(r.status == 2);
  CHECK(r.err == "capsim: error: --junit: cannot write /dev/full: No space left on device\n");
  CHECK(has(r.out, "all 2 checks hold"));  // the run itself went through
  CHECK_FALSE(fs::exists(json));
  CHECK(entries(dir.path()) == std::set<std::string>{"a.yaml", "s.yaml"});  // no temporary either
}
