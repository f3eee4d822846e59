// What serve reads from a request body, it reads in memory: a pasted config.json
// (model_config_from_json, held by name with scenario::hold_model) and a check body
// (check::assumptions_from_text), each the same as what the file-reading loader makes of a file
// with the same text.
#include <catch2/catch.hpp>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/check/assumptions.h"
#include "sim/core/error.h"
#include "sim/llm/model_config_json.h"
#include "sim/scenario/catalogues.h"
#include "sim/scenario/held_models.h"
#include "tests/support/temp_dir.h"

namespace {

nlohmann::json llama_8b_config() {
  std::ifstream in(capsim::scenario::data_dir() + "/models/llama-3.1-8b/config.json");
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("in-memory config.json: the same model as the file, named by its label, with no path", "[server][memory]") {
  const capsim::ModelSpec file = capsim::load_model_config(capsim::scenario::data_dir() + "/models/llama-3.1-8b/config.json");
  const capsim::ModelSpec pasted = capsim::model_config_from_json(llama_8b_config(), "model_config");
  CHECK(pasted.name == "model_config");
  CHECK(pasted.config_path.empty());
  CHECK(pasted.hidden == 4096);
  CHECK(pasted.layers == 32);
  CHECK(pasted.kv_heads == 8);
  CHECK(pasted.hidden == file.hidden);
  CHECK(pasted.intermediate == file.intermediate);
  CHECK(pasted.vocab == file.vocab);
  CHECK(pasted.max_context == file.max_context);
  // Messages name the label, as they name the file for load_model_config.
  CHECK_THROWS_WITH(capsim::model_config_from_json(nlohmann::json{{"model_type", "llama"}}, "model_config"),
                    Catch::StartsWith("model_config: missing field 'hidden_size'"));
}

TEST_CASE("held models: find_model answers a held name until its last handle goes", "[server][memory]") {
  const std::string name = "model_config:test-held";
  const std::string text = llama_8b_config().dump();
  capsim::ModelSpec m = capsim::model_config_from_json(llama_8b_config(), "model_config");
  m.name = name;
  auto first = capsim::scenario::hold_model(name, m, text);
  auto second = capsim::scenario::hold_model(name, m, text);  // the same paste again: shared
  CHECK(capsim::scenario::find_model(name).layers == 32);
  CHECK_THROWS_WITH(capsim::scenario::hold_model(name, m, text + " "), Catch::Contains("another model is held"));
  first.reset();
  CHECK(capsim::scenario::find_model(name).name == name);
  second.reset();
  CHECK_THROWS_AS(capsim::scenario::find_model(name), capsim::Error);
}

TEST_CASE("in-memory assumptions: the same assertions as the file, messages naming the label", "[server][memory][check]") {
  const std::string text =
      "assertions:\n"
      "  - name: chat\n"
      "    model: llama-3.1-8b\n"
      "    deployment: {card: h100-sxm}\n"
      "    workload: {rate: 2, requests: 40}\n"
      "    expect: {slo: {ttft_p95: 2s}}\n";
  capsim_test::TempDir dir("assumptions");
  const std::string path = dir.path() + "/a.yaml";
  std::ofstream(path) << text;
  const capsim::check::Assumptions file = capsim::check::load_assumptions(path);
  const capsim::check::Assumptions memory = capsim::check::assumptions_from_text(text, "request body");
  CHECK(memory.path == "request body");
  REQUIRE(memory.assertions.size() == 1);
  REQUIRE(file.assertions.size() == 1);
  CHECK(memory.assertions[0].name == "chat");
  CHECK(memory.assertions[0].where == "request body: assertions[0]");
  CHECK(memory.assertions[0].spec.deployment.model == file.assertions[0].spec.deployment.model);
  CHECK(memory.assertions[0].expect.size() == file.assertions[0].expect.size());
  CHECK_THROWS_WITH(capsim::check::assumptions_from_text("assertions: []\n", "request body"),
                    Catch::StartsWith("request body: assertions: expected a non-empty list"));
}
