// The scenario file's fields, section by section, as the tables apply_scenario_yaml reads them
// with (sim/scenario/field_table.h): for the reference in docs/data-formats.md and the HTTP
// API's schema of a scenario body.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/scenario/field_table.h"

namespace capsim::scenario {

// The file's top level first, then each section a row of it (or of another section) names.
std::vector<SectionDoc> scenario_field_sections();
// What `capsim list scenario-fields` prints; docs/data-formats.md#scenario-fields holds it.
std::string scenario_fields_markdown();
// The JSON schema of a scenario body's fields (the root mapping), as sim/server/openapi.cc serves it.
nlohmann::ordered_json scenario_json_schema();

}  // namespace capsim::scenario
