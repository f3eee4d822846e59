// The engine options' table (sim/scenario/engine_options.h): every row is reachable from the
// command line (simulate's flags, and fit's for the scheduler limits) and from a scenario file's
// `engine:` section, puts its value in the same member from both, and refuses a value out of its
// range with the same words from both, worked out here from the row's own bounds. And a further
// deployment group of a file honours its kv_cache and refuses an engine it cannot have.
#include <catch2/catch.hpp>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include <yaml-cpp/yaml.h>

#include "sim/cli/common.h"
#include "sim/core/error.h"
#include "sim/flags/scenario_flags.h"
#include "sim/scenario/engine_options.h"
#include "sim/scenario/scenario.h"

namespace {

using namespace capsim;
using namespace capsim::scenario;

std::string text_of(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

// A value the row accepts that no default spec holds: one above the lowest whole number, the
// top of a number's range, false, and the key itself for a name (stored as given; names are
// checked when the deployment is resolved).
std::string accepted_value(const EngineOption& row) {
  switch (row.doc.type) {
    case FieldType::kWhole: return text_of(row.doc.lo + 1);
    case FieldType::kNumber: return text_of(row.doc.hi);
    case FieldType::kBool: return "false";
    default: return row.doc.key;
  }
}

ScenarioSpec from_yaml(const std::string& key, const std::string& value) {
  ScenarioSpec s;
  apply_scenario_yaml(YAML::Load("engine: {" + key + ": " + value + "}"), "a.yaml", "a.yaml: ", "", s);
  return s;
}

std::string yaml_refusal(const std::string& key, const std::string& value) {
  try {
    from_yaml(key, value);
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

// simulate's flags: the spec the command line resolves to, or what CLI11 refused.
struct FromFlags {
  ScenarioSpec spec;
  std::string refusal = "(accepted)";
};
FromFlags from_flags(const std::string& args) {
  CLI::App app;
  flags::ScenarioFlags f;
  f.add_to(app);
  FromFlags out;
  try {
    app.parse(args, false);
    out.spec = f.resolve("");
  } catch (const CLI::ParseError& e) {
    out.refusal = e.what();
  }
  return out;
}

// fit's flags (sim/cli/common.h add_deployment_flags with the scheduler limits).
struct FromFitFlags {
  DeploymentSpec deployment;
  std::string refusal = "(accepted)";
};
FromFitFlags from_fit_flags(const std::string& args) {
  CLI::App app;
  FromFitFlags out;
  cli::add_deployment_flags(app, out.deployment);
  try {
    app.parse(args, false);
  } catch (const CLI::ParseError& e) {
    out.refusal = e.what();
  }
  return out;
}

}  // namespace

TEST_CASE("engine options: every row is reachable from the flags and the scenario file alike", "[engine_options]") {
  REQUIRE(engine_options().size() == 11);
  for (const EngineOption& row : engine_options()) {
    const std::string value = accepted_value(row);
    INFO(row.doc.key << " = " << value);
    const ScenarioSpec file = from_yaml(row.doc.key, value);
    const FromFlags flags = from_flags(std::string(row.doc.flag) + " " + value);
    REQUIRE(flags.refusal == "(accepted)");
    const ScenarioSpec defaults;
    std::visit(
        [&](auto m) {
          CHECK(member_of(file, m) == member_of(flags.spec, m));
          CHECK(member_of(file, m) != member_of(defaults, m));
        },
        row.member);
    // A value from the file is attributed to its field, from the command line to the flag.
    if (row.doc.origin) CHECK(file.where(row.doc.flag) == std::string("a.yaml: engine.") + row.doc.key);
    CHECK(flags.spec.where(row.doc.flag) == row.doc.flag);
    // fit takes exactly the rows that size memory, into the same member.
    const FromFitFlags fit = from_fit_flags(std::string(row.doc.flag) + " " + value);
    if (row.scheduler_limit) {
      REQUIRE(fit.refusal == "(accepted)");
      std::visit(
          [&](auto m) {
            if constexpr (requires { fit.deployment.*m; }) {
              CHECK(fit.deployment.*m == member_of(file, m));
            } else {
              FAIL("a scheduler limit lives in the deployment");
            }
          },
          row.member);
    } else {
      CHECK(fit.refusal != "(accepted)");  // CLI11: the argument was not expected
      CHECK(fit.refusal.find(row.doc.flag) != std::string::npos);
    }
  }
}

TEST_CASE("engine options: a value out of a row's range is refused in the same words by flag and file",
          "[engine_options]") {
  int ranged = 0;
  for (const EngineOption& row : engine_options()) {
    const FieldDoc& d = row.doc;
    if (d.type != FieldType::kWhole && d.type != FieldType::kNumber) continue;
    ++ranged;
    // Just outside each end: the whole number below lo and above hi; a number's open lower
    // bound itself, and twice its upper bound.
    const bool whole = d.type == FieldType::kWhole;
    for (const double bad : {whole ? d.lo - 1 : d.lo, whole ? d.hi + 1 : d.hi * 2}) {
      const std::string text = text_of(bad);
      std::string words;
      if (whole) {
        words = "'" + text + "' is not a whole number in " + text_of(d.lo) + ".." + text_of(d.hi);
      } else {
        REQUIRE(d.range_error);
        words = d.range_error;
        if (const auto at = words.find("{}"); at != std::string::npos) words.replace(at, 2, text);
      }
      INFO(d.key << " = " << text);
      CHECK(yaml_refusal(d.key, text) == "a.yaml: engine." + std::string(d.key) + ": " + words);
      CHECK(from_flags(std::string(d.flag) + " " + text).refusal == std::string(d.flag) + ": " + words);
      if (row.scheduler_limit) {
        CHECK(from_fit_flags(std::string(d.flag) + " " + text).refusal == std::string(d.flag) + ": " + words);
      }
    }
  }
  CHECK(ranged == 6);  // max_num_seqs, max_num_batched_tokens, block_size, gpu_memory_utilization,
                       // max_model_len, kv_offloading_size
  // The bounds are the file's on the command line too: 0.05 was accepted by the flag and refused
  // by the file before the two shared the row.
  CHECK(from_flags("--gpu-memory-utilization 0.05").refusal == "--gpu-memory-utilization: must be in (0.05, 1]");
  // A whole number is read as the file reads it: 1e3 is 1000.
  CHECK(from_flags("--max-num-seqs 1e3").spec.deployment.max_num_seqs == 1000);
  CHECK(from_flags("--max-num-seqs 2.5").refusal == "--max-num-seqs: '2.5' is not a whole number in 1..1048576");
}

TEST_CASE("engine options: a further deployment group honours kv_cache and refuses engine", "[engine_options]") {
  ScenarioSpec s;
  apply_scenario_yaml(YAML::Load("deployment: [{card: h100-sxm}, {card: h100-pcie, kv_cache: fp8}]"), "a.yaml",
                      "a.yaml: ", "", s);
  REQUIRE(s.extra_groups.size() == 1);
  CHECK(s.extra_groups[0].kv_cache == "fp8");
  const auto groups = resolve_groups(s);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].deployment.kv_cache == Precision::kBf16);  // the card's 16-bit type
  CHECK(groups[1].deployment.kv_cache == Precision::kFp8);

  // A bad precision there is the group's field, not the first group's or the flag.
  ScenarioSpec bad;
  apply_scenario_yaml(YAML::Load("deployment: [{card: h100-sxm}, {card: h100-pcie, kv_cache: fp7}]"), "a.yaml",
                      "a.yaml: ", "", bad);
  try {
    resolve_groups(bad);
    FAIL("fp7 accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).rfind("a.yaml: deployment[1].kv_cache: ", 0) == 0);
  }

  ScenarioSpec engine;
  try {
    apply_scenario_yaml(YAML::Load("deployment: [{card: h100-sxm}, {card: h100-pcie, engine: tensorrt-llm}]"),
                        "a.yaml", "a.yaml: ", "", engine);
    FAIL("engine accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "a.yaml: deployment[1].engine: every group runs the first deployment group's engine profile (one "
          "scheduler and its settings for the fleet); accepted here: card, tp, replicas, weights, kv_cache");
  }
}
