// The scenario reader's tables (sim/scenario/scenario_fields.cc): a row refuses a value of the
// wrong type or out of its range with the message naming file, field and accepted values; the
// reference in docs/data-formats.md and the API's JSON schema are the tables' own output; and a
// row added to a table is read, refused when bad, and documented in both, with nothing else.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "sim/core/error.h"
#include "sim/scenario/catalogues.h"
#include "sim/scenario/field_table.h"
#include "sim/scenario/scenario.h"
#include "sim/scenario/scenario_fields.h"
#include "sim/server/api.h"

namespace {

using namespace capsim;
using namespace capsim::scenario;

std::string error_of(const std::string& yaml) {
  ScenarioSpec s;
  try {
    apply_scenario_yaml(YAML::Load(yaml), "a.yaml", "a.yaml: ", "", s);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("scenario fields: a wrong type or a value out of range names file, field and accepted values",
          "[scenario_fields]") {
  // kWhole: 1..64 for tp; 65 is one past, 2.5 not whole.
  CHECK(error_of("deployment: {card: h100-sxm, tp: 65}") == "a.yaml: deployment.tp: '65' is not a whole number in 1..64");
  CHECK(error_of("deployment: [{card: h100-sxm}, {card: l4, tp: 2.5}]") ==
        "a.yaml: deployment[1].tp: '2.5' is not a whole number in 1..64");
  // kNumber with an open lower end: (0.05, 1], so 0.05 itself is refused and 1 is not.
  CHECK(error_of("engine: {gpu_memory_utilization: 0.05}") == "a.yaml: engine.gpu_memory_utilization: must be in (0.05, 1]");
  CHECK(error_of("engine: {gpu_memory_utilization: 1}") == "(no error)");
  CHECK(error_of("engine: {kv_offloading_size: 1000001}") == "a.yaml: engine.kv_offloading_size: must be in (0, 1000000] GiB");
  CHECK(error_of("deployment: {expert_imbalance: 0.9}") ==
        "a.yaml: deployment.expert_imbalance: 0.9 is not a max/mean load ratio; accepted: 1 to 64");
  CHECK(error_of("workload: {burstiness: 0}") == "a.yaml: workload.burstiness: must be > 0 (the gamma shape)");
  // A unit where a plain number is expected, a boolean that is neither, a list for a value.
  CHECK(error_of("engine: {kv_offloading_size: 8GiB}") ==
        "a.yaml: engine.kv_offloading_size: '8GiB' is not a plain number (no unit expected here)");
  CHECK(error_of("lora: {enable_lora: maybe}") == "a.yaml: lora.enable_lora: 'maybe'; accepted: true, false");
  CHECK(error_of("workload: {users: [1, 2]}") == "a.yaml: workload.users: expected a single value");
  // Required rows: checked before any other row of the section is read.
  CHECK(error_of("speculative: {num_speculative_tokens: 99}") ==
        "a.yaml: speculative.method: missing (eagle3, eagle, mtp, ngram, draft_model)");
  CHECK(error_of("deployment: [{card: h100-sxm}, {tp: 2}]") == "a.yaml: deployment[1].card: missing (required)");
  // Unknown keys: every accepted key, in the table's order.
  CHECK(error_of("engine: {max_num_seq: 8}") ==
        "a.yaml: engine: unknown field 'max_num_seq'; accepted: max_num_seqs, max_num_batched_tokens, block_size, "
        "gpu_memory_utilization, prefix_caching, enable_prefix_caching, policy, max_model_len, async_scheduling, "
        "kv_offloading_size, kv_offloading_backend");
  CHECK(error_of("disaggregation: {prefill: {card: h100-sxm, kv_cache: fp8}, decode: {card: h100-sxm}, kv_link: x}") ==
        "a.yaml: disaggregation.prefill: unknown field 'kv_cache'; accepted: card, tp, replicas, weights");
}

TEST_CASE("scenario fields: the rows put each value where the spec keeps it", "[scenario_fields]") {
  ScenarioSpec s;
  apply_scenario_yaml(YAML::Load("deployment: {card: l4, tp: 2, pp: 2}\n"
                                 "engine: {prefix_caching: false, enable_prefix_caching: true, kv_offloading_size: 8}\n"
                                 "workload: {prompt_tokens: 100, input_tokens: {dist: lognormal, mean: 150, p99: 1200},"
                                 " stages: [{rate: 5, duration: 10min}, {rate: 10}]}\n"
                                 "speculative: {method: eagle3, acceptance: [0.9, 0.8]}\nseed: 7"),
                      "a.yaml", "a.yaml: ", "", s);
  CHECK(s.deployment.card == "l4");
  CHECK(s.deployment.tp == 2);
  CHECK(s.deployment.pp == 2);
  CHECK(s.prefix_caching == true);  // enable_prefix_caching is the later row
  CHECK(s.deployment.kv_offloading_size == 8.0);
  CHECK(s.input_tokens == "lognormal:150:1200");  // input_tokens is the later row
  CHECK(s.rate == "5@10min,10");
  CHECK(s.deployment.speculative_config == R"({"method":"eagle3"})");
  CHECK(s.deployment.spec_acceptance == "0.9,0.8");
  CHECK(s.seed == 7u);
  // Messages about these fields name the file's field in place of the flag.
  CHECK(s.where("--tp") == "a.yaml: deployment.tp");
  CHECK(s.where("--rate") == "a.yaml: workload.stages");
  CHECK(s.where("--input-tokens") == "a.yaml: workload.input_tokens");
  CHECK(s.where("--replicas") == "--replicas");
}

TEST_CASE("scenario fields: docs/data-formats.md holds exactly what the tables write", "[scenario_fields]") {
  std::ifstream in(data_dir() + "/docs/data-formats.md");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const std::string open = "<!-- capsim-markdown: list scenario-fields -->\n";
  const std::string close = "\n<!-- /capsim-markdown -->";
  const auto b = doc.find(open);
  REQUIRE(b != std::string::npos);
  const auto e = doc.find(close, b);
  REQUIRE(e != std::string::npos);
  // scripts/update_docs.py rewrites the block from `capsim list scenario-fields`.
  CHECK(doc.substr(b + open.size(), e - b - open.size()) == scenario_fields_markdown());
  // One line per row of a table, as the reader has them: e.g. the engine's memory share.
  CHECK(doc.find("| `gpu_memory_utilization` | number | (0.05, 1] | 0.9 | `--gpu-memory-utilization` | "
                 "share of each GPU's memory the engine takes |") != std::string::npos);
}

TEST_CASE("scenario fields: the API's scenario schema is the tables'", "[scenario_fields]") {
  const auto api = nlohmann::json::parse(server::openapi_json());
  const auto& scenario = api["components"]["schemas"]["Scenario"];
  std::vector<std::string> root_keys;
  for (const auto& [k, v] : scenario["properties"].items()) root_keys.push_back(k);
  std::sort(root_keys.begin(), root_keys.end());
  std::vector<std::string> table_keys;
  const auto sections = scenario_field_sections();  // kept alive: the loop reads into it
  for (const auto& r : sections.front().fields) table_keys.push_back(r.key);
  std::sort(table_keys.begin(), table_keys.end());
  CHECK(root_keys == table_keys);
  CHECK(scenario["additionalProperties"] == false);
  const auto& gmu = scenario["properties"]["engine"]["properties"]["gpu_memory_utilization"];
  CHECK(gmu["type"] == "number");
  CHECK(gmu["minimum"] == 0.05);
  CHECK(gmu["exclusiveMinimum"] == true);
  CHECK(gmu["maximum"] == 1.0);
  // deployment: one group or a list of them, each the deployment table.
  const auto& one = scenario["properties"]["deployment"]["oneOf"][0];
  CHECK(one["properties"]["tp"]["minimum"] == 1);
  CHECK(one["properties"]["tp"]["maximum"] == 64);
  CHECK(scenario["properties"]["deployment"]["oneOf"][1]["items"] == one);
  const auto& pool = scenario["properties"]["disaggregation"]["properties"]["prefill"];
  CHECK(pool["required"] == nlohmann::json{"card"});
  // The paths that take a scenario body still point at it.
  CHECK(api["components"]["requestBodies"]["Scenario"]["content"]["application/json"]["schema"]["$ref"] ==
        "#/components/schemas/Scenario");
}

namespace {

struct Widgets {
  int count = 0;
  std::string colour = "grey";
};

const Field<Widgets> kWidgetFields[] = {
    {{.key = "colour", .type = FieldType::kText, .doc = "the widgets' colour", .default_text = "grey"},
     [](Widgets& w, const FieldValue& v) { w.colour = v.text; }},
};
// The same table with one row added.
const Field<Widgets> kWidgetFieldsPlusOne[] = {
    kWidgetFields[0],
    {{.key = "count", .type = FieldType::kWhole, .doc = "how many widgets", .default_text = "0", .lo = 0, .hi = 12},
     [](Widgets& w, const FieldValue& v) { w.count = v.whole(); }},
};

}  // namespace

TEST_CASE("scenario fields: a row added to a table is read, checked and documented", "[scenario_fields]") {
  const YAML::Node node = YAML::Load("{colour: red, count: 12}");
  Widgets before;
  CHECK_THROWS_WITH(read_fields<Widgets>(node, "w.yaml: box", kWidgetFields, before, {.prefix = "w.yaml: box."}),
                    "w.yaml: box: unknown field 'count'; accepted: colour");
  Widgets after;
  read_fields<Widgets>(node, "w.yaml: box", kWidgetFieldsPlusOne, after, {.prefix = "w.yaml: box."});
  CHECK(after.colour == "red");
  CHECK(after.count == 12);
  CHECK_THROWS_WITH(read_fields<Widgets>(YAML::Load("{count: 13}"), "w.yaml: box", kWidgetFieldsPlusOne, after,
                                         {.prefix = "w.yaml: box."}),
                    "w.yaml: box.count: '13' is not a whole number in 0..12");

  const std::vector<SectionDoc> one = {{"", "the box", docs_of<Widgets>(kWidgetFields)}};
  const std::vector<SectionDoc> two = {{"", "the box", docs_of<Widgets>(kWidgetFieldsPlusOne)}};
  const std::string row = "| `count` | whole number | 0..12 | 0 |  | how many widgets |";
  CHECK(fields_markdown(one).find(row) == std::string::npos);
  CHECK(fields_markdown(two) == fields_markdown(one) + "\n" + row);
  CHECK_FALSE(fields_json_schema(one)["properties"].contains("count"));
  const auto count = fields_json_schema(two)["properties"]["count"];
  CHECK(count["type"] == "integer");
  CHECK(count["minimum"] == 0);
  CHECK(count["maximum"] == 12);
  CHECK(count["description"] == "how many widgets. Accepted: 0..12. Default: 0");
}

TEST_CASE("scenario fields: turns and think time without users are refused, not ignored", "[scenario_fields]") {
  // A session's turns and think time shape chat users; an open loop, a fixed concurrency or a
  // trace sends each request once, and ran as if neither were given (before: exit 0, no word).
  const auto build_error = [](const std::string& yaml) {
    ScenarioSpec s;
    apply_scenario_yaml(YAML::Load(yaml), "a.yaml", "a.yaml: ", "", s);
    try {
      build_scenario(s);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string base = "model: llama-3.1-8b\ndeployment: {card: h100-sxm}\n";
  CHECK(build_error(base + "workload: {rate: 2, requests: 10, turns: {dist: geometric, mean: 5}}\n") ==
        "a.yaml: workload.turns: turns per session apply to chat users (--users, workload.users); an open loop "
        "(--rate) sends each request once. Remove it, or give users");
  CHECK(build_error(base + "workload: {concurrency: 4, requests: 10, think_time: 20s}\n") ==
        "a.yaml: workload.think_time: the think time applies to chat users (--users, workload.users); "
        "--concurrency has no pause between turns. Remove it, or give users");
  // Where they belong, and at their defaults elsewhere, they are taken.
  CHECK(build_error(base + "workload: {users: 4, requests: 10, turns: 3, think_time: 1s}\n") == "(no error)");
  CHECK(build_error(base + "workload: {rate: 2, requests: 10, turns: 1, think_time: 0s}\n") == "(no error)");
}
