// Sweeps (sim/plan/sweep.h): grid expansion order, shard selection, merge equal to the
// unsharded run byte for byte, failed cells, and bad input named by file and field.
#include <catch2/catch.hpp>
#include <string>

#include "sim/core/error.h"
#include "sim/plan/sweep.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace capsim;
using namespace capsim::plan;

// 2 models x 2 cards x 2 rates x 2 seeds = 16 runs of 30 open-loop requests. Qwen2.5-7B in bf16
// (about 15.2 GB of weights) does not fit a 16 GB T4 with 90% of it for the engine: those four
// cells fail, the rest run.
const char* kGrid = R"(name: tiny
models: [llama-3.2-1b, qwen2.5-7b]
cards: [l4, t4]
loads: [2, 4]
seeds: [1, 2]
set: {workload: {requests: 30, input_tokens: 256, output_tokens: 32}}
)";

}  // namespace

TEST_CASE("sweep: the grid expands in axis order and shards take every N-th run", "[sweep]") {
  capsim_test::TempDir dir("sweep");
  const Sweep s = load_sweep(dir.write("tiny.yaml", kGrid));
  REQUIRE(s.runs.size() == 16);
  // The last axis varies fastest: run 5 = model 0, card 1 (t4), load 0 (2/s), seed 1 (2).
  CHECK(s.runs[5].spec.deployment.model == "llama-3.2-1b");
  CHECK(s.runs[5].spec.deployment.card == "t4");
  CHECK(*s.runs[5].load == 2.0);
  CHECK(*s.runs[5].spec.rate == "2");
  CHECK(s.runs[5].spec.seed == 2);
  CHECK(s.runs[15].spec.deployment.model == "qwen2.5-7b");
  CHECK(*s.runs[15].spec.requests == 30);

  const Shard third = parse_shard("1/3", "--shard");
  std::vector<std::size_t> mine;
  for (const SweepRun& r : s.runs) {
    if (third.has(r.index)) mine.push_back(r.index);
  }
  CHECK(mine == std::vector<std::size_t>{1, 4, 7, 10, 13});
}

TEST_CASE("sweep: three uneven shards merge into the unsharded result byte for byte", "[sweep]") {
  capsim_test::TempDir dir("sweep");
  const Sweep s = load_sweep(dir.write("tiny.yaml", kGrid));
  const nlohmann::json whole = run_sweep(s, Shard{}, 2, false);
  REQUIRE(whole["results"].size() == 16);
  CHECK_FALSE(whole.contains("shard"));
  std::vector<std::pair<std::string, nlohmann::json>> shards;
  // Shards run with different thread counts: results do not depend on them.
  for (std::size_t i = 0; i < 3; ++i) {
    nlohmann::json d = run_sweep(s, Shard{i, 3}, static_cast<unsigned>(i + 1), false);
    CHECK(d["shard"] == std::to_string(i) + "/3");
    CHECK(d["results"].size() == (i == 0 ? 6u : 5u));  // 16 runs: 0,3,..,15 / 1,..,13 / 2,..,14
    // Through text and back, as merge reads them from files.
    shards.emplace_back("shard-" + std::to_string(i) + ".json", nlohmann::json::parse(d.dump(2)));
  }
  std::swap(shards[0], shards[2]);  // the order of the files does not matter
  const nlohmann::json merged = merge_sweeps(shards);
  CHECK(merged.dump(2) == whole.dump(2));
  CHECK(sweep_csv(merged) == sweep_csv(whole));

  int ok = 0, failed = 0;
  for (const nlohmann::json& r : whole["results"]) {
    if (r["status"] == "ok") {
      ++ok;
      CHECK(r["completed"] == 30);
      CHECK(r["p95_ttft_ms"].get<double>() > 0);
    } else {
      ++failed;
      CHECK(r["model"] == "qwen2.5-7b");
      CHECK(r["card"] == "t4");
      CHECK(r["error"].get<std::string>().find("does not fit") != std::string::npos);
    }
  }
  CHECK(ok == 12);
  CHECK(failed == 4);
  // CSV: a header and one line per run.
  const std::string csv = sweep_csv(whole);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 17);
}

TEST_CASE("sweep: merge refuses missing, repeated and foreign shards", "[sweep]") {
  capsim_test::TempDir dir("sweep");
  const Sweep s = load_sweep(dir.write("tiny.yaml", kGrid));
  const nlohmann::json a = run_sweep(s, Shard{0, 2}, 1, false);
  const nlohmann::json b = run_sweep(s, Shard{1, 2}, 1, false);
  CHECK_THROWS_WITH(merge_sweeps({{"a.json", a}}),
                    Catch::Contains("8 of 16 runs missing (1, 3, 5, 7, 9, 11, 13, 15)"));
  CHECK_THROWS_WITH(merge_sweeps({{"a.json", a}, {"b.json", b}, {"a2.json", a}}),
                    Catch::Contains("a2.json: run 0 is also in a.json"));
  nlohmann::json other = b;
  other["grid"]["seeds"] = {"1"};
  CHECK_THROWS_WITH(merge_sweeps({{"a.json", a}, {"b.json", other}}),
                    Catch::Contains("b.json: belongs to a different sweep"));
  CHECK_THROWS_WITH(merge_sweeps({{"x.json", nlohmann::json::object()}}),
                    Catch::Contains("x.json: not a capsim sweep result"));
  // A corrupted run record is refused by file, run and field (it was merged as it was: a
  // negative TTFT printed and passing its SLO, a string in a metric column).
  const auto corrupt = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json c = b;
    for (auto& r : c["results"]) {
      if (r["status"] == "ok") {
        if (value.is_null()) r.erase(key); else r[key] = value;
        return std::pair{c, r["index"].get<std::size_t>()};
      }
    }
    FAIL("no run with status ok in the shard");
    return std::pair{c, std::size_t{0}};
  };
  const auto [neg, i1] = corrupt("p95_ttft_ms", -5.0);
  CHECK_THROWS_WITH(merge_sweeps({{"a.json", a}, {"b.json", neg}}),
                    "b.json: run " + std::to_string(i1) + ": p95_ttft_ms: -5.0 is not a finite number >= 0");
  const auto [text, i2] = corrupt("mean_e2el_ms", "abc");
  CHECK_THROWS_WITH(merge_sweeps({{"a.json", a}, {"b.json", text}}),
                    Catch::Contains("mean_e2el_ms: \"abc\" is not a finite number >= 0"));
  const auto [card, i3] = corrupt("card", 7);
  CHECK_THROWS_WITH(merge_sweeps({{"a.json", a}, {"b.json", card}}), Catch::Contains("card: 7 is not a string"));
  const auto [status, i4] = corrupt("status", "bogus");
  CHECK_THROWS_WITH(merge_sweeps({{"a.json", a}, {"b.json", status}}),
                    Catch::Contains("status: \"bogus\" is not 'ok' or 'failed'"));
  const auto [gone, i5] = corrupt("completed", nullptr);
  CHECK_THROWS_WITH(merge_sweeps({{"a.json", a}, {"b.json", gone}}),
                    Catch::Contains("completed: missing (a run with status 'ok' has it)"));
}

TEST_CASE("sweep: bad input names the file and field", "[sweep]") {
  capsim_test::TempDir dir("sweep");
  CHECK_THROWS_WITH(load_sweep(dir.write("a.yaml", "modls: [llama-3.2-1b]\n")),
                    Catch::Contains("a.yaml: modls: unknown field; accepted: name, description, workloads"));
  CHECK_THROWS_WITH(load_sweep(dir.write("b.yaml", "cards: [h100-sxm, nope]\n")),
                    Catch::Contains("nope"));
  CHECK_THROWS_WITH(load_sweep(dir.write("c.yaml", "loads: [1, -2]\n")),
                    Catch::Contains("c.yaml: loads[1]: '-2'"));
  CHECK_THROWS_WITH(load_sweep(dir.write("c0.yaml", "loads: [0]\n")),
                    Catch::Contains("c0.yaml: loads[0]: '0' must be a positive number"));
  CHECK_THROWS_WITH(load_sweep(dir.write("d.yaml", "precisions: [bf16, fp3]\n")),
                    Catch::Contains("d.yaml: precisions[1]"));
  CHECK_THROWS_WITH(load_sweep(dir.write("e.yaml", "seeds: [1, 1]\n")),
                    Catch::Contains("e.yaml: seeds: '1' is listed twice"));
  CHECK_THROWS_WITH(load_sweep(dir.write("f.yaml", "tp: []\n")), Catch::Contains("f.yaml: tp: empty list"));
  // A non-scalar key (fuzz_sweep's find, fuzz/regressions/fuzz_sweep/): was yaml-cpp's "bad
  // conversion" with no file.
  CHECK_THROWS_WITH(load_sweep(dir.write("g.yaml", "# and loid\nmodels:\n[../llama-3.1h]")),
                    Catch::Contains("g.yaml: a field name is not a plain word; accepted: name, description"));
  // An unknown model on an axis names the sweep file, not only the flag validate_names speaks of.
  CHECK_THROWS_WITH(load_sweep(dir.write("i.yaml", "models: [no-such-model]\n")),
                    Catch::Contains("i.yaml: the run with model 'no-such-model'"));
  CHECK_THROWS_AS(load_sweep(dir.write("h.yaml", "[a, b]: 1\n")), capsim::Error);
  for (const char* bad : {"4/4", "1", "/3", "a/3", "1/0", "-1/3"}) {
    CHECK_THROWS_WITH(parse_shard(bad, "--shard"), Catch::Contains("--shard: '" + std::string(bad) + "'"));
  }
  const Shard s = parse_shard("3/4", "--shard");
  CHECK(s.index == 3);
  CHECK(s.count == 4);
}
