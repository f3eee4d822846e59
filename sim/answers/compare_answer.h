// `compare`'s answer as every front end gives it: named deployments ('4x rtx-4090',
// '1x h100-sxm + 2x rtx-4090') or a searched mix of two card types on one workload, each
// simulated, with latency, throughput, cost and the verdict. `json` is exactly what
// `capsim compare --json -` prints (docs/json-output.md#compare).
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/plan/search.h"
#include "sim/report/table.h"
#include "sim/scenario/scenario.h"

namespace capsim::answers {

// One group of a deployment: N replicas of CARD at tensor parallelism TP.
struct GroupSpec {
  int replicas = 1;
  std::string card;
  int tp = 1;
  std::string weights = "auto";
  std::string kv_cache = "auto";  // 'kv:PRECISION'
  // Whether the text named them. compare's first group runs the scenario's precisions where the
  // text names none (as `simulate --card` would); a later group runs "auto".
  bool weights_named = false, kv_cache_named = false;
};

// The accepted deployment forms, for messages and --help.
extern const char* const kDeploymentForm;
// "2x rtx-4090 tp2 fp8 + 1x h100-sxm" -> groups. Throws capsim::Error naming `flag`.
std::vector<GroupSpec> parse_deployment_groups(const std::string& text, const std::string& flag = "--deployment");

struct CompareRequest {
  scenario::ScenarioSpec base;
  std::vector<std::string> deployments;  // 'N x CARD [tpK] [PRECISION] [kv:PRECISION]' joined by '+'
  std::string search_mix;                // "CARD_A,CARD_B": every mix up to max_cards
  int max_cards = 8;
  std::optional<double> min_goodput;
  std::vector<std::string> price_overrides;
  std::string prices_file;
  std::function<void()> before_search;   // called once the input is validated
};

struct CompareRow {
  std::string name;
  std::vector<GroupSpec> groups;
  int cards = 0;
  double usd_per_hour = 0;
  plan::Evaluation eval;
  std::string error;  // why it did not run (then eval is empty)
  // false: a group cannot hold one ordinary request (plan_fit, the verdict of `fit` and `plan`);
  // error says which and why, and nothing was simulated.
  bool fits = true;
};

struct CompareAnswer {
  scenario::ScenarioSpec base;
  std::vector<CompareRow> rows;
  int best = -1;           // index of the verdict in rows, -1 when none qualifies
  bool have_slos = false;
  nlohmann::json json;     // exactly what `capsim compare --json -` prints
  std::string text;        // the readable report
  std::optional<TextTable> table;
};

// Throws capsim::Error for bad input (error messages name --deployment, --search-mix) before any
// simulation; Cancelled when the base spec's cancel flag is set. progress(done, total) counts
// deployments simulated (called from a watcher thread).
CompareAnswer answer_compare(const CompareRequest& request,
                             const std::function<void(std::size_t, std::size_t)>& progress);

}  // namespace capsim::answers
