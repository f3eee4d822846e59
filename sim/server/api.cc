// The HTTP API's routes and the readers of a request body that every command shares (declared in
// api.h and api_internal.h): the JSON -> YAML bridge to the scenario reader, the checks that a
// body names only what the catalogues loaded at start hold (the server opens no file a request
// names), the scenario of a body and the typed fields of its options. Each command's job is made in
// api_scenario_jobs.cc (simulate, fit, plan, capacity, compare, check) or api_command_jobs.cc
// (batch-serve, finetune, calibrate).
#include "sim/server/api.h"
#include "sim/server/api_internal.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <sstream>
#include <yaml-cpp/yaml.h>

#include "sim/check/assumptions.h"
#include "sim/cluster/simulation.h"
#include "sim/core/error.h"
#include "sim/core/input_limits.h"
#include "sim/core/units.h"
#include "sim/http/request_guard.h"
#include "sim/llm/speculative.h"
#include "sim/plan/search.h"
#include "sim/report/json_output.h"
#include "sim/report/table.h"
#include "sim/answers/batch_serve_answer.h"
#include "sim/answers/calibrate_answer.h"
#include "sim/answers/capacity_answer.h"
#include "sim/scenario/catalogues.h"
#include "sim/scenario/held_models.h"
#include "sim/llm/model_config_json.h"
#include "sim/answers/compare_answer.h"
#include "sim/answers/finetune_answer.h"
#include "sim/answers/fit_answer.h"
#include "sim/answers/listings.h"
#include "sim/answers/plan_answer.h"
#include "sim/scenario/scenario.h"
#include "sim/answers/simulate_report.h"

namespace capsim::server {
namespace detail {

// The bytes `--json -` prints (sim/report/json_output.cc: dump(2) and a newline).
std::string json_text(const nlohmann::json& j) { return j.dump(2) + "\n"; }

// JSON -> the YAML node apply_scenario_yaml reads, so a body and a file share one parser and one
// set of messages. Numbers keep nlohmann's shortest round-trip text.
YAML::Node to_yaml(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object: {
      YAML::Node n(YAML::NodeType::Map);
      for (const auto& [k, v] : j.items()) n[k] = to_yaml(v);
      return n;
    }
    case nlohmann::json::value_t::array: {
      YAML::Node n(YAML::NodeType::Sequence);
      for (const auto& v : j) n.push_back(to_yaml(v));
      return n;
    }
    case nlohmann::json::value_t::string: return YAML::Node(j.get<std::string>());
    case nlohmann::json::value_t::null: return YAML::Node(YAML::NodeType::Null);
    default: return YAML::Node(j.dump());  // numbers and booleans as JSON writes them
  }
}

nlohmann::json parse_body(std::string_view body) {
  if (body.empty()) throw HttpError(400, "request body: empty; expected a JSON object of scenario fields (docs/server.md)");
  nlohmann::json j;
  try {
    j = parse_json(body, "request body");
  } catch (const Error& e) {
    throw HttpError(400, e.what());
  }
  if (!j.is_object()) {
    throw HttpError(400, std::string("request body: expected a JSON object of scenario fields, got ") + json_type_word(j));
  }
  return j;
}

// A pasted config.json ("model_config": {...}), held in memory (scenario::hold_model) under a
// name of its own while the jobs that use it live: nothing is written to disk. The name is
// "model_config:" and a hash of the config's text, so the same paste gets the same answer.
class PastedModel {
 public:
  explicit PastedModel(const nlohmann::json& config) {
    const std::string text = config.dump();
    std::uint64_t hash = 1469598103934665603ULL;  // FNV-1a
    for (const unsigned char c : text) hash = (hash ^ c) * 1099511628211ULL;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
    name_ = std::string("model_config:") + hex;
    ModelSpec model;
    try {
      model = model_config_from_json(config, "model_config");
      model.name = name_;
    } catch (const Error& e) {
      throw HttpError(400, e.what());
    }
    try {
      held_ = scenario::hold_model(name_, std::move(model), text);
    } catch (const Error& e) {
      throw HttpError(503, std::string(e.what()) + "; retry later");
    }
  }
  const std::string& path() const { return name_; }

 private:
  std::string name_;
  std::shared_ptr<const void> held_;
};

// The server opens no file a request names (a client on the network must not make it open, stat
// or read the server's files, nor block its I/O thread on a FIFO): every name a request gives
// resolves only in the catalogues loaded at start (GET /v1/cards, /v1/models, /v1/engines).
// Their lookups also take paths (a card or engine .yaml, a config.json or its folder), so a name
// is matched against the catalogue's names and aliases here, before anything resolves it; a
// refusal quotes the request's own text and where accepted names come from, never a file.
std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

void catalogue_card(const std::string& name, const std::string& field) {
  const std::string key = lower(name);
  for (const Card& c : scenario::cards().cards()) {
    if (lower(c.name) == key) return;
    for (const auto& a : c.aliases) {
      if (lower(a) == key) return;
    }
  }
  throw HttpError(400, field + ": '" + name + "' is not a card of the catalogue (the server takes catalogue names "
                       "only, not file paths); accepted (GET /v1/cards): " + joined(scenario::cards().names()));
}

void catalogue_model(const std::string& name, const std::string& field) {
  if (scenario::models().entry(name)) return;
  std::vector<std::string> names;
  for (const auto& e : scenario::models().entries()) names.push_back(e.name);
  throw HttpError(400, field + ": '" + name + "' is not in the catalogue (the server takes catalogue names or their "
                       "Hugging Face ids, not file paths); accepted (GET /v1/models): " + joined(names));
}

void catalogue_engine(const std::string& name, const std::string& field) {
  const std::vector<std::string> names = scenario::engines().names();
  if (std::find(names.begin(), names.end(), name) != names.end()) return;
  throw HttpError(400, field + ": '" + name + "' is not an engine of the catalogue (the server takes catalogue "
                       "names only, not file paths); accepted (GET /v1/engines): " + joined(names));
}

// Distribution::parse reads a CSV for empirical:FILE:COLUMN; the other kinds are numbers.
void refuse_empirical(const std::string& text, const std::string& field) {
  if (text.substr(0, text.find(':')) == "empirical") {
    throw HttpError(400, field + ": empirical distributions read a file; the server takes fixed, uniform, normal, "
                             "lognormal, exponential and geometric ones");
  }
}

// The speculative section's draft model (method draft_model) is a model the deployment loads; the
// other methods' `model` names a checkpoint capsim never opens.
void refuse_draft_file(const ScenarioSpec& s, const std::string& field) {
  if (!s.deployment.speculative_config) return;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(*s.deployment.speculative_config);
  } catch (const nlohmann::json::exception&) {
    return;  // not from a body (apply_scenario_yaml writes valid JSON); resolve refuses it
  }
  if (!j.is_object() || !j.contains("method") || !j["method"].is_string() || !j.contains("model") ||
      !j["model"].is_string()) {
    return;
  }
  try {
    const SpeculativeMethod& m = find_speculative_method(j["method"].get<std::string>(), "speculative.method");
    if (m.proposer != Proposer::kDraftModel) return;
  } catch (const Error&) {
    return;  // an unknown method is refused by resolve, before any model is looked up
  }
  catalogue_model(j["model"].get<std::string>(), field);
}

// Every name and file-naming field of a scenario read from a body. Fields are named as the body
// has them (s.origin), else `prefix` + the field ("assertions[0]." in a check body).
void refuse_files(const ScenarioSpec& s, const std::string& pasted_model, const std::string& prefix) {
  const auto field = [&](const char* flag, const char* name) {
    const auto it = s.origin.find(flag);
    return it != s.origin.end() ? it->second : prefix + name;
  };
  if (s.trace) {
    throw HttpError(400, prefix + "workload.trace: the server reads no trace files; send a synthetic workload "
                                  "(users, concurrency or rate)");
  }
  if (s.deployment.model != pasted_model) catalogue_model(s.deployment.model, field("--model", "model"));
  refuse_draft_file(s, prefix + "speculative.model");
  catalogue_card(s.deployment.card, field("--card", "deployment.card"));
  for (const auto& g : s.extra_groups) catalogue_card(g.card, g.where.empty() ? prefix + "deployment.card" : g.where + ".card");
  if (s.decode_pool) {
    catalogue_card(s.decode_pool->card, s.decode_pool->where.empty() ? prefix + "disaggregation.decode.card"
                                                                     : s.decode_pool->where + ".card");
  }
  catalogue_engine(s.deployment.engine, field("--engine", "deployment.engine"));
  refuse_empirical(s.input_tokens, field("--input-tokens", "workload.input_tokens"));
  refuse_empirical(s.output_tokens, field("--output-tokens", "workload.output_tokens"));
  refuse_empirical(s.think_time, field("--think-time", "workload.think_time"));
  refuse_empirical(s.turns, field("--turns", "workload.turns"));
}

// The run limits (sim/core/run_limits.h) speak of flags; a body has fields. Same numbers.
[[noreturn]] void rethrow_as_http(const Error& e) {
  std::string m = e.what();
  const std::string lift = "; pass --allow-large to run it anyway";
  if (const auto at = m.find(lift); at != std::string::npos) {
    m.replace(at, lift.size(), "; the server's limit (docs/server.md#limits)");
    throw HttpError(422, m);
  }
  throw HttpError(400, m);
}

void check_duration(const std::optional<std::string>& text, const std::string& field, const Limits& limits) {
  if (!text) return;
  double s = 0;
  try {
    s = units::parse_time(*text, field);
  } catch (const Error& e) {
    throw HttpError(400, e.what());
  }
  if (s > limits.max_duration_s) {
    throw HttpError(422, field + ": " + *text + " is longer than the server runs (at most " +
                             fmt("%g", limits.max_duration_s) + " s simulated; capsim serve --max-duration)");
  }
}

// The body's scenario fields; `own` names the command's options object ("plan", ...), accepted
// and left for the caller.
// `build` false (fit) checks the names and the deployment only: a workload is not needed.
Scenario scenario_of(const nlohmann::json& body, std::vector<std::string> own, const Limits& limits,
                     bool build) {
  Scenario out;
  ScenarioSpec& s = out.spec;
  own.push_back("model_config");
  if (body.contains("model_config")) {
    if (!body["model_config"].is_object()) throw HttpError(400, "model_config: expected the JSON object of a Hugging Face config.json");
    if (body.contains("model")) throw HttpError(400, "model, model_config: give one (a catalogue name or a pasted config.json)");
    out.pasted = std::make_shared<const PastedModel>(body["model_config"]);
    s.deployment.model = out.pasted->path();
  }
  try {
    scenario::apply_scenario_yaml(to_yaml(body), "request body", "", scenario::data_dir(), s, own);
  } catch (const Error& e) {
    throw HttpError(400, e.what());
  }
  refuse_files(s, out.pasted ? out.pasted->path() : "");
  check_duration(s.duration, "workload.duration", limits);
  try {
    scenario::validate_names(s);
    // Every field checked, the run limits too, before the queue.
    if (build) (void)scenario::build_scenario(s); else (void)s.deployment.resolve();
  } catch (const Error& e) {
    rethrow_as_http(e);
  }
  return out;
}

// The command's own options object: absent is {}; anything else must be an object of `keys`.
nlohmann::json options_of(const nlohmann::json& body, const std::string& name, const std::vector<std::string>& keys) {
  if (!body.contains(name)) return nlohmann::json::object();
  const nlohmann::json& o = body[name];
  std::string list;
  for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
  if (!o.is_object()) throw HttpError(400, name + ": expected an object with fields among: " + list);
  for (const auto& [k, v] : o.items()) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
      throw HttpError(400, name + ": unknown field '" + k + "'; accepted: " + list);
    }
  }
  return o;
}

// "a,b" or ["a", "b"] -> "a,b" (the flags' list form, parsed by the answer).
std::string list_text(const nlohmann::json& v, const std::string& field) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return v.dump();
  if (!v.is_array()) throw HttpError(400, field + ": expected a list (or comma-separated text)");
  std::string out;
  for (const auto& x : v) {
    if (!x.is_string() && !x.is_number()) throw HttpError(400, field + ": expected names or numbers in the list");
    if (!out.empty()) out += ',';
    out += x.is_string() ? x.get<std::string>() : x.dump();
  }
  return out;
}

std::string fmt_range(double lo, double hi) { return fmt("%g", lo) + ".." + fmt("%g", hi); }

// {"h100-sxm": 2.49} -> {"h100-sxm=2.49"} (plan's and compare's --price).
std::vector<std::string> price_overrides(const nlohmann::json& v, const std::string& field) {
  if (!v.is_object()) throw HttpError(400, field + ": expected an object of card: usd_per_hour");
  std::vector<std::string> out;
  for (const auto& [card, usd] : v.items()) {
    catalogue_card(card, field);
    out.push_back(card + "=" + std::to_string(number<double>(usd, field + "." + card, 0, 1e6)));
  }
  return out;
}

// Each name of a comma-separated card list (plan --cards, compare --search-mix), split as the
// commands split it.
void catalogue_cards(const std::string& list, const std::string& field) {
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) {
    if (!name.empty()) catalogue_card(name, field);
  }
}

// The card of each group of a compare deployment ("4x rtx-4090 + 1x h100-sxm tp2"): the word
// after the count, where parse_deployment_groups (sim/answers/compare_answer.h) looks it up.
void deployment_cards(const std::string& text, const std::string& field) {
  std::stringstream parts(text);
  for (std::string part; std::getline(parts, part, '+');) {
    std::stringstream words(part);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    std::size_t i = 0;
    if (!w.empty()) {
      std::string count = w[0];
      if (!count.empty() && (count.back() == 'x' || count.back() == 'X')) count.pop_back();
      if (!count.empty() && std::all_of(count.begin(), count.end(), [](unsigned char c) { return std::isdigit(c); })) {
        i = 1;
        if (i < w.size() && (w[i] == "x" || w[i] == "X")) ++i;
      }
    }
    if (i < w.size()) catalogue_card(w[i], field);
  }
}

std::optional<double> min_goodput(const nlohmann::json& o, const std::string& field) {
  if (!o.contains("min_goodput")) return std::nullopt;
  return number<double>(o["min_goodput"], field + ".min_goodput", 0, 1);
}

}  // namespace detail

using namespace detail;

Endpoint route(std::string_view method, std::string_view path) {
  struct Entry {
    std::string_view path;
    std::string_view method;
    Endpoint endpoint;
  };
  static constexpr Entry kTable[] = {
      {"/healthz", "GET", Endpoint::kHealth},       {"/v1/cards", "GET", Endpoint::kCards},
      {"/v1/models", "GET", Endpoint::kModels},     {"/v1/engines", "GET", Endpoint::kEngines},
      {"/v1/serving", "GET", Endpoint::kServing},   {"/v1/links", "GET", Endpoint::kLinks},
      {"/openapi.json", "GET", Endpoint::kOpenApi}, {"/", "GET", Endpoint::kPage},
      {"/v1/fit", "POST", Endpoint::kFit},          {"/v1/simulate", "POST", Endpoint::kSimulate},
      {"/v1/plan", "POST", Endpoint::kPlan},        {"/v1/capacity", "POST", Endpoint::kCapacity},
      {"/v1/compare", "POST", Endpoint::kCompare},  {"/v1/check", "POST", Endpoint::kCheck},
      {"/v1/batch-serve", "POST", Endpoint::kBatchServe}, {"/v1/finetune", "POST", Endpoint::kFinetune},
      {"/v1/calibrate", "POST", Endpoint::kCalibrate},   {"/v1/calibrate/runs", "POST", Endpoint::kCalibrateRuns},
      {"/v1/roofline", "POST", Endpoint::kRoofline},     {"/v1/kernels", "POST", Endpoint::kKernels},
      {"/v1/diff", "POST", Endpoint::kDiff},             {"/v1/sweep", "POST", Endpoint::kSweep},
  };
  for (const Entry& e : kTable) {
    if (e.path != path) continue;
    // HEAD is GET without a body (the transport drops it).
    if (e.method == method || (e.method == "GET" && method == "HEAD")) return e.endpoint;
    throw HttpError(405, std::string(path) + ": method " + std::string(method) + " not allowed; accepted: " +
                             std::string(e.method));
  }
  // The page's own files (bundled script and styles) are served below /assets/.
  if (path.rfind("/assets/", 0) == 0 && (method == "GET" || method == "HEAD")) return Endpoint::kPage;
  throw HttpError(404, std::string(path) + ": no such endpoint; see /openapi.json");
}

bool runs_on_pool(Endpoint e) { return e >= Endpoint::kFit; }

bool reports_progress(Endpoint e) {
  return e == Endpoint::kPlan || e == Endpoint::kCapacity || e == Endpoint::kCompare || e == Endpoint::kCheck;
}

std::string answer_get(Endpoint e) {
  switch (e) {
    case Endpoint::kHealth: return json_text({{"status", "ok"}});
    case Endpoint::kCards: return json_text(answers::list_cards().json);
    case Endpoint::kModels: return json_text(answers::list_models().json);
    case Endpoint::kEngines: return json_text(answers::list_engines().json);
    case Endpoint::kServing: return json_text(answers::list_serving().json);
    case Endpoint::kLinks: return json_text(answers::list_kv_links().json);
    case Endpoint::kOpenApi: return openapi_json();
    default: throw HttpError(500, "answer_get: not a GET endpoint");
  }
}

Job prepare(Endpoint e, std::string_view body, const Limits& limits) {
  if (body.size() > limits.max_body_bytes) {
    throw HttpError(413, "request body: " + std::to_string(body.size()) + " bytes; the limit is " +
                             std::to_string(limits.max_body_bytes));
  }
  const nlohmann::json j = parse_body(body);
  switch (e) {
    case Endpoint::kSimulate: return prepare_simulate(j, limits);
    case Endpoint::kFit: return prepare_fit(j, limits);
    case Endpoint::kPlan: return prepare_plan(j, limits);
    case Endpoint::kCapacity: return prepare_capacity(j, limits);
    case Endpoint::kCompare: return prepare_compare(j, limits);
    case Endpoint::kCheck: return prepare_check(j, limits);
    case Endpoint::kBatchServe: return prepare_batch_serve(j, limits);
    case Endpoint::kFinetune: return prepare_finetune(j, limits);
    case Endpoint::kCalibrate: return prepare_calibrate(j, limits);
    case Endpoint::kCalibrateRuns: return prepare_calibrate_runs(j, limits);
    case Endpoint::kRoofline: return prepare_roofline(j, limits);
    case Endpoint::kKernels: return prepare_kernels(j, limits);
    case Endpoint::kDiff: return prepare_diff(j, limits);
    case Endpoint::kSweep: return prepare_sweep(j, limits);
    default: throw HttpError(500, "prepare: not a POST endpoint");
  }
}

std::string error_json(int status, const std::string& message) {
  // The message may quote what a client sent (a path, a parser's "last read: ..."): bytes that
  // are not UTF-8 are replaced rather than thrown on (sim/http/request_guard.h).
  return http::safe_dump(nlohmann::json{{"error", message}, {"status", status}}, 2) + "\n";
}

}  // namespace capsim::server
