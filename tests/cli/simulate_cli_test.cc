// `capsim simulate` as a user runs it: the built binary (CAPSIM_BINARY), its stdout, stderr,
// exit status and --json file. Exit status 0 = ran, 2 = bad input with a message naming the flag
// or file:field and what is accepted. Messages are pinned from the code paths that produce them
// (sim/scenario/scenario.cc, sim/cluster/router.cc, sim/workload/trace.cc, CLI11's range check).
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "tests/cli/simulate_cli.h"

namespace {

namespace fs = std::filesystem;
using namespace capsim_test::simulate_cli;

TEST_CASE("simulate cli: the same one-liner twice writes byte-identical JSON", "[cli][simulate]") {
  ScratchDir tmp;
  const std::string a = tmp.file("a.json"), b = tmp.file("b.json"), c = tmp.file("c.json");
  const Run ra = simulate(std::string(kSmall) + " --seed 4 --json '" + a + "'");
  const Run rb = simulate(std::string(kSmall) + " --seed 4 --json '" + b + "'");
  const Run rc = simulate(std::string(kSmall) + " --seed 5 --json '" + c + "'");
  REQUIRE(ra.status == 0);
  REQUIRE(rb.status == 0);
  REQUIRE(rc.status == 0);
  CHECK(ra.err.empty());  // -q: no progress line
  const std::string ja = read_all(a), jb = read_all(b), jc = read_all(c);
  REQUIRE_FALSE(ja.empty());
  CHECK(ja == jb);          // byte for byte
  CHECK(ra.out == rb.out);  // and the printed report too
  CHECK(ja != jc);          // another seed is another run
  const auto j = nlohmann::json::parse(ja);
  CHECK(j.at("completed") == 300);
  CHECK(j.at("failed") == 0);
  CHECK(j.at("seed") == 4);
}

TEST_CASE("simulate cli: --bounded-memory changes only the ITL and step-time percentiles, and says so",
          "[cli][simulate][bounded-memory]") {
  const Run exact = simulate(std::string(kSmall) + " --json -");
  const Run bounded = simulate(std::string(kSmall) + " --bounded-memory --json -");
  REQUIRE(exact.status == 0);
  REQUIRE(bounded.status == 0);
  const auto e = nlohmann::json::parse(exact.out), b = nlohmann::json::parse(bounded.out);
  CHECK_FALSE(e.at("capsim").contains("bounded_memory"));
  REQUIRE(b.at("capsim").contains("bounded_memory"));
  CHECK(b.at("capsim").at("bounded_memory").at("percentile_max_relative_error") == std::ldexp(1.0, -10));
  // Per-request latencies are kept exactly: every TTFT/TPOT/E2E key equal bit for bit.
  for (const char* k : {"mean_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_e2el_ms", "mean_itl_ms", "completed"}) {
    INFO(k);
    CHECK(b.at(k) == e.at(k));
  }
  // ITL percentiles from the histogram: within one bucket, 2^-10 of the value.
  for (const char* k : {"median_itl_ms", "p90_itl_ms", "p99_itl_ms"}) {
    INFO(k);
    const double x = e.at(k), y = b.at(k);
    CHECK(std::abs(y - x) <= std::ldexp(x, -10));
  }
  // The HTML report says it too.
  ScratchDir tmp;
  const std::string page = tmp.file("r.html");
  REQUIRE(simulate(std::string(kSmall) + " --bounded-memory --report '" + page + "'").status == 0);
  CHECK(has(read_all(page), "--bounded-memory: the ITL and step-time percentiles come from histograms, within 0.098% of the exact values"));
  // Decisions rest on exact percentiles: plan does not take the flag.
  const std::string cmd = "cd '" + std::string(CAPSIM_DATA_DIR) + "' && '" + std::string(CAPSIM_BINARY) +
                          "' plan --bounded-memory --model llama-3.1-8b >/dev/null 2>'" + tmp.file("err") + "'";
  const int raw = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(raw));
  CHECK(WEXITSTATUS(raw) != 0);
  CHECK(has(read_all(tmp.file("err")), "--bounded-memory"));
}

TEST_CASE("simulate cli: --json - prints only JSON on stdout", "[cli][simulate]") {
  const Run r = simulate(std::string(kSmall) + " --json -");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);  // throws (fails the test) if anything else is there
  CHECK(j.at("completed") == 300);
}

TEST_CASE("simulate cli: the scenario files in workloads/ run", "[cli][simulate][scenario]") {
  // Every workloads/*.yaml, as shipped (each runs in about a second or two).
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(std::string(CAPSIM_DATA_DIR) + "/workloads")) {
    // assumptions.yaml is capsim check's input (docs/ci.md), not a scenario.
    if (e.path().extension() == ".yaml" && e.path().filename() != "assumptions.yaml") {
      files.push_back(e.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  REQUIRE_FALSE(files.empty());
  ScratchDir tmp;
  for (const std::string& f : files) {
    const std::string json = tmp.file("out.json");
    const Run r = simulate("-q '" + f + "' --json '" + json + "'");
    INFO(f << "\n" << r.err);
    CHECK(r.status == 0);
    if (r.status != 0) continue;
    const auto j = nlohmann::json::parse(read_all(json));
    CHECK(j.at("completed").get<long long>() > 0);
    CHECK(j.at("scenario") == fs::path(f).stem().string());  // each file names itself
  }
}

TEST_CASE("simulate cli: one scenario file, and flags override its fields", "[cli][simulate][scenario]") {
  const std::string f = std::string(CAPSIM_DATA_DIR) + "/workloads/chat-8b-1x-h100.yaml";
  REQUIRE(fs::exists(f));
  ScratchDir tmp;
  const std::string json = tmp.file("o.json");
  // --requests 50 caps the closed loop; --seed replaces the file's seed 2.
  const Run r = simulate("-q '" + f + "' --requests 50 --seed 9 --json '" + json + "'");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(read_all(json));
  CHECK(j.at("scenario") == "chat-8b-1x-h100");
  CHECK(j.at("seed") == 9);
  CHECK(j.at("completed").get<long long>() <= 50);
  CHECK(has(r.out, "capsim simulate: chat-8b-1x-h100"));
}

TEST_CASE("simulate cli: a scenario written here, with two card types", "[cli][simulate][scenario]") {
  ScratchDir tmp;
  const std::string yaml = tmp.write("mixed.yaml",
                                     "name: mixed-test\n"
                                     "model: llama-3.1-8b\n"
                                     "deployment:\n"
                                     "  - {card: h100-sxm, replicas: 1}\n"
                                     "  - {card: rtx-4090, replicas: 1}\n"
                                     "router: round-robin\n"
                                     "workload: {rate: 4, requests: 100, prompt_tokens: 256, output_tokens: 32}\n"
                                     "slo: {ttft_p95: 1s}\n"
                                     "seed: 3\n");
  const std::string json = tmp.file("m.json");
  const Run r = simulate("-q '" + yaml + "' --json '" + json + "'");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(read_all(json));
  CHECK(j.at("completed") == 100);
  REQUIRE(j.at("deployment").size() == 2);
  CHECK(j.at("deployment")[1].at("card") == "rtx-4090");
  const auto& reps = j.at("capsim").at("replicas");
  REQUIRE(reps.size() == 2);
  CHECK(reps[0].at("card") == "h100-sxm");
  CHECK(reps[1].at("card") == "rtx-4090");
  CHECK(reps[1].at("kv_tokens").get<long long>() < reps[0].at("kv_tokens").get<long long>());
  CHECK(j.at("capsim").at("slos").size() == 1);
}

// Each replica group of a mixed cluster is reported with its own KV capacity.
TEST_CASE("simulate cli: the report shows each card group's own KV capacity",
          "[cli][simulate][scenario]") {
  ScratchDir tmp;
  const std::string yaml = tmp.write("mixed.yaml",
                                     "name: mixed-kv\n"
                                     "model: llama-3.1-8b\n"
                                     "deployment:\n"
                                     "  - {card: h100-sxm, replicas: 1}\n"
                                     "  - {card: rtx-4090, replicas: 1}\n"
                                     "workload: {rate: 4, requests: 20, prompt_tokens: 256, output_tokens: 8}\n");
  const std::string json = tmp.file("m.json");
  const Run r = simulate("-q '" + yaml + "' --json '" + json + "'");
  REQUIRE(r.status == 0);
  const auto reps = nlohmann::json::parse(read_all(json)).at("capsim").at("replicas");
  const std::string rtx = "1 x rtx-4090 (bf16, KV bf16, " + std::to_string(reps[1].at("kv_tokens").get<long long>()) +
                          " KV tokens/replica)";
  INFO(r.out);
  CHECK(has(r.out, rtx));
}

// ---------------------------------------------------------------------------------------------
// Bad input (check_refused, tests/cli/simulate_cli.h).

TEST_CASE("simulate cli: bad input exits 2 with a pinned message", "[cli][simulate][errors]") {
  SECTION("--rate -1") {
    // parse_number("--rate") refuses negatives before the > 0 check.
    check_refused(simulate("-q --rate -1 --requests 10"),
                  "capsim: error: --rate: '-1' is negative; expected a number >= 0\n");
  }
  SECTION("--rate 0") {
    check_refused(simulate("-q --rate 0 --requests 10"),
                  "capsim: error: --rate: '0' is not a rate > 0 (requests/s)\n");
  }
  SECTION("a zero stage rate") {
    check_refused(simulate("-q --rate 5@10s,0 --requests 10"),
                  "capsim: error: --rate: '0' is not a rate > 0 (requests/s)\n");
  }
  SECTION("--users 0") {
    // CLI11's range check on the flag (CLI11 2.x wording).
    const Run r = simulate("-q --users 0 --requests 10");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "--users: Value 0 not in range 1 to 10000000\nRun with --help for more information.\n");
  }
  SECTION("an unknown --router") {
    check_refused(simulate("-q --rate 5 --requests 10 --router random"),
                  "capsim: error: --router: unknown router 'random'; accepted: round-robin, "
                  "least-outstanding, prefix-aware, size-aware\n");
  }
  SECTION("an unknown --scheduler") {
    check_refused(simulate("-q --rate 5 --requests 10 --scheduler fifo"),
                  "capsim: error: --scheduler: unknown scheduler policy 'fifo'");
  }
  SECTION("a trace with a malformed line") {
    ScratchDir tmp;
    const std::string t = tmp.write("bad.csv",
                                    "arrival_s,input_tokens,output_tokens\n"
                                    "0.0,100,10\n"
                                    "0.5,abc,10\n");
    check_refused(simulate("-q --trace '" + t + "'"),
                  "capsim: error: " + t + ":3: column 'input_tokens': 'abc' is not a non-negative integer\n");
  }
  SECTION("a missing trace file") {
    check_refused(simulate("-q --trace /nonexistent/trace.csv"),
                  "capsim: error: /nonexistent/trace.csv: no such trace file\n");
  }
  SECTION("a malformed scenario YAML") {
    ScratchDir tmp;
    const std::string y = tmp.write("bad.yaml", "name: x\nworkload: {rate: 5\n");
    const Run r = simulate("-q '" + y + "'");
    check_refused(r, "capsim: error: " + y + ":");  // file:line:column from yaml-cpp
    check_refused(r, "malformed YAML");
  }
  SECTION("an unknown scenario field, top level and nested") {
    ScratchDir tmp;
    const std::string y1 = tmp.write("top.yaml", "name: x\ncolour: red\n");
    check_refused(simulate("-q '" + y1 + "'"),
                  "capsim: error: " + y1 +
                      ": unknown field 'colour'; accepted: name, description, model, deployment, "
                      "engine, router, workload, slo, seed, references, notes, serving, disaggregation, speculative, lora\n");
    const std::string y2 = tmp.write("nested.yaml", "name: x\nworkload:\n  rate: 5\n  requets: 20\n");
    check_refused(simulate("-q '" + y2 + "'"),
                  "capsim: error: " + y2 + ": workload: unknown field 'requets'; accepted: users,");
  }
  SECTION("--slo with = instead of <=") {
    // '<' is accepted as people write it ('ttft_p95 < 1s', tests/cli/scenario_test.cc); '=' is not a bound.
    check_refused(simulate("-q --rate 5 --requests 10 --slo 'ttft_p95=1s'"),
                  "capsim: error: --slo: 'ttft_p95=1s' cannot be parsed; accepted: METRIC_STAT<=TIME "
                  "with METRIC ttft, tpot, itl, e2el and STAT mean, p50 (median), p90, p95, p99, spaces "
                  "allowed (e.g. ttft_p95<=1s, 'tpot p99 <= 100 ms', 'ttft_p95 <= 1 sec')\n");
  }
  SECTION("--warmup longer than --duration") {
    check_refused(simulate("-q --rate 5 --duration 5min --warmup 10min"),
                  "capsim: error: --warmup: 10min is not shorter than --duration 5min\n");
  }
  SECTION("a closed loop with no end") {
    check_refused(simulate("-q --users 10"),
                  "capsim: error: --users/--concurrency: give --duration D or --requests N (closed "
                  "loops never end)\n");
  }
  SECTION("a missing scenario file") {
    const Run r = simulate("-q /nonexistent/scenario.yaml");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(has(r.err, "/nonexistent/scenario.yaml"));
  }
}

}  // namespace
