#include "sim/server/api.h"

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
namespace {

using scenario::ScenarioSpec;

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
void refuse_files(const ScenarioSpec& s, const std::string& pasted_model = "", const std::string& prefix = "") {
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
// A body's scenario, and what must live as long as the job (a pasted config.json).
struct Scenario {
  ScenarioSpec spec;
  std::shared_ptr<const PastedModel> pasted;
};

// `build` false (fit) checks the names and the deployment only: a workload is not needed.
Scenario scenario_of(const nlohmann::json& body, std::vector<std::string> own, const Limits& limits,
                     bool build = true) {
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
    out += (out.empty() ? "" : ",") + (x.is_string() ? x.get<std::string>() : x.dump());
  }
  return out;
}

std::string fmt_range(double lo, double hi) { return fmt("%g", lo) + ".." + fmt("%g", hi); }

template <typename T>
T number(const nlohmann::json& v, const std::string& field, double lo, double hi) {
  if (!v.is_number()) throw HttpError(400, field + ": expected a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi || (std::is_integral_v<T> && x != std::floor(x))) {
    throw HttpError(400, field + ": " + v.dump() + " is not " + (std::is_integral_v<T> ? "a whole number" : "a number") +
                             " in " + fmt_range(lo, hi));
  }
  return static_cast<T>(x);
}

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

// Every answer runs with the job's cancel flag in its specs, and answers bad input found only by
// a run as 400 (422 for a run limit).
template <typename F>
std::string guarded(F&& run) {
  try {
    return run();
  } catch (const Error& e) {
    rethrow_as_http(e);
  }
}

// The job of a command with a base scenario (plan, capacity, compare): `run` answers one request
// whose base carries the job's cancel flag and returns the command's JSON.
template <typename Request, typename Run>
Job base_job(Request request, std::shared_ptr<const PastedModel> keep, Run run) {
  return [request = std::move(request), keep = std::move(keep), run](const CancelFlag& cancel, const ProgressFn& progress) {
    return guarded([&] {
      Request r = request;
      r.base.cancel = cancel;
      return json_text(run(r, progress));
    });
  };
}

Job prepare_simulate(const nlohmann::json& body, const Limits& limits) {
  const nlohmann::json o = options_of(body, "simulate", {"replications"});
  // simulate --replications N: the same seeds and the same capsim.over_seeds, run one after
  // another inside this job (the pool bounds how many jobs run at once).
  const int replications =
      o.contains("replications") ? number<int>(o["replications"], "simulate.replications", 1, 10) : 1;
  const Scenario in = scenario_of(body, {"simulate"}, limits);
  return [in, replications](const CancelFlag& cancel, const ProgressFn&) {
    return guarded([&] {
      ScenarioSpec s = in.spec;
      s.cancel = cancel;
      const scenario::BuiltScenario b = scenario::build_scenario(s);
      const SimulationResult r = simulate(b.config, *b.workload);
      nlohmann::json j = scenario::simulation_json(s, b, r);
      if (replications > 1) {
        const std::vector<SimulationResult> others = plan::run_next_seeds(s, replications - 1, 1);
        std::vector<const SimulationResult*> runs{&r};
        for (const SimulationResult& x : others) runs.push_back(&x);
        j["capsim"]["over_seeds"] = scenario::replications_json(s, runs);
      }
      return json_text(j);
    });
  };
}

Job prepare_fit(const nlohmann::json& body, const Limits& limits) {
  const nlohmann::json o = options_of(body, "fit", {"context"});
  const Scenario in = scenario_of(body, {"fit"}, limits, false);
  std::optional<long long> context;
  if (o.contains("context")) context = number<long long>(o["context"], "fit.context", 1, 1e8);
  return [in, context](const CancelFlag&, const ProgressFn&) {
    return guarded([&] { return json_text(scenario::answer_fit(in.spec.deployment, context).json); });
  };
}

Job prepare_plan(const nlohmann::json& body, const Limits& limits) {
  const nlohmann::json o = options_of(body, "plan", {"cards", "card_class", "explain", "tp", "weights", "kv_cache",
                                                     "max_cards", "min_goodput", "price", "load_profile", "top",
                                                     "search_duration", "replications"});
  const Scenario in = scenario_of(body, {"plan"}, limits);
  scenario::PlanRequest req;
  req.base = in.spec;
  if (o.contains("cards")) {
    req.cards = list_text(o["cards"], "plan.cards");
    catalogue_cards(req.cards, "plan.cards");
  }
  if (o.contains("card_class")) req.card_classes = list_text(o["card_class"], "plan.card_class");
  if (o.contains("explain")) {
    if (!o["explain"].is_string()) throw HttpError(400, "plan.explain: expected a card name such as \"t4\"");
    req.explain = o["explain"].get<std::string>();
    catalogue_card(req.explain, "plan.explain");
  }
  if (o.contains("tp")) req.tps = list_text(o["tp"], "plan.tp");
  if (o.contains("weights")) req.weights = list_text(o["weights"], "plan.weights");
  if (o.contains("kv_cache")) {
    req.kv = list_text(o["kv_cache"], "plan.kv_cache");
    req.kv_given = true;
  }
  if (o.contains("max_cards")) req.max_cards = number<int>(o["max_cards"], "plan.max_cards", 1, limits.max_cards);
  req.min_goodput = min_goodput(o, "plan");
  if (o.contains("price")) req.price_overrides = price_overrides(o["price"], "plan.price");
  if (o.contains("load_profile")) req.load_profile = list_text(o["load_profile"], "plan.load_profile");
  if (o.contains("top")) req.top = number<int>(o["top"], "plan.top", 1, 1000);
  if (o.contains("search_duration")) {
    if (!o["search_duration"].is_string()) throw HttpError(400, "plan.search_duration: expected a duration such as \"5min\"");
    req.search_duration = o["search_duration"].get<std::string>();
    check_duration(req.search_duration, "plan.search_duration", limits);
  }
  if (o.contains("replications")) req.replications = number<int>(o["replications"], "plan.replications", 1, 10);
  if (req.base.slos.empty() && !req.min_goodput) {
    throw HttpError(400, "slo: plan needs at least one SLO (e.g. \"slo\": {\"ttft_p95\": \"1s\"}) or plan.min_goodput");
  }
  return base_job(req, in.pasted, [](const scenario::PlanRequest& r, const ProgressFn& progress) {
    return scenario::answer_plan(r, [&](std::size_t d, std::size_t t, const char* what) {
             if (progress) progress({{"phase", what}, {"done", d}, {"total", t}});
           }).json;
  });
}

Job prepare_capacity(const nlohmann::json& body, const Limits& limits) {
  const nlohmann::json o = options_of(body, "capacity", {"min_goodput", "points"});
  const Scenario in = scenario_of(body, {"capacity"}, limits);
  scenario::CapacityRequest req;
  req.base = in.spec;
  req.min_goodput = min_goodput(o, "capacity");
  if (o.contains("points")) req.points = number<int>(o["points"], "capacity.points", 2, 100);
  if (req.base.slos.empty() && !req.min_goodput) {
    throw HttpError(400, "slo: capacity needs at least one SLO (e.g. \"slo\": {\"ttft_p95\": \"1s\"}) or capacity.min_goodput");
  }
  return base_job(req, in.pasted, [](const scenario::CapacityRequest& r, const ProgressFn& progress) {
    return scenario::answer_capacity(r, [&](const char* phase, std::size_t d, std::size_t t) {
             if (progress) progress({{"phase", phase}, {"done", d}, {"total", t}});
           }).json;
  });
}

Job prepare_compare(const nlohmann::json& body, const Limits& limits) {
  const nlohmann::json o = options_of(body, "compare", {"deployments", "search_mix", "max_cards", "min_goodput", "price"});
  const Scenario in = scenario_of(body, {"compare"}, limits);
  scenario::CompareRequest req;
  req.base = in.spec;
  if (o.contains("deployments")) {
    const nlohmann::json& d = o["deployments"];
    if (!d.is_array()) throw HttpError(400, "compare.deployments: expected a list such as [\"4x rtx-4090\", \"1x h100-sxm\"]");
    for (const auto& x : d) {
      if (!x.is_string()) throw HttpError(400, "compare.deployments: expected texts such as \"4x rtx-4090\"");
      req.deployments.push_back(x.get<std::string>());
    }
  }
  if (o.contains("search_mix")) {
    req.search_mix = list_text(o["search_mix"], "compare.search_mix");
    catalogue_cards(req.search_mix, "compare.search_mix");
  }
  if (o.contains("max_cards")) req.max_cards = number<int>(o["max_cards"], "compare.max_cards", 1, 64);
  req.min_goodput = min_goodput(o, "compare");
  if (o.contains("price")) req.price_overrides = price_overrides(o["price"], "compare.price");
  for (const auto& d : req.deployments) deployment_cards(d, "compare.deployments");
  if (req.deployments.empty() && req.search_mix.empty()) {
    throw HttpError(400, "compare.deployments: give at least one (or compare.search_mix), e.g. [\"4x rtx-4090\", \"1x h100-sxm\"]");
  }
  return base_job(req, in.pasted, [](const scenario::CompareRequest& r, const ProgressFn& progress) {
    return scenario::answer_compare(r, [&](std::size_t d, std::size_t t) {
             if (progress) progress({{"phase", "deployments"}, {"done", d}, {"total", t}});
           }).json;
  });
}

// A check body is an assumptions document (docs/ci.md) as JSON, with its scenarios inline: the
// server reads no scenario, baseline or price file it names.
void refuse_file_fields(const nlohmann::json& j, const std::string& where, int depth = 0) {
  if (depth > kMaxJsonDepth) return;
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      // A baseline is a file whatever its form (expect.baseline: {file, tolerance}).
      if (((k == "scenario" || k == "prices" || k == "trace") && v.is_string()) || k == "baseline") {
        throw HttpError(400, where + k + ": the server reads no files; give it inline");
      }
      refuse_file_fields(v, where + k + ".", depth + 1);
    }
  } else if (j.is_array()) {
    const std::string list = where.empty() ? where : where.substr(0, where.size() - 1);  // "assertions[0]."
    for (std::size_t i = 0; i < j.size(); ++i) refuse_file_fields(j[i], list + "[" + std::to_string(i) + "].", depth + 1);
  }
}

// The names in a check body, before load_assumptions resolves any of them: each assertion's
// scenario fields (or the whole body's, in the one-scenario form) and the cards of a
// plan_cheapest_max_usd_per_hour expectation.
void refuse_check_names(const nlohmann::json& body) {
  const auto scenario_names = [](const nlohmann::json& fields, const std::vector<std::string>& own,
                                 const std::string& prefix) {
    ScenarioSpec s;
    const std::string label = prefix.empty() ? "request body" : "request body: " + prefix.substr(0, prefix.size() - 1);
    try {
      scenario::apply_scenario_yaml(to_yaml(fields), label, prefix, "", s, own);
    } catch (const Error& e) {
      throw HttpError(400, e.what());
    }
    refuse_files(s, "", prefix);
  };
  if (!body.contains("assertions")) {
    if (body.contains("workload")) scenario_names(body, {}, "");
    return;
  }
  const nlohmann::json& list = body["assertions"];
  if (!list.is_array()) return;  // load_assumptions says what it expects
  for (std::size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& a = list[i];
    if (!a.is_object()) continue;
    const std::string prefix = "assertions[" + std::to_string(i) + "].";
    scenario_names(a, {"name", "description", "scenario", "expect"}, prefix);
    if (!a.contains("expect") || !a["expect"].is_object()) continue;
    const nlohmann::json& ex = a["expect"];
    const std::string plan = "plan_cheapest_max_usd_per_hour";
    if (ex.contains(plan) && ex[plan].is_object() && ex[plan].contains("cards")) {
      const std::string field = prefix + "expect." + plan + ".cards";
      catalogue_cards(list_text(ex[plan]["cards"], field), field);
    }
  }
}

Job prepare_check(const nlohmann::json& body, const Limits& limits) {
  refuse_file_fields(body, "");
  refuse_check_names(body);
  // Parsed in memory as the YAML a file would hold: the same reading as `capsim check FILE`.
  check::Assumptions a;
  try {
    YAML::Emitter out;
    out << to_yaml(body);
    a = check::assumptions_from_text(std::string(out.c_str()) + "\n", "request body");
  } catch (const Error& e) {
    throw HttpError(400, e.what());
  }
  for (const auto& as : a.assertions) check_duration(as.spec.duration, as.where + ": workload.duration", limits);
  return [a](const CancelFlag& cancel, const ProgressFn& progress) {
    return guarded([&] {
      check::Assumptions run = a;
      for (auto& as : run.assertions) as.spec.cancel = cancel;
      const check::CheckOutcome c = check::run_checks(run, [&](const check::AssertionOutcome&, std::size_t d, std::size_t t) {
        if (progress) progress({{"phase", "assertions"}, {"done", d}, {"total", t}});
      });
      return json_text(check::check_json(c));
    });
  };
}

// The commands without a scenario (batch-serve, finetune, calibrate): the body is the command's
// flags as fields ("max_batch" for --max-batch), nothing else. `files` are flags that name a file
// or folder: refused, whatever they hold, with `why`.
void command_fields(const nlohmann::json& body, const std::string& command, const std::vector<std::string>& keys,
                    const std::vector<std::string>& files, const std::string& why) {
  for (const auto& [k, v] : body.items()) {
    if (std::find(files.begin(), files.end(), k) != files.end()) throw HttpError(400, k + ": " + why);
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
      throw HttpError(400, k + ": not a field of a " + command + " body; accepted: " + joined(keys));
    }
  }
}

std::string text_field(const nlohmann::json& v, const std::string& field, const std::string& example) {
  if (!v.is_string()) throw HttpError(400, field + ": expected text such as " + example + ", got " + json_type_word(v));
  return v.get<std::string>();
}

bool bool_field(const nlohmann::json& v, const std::string& field) {
  if (!v.is_boolean()) throw HttpError(400, field + ": expected true or false, got " + json_type_word(v));
  return v.get<bool>();
}

// "a,b" or ["a", "b"] -> {"a", "b"}.
std::vector<std::string> list_field(const nlohmann::json& v, const std::string& field) {
  std::vector<std::string> out;
  std::stringstream in(list_text(v, field));
  for (std::string x; std::getline(in, x, ',');) out.push_back(x);
  return out;
}

// Whole numbers the answer range-checks itself (its message, in the body's words): only what
// fits the C++ type is checked here.
template <typename T>
T whole_field(const nlohmann::json& v, const std::string& field) {
  return number<T>(v, field, static_cast<double>(std::numeric_limits<T>::min()),
                   std::min(static_cast<double>(std::numeric_limits<T>::max()), 9007199254740992.0));
}

// The answers name the command's flags (--max-batch); a body names fields (max_batch). Each of
// `fields` as its flag, where a flag ends, is reworded.
std::string as_fields(std::string message, const std::vector<std::string>& fields) {
  for (const auto& f : fields) {
    std::string flag = "--" + f;
    std::replace(flag.begin(), flag.end(), '_', '-');
    for (std::size_t at = message.find(flag); at != std::string::npos; at = message.find(flag, at)) {
      const std::size_t end = at + flag.size();
      const bool whole = end == message.size() || !(std::isalnum(static_cast<unsigned char>(message[end])) || message[end] == '-');
      if (!whole) {
        at = end;
        continue;
      }
      message.replace(at, flag.size(), f);
      at += f.size();
    }
  }
  return message;
}

const std::vector<std::string> kBatchServeFields = {"model",     "flops_per_item", "weights_bytes", "card",     "precision",
                                                    "rate",      "per_day",        "max_batch",     "max_delay", "seq_len",
                                                    "requests",  "duration",       "slo",           "overhead", "seed",
                                                    "price"};

Job prepare_batch_serve(const nlohmann::json& body, const Limits& limits) {
  const std::vector<std::string>& fields = kBatchServeFields;
  command_fields(body, "batch-serve", fields, {"prices", "json"},
                 "the server reads and writes no files; give rents as price: {\"t4\": 0.35}");
  scenario::BatchServeRequest r;
  if (body.contains("model")) {
    r.model = text_field(body["model"], "model", "\"bert-base-uncased\"");
    catalogue_model(*r.model, "model");
  }
  if (body.contains("flops_per_item")) r.flops_per_item = number<double>(body["flops_per_item"], "flops_per_item", -1e300, 1e300);
  if (body.contains("weights_bytes")) r.weights_bytes = text_field(body["weights_bytes"], "weights_bytes", "\"500MB\"");
  if (body.contains("card")) {
    r.card = text_field(body["card"], "card", "\"t4\"");
    catalogue_card(r.card, "card");
  }
  if (body.contains("precision")) r.precision = text_field(body["precision"], "precision", "\"int8\"");
  if (body.contains("rate")) r.rate = number<double>(body["rate"], "rate", -1e300, 1e300);
  if (body.contains("per_day")) r.per_day = number<double>(body["per_day"], "per_day", -1e300, 1e300);
  if (body.contains("max_batch")) r.max_batch = whole_field<int>(body["max_batch"], "max_batch");
  if (body.contains("max_delay")) r.max_delay = text_field(body["max_delay"], "max_delay", "\"10ms\"");
  if (body.contains("seq_len")) r.seq_len = whole_field<long long>(body["seq_len"], "seq_len");
  if (body.contains("requests")) r.requests = whole_field<long long>(body["requests"], "requests");
  if (body.contains("duration")) r.duration = text_field(body["duration"], "duration", "\"1h\"");
  if (body.contains("slo")) {
    const nlohmann::json& s = body["slo"];
    if (s.is_string()) {
      r.slos.push_back(s.get<std::string>());
    } else {
      if (!s.is_array()) throw HttpError(400, "slo: expected a latency objective such as \"p95<=3s\", or a list of them");
      for (const auto& x : s) r.slos.push_back(text_field(x, "slo", "\"p95<=3s\""));
    }
  }
  if (body.contains("overhead")) r.overhead = text_field(body["overhead"], "overhead", "\"1ms\"");
  if (body.contains("seed")) r.seed = number<std::uint64_t>(body["seed"], "seed", 0, 9007199254740992.0);
  if (body.contains("price")) r.price_overrides = price_overrides(body["price"], "price");
  check_duration(r.duration, "duration", limits);
  scenario::BatchServeSetup setup;
  try {
    setup = scenario::resolve_batch_serve(r);
  } catch (const Error& e) {
    throw HttpError(400, as_fields(e.what(), fields));
  }
  const BatchServeConfig& c = setup.config;
  const double items = c.duration_s ? c.rate * *c.duration_s : static_cast<double>(c.requests);
  if (items > static_cast<double>(limits.max_requests)) {
    throw HttpError(422, std::string(c.duration_s ? "duration" : "requests") + ": " + fmt("%.0f", items) +
                             " items is more than the server runs (at most " + std::to_string(limits.max_requests) +
                             " per run; capsim serve --max-requests)");
  }
  return [setup](const CancelFlag&, const ProgressFn&) {
    return guarded([&] { return json_text(scenario::batch_serve_json(scenario::answer_batch_serve(setup))); });
  };
}

const std::vector<std::string> kFinetuneFields = {"model", "method", "optimizer", "batch", "seq_len", "lora_rank",
                                                  "gradient_checkpointing", "flash_attention", "cards", "gpus", "price"};

Job prepare_finetune(const nlohmann::json& body, const Limits&) {
  const std::vector<std::string>& fields = kFinetuneFields;
  command_fields(body, "finetune", fields, {"prices", "json"},
                 "the server reads and writes no files; give rents as price: {\"h100-sxm\": 2.49}");
  scenario::FinetuneRequest r;
  if (body.contains("model")) r.model = text_field(body["model"], "model", "\"llama-2-13b\"");
  catalogue_model(r.model, "model");
  if (body.contains("method")) r.method = text_field(body["method"], "method", "\"qlora\"");
  if (body.contains("optimizer")) r.optimizer = text_field(body["optimizer"], "optimizer", "\"adamw\"");
  if (body.contains("batch")) r.batch = whole_field<long long>(body["batch"], "batch");
  if (body.contains("seq_len")) r.seq_len = whole_field<long long>(body["seq_len"], "seq_len");
  if (body.contains("lora_rank")) r.lora_rank = whole_field<int>(body["lora_rank"], "lora_rank");
  if (body.contains("gradient_checkpointing")) {
    r.gradient_checkpointing = bool_field(body["gradient_checkpointing"], "gradient_checkpointing");
  }
  if (body.contains("flash_attention")) r.flash_attention = bool_field(body["flash_attention"], "flash_attention");
  if (body.contains("cards")) {
    r.cards = list_field(body["cards"], "cards");
    for (const auto& c : r.cards) catalogue_card(c, "cards");
  }
  if (body.contains("gpus")) r.gpus = whole_field<int>(body["gpus"], "gpus");
  if (body.contains("price")) r.price_overrides = price_overrides(body["price"], "price");
  // Arithmetic only (microseconds): answered here, so every refusal comes before the queue.
  std::string answer;
  try {
    answer = json_text(scenario::finetune_json(scenario::answer_finetune(r)));
  } catch (const Error& e) {
    throw HttpError(400, as_fields(e.what(), fields));
  }
  return [answer](const CancelFlag&, const ProgressFn&) { return answer; };
}

const std::vector<std::string> kCalibrateFields = {"card", "profile", "force"};

// The fit of `capsim calibrate fit` to a profile the body carries (capsim-calibrate's JSON
// object). No path: the server reads no profile, Vidur folder or card file a client names, and
// writes no fitted profile (the answer's "out" is null).
Job prepare_calibrate(const nlohmann::json& body, const Limits&) {
  const std::vector<std::string>& fields = kCalibrateFields;
  command_fields(body, "calibrate", fields, {"vidur", "sku", "out", "json", "path"},
                 "the server reads and writes no files; send the profile itself as profile: {...} "
                 "(capsim-calibrate's JSON)");
  scenario::CalibrateFitRequest r;
  if (body.contains("card")) r.card = text_field(body["card"], "card", "\"h100-sxm\"");
  catalogue_card(r.card, "card");
  if (body.contains("force")) r.force = bool_field(body["force"], "force");
  if (!body.contains("profile")) {
    throw HttpError(400, "profile: missing; send capsim-calibrate's JSON object (docs/calibration.md#profile)");
  }
  const nlohmann::json& p = body["profile"];
  if (p.is_string()) {
    throw HttpError(400, "profile: the server reads no files; send the profile itself, capsim-calibrate's JSON "
                         "object, not a path");
  }
  if (!p.is_object()) {
    throw HttpError(400, std::string("profile: expected capsim-calibrate's JSON object, got ") + json_type_word(p));
  }
  try {
    r.measured = calibration::parse_profile(p, "profile");
  } catch (const Error& e) {
    throw HttpError(400, e.what());
  }
  r.measured->path = "profile";
  r.command_line = "POST /v1/calibrate";
  return [r](const CancelFlag&, const ProgressFn&) {
    try {
      return json_text(scenario::calibrate_fit_json(scenario::answer_calibrate_fit(r), std::nullopt));
    } catch (const Error& e) {
      throw HttpError(400, as_fields(e.what(), kCalibrateFields));
    }
  };
}

}  // namespace

Endpoint route(std::string_view method, std::string_view path) {
  struct Entry {
    std::string_view path;
    std::string_view method;
    Endpoint endpoint;
  };
  static constexpr Entry kTable[] = {
      {"/healthz", "GET", Endpoint::kHealth},       {"/v1/cards", "GET", Endpoint::kCards},
      {"/v1/models", "GET", Endpoint::kModels},     {"/v1/engines", "GET", Endpoint::kEngines},
      {"/openapi.json", "GET", Endpoint::kOpenApi}, {"/", "GET", Endpoint::kPage},
      {"/v1/fit", "POST", Endpoint::kFit},          {"/v1/simulate", "POST", Endpoint::kSimulate},
      {"/v1/plan", "POST", Endpoint::kPlan},        {"/v1/capacity", "POST", Endpoint::kCapacity},
      {"/v1/compare", "POST", Endpoint::kCompare},  {"/v1/check", "POST", Endpoint::kCheck},
      {"/v1/batch-serve", "POST", Endpoint::kBatchServe}, {"/v1/finetune", "POST", Endpoint::kFinetune},
      {"/v1/calibrate", "POST", Endpoint::kCalibrate},
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
    case Endpoint::kCards: return json_text(scenario::list_cards().json);
    case Endpoint::kModels: return json_text(scenario::list_models().json);
    case Endpoint::kEngines: return json_text(scenario::list_engines().json);
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
    default: throw HttpError(500, "prepare: not a POST endpoint");
  }
}

std::string error_json(int status, const std::string& message) {
  // The message may quote what a client sent (a path, a parser's "last read: ..."): bytes that
  // are not UTF-8 are replaced rather than thrown on (sim/http/request_guard.h).
  return http::safe_dump(nlohmann::json{{"error", message}, {"status", status}}, 2) + "\n";
}

}  // namespace capsim::server
