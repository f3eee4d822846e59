#include "sim/report/diff.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/input_limits.h"

namespace capsim::diff {
namespace {

using Flat = std::map<std::string, nlohmann::json>;

std::string text_of(const nlohmann::json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

std::string number_text(double v) {
  std::ostringstream s;
  s.precision(10);
  s << v;
  return s.str();
}

// What identifies one entry of a list, so entries are matched by identity, not position.
std::string element_key(const std::string& list_path, const nlohmann::json& e, std::size_t index) {
  if (list_path != "deployment" && e.contains("card") && e.contains("tp") && e.contains("weights")) {
    std::string k = text_of(e["card"]) + " tp" + text_of(e["tp"]);
    if (e.contains("weights")) k += " " + text_of(e["weights"]);
    if (e.contains("kv_cache")) k += "/kv " + text_of(e["kv_cache"]);
    return k;
  }
  if (list_path != "deployment") {
    for (const char* field : {"slo", "deployment", "name", "index"}) {
      if (e.contains(field) && !e[field].is_object() && !e[field].is_array()) return text_of(e[field]);
    }
    if (e.contains("load") && e["load"].is_number()) return "load=" + number_text(e["load"].get<double>());
  }
  return std::to_string(index);
}

void flatten(const nlohmann::json& j, const std::string& path, Flat& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) flatten(*it, path.empty() ? it.key() : path + "." + it.key(), out);
    return;
  }
  if (j.is_array()) {
    const bool objects = !j.empty() && std::all_of(j.begin(), j.end(), [](const auto& e) { return e.is_object(); });
    const bool numbers = !j.empty() && std::all_of(j.begin(), j.end(), [](const auto& e) { return e.is_number(); });
    if (objects) {
      std::map<std::string, int> seen;
      for (std::size_t i = 0; i < j.size(); ++i) {
        std::string key = element_key(path, j[i], i);
        if (++seen[key] > 1) key += " #" + std::to_string(seen[key]);
        flatten(j[i], path + "[" + key + "]", out);
      }
    } else if (numbers) {
      for (std::size_t i = 0; i < j.size(); ++i) out[path + "[" + std::to_string(i) + "]"] = j[i];
    } else {
      out[path] = j.dump();
    }
    return;
  }
  out[path] = j;
}

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

bool is_configuration(const std::string& kind, const std::string& path) {
  const auto top = [&](const std::vector<std::string>& names) {
    for (const auto& n : names) {
      if (path == n || starts_with(path, n + ".") || starts_with(path, n + "[")) return true;
    }
    return false;
  };
  if (kind == "simulate") {
    if (top({"scenario", "workload", "seed", "router", "scheduler", "deployment", "capsim.warmup_seconds"})) return true;
    return starts_with(path, "capsim.slos[") && path.size() > 9 && path.compare(path.size() - 9, 9, ".bound_ms") == 0;
  }
  // The seed (capacity: the first of its replications, and how many) is configuration too: two
  // answers from other seeds differ by sampling noise, not by a change in capsim.
  if (kind == "plan") return top({"scenario", "model", "slos", "seed"});
  if (kind == "capacity") return top({"scenario", "load_axis", "first_seed", "replications"});
  return top({"scenario", "seed"});
}

// The entry a path belongs to: "options[h100-sxm tp1 bf16/kv bf16]" for
// "options[h100-sxm tp1 bf16/kv bf16].usd_per_hour"; empty for paths outside lists of entries.
std::string entry_of(const std::string& path) {
  const auto close = path.find(']');
  if (close == std::string::npos) return "";
  return path.substr(0, close + 1);
}

}  // namespace

Input load_result(const std::string& path) {
  const std::string text = read_input_file(path, "capsim result");
  check_json_depth(text, path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse errors and number overflow
    throw Error(path + ": not JSON (" + std::string(e.what()) + "); diff reads `capsim simulate --json FILE` "
                "(or plan, capacity, compare) results");
  }
  return recognise_result(std::move(j), path);
}

Input recognise_result(nlohmann::json json, const std::string& name) {
  Input r;
  r.path = name;
  r.json = std::move(json);
  const nlohmann::json& j = r.json;
  const auto has = [&](const char* k) { return j.is_object() && j.contains(k); };
  if (has("scenario") && has("deployment") && j["deployment"].is_array() && has("capsim")) r.kind = "simulate";
  else if (has("scenario") && has("options") && j["options"].is_array()) r.kind = "plan";
  else if (has("scenario") && has("curve") && has("load_axis")) r.kind = "capacity";
  else if (has("scenario") && has("deployments") && j["deployments"].is_array()) r.kind = "compare";
  else {
    throw Error(name + ": not a capsim result: expected the JSON of `capsim simulate --json` (or plan, capacity, "
                "compare), an object with 'scenario' and 'deployment', 'options', 'curve' or 'deployments'");
  }
  return r;
}

Diff compare(const Input& a, const Input& b, double min_percent) {
  if (a.kind != b.kind) {
    throw Error(b.path + ": a " + b.kind + " result, and " + a.path + " a " + a.kind +
                " result; diff compares two results of the same command");
  }
  Diff d;
  d.kind = a.kind;
  Flat fa, fb;
  flatten(a.json, "", fa);
  flatten(b.json, "", fb);
  std::set<std::string> paths;
  for (const auto& [p, v] : fa) paths.insert(p);
  for (const auto& [p, v] : fb) paths.insert(p);
  std::set<std::string> entries_a, entries_b, only_a, only_b;
  for (const auto& [p, v] : fa) entries_a.insert(entry_of(p));
  for (const auto& [p, v] : fb) entries_b.insert(entry_of(p));
  for (const std::string& p : paths) {
    const auto ia = fa.find(p), ib = fb.find(p);
    const bool config = is_configuration(d.kind, p);
    if (ia == fa.end() || ib == fb.end()) {
      const std::string entry = entry_of(p);
      if (!entry.empty() && ia == fa.end() && !entries_a.count(entry)) { only_b.insert(entry); continue; }
      if (!entry.empty() && ib == fb.end() && !entries_b.count(entry)) { only_a.insert(entry); continue; }
      FieldChange f{p, ia == fa.end() ? "(absent)" : text_of(ia->second), ib == fb.end() ? "(absent)" : text_of(ib->second)};
      (config ? d.configuration : d.other).push_back(f);
      continue;
    }
    const nlohmann::json& va = ia->second;
    const nlohmann::json& vb = ib->second;
    if (va.is_number() && vb.is_number() && !config) {
      const double x = va.get<double>(), y = vb.get<double>();
      if (x == y || std::fabs(y - x) <= 1e-12 * std::max(std::fabs(x), std::fabs(y))) {
        ++d.unchanged;
        continue;
      }
      MetricChange m{p, x, y, y - x, std::nullopt};
      if (x != 0) m.change_percent = 100 * (y - x) / std::fabs(x);
      if (min_percent > 0 && m.change_percent && std::fabs(*m.change_percent) < min_percent) {
        ++d.unchanged;
        continue;
      }
      d.metrics.push_back(m);
      continue;
    }
    if (va != vb) (config ? d.configuration : d.other).push_back({p, text_of(va), text_of(vb)});
  }
  d.only_a.assign(only_a.begin(), only_a.end());
  d.only_b.assign(only_b.begin(), only_b.end());
  std::stable_sort(d.metrics.begin(), d.metrics.end(), [](const MetricChange& x, const MetricChange& y) {
    const double px = x.change_percent ? std::fabs(*x.change_percent) : INFINITY;
    const double py = y.change_percent ? std::fabs(*y.change_percent) : INFINITY;
    return px > py;
  });
  return d;
}

std::vector<std::string> likely_causes(const Diff& d) {
  std::vector<std::string> out;
  if (d.configuration.empty()) {
    if (!d.metrics.empty() || !d.other.empty() || !d.only_a.empty() || !d.only_b.empty()) {
      out.push_back("the configuration is identical (scenario, deployment, workload, seed, SLOs): the change comes "
                    "from capsim itself — its code, calibration or catalogue data (e.g. another capsim version or "
                    "edited calibration/ files)");
    }
    return out;
  }
  bool seed_only = true;
  for (const FieldChange& f : d.configuration) {
    const bool seed = f.path == "seed" || f.path == "first_seed";
    if (!seed) seed_only = false;
    std::string why;
    if (seed) why = "another random workload: metrics move by sampling noise alone";
    else if (f.path == "replications") why = "another number of seeds behind the answer";
    else if (f.path == "workload") why = "the workload changed";
    else if (starts_with(f.path, "deployment")) why = "the deployment changed";
    else if (f.path == "scenario") why = "another scenario";
    else if (f.path == "router" || f.path == "scheduler") why = "the " + f.path + " changed";
    else if (starts_with(f.path, "capsim.slos") || f.path == "slos") why = "the SLOs changed (goodput and verdicts follow them)";
    else if (f.path == "capsim.warmup_seconds") why = "the warm-up changed (which requests are measured)";
    else if (f.path == "model") why = "another model";
    out.push_back(f.path + ": " + f.a + " -> " + f.b + (why.empty() ? "" : " (" + why + ")"));
  }
  if (seed_only) out.push_back("only the seed changed: the moves are sampling noise, not a change of capacity");
  return out;
}

nlohmann::json diff_json(const Input& a, const Input& b, const Diff& d) {
  nlohmann::json j;
  j["a"] = a.path;
  j["b"] = b.path;
  j["kind"] = d.kind;
  nlohmann::json cfg = nlohmann::json::array(), other = nlohmann::json::array(), metrics = nlohmann::json::array();
  for (const FieldChange& f : d.configuration) cfg.push_back({{"path", f.path}, {"a", f.a}, {"b", f.b}});
  for (const FieldChange& f : d.other) other.push_back({{"path", f.path}, {"a", f.a}, {"b", f.b}});
  for (const MetricChange& m : d.metrics) {
    metrics.push_back({{"path", m.path}, {"a", m.a}, {"b", m.b}, {"change", m.change},
                       {"change_percent", m.change_percent ? nlohmann::json(*m.change_percent) : nlohmann::json()}});
  }
  j["configuration"] = cfg;
  j["metrics"] = metrics;
  j["other"] = other;
  j["only_in_a"] = d.only_a;
  j["only_in_b"] = d.only_b;
  j["unchanged_metrics"] = d.unchanged;
  j["likely_causes"] = likely_causes(d);
  return j;
}

}  // namespace capsim::diff
