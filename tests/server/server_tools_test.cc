// The CLI's tools through the HTTP API (issue 34: every command the CLI has is a library call the
// server can offer): POST /v1/roofline, /v1/kernels and /v1/diff give the bytes
// `capsim roofline|kernels|diff --json -` print for the same input; a bad body is a 400 naming
// the field; no endpoint reads a file a client names (a kernel table, a result's path). Driven
// without the transport, as server_commands_test.cc is (prepare() and the job it returns).
#include <catch2/catch.hpp>
#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/core/cancel.h"
#include "sim/core/run_limits.h"
#include "sim/server/api.h"
#include "tests/check/cli_run.h"

namespace {

using capsim::server::Endpoint;
using capsim::server::HttpError;
using capsim::server::Limits;
using capsim_test::has;
using nlohmann::json;

std::string answer(Endpoint e, const json& body) {
  const capsim::server::Job job = capsim::server::prepare(e, body.dump(), Limits{});
  return job(std::make_shared<std::atomic<bool>>(false), [](const json&) {});
}

// The refusal of `body` at `e`, whether prepare() or the job it returned found it (status 0: none).
HttpError refusal(Endpoint e, const json& body) {
  try {
    (void)answer(e, body);
  } catch (const HttpError& x) {
    return x;
  }
  return HttpError(0, "answered");
}

}  // namespace

TEST_CASE("server and CLI: POST /v1/roofline gives `capsim roofline --json -`'s bytes", "[answers][server][roofline]") {
  const std::string api = answer(Endpoint::kRoofline, {{"model", "llama-3.1-8b"},
                                                       {"deployment", {{"card", "h100-sxm"}}},
                                                       {"roofline", {{"batch", 8}, {"context", 512}, {"prefill", 256}}}});
  const auto cli = capsim_test::run_capsim(
      "roofline --model llama-3.1-8b --card h100-sxm --batch 8 --context 512 --prefill 256 --json -");
  INFO(cli.err);
  REQUIRE(cli.status == 0);
  CHECK(api == cli.out);
  const json j = json::parse(api);
  CHECK(j["batch"] == 8);
  CHECK(j["prefill_tokens"] == 256);
  // 8 sequences each get one token per step.
  CHECK(j["decode_tokens_per_s"].get<double>() == Approx(8 / j["step_seconds"].get<double>()).epsilon(1e-12));
  // The groups add up to the step (times and FLOPs).
  double seconds = 0, flops = 0;
  for (const json& g : j["groups"]) {
    seconds += g["seconds"].get<double>();
    flops += g["flops"].get<double>();
  }
  CHECK(flops == Approx(j["flops_per_gpu"].get<double>()).epsilon(1e-9));
  CHECK(seconds <= j["step_seconds"].get<double>() * (1 + 1e-9));
}

TEST_CASE("server: a bad roofline body is a 400 naming the field", "[server][roofline]") {
  const json base = {{"model", "llama-3.1-8b"}, {"deployment", {{"card", "h100-sxm"}}}};
  json empty = base;
  empty["roofline"] = {{"batch", 0}};
  const HttpError e = refusal(Endpoint::kRoofline, empty);
  CHECK(e.status() == 400);
  CHECK(has(e.what(), "roofline.batch, roofline.prefill: the step is empty"));
  json big = base;
  big["roofline"] = {{"context", 1e9}};
  const HttpError b = refusal(Endpoint::kRoofline, big);
  CHECK(b.status() == 400);
  CHECK(has(b.what(), "roofline.context: 1000000000.0 is not a whole number in 1..1e+08"));
  json unknown = base;
  unknown["roofline"] = {{"sequences", 3}};
  CHECK(has(refusal(Endpoint::kRoofline, unknown).what(), "roofline: unknown field 'sequences'; accepted: batch, context"));
  const HttpError encoder = refusal(Endpoint::kRoofline, {{"model", "bert-base-uncased"}, {"deployment", {{"card", "t4"}}}});
  CHECK(encoder.status() == 400);
  CHECK(has(encoder.what(), "bert-base-uncased is encoder-only; roofline models decoder steps"));
}

TEST_CASE("server and CLI: POST /v1/kernels lists a card's tables and times shapes as `capsim kernels` does",
          "[answers][server][kernels]") {
  const auto list_cli = capsim_test::run_capsim("kernels --card h200 --json -");
  REQUIRE(list_cli.status == 0);
  CHECK(answer(Endpoint::kKernels, {{"card", "h200"}}) == list_cli.out);

  capsim_test::Scratch dir("kernels");
  const std::string shapes = dir.write("shapes.csv", "n,k,m\n8192,8192,144\n4096,14336,1\n");
  const auto cli = capsim_test::run_capsim("kernels --card h100-sxm --shapes '" + shapes + "' --json -");
  REQUIRE(cli.status == 0);
  const json as_list = {{"card", "h100-sxm"},
                        {"shapes", json::array({{{"n", 8192}, {"k", 8192}, {"m", 144}}, {{"n", 4096}, {"k", 14336}, {"m", 1}}})}};
  const std::string api = answer(Endpoint::kKernels, as_list);
  CHECK(api == cli.out);
  // The same shapes as CSV text.
  CHECK(answer(Endpoint::kKernels, {{"card", "h100-sxm"}, {"shapes", "n,k,m\n8192,8192,144\n4096,14336,1\n"}}) == cli.out);
  // Rows m = 128 (48.67 us) and 160 (49.62 us) of the H100 bf16 table, log-log at 144:
  // 49.1692 us (tests/cli/kernels_cli_test.cc works it).
  const json j = json::parse(api);
  CHECK(j["shapes"][0]["table_seconds"].get<double>() == Approx(49.1692e-6).epsilon(1e-5));
  CHECK(j["shapes"][0]["in_range"] == true);
}

TEST_CASE("server: a bad kernels body is a 400 naming the field, and no table file is read",
          "[server][kernels]") {
  const HttpError table = refusal(Endpoint::kKernels, {{"card", "h100-sxm"}, {"table", "calibration/kernels/h100-sxm/gemm-bf16.csv"}});
  CHECK(table.status() == 400);
  CHECK(has(table.what(), "table: the server reads no table files"));
  const HttpError neg = refusal(Endpoint::kKernels, {{"card", "h100-sxm"},
                                                     {"shapes", json::array({{{"n", 1}, {"k", 1}, {"m", 1}},
                                                                             {{"n", 4096}, {"k", -3}, {"m", 1}}})}});
  CHECK(neg.status() == 400);
  CHECK(has(neg.what(), "shapes[1].k: expected a positive number (a GEMM dimension), got -3"));
  const HttpError csv = refusal(Endpoint::kKernels, {{"card", "h100-sxm"}, {"shapes", "n,k\n1,2\n"}});
  CHECK(csv.status() == 400);
  CHECK(has(csv.what(), "shapes:1: the header must name columns n, k and m"));
  const HttpError no_table = refusal(Endpoint::kKernels, {{"card", "rtx-4090"}, {"shapes", "n,k,m\n1,2,3\n"}});
  CHECK(no_table.status() == 400);
  CHECK(has(no_table.what(), "dtype: rtx-4090 has no measured bf16 GEMM table (calibration/kernels/rtx-4090/gemm-bf16.csv); "
                             "asked without shapes, kernels lists the tables rtx-4090 has"));
  CHECK(has(refusal(Endpoint::kKernels, {{"card", "./h100.yaml"}}).what(), "card: './h100.yaml' is not a card of the catalogue"));
  CHECK(has(refusal(Endpoint::kKernels, {{"card", "h100-sxm"}, {"dtype", "int3"}}).what(), "dtype: "));
}

TEST_CASE("server and CLI: POST /v1/diff gives `capsim diff --json -`'s answer for the same two results",
          "[answers][server][diff]") {
  capsim_test::Scratch dir("diff");
  const std::string a = dir.path() + "/a.json", b = dir.path() + "/b.json";
  const std::string scenario = "simulate --model llama-3.1-8b --users 20 --duration 3min --seed 3 --quiet";
  REQUIRE(capsim_test::run_capsim(scenario + " --card h100-sxm --json '" + a + "'").status == 0);
  REQUIRE(capsim_test::run_capsim(scenario + " --card a100-80gb-sxm --json '" + b + "'").status == 0);
  const auto cli = capsim_test::run_capsim("diff '" + a + "' '" + b + "' --min-change 1 --json -");
  INFO(cli.err);
  REQUIRE(cli.status == 0);
  json api = json::parse(answer(Endpoint::kDiff, {{"a", json::parse(capsim_test::read_all(a))},
                                                  {"b", json::parse(capsim_test::read_all(b))},
                                                  {"min_change", 1}}));
  // The body's results are named a and b, the files by their paths; the rest is the same answer.
  CHECK(api["a"] == "a");
  CHECK(api["b"] == "b");
  json from_cli = json::parse(cli.out);
  from_cli["a"] = "a";
  from_cli["b"] = "b";
  CHECK(api == from_cli);
  CHECK(api["kind"] == "simulate");
  bool card_changed = false;
  for (const json& c : api["configuration"]) card_changed = card_changed || has(c["path"].get<std::string>(), "card");
  CHECK(card_changed);
}

TEST_CASE("server: a bad diff body is a 400 naming the field, and no result file is read", "[server][diff]") {
  const HttpError path = refusal(Endpoint::kDiff, {{"a", "/etc/passwd"}, {"b", json::object()}});
  CHECK(path.status() == 400);
  CHECK(has(path.what(), "a: the server reads no files; send the result's JSON object itself"));
  const HttpError missing = refusal(Endpoint::kDiff, {{"a", json::object()}});
  CHECK(missing.status() == 400);
  CHECK(has(missing.what(), "a: not a capsim result"));
  const json sim = {{"scenario", json::object()}, {"deployment", json::array()}, {"capsim", json::object()}};
  const json plan = {{"scenario", json::object()}, {"options", json::array()}};
  const HttpError kinds = refusal(Endpoint::kDiff, {{"a", sim}, {"b", plan}});
  CHECK(kinds.status() == 400);
  CHECK(has(kinds.what(), "b: a plan result, and a a simulate result; diff compares two results of the same command"));
  CHECK(has(refusal(Endpoint::kDiff, {{"a", sim}}).what(), "b: missing"));
  CHECK(has(refusal(Endpoint::kDiff, {{"a", sim}, {"b", sim}, {"min_change", -1}}).what(), "min_change: -1 is not a number in 0..1e+300"));
  CHECK(has(refusal(Endpoint::kDiff, {{"a", sim}, {"b", sim}, {"c", 1}}).what(), "c: not a field of a diff body; accepted: a, b, min_change"));
}

namespace {

// A small grid over one scenario: two cards x two user counts, 2 simulated minutes each.
const json kSweepScenario = {{"model", "llama-3.1-8b"},
                             {"deployment", {{"card", "h100-sxm"}}},
                             {"workload", {{"users", 20}, {"duration", "2min"}, {"warmup", "20s"}}},
                             {"slo", {{"ttft_p95", "1s"}}},
                             {"seed", 5}};

json sweep_body(const json& axes) {
  json body = kSweepScenario;
  body["sweep"] = axes;
  return body;
}

}  // namespace

TEST_CASE("server and CLI: POST /v1/sweep runs the grid `capsim sweep` runs over the body's scenario",
          "[answers][server][sweep]") {
  capsim_test::Scratch dir("sweep");
  const std::string scenario = dir.write("chat.yaml",
                                         "model: llama-3.1-8b\ndeployment: {card: h100-sxm}\n"
                                         "workload: {users: 20, duration: 2min, warmup: 20s}\nslo: {ttft_p95: 1s}\nseed: 5\n");
  const std::string file = dir.write("grid.yaml", "name: grid\nworkloads: [chat.yaml]\ncards: [h100-sxm, l40s]\nloads: [10, 20]\n");
  const auto cli = capsim_test::run_capsim("sweep '" + file + "' --quiet --json -");
  INFO(cli.err);
  REQUIRE(cli.status == 0);
  const json api = json::parse(answer(Endpoint::kSweep, sweep_body({{"name", "grid"}, {"cards", {"h100-sxm", "l40s"}},
                                                                    {"loads", {10, 20}}})));
  // The file names its scenario file; the body is its own scenario (workload ""). The rest is the
  // same document, run for run.
  json expected = json::parse(cli.out);
  expected["grid"]["workloads"] = json::array({""});
  for (json& r : expected["results"]) r["workload"] = "";
  CHECK(api == expected);
  REQUIRE(api["results"].size() == 4);  // 2 cards x 2 loads, the last axis fastest
  CHECK(api["results"][1]["card"] == "h100-sxm");
  CHECK(api["results"][1]["load"] == 20.0);
  CHECK(api["results"][2]["card"] == "l40s");
  CHECK(api["results"][0]["status"] == "ok");
  CHECK(api["results"][0]["completed"].get<long long>() > 0);
}

TEST_CASE("server: a sweep body is checked before the queue and stops when its client goes away", "[server][sweep]") {
  const HttpError files = refusal(Endpoint::kSweep, sweep_body({{"workloads", {"chat.yaml"}}}));
  CHECK(files.status() == 400);
  CHECK(has(files.what(), "sweep.workloads: the server reads no scenario files"));
  CHECK(has(refusal(Endpoint::kSweep, sweep_body({{"set", {{"seed", 2}}}})).what(), "sweep.set: give those scenario fields"));
  const HttpError path = refusal(Endpoint::kSweep, sweep_body({{"cards", {"h100-sxm", "../cards/x.yaml"}}}));
  CHECK(path.status() == 400);
  CHECK(has(path.what(), "sweep.cards[1]: '../cards/x.yaml' is not a card of the catalogue"));
  CHECK(has(refusal(Endpoint::kSweep, sweep_body({{"loads", {2.5}}})).what(), "sweep: loads: 2.500000 is not a whole number of users"));
  // 17 loads x 16 seeds = 272 runs, past the default 256.
  json loads = json::array(), seeds = json::array();
  for (int i = 1; i <= 17; ++i) loads.push_back(i);
  for (int i = 1; i <= 16; ++i) seeds.push_back(i);
  const HttpError big = refusal(Endpoint::kSweep, sweep_body({{"loads", loads}, {"seeds", seeds}}));
  CHECK(big.status() == 422);
  CHECK(has(big.what(), "sweep: the grid has 272 runs; the server runs at most 256 per request"));
  // A load past the server's users limit (--max-users, which the server makes the process's run
  // limit) is refused, not run as a failed cell.
  const std::int64_t saved = capsim::run_limit(capsim::RunLimit::kUsers);
  capsim::set_run_limit(capsim::RunLimit::kUsers, 30);
  const HttpError users = refusal(Endpoint::kSweep, sweep_body({{"loads", {20, 40}}}));
  capsim::set_run_limit(capsim::RunLimit::kUsers, saved);
  CHECK(users.status() == 422);
  CHECK(has(users.what(), "workload.users: 40 users is more than one run may ask for (at most 30 users"));
  const capsim::server::Job job = capsim::server::prepare(Endpoint::kSweep, sweep_body({{"loads", {10, 20}}}).dump(), Limits{});
  auto gone = std::make_shared<std::atomic<bool>>(true);
  CHECK_THROWS_AS(job(gone, [](const json&) {}), capsim::Cancelled);
}
