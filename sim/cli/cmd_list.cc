// `capsim list cards|models|engines`: what the catalogues hold.
#include <iostream>

#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/core/error.h"
#include "sim/report/json_output.h"
#include "sim/report/table.h"
#include "sim/answers/listings.h"
#include "sim/scenario/scenario_fields.h"

namespace capsim::cli {
namespace {

int print_listing(const answers::Listing& l, const std::string& json) {
  if (json != "-") l.table.print(std::cout);
  if (!json.empty()) write_json(json, l.json);
  return 0;
}

// The scenario file's fields as Markdown tables (docs/data-formats.md#scenario-fields), or as
// the JSON schema the HTTP API serves for a scenario body.
int print_scenario_fields(const std::string& json) {
  if (json != "-") std::cout << scenario::scenario_fields_markdown() << "\n";
  if (!json.empty()) write_json(json, nlohmann::json::parse(scenario::scenario_json_schema().dump()));
  return 0;
}

}  // namespace

void add_list_command(CLI::App& app, int& exit_code) {
  auto what = std::make_shared<std::string>();
  auto json = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("list", "list the catalogues: cards, models, engines, serving models, KV links, scenario fields");
  cmd->add_option("what", *what, "cards, models, engines, serving, links or scenario-fields")->required();
  cmd->add_option("--json", *json, "also write the list as JSON to FILE ('-' = stdout only)");
  cmd->footer("examples:\n  capsim list cards\n  capsim list models --json models.json");
  cmd->callback([what, json, &exit_code] {
    if (*what == "cards") exit_code = print_listing(answers::list_cards(), *json);
    else if (*what == "models") exit_code = print_listing(answers::list_models(), *json);
    else if (*what == "engines") exit_code = print_listing(answers::list_engines(), *json);
    else if (*what == "serving") exit_code = print_listing(answers::list_serving(), *json);
    else if (*what == "links") exit_code = print_listing(answers::list_kv_links(), *json);
    else if (*what == "scenario-fields") exit_code = print_scenario_fields(*json);
    else throw Error(unknown_name_message("list", *what, {"cards", "models", "engines", "serving", "links", "scenario-fields"}));
  });
}

}  // namespace capsim::cli
