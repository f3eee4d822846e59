// The catalogues as every front end lists them: `capsim list cards|models|engines` and the
// server's GET /v1/cards, /v1/models, /v1/engines. `json` is exactly what `--json -` prints.
#pragma once

#include <nlohmann/json.hpp>

#include "sim/report/table.h"

namespace capsim::answers {

struct Listing {
  nlohmann::json json;     // an array, one object per entry (docs/json-output.md#list)
  TextTable table{{}};     // the readable table
};

Listing list_cards();
Listing list_models();
Listing list_engines();
Listing list_serving();   // serving models (cluster/disaggregation.h)
Listing list_kv_links();  // calibration/links.yaml

}  // namespace capsim::answers
