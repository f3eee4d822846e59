// Reading an assumptions file (docs/ci.md): its keys, each assertion's kind and fields,
// tolerances and baselines, checked and resolved into an `Assumptions` that run_checks runs. Bad
// input throws an Error naming the file, the field and the accepted values. Running the
// assertions is in assumptions_run.cc and the JSON and JUnit reports in assumptions_report.cc.
#include "sim/check/assumptions.h"
#include "sim/check/model_error_requirement.h"
#include "sim/check/assumptions_internal.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "sim/scenario/catalogues.h"
#include "sim/answers/simulate_report.h"
#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/input_limits.h"
#include "sim/core/units.h"
#include "sim/core/yaml_fields.h"
#include "sim/llm/memory_plan.h"
#include "sim/plan/capacity.h"
#include "sim/plan/search.h"
#include "sim/report/table.h"

namespace capsim::check {
namespace {

namespace fs = std::filesystem;

using detail::lookup;

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}

std::string scalar(const YAML::Node& n, const std::string& where) {
  if (!n.IsScalar()) throw Error(where + ": expected a single value");
  return n.Scalar();
}

void check_keys(const YAML::Node& n, const std::string& where, const std::vector<std::string>& keys) {
  if (!n.IsMap()) throw Error(where + ": expected a mapping with fields " + join(keys));
  for (const auto& kv : n) {
    const std::string k = scalar(kv.first, where);
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
      throw Error(where + ": unknown field '" + k + "'; accepted: " + join(keys));
    }
  }
}

double positive(const YAML::Node& n, const std::string& where, const std::string& what) {
  const std::string t = scalar(n, where);
  const double v = parse_number(t, where);
  if (!(v > 0)) throw Error(where + ": '" + t + "' is not " + what + " > 0");
  return v;
}

// `kind: true` is the only form of a flag kind; false would assert nothing.
void require_true(const YAML::Node& n, const std::string& where, const std::string& kind) {
  const std::string v = scalar(n, where);
  if (v == "true") return;
  if (v == "false") throw Error(where + ": 'false' asserts nothing; write `" + kind + ": true` or leave it out");
  throw Error(where + ": '" + v + "'; accepted: true");
}

std::vector<std::string> string_list(const YAML::Node& n, const std::string& where) {
  std::vector<std::string> out;
  if (n.IsSequence()) {
    for (std::size_t i = 0; i < n.size(); ++i) out.push_back(scalar(n[i], where + "[" + std::to_string(i) + "]"));
  } else {
    std::stringstream in(scalar(n, where));
    for (std::string x; std::getline(in, x, ',');) {
      if (!x.empty()) out.push_back(x);
    }
  }
  if (out.empty()) throw Error(where + ": empty list");
  return out;
}

void numeric_fields(const nlohmann::json& j, const std::string& prefix, std::vector<std::string>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it->is_number()) out.push_back(prefix + it.key());
    else if (it->is_object()) numeric_fields(*it, prefix + it.key() + ".", out);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string json_text(const nlohmann::json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

// The baseline must be a simulate result of the assertion's scenario, model and deployment.
void check_baseline_source(const nlohmann::json& j, const std::string& file, const std::string& where,
                           const scenario::ScenarioSpec& spec, const scenario::BuiltScenario& b, std::string& note) {
  if (!j.is_object() || !j.contains("scenario") || !j.contains("deployment") || !j["deployment"].is_array()) {
    throw Error(where + ": " + file + " is not a `capsim simulate --json` result (it has no 'scenario' and "
                "'deployment' fields)");
  }
  const auto other = [&](const std::string& field, const std::string& theirs, const std::string& ours) {
    throw Error(where + ": " + file + " is a baseline of another scenario: its " + field + " is '" + theirs +
                "', this assertion's is '" + ours + "'");
  };
  if (json_text(j["scenario"]) != spec.name) other("scenario", json_text(j["scenario"]), spec.name);
  const nlohmann::json& groups = j["deployment"];
  if (groups.size() != b.config.groups.size()) {
    other("deployment", std::to_string(groups.size()) + " card group(s)",
          std::to_string(b.config.groups.size()) + " card group(s)");
  }
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const Deployment& d = b.config.groups[i].deployment;
    const std::vector<std::pair<std::string, std::string>> ours = {
        {"model", d.model.name}, {"card", d.card.name}, {"tp", std::to_string(d.tp)},
        {"replicas", std::to_string(b.config.groups[i].replicas)},
        {"weights", std::string(precision_name(d.weights))}, {"kv_cache", std::string(precision_name(d.kv_cache))}};
    for (const auto& [field, value] : ours) {
      const std::string theirs = groups[i].contains(field) ? json_text(groups[i][field]) : "(missing)";
      if (theirs != value) other("deployment[" + std::to_string(i) + "]." + field, theirs, value);
    }
  }
  if (j.contains("workload") && json_text(j["workload"]) != b.workload_description) {
    note = "the baseline ran another workload: " + json_text(j["workload"]);
  } else if (j.contains("seed") && json_text(j["seed"]) != std::to_string(spec.seed)) {
    note = "the baseline ran seed " + json_text(j["seed"]) + ", this assertion " + std::to_string(spec.seed);
  }
}

Expectation parse_expectation(const std::string& kind, const YAML::Node& n, const std::string& ew,
                              const std::string& base_dir, const scenario::ScenarioSpec& spec,
                              const scenario::BuiltScenario& b, const PriceBook& prices) {
  Expectation e;
  e.kind = kind;
  e.where = ew;
  const auto needs_slos = [&](const char* what) {
    if (spec.slos.empty()) {
      throw Error(ew + ": " + what + " searches within the scenario's SLOs, and it has none; give the "
                  "assertion (or its scenario) `slo: {ttft_p95: 1s, ...}`");
    }
  };
  if (kind == "slo") {
    if (n.IsMap()) {
      for (const auto& kv : n) {
        const std::string k = scalar(kv.first, ew);
        e.slos.push_back(scenario::parse_slo(k, scalar(kv.second, ew + "." + k), ew + "." + k));
      }
      if (e.slos.empty()) throw Error(ew + ": empty; give bounds like {ttft_p95: 1s, tpot_p95: 100ms}");
    } else {
      require_true(n, ew, "slo");
      if (spec.slos.empty()) {
        throw Error(ew + ": 'true' checks the scenario's SLOs, and it has none; give bounds like "
                    "{ttft_p95: 1s, tpot_p95: 100ms}");
      }
      e.slos = spec.slos;
    }
  } else if (kind == "min_users" || kind == "min_rate") {
    e.limit = positive(n, ew, kind == "min_users" ? "a number of users" : "a rate (requests/s)");
    needs_slos(kind.c_str());
    if (kind == "min_users" && !spec.users && !spec.concurrency) {
      throw Error(ew + ": the workload has no users or concurrency (it is an open loop at a rate, a trace "
                  "or offline); use min_rate for requests/s");
    }
    if (kind == "min_rate") {
      if (!spec.rate || spec.users || spec.concurrency || spec.trace) {
        throw Error(ew + ": the workload has no rate (it is closed-loop users, a concurrency, a trace or "
                    "offline); use min_users");
      }
      if (spec.rate->find(',') != std::string::npos) {
        throw Error(ew + ": the workload's rate has stages ('" + *spec.rate + "'); the capacity search "
                    "varies one rate");
      }
    }
  } else if (kind == "max_cost_usd_per_hour") {
    e.limit = positive(n, ew, "a price in $/hour");
    for (const ReplicaGroup& g : b.config.groups) {
      try {
        prices.usd_per_hour(g.deployment.card);
      } catch (const Error& x) {
        throw Error(ew + ": " + x.what());
      }
    }
  } else if (kind == "no_preemption") {
    require_true(n, ew, kind);
  } else if (kind == "fits_in_memory") {
    if (n.IsMap()) {
      check_keys(n, ew, {"context"});
      // Whole and in range before any conversion: a cast of 1e20 to an integer is undefined (it
      // showed as -9223372036854775808 and the check failed instead of refusing the file).
      if (n["context"]) e.context = checked::tokens(positive(n["context"], ew + ".context", "a number of tokens"), 1, ew + ".context");
    } else {
      require_true(n, ew, kind);
    }
  } else if (kind == "plan_cheapest_max_usd_per_hour") {
    if (n.IsMap()) {
      check_keys(n, ew, {"max_usd_per_hour", "cards", "tp", "weights", "kv_cache", "max_cards", "min_goodput",
                         "top", "search_duration"});
      if (!n["max_usd_per_hour"]) throw Error(ew + ".max_usd_per_hour: missing (required)");
      e.limit = positive(n["max_usd_per_hour"], ew + ".max_usd_per_hour", "a price in $/hour");
      if (n["cards"]) {
        for (const auto& c : string_list(n["cards"], ew + ".cards")) {
          try {
            e.space.cards.push_back(scenario::cards().find(c).name);
          } catch (const Error& x) {
            throw Error(ew + ".cards: " + x.what());
          }
        }
      }
      if (n["tp"]) {
        e.space.tps.clear();
        for (const auto& t : string_list(n["tp"], ew + ".tp")) {
          const double v = parse_number(t, ew + ".tp");
          if (v < 1 || v > 64 || v != std::floor(v)) throw Error(ew + ".tp: '" + t + "' is not a GPU count in 1..64");
          e.space.tps.push_back(static_cast<int>(v));
        }
      }
      if (n["weights"]) e.space.weights = string_list(n["weights"], ew + ".weights");
      if (n["kv_cache"]) e.space.kv_caches = string_list(n["kv_cache"], ew + ".kv_cache");
      // The ranges of plan's --max-cards and --top, for the same search.
      if (n["max_cards"]) {
        e.space.max_cards = static_cast<int>(
            checked::whole_in(positive(n["max_cards"], ew + ".max_cards", "a card count"), 1, 100000, ew + ".max_cards"));
      }
      if (n["top"]) {
        e.space.top = static_cast<int>(checked::whole_in(positive(n["top"], ew + ".top", "a count"), 1, 1000, ew + ".top"));
      }
      if (n["min_goodput"]) {
        const double g = parse_number(scalar(n["min_goodput"], ew + ".min_goodput"), ew + ".min_goodput");
        if (g < 0 || g > 1) throw Error(ew + ".min_goodput: must be in 0..1");
        e.space.min_goodput = g;
      }
      if (n["search_duration"]) {
        e.space.search_duration = scalar(n["search_duration"], ew + ".search_duration");
        if (units::parse_time(e.space.search_duration, ew + ".search_duration") <= 0) {
          throw Error(ew + ".search_duration: must be > 0");
        }
      }
    } else {
      e.limit = positive(n, ew, "a price in $/hour");
    }
    if (spec.slos.empty() && !e.space.min_goodput) needs_slos(kind.c_str());
    // The same space `capsim plan` searches: fp8 KV where supported unless kv_cache is given,
    // and the routers a user would try for this workload.
    e.space.try_fp8_kv = !(n.IsMap() && n["kv_cache"]);
    e.space.routers = plan::routers_to_try(spec);
    if (!spec.extra_groups.empty()) {
      throw Error(ew + ": plan searches one card type at a time, and this scenario has " +
                  std::to_string(spec.extra_groups.size() + 1) + " card groups");
    }
  } else if (kind == "baseline") {
    check_keys(n, ew, {"file", "tolerance", "metrics"});
    if (!n["file"]) throw Error(ew + ".file: missing (required): a `capsim simulate --json` result");
    if (!n["tolerance"]) throw Error(ew + ".tolerance: missing (required), e.g. 10%");
    e.tolerance = parse_tolerance(scalar(n["tolerance"], ew + ".tolerance"), ew + ".tolerance");
    fs::path file = scalar(n["file"], ew + ".file");
    if (file.is_relative()) file = fs::path(base_dir) / file;
    e.baseline_file = file.lexically_normal().string();
    const std::string text = read_file(e.baseline_file);
    if (text.empty()) throw Error(ew + ".file: cannot read " + e.baseline_file);
    try {
      e.baseline = parse_json(text, e.baseline_file);
    } catch (const Error& x) {
      throw Error(ew + ".file: " + e.baseline_file + " is not a capsim simulate --json result: " + x.what());
    }
    check_baseline_source(e.baseline, e.baseline_file, ew + ".file", spec, b, e.baseline_note);
    std::vector<BaselineMetric> metrics;
    if (n["metrics"]) {
      const YAML::Node& m = n["metrics"];
      if (!m.IsSequence() || m.size() == 0) {
        throw Error(ew + ".metrics: expected a list like [p95_ttft_ms, output_throughput]");
      }
      for (std::size_t i = 0; i < m.size(); ++i) {
        const std::string mw = ew + ".metrics[" + std::to_string(i) + "]";
        BaselineMetric bm;
        std::optional<bool> worse;
        if (m[i].IsMap()) {
          check_keys(m[i], mw, {"name", "better"});
          if (!m[i]["name"]) throw Error(mw + ".name: missing (required)");
          bm.name = scalar(m[i]["name"], mw + ".name");
          if (m[i]["better"]) {
            const std::string better = scalar(m[i]["better"], mw + ".better");
            if (better != "lower" && better != "higher") {
              throw Error(mw + ".better: '" + better + "'; accepted: lower, higher");
            }
            worse = better == "lower";
          }
        } else {
          bm.name = scalar(m[i], mw);
        }
        if (!worse) worse = higher_is_worse(bm.name);
        if (!worse) {
          throw Error(mw + ": '" + bm.name + "' has no known direction; write {name: " + bm.name +
                      ", better: lower} or {name: " + bm.name + ", better: higher}");
        }
        bm.higher_is_worse = *worse;
        metrics.push_back(bm);
      }
    } else {
      metrics = {{"p95_ttft_ms", true}, {"p95_tpot_ms", true}, {"output_throughput", false}};
    }
    for (std::size_t i = 0; i < metrics.size(); ++i) {
      const nlohmann::json* v = lookup(e.baseline, metrics[i].name);
      if (!v || !v->is_number()) {
        std::vector<std::string> names;
        numeric_fields(e.baseline, "", names);
        if (names.size() > 12) {
          names.resize(12);
          names.push_back("...");
        }
        throw Error(ew + ".metrics[" + std::to_string(i) + "]: '" + metrics[i].name + "' is not a number in " +
                    e.baseline_file + "; numeric fields: " + join(names));
      }
    }
    e.metrics = metrics;
  } else {
    throw Error(ew + ": unknown assertion kind '" + kind + "'; accepted: " + join(assertion_kinds()));
  }
  return e;
}

}  // namespace

namespace detail {

const nlohmann::json* lookup(const nlohmann::json& j, const std::string& dotted) {
  const nlohmann::json* cur = &j;
  std::stringstream in(dotted);
  for (std::string part; std::getline(in, part, '.');) {
    if (!cur->is_object() || !cur->contains(part)) return nullptr;
    cur = &(*cur)[part];
  }
  return cur;
}

}  // namespace detail

const std::vector<std::string>& assertion_kinds() {
  static const std::vector<std::string> kinds = {
      "slo", "min_users", "min_rate", "max_cost_usd_per_hour", "no_preemption", "fits_in_memory",
      "plan_cheapest_max_usd_per_hour", "baseline"};
  return kinds;
}

std::optional<bool> higher_is_worse(const std::string& metric) {
  const std::string leaf = metric.substr(metric.rfind('.') == std::string::npos ? 0 : metric.rfind('.') + 1);
  const auto ends = [&](const std::string& suffix) {
    return leaf.size() >= suffix.size() && leaf.compare(leaf.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends("_ms") || leaf == "failed" || leaf == "preemptions" || leaf == "mean_waiting_requests") return true;
  if (leaf.find("throughput") != std::string::npos || leaf.find("goodput") != std::string::npos ||
      leaf == "completed" || leaf == "prefix_cache_hit_rate") {
    return false;
  }
  return std::nullopt;
}

double parse_tolerance(const std::string& text, const std::string& where) {
  std::string t = text;
  while (!t.empty() && t.back() == ' ') t.pop_back();
  const bool percent = !t.empty() && t.back() == '%';
  if (percent) t.pop_back();
  const bool negative = !t.empty() && t[0] == '-';
  if (negative) t.erase(0, 1);
  double v = 0;
  try {
    v = parse_number(t, where);
  } catch (const Error&) {
    throw Error(where + ": '" + text + "' is not a tolerance; write a percentage like 10% (or a fraction, 0.1)");
  }
  if (negative && v > 0) throw Error(where + ": '" + text + "' is negative; a tolerance is >= 0, e.g. 10%");
  // A bare number is a fraction; "10" is far likelier to mean 10% than +1000%, which would let
  // the regression check pass whatever moved.
  if (!percent && v > 1) {
    throw Error(where + ": '" + text + "' as a fraction is " + std::to_string(static_cast<long long>(std::llround(v * 100))) +
                "%; write " + text + "% for a percentage (a bare number is a fraction, accepted 0 to 1)");
  }
  return percent ? v / 100 : v;
}

namespace {

// load_assumptions and assumptions_from_text: `doc` read from a file (`from_file`) or from text
// named by doc.path() (relative paths in it then resolve against the working folder).
Assumptions assumptions_of(const YamlDoc& doc, bool from_file, const std::string& prices_file,
                           const std::vector<std::string>& price_overrides) {
  const std::string& path = doc.path();
  const YAML::Node& root = doc.root();
  Assumptions out;
  out.path = path;
  if (!root.IsMap()) throw Error(path + ": expected a mapping with an `assertions:` list (docs/ci.md)");
  if (!root["assertions"] && root["workload"]) {
    // A scenario file: one assertion, its own SLOs, checked with their intervals.
    Assertion a;
    a.where = path;
    if (from_file) {
      scenario::load_scenario_file(path, a.spec);
    } else {
      scenario::apply_scenario_yaml(root, path, path + ": ", "", a.spec);
    }
    a.name = a.spec.name;
    a.description = a.spec.description;
    if (a.spec.slos.empty()) {
      throw Error(path + ": slo: missing; a scenario checked by `capsim check` needs SLOs (e.g. slo: {ttft_p95: 1s})");
    }
    scenario::build_scenario(a.spec);  // bad input is refused before anything runs
    Expectation e;
    e.kind = "slo";
    e.where = path + ": slo";
    e.slos = a.spec.slos;
    a.expect.push_back(e);
    out.assertions.push_back(a);
    out.prices = load_prices_with_overrides(prices_file.empty() ? scenario::data_dir() + "/calibration/prices.yaml" : prices_file,
                                            scenario::cards(), price_overrides);
    return out;
  }
  check_keys(root, path, {"description", "prices", "require_model_error", "assertions"});
  out.require_model_error = parse_require_model_error(root, path);
  const std::string base_dir = fs::path(path).parent_path().string();
  if (root["description"]) out.description = scalar(root["description"], path + ": description");
  std::string pf = prices_file;
  if (pf.empty() && root["prices"]) {
    fs::path p = scalar(root["prices"], path + ": prices");
    if (p.is_relative()) p = fs::path(base_dir) / p;
    pf = p.lexically_normal().string();
  }
  if (pf.empty()) pf = scenario::data_dir() + "/calibration/prices.yaml";
  out.prices = load_prices_with_overrides(pf, scenario::cards(), price_overrides);
  const YAML::Node list = root["assertions"];
  if (!list) throw Error(path + ": assertions: missing (required): a list of named assertions");
  if (!list.IsSequence() || list.size() == 0) {
    throw Error(path + ": assertions: expected a non-empty list of {name, scenario, expect}");
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node& n = list[i];
    Assertion a;
    a.where = path + ": assertions[" + std::to_string(i) + "]";
    const std::string p = a.where + ".";
    if (!n.IsMap()) throw Error(a.where + ": expected a mapping with name, scenario (or scenario fields) and expect");
    if (!n["name"]) throw Error(p + "name: missing (required)");
    a.name = scalar(n["name"], p + "name");
    if (a.name.empty()) throw Error(p + "name: empty");
    if (!names.insert(a.name).second) throw Error(p + "name: '" + a.name + "' is used by an earlier assertion");
    if (n["description"]) a.description = scalar(n["description"], p + "description");
    a.spec.name = a.name;
    if (n["scenario"]) {
      fs::path sf = scalar(n["scenario"], p + "scenario");
      if (sf.is_relative()) sf = fs::path(base_dir) / sf;
      try {
        scenario::load_scenario_file(sf.lexically_normal().string(), a.spec);
      } catch (const Error& e) {
        throw Error(p + "scenario: " + e.what());
      }
    }
    scenario::apply_scenario_yaml(n, a.where, p, base_dir, a.spec, {"name", "description", "scenario", "expect"});
    scenario::BuiltScenario b;
    try {
      b = scenario::build_scenario(a.spec);
    } catch (const Error& e) {
      throw Error(a.where + " (its scenario): " + e.what());
    }
    const YAML::Node& ex = n["expect"];
    if (!ex) throw Error(p + "expect: missing (required): what must hold, e.g. {slo: {ttft_p95: 1s}}; kinds: " +
                         join(assertion_kinds()));
    if (!ex.IsMap() || ex.size() == 0) {
      throw Error(p + "expect: expected a mapping of assertion kinds; accepted: " + join(assertion_kinds()));
    }
    for (const auto& kv : ex) {
      const std::string kind = scalar(kv.first, p + "expect");
      a.expect.push_back(parse_expectation(kind, kv.second, p + "expect." + kind, base_dir, a.spec, b, out.prices));
    }
    out.assertions.push_back(std::move(a));
  }
  return out;
}

}  // namespace

Assumptions load_assumptions(const std::string& path, const std::string& prices_file,
                             const std::vector<std::string>& price_overrides) {
  return assumptions_of(YamlDoc::load(path), true, prices_file, price_overrides);
}

Assumptions assumptions_from_text(const std::string& text, const std::string& label, const std::string& prices_file,
                                  const std::vector<std::string>& price_overrides) {
  return assumptions_of(YamlDoc::parse(text, label), false, prices_file, price_overrides);
}

}  // namespace capsim::check
