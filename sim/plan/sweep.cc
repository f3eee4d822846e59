#include "sim/plan/sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "sim/core/cancel.h"
#include "sim/core/error.h"
#include "sim/core/progress.h"
#include "sim/core/yaml_fields.h"
#include "sim/hardware/precision.h"
#include "sim/plan/search.h"
#include "sim/report/html.h"

namespace capsim::plan {
namespace {

const std::vector<std::string> kSweepKeys = {"name", "description", "workloads", "models", "cards",
                                             "tp", "precisions", "loads", "seeds", "set"};

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

// A list axis: a sequence of scalars or one scalar; absent = `fallback` (one value).
std::vector<std::string> axis(const YAML::Node& root, const std::string& key, const std::string& file,
                              const std::vector<std::string>& fallback) {
  const YAML::Node n = root[key];
  if (!n) return fallback;
  const std::string where = file + ": " + key;
  std::vector<std::string> out;
  if (n.IsSequence()) {
    for (std::size_t i = 0; i < n.size(); ++i) {
      out.push_back(yaml_scalar(n[i], where + "[" + std::to_string(i) + "]"));
    }
  } else {
    out.push_back(yaml_scalar(n, where));
  }
  if (out.empty()) throw Error(where + ": empty list; give at least one value or leave the key out");
  std::set<std::string> seen;
  for (const std::string& v : out) {
    if (!seen.insert(v).second) throw Error(where + ": '" + v + "' is listed twice");
  }
  return out;
}

double positive_number(const std::string& text, const std::string& where) {
  const double v = parse_number(text, where);
  if (!(v > 0) || !std::isfinite(v)) throw Error(where + ": '" + text + "' must be a positive number");
  return v;
}

// Applies a load to the scenario's workload kind: users, concurrency, a trace's rate multiple or
// the open-loop rate (docs/scale.md).
void apply_load(scenario::ScenarioSpec& s, double load, const std::string& where) {
  const bool whole = std::floor(load) == load && load <= 1e7;
  if (s.trace) {
    s.time_scale /= load;  // `load` x the trace's rate
  } else if (s.users || s.concurrency) {
    if (!whole) {
      throw Error(where + ": " + std::to_string(load) + " is not a whole number of " +
                  (s.users ? "users" : "requests in flight"));
    }
    (s.users ? s.users : s.concurrency) = static_cast<int>(load);
  } else {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", load);
    s.rate = buf;
  }
}

double ms(double s) { return s * 1e3; }

nlohmann::json run_result(const SweepRun& run) {
  const scenario::ScenarioSpec& s = run.spec;
  // A cancelled sweep starts no more runs (a short run may end before its own check: the cluster
  // looks at the flag every 1024 event times). Cancelled is not an Error: it ends the sweep.
  throw_if_cancelled(s.cancel);
  nlohmann::json j;
  j["index"] = run.index;
  j["workload"] = run.workload;
  j["scenario"] = s.name;
  j["model"] = s.deployment.model;
  j["card"] = s.deployment.card;
  j["tp"] = s.deployment.tp;
  j["weights"] = s.deployment.weights;
  j["replicas"] = s.replicas;
  j["load"] = run.load ? nlohmann::json(*run.load) : nlohmann::json(nullptr);
  j["seed"] = s.seed;
  try {
    const Evaluation e = evaluate(s, s.replicas, std::nullopt);
    const SimulationResult& r = e.result;
    j["status"] = "ok";
    j["completed"] = r.completed;
    j["rejected"] = r.rejected;
    j["request_throughput"] = r.request_throughput;
    j["output_throughput"] = r.output_throughput;
    j["request_goodput"] = r.request_goodput;
    j["goodput_fraction"] = r.goodput_fraction;
    const auto pct = [&](const char* name, const Percentiles& p) {
      j[std::string("mean_") + name + "_ms"] = ms(p.mean);
      j[std::string("p50_") + name + "_ms"] = ms(p.median);
      j[std::string("p95_") + name + "_ms"] = ms(p.p95);
      j[std::string("p99_") + name + "_ms"] = ms(p.p99);
    };
    pct("ttft", r.ttft);
    pct("tpot", r.tpot);
    pct("itl", r.itl);
    pct("e2el", r.e2el);
    j["preemptions"] = r.preemptions;
    j["prefix_hit_rate"] = r.prefix_hit_rate;
    j["steady_state"] = r.steady.at_steady_state();
    j["slo"] = s.slos.empty() ? "none" : decision_name(e.verdict.decision);
    j["binds"] = binding_resource(r);
  } catch (const Error& err) {
    // The grid is the user's; a cell that cannot run (does not fit, TP does not divide the
    // heads) is an answer about that cell.
    j["status"] = "failed";
    j["error"] = err.what();
  }
  return j;
}

// The CSV/HTML columns, in order; a run that failed leaves the metric columns empty.
const std::vector<std::string> kColumns = {
    "index", "workload", "scenario", "model", "card", "tp", "weights", "replicas", "load", "seed",
    "status", "completed", "rejected", "request_throughput", "output_throughput",
    "request_goodput", "goodput_fraction", "mean_ttft_ms", "p50_ttft_ms", "p95_ttft_ms",
    "p99_ttft_ms", "mean_tpot_ms", "p50_tpot_ms", "p95_tpot_ms", "p99_tpot_ms", "mean_itl_ms",
    "p50_itl_ms", "p95_itl_ms", "p99_itl_ms", "mean_e2el_ms", "p50_e2el_ms", "p95_e2el_ms",
    "p99_e2el_ms", "preemptions", "prefix_hit_rate", "steady_state", "slo", "binds", "error"};

std::string cell(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();  // numbers round-trip; booleans true/false
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

Shard parse_shard(const std::string& text, const std::string& where) {
  const std::size_t slash = text.find('/');
  const auto bad = [&] {
    return Error(where + ": '" + text + "' is not a shard; expected i/N with 0 <= i < N (e.g. 0/4, "
                 "the Slurm array index or Kubernetes completion index over the count)");
  };
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size()) throw bad();
  const std::string a = text.substr(0, slash), b = text.substr(slash + 1);
  for (const std::string& part : {a, b}) {
    if (part.size() > 9 || part.find_first_not_of("0123456789") != std::string::npos) throw bad();
  }
  Shard s{std::stoul(a), std::stoul(b)};
  if (s.count == 0 || s.index >= s.count) throw bad();
  return s;
}

Sweep load_sweep(const std::string& path) {
  const YamlDoc doc = YamlDoc::load(path);
  // Relative scenario files resolve against the sweep file's folder.
  const std::string base_dir = std::filesystem::path(path).parent_path().string();
  return expand_sweep(doc.root(), path, std::filesystem::path(path).stem().string(),
                      [&](const std::string& w, const YAML::Node& set) {
                        scenario::ScenarioSpec s;
                        if (!w.empty()) {
                          const std::filesystem::path p(w);
                          scenario::load_scenario_file(
                              p.is_absolute() || base_dir.empty() ? w : (std::filesystem::path(base_dir) / p).string(), s);
                        }
                        if (set) scenario::apply_scenario_yaml(set, path, path + ": set.", base_dir, s);
                        return s;
                      });
}

Sweep expand_sweep(const YAML::Node& root, const std::string& path, const std::string& default_name,
                   const std::function<scenario::ScenarioSpec(const std::string&, const YAML::Node&)>& base_of) {
  if (!root.IsMap()) throw Error(path + ": expected a mapping of sweep fields (" + join(kSweepKeys) + ")");
  for (const auto& kv : root) {
    // A key can be any node in YAML (`[a, b]: 1`); converting a non-scalar one threw yaml-cpp's
    // "bad conversion" without the file (found by fuzz_sweep).
    if (!kv.first.IsScalar()) {
      throw Error(path + ": a field name is not a plain word; accepted: " + join(kSweepKeys));
    }
    const std::string key = kv.first.Scalar();
    bool known = false;
    for (const std::string& k : kSweepKeys) known = known || k == key;
    if (!known) throw Error(path + ": " + key + ": unknown field; accepted: " + join(kSweepKeys));
  }
  Sweep sw;
  sw.file = path;
  sw.name = root["name"] ? yaml_scalar(root["name"], path + ": name") : default_name;
  const std::vector<std::string> workloads = axis(root, "workloads", path, {""});
  const std::vector<std::string> models = axis(root, "models", path, {""});
  const std::vector<std::string> cards = axis(root, "cards", path, {""});
  const std::vector<std::string> tps = axis(root, "tp", path, {""});
  const std::vector<std::string> precisions = axis(root, "precisions", path, {""});
  const std::vector<std::string> loads = axis(root, "loads", path, {""});
  const std::vector<std::string> seeds = axis(root, "seeds", path, {""});
  const YAML::Node set = root["set"];
  if (set && !set.IsMap()) throw Error(path + ": set: expected a mapping of scenario fields (docs/scenarios.md)");

  const double total = static_cast<double>(workloads.size()) * models.size() * cards.size() *
                       tps.size() * precisions.size() * loads.size() * seeds.size();
  if (total > static_cast<double>(kMaxSweepRuns)) {
    throw Error(path + ": the grid has " + std::to_string(static_cast<long long>(total)) +
                " runs; at most " + std::to_string(kMaxSweepRuns) + " per sweep (split it into several files)");
  }
  for (std::size_t i = 0; i < tps.size(); ++i) {
    if (tps[i].empty()) continue;
    const double v = positive_number(tps[i], path + ": tp[" + std::to_string(i) + "]");
    if (std::floor(v) != v || v > 64) throw Error(path + ": tp[" + std::to_string(i) + "]: '" + tps[i] + "' must be a whole number in [1, 64]");
  }
  for (std::size_t i = 0; i < precisions.size(); ++i) {
    if (!precisions[i].empty() && precisions[i] != "auto") {
      (void)parse_precision(precisions[i], path + ": precisions[" + std::to_string(i) + "]");
    }
  }
  for (std::size_t i = 0; i < loads.size(); ++i) {
    if (!loads[i].empty()) (void)positive_number(loads[i], path + ": loads[" + std::to_string(i) + "]");
  }
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    const std::string& v = seeds[i];
    if (!v.empty() && (v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)) {
      throw Error(path + ": seeds[" + std::to_string(i) + "]: '" + v + "' must be a whole number >= 0");
    }
  }

  // The scenarios, each read once.
  std::vector<scenario::ScenarioSpec> bases;
  for (const std::string& w : workloads) bases.push_back(base_of(w, set));

  std::size_t index = 0;
  for (std::size_t wi = 0; wi < workloads.size(); ++wi) {
    for (const std::string& model : models) {
      for (const std::string& card : cards) {
        for (const std::string& tp : tps) {
          for (const std::string& precision : precisions) {
            for (const std::string& load : loads) {
              for (const std::string& seed : seeds) {
                SweepRun run;
                run.index = index++;
                run.workload = workloads[wi];
                run.spec = bases[wi];
                scenario::ScenarioSpec& s = run.spec;
                if (!model.empty()) s.deployment.model = model;
                if (!card.empty()) s.deployment.card = card;
                if (!tp.empty()) s.deployment.tp = static_cast<int>(std::stod(tp));
                if (!precision.empty()) s.deployment.weights = precision;
                if (!load.empty()) {
                  run.load = std::stod(load);
                  apply_load(s, *run.load, path + ": loads");
                }
                if (!seed.empty()) s.seed = std::stoull(seed);
                sw.runs.push_back(std::move(run));
              }
            }
          }
        }
      }
    }
  }
  // Unknown names are bad input (exit 2) before anything runs, not failed cells.
  std::set<std::string> checked;
  for (const SweepRun& r : sw.runs) {
    const std::string key = r.spec.deployment.model + "|" + r.spec.deployment.card + "|" + r.spec.router +
                            "|" + r.spec.policy + "|" + r.spec.deployment.engine;
    if (!checked.insert(key).second) continue;
    try {
      scenario::validate_names(r.spec);
    } catch (const Error& e) {
      // validate_names speaks of flags (--model); name the sweep file and the grid cell too.
      throw Error(path + ": the run with model '" + r.spec.deployment.model + "' on card '" +
                  r.spec.deployment.card + "' (axes models, cards or its workload file): " + e.what());
    }
  }
  std::string set_text;
  if (set) {
    YAML::Emitter e;
    e << YAML::Flow << set;
    set_text = e.c_str();
  }
  sw.grid = {{"workloads", workloads}, {"models", models},         {"cards", cards},
             {"tp", tps},              {"precisions", precisions}, {"loads", loads},
             {"seeds", seeds},         {"set", set_text}};
  return sw;
}

nlohmann::json run_sweep(const Sweep& sweep, Shard shard, unsigned threads, bool progress) {
  std::vector<const SweepRun*> mine;
  for (const SweepRun& r : sweep.runs) {
    if (shard.has(r.index)) mine.push_back(&r);
  }
  std::vector<nlohmann::json> results(mine.size());
  std::optional<ProgressLine> line;
  run_parallel(
      mine.size(), threads, [&](std::size_t i) { results[i] = run_result(*mine[i]); },
      progress ? std::function<void(std::size_t, std::size_t)>([&](std::size_t done, std::size_t all) {
        if (!line) line.emplace();
        line->update("capsim sweep: " + std::to_string(done) + "/" + std::to_string(all) + " runs");
      })
               : std::function<void(std::size_t, std::size_t)>());
  if (line) line->finish("capsim sweep: " + std::to_string(mine.size()) + " runs done");
  nlohmann::json doc;
  doc["sweep"] = sweep.name;
  doc["grid"] = sweep.grid;
  doc["runs"] = sweep.runs.size();
  if (!shard.whole()) doc["shard"] = std::to_string(shard.index) + "/" + std::to_string(shard.count);
  doc["results"] = results;
  return doc;
}

namespace {

// A shard's run record as run_record writes it: a hand-edited or corrupted one is refused by
// file, run and field rather than merged (or failing later with the JSON library's words).
void check_run_record(const nlohmann::json& r, const std::string& where) {
  const auto bad = [&](const std::string& key, const nlohmann::json& value, const std::string& expected) {
    return Error(where + ": " + key + ": " + value.dump() + " is not " + expected);
  };
  static const std::vector<std::string> kText = {"workload", "scenario", "model", "card", "weights",
                                                 "slo", "binds", "error"};
  static const std::vector<std::string> kWhole = {"tp", "replicas", "seed", "completed", "rejected", "preemptions"};
  for (const auto& [key, v] : r.items()) {
    if (key == "index") continue;
    if (std::find(kText.begin(), kText.end(), key) != kText.end()) {
      if (!v.is_string()) throw bad(key, v, "a string");
    } else if (std::find(kWhole.begin(), kWhole.end(), key) != kWhole.end()) {
      if (!v.is_number_integer() || v.get<long long>() < 0) throw bad(key, v, "a whole number >= 0");
    } else if (key == "steady_state") {
      if (!v.is_boolean()) throw bad(key, v, "true or false");
    } else if (key == "status") {
      if (v != "ok" && v != "failed") throw bad(key, v, "'ok' or 'failed'");
    } else if (std::find(kColumns.begin(), kColumns.end(), key) != kColumns.end()) {
      // The metrics: a number >= 0 (null where a statistic has no value).
      if (!v.is_null() && !(v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0)) {
        throw bad(key, v, "a finite number >= 0");
      }
    }
  }
  if (!r.contains("status")) throw Error(where + ": status: missing");
  if (r["status"] == "ok") {
    for (const char* key : {"model", "card", "completed", "request_throughput", "mean_ttft_ms", "mean_e2el_ms"}) {
      if (!r.contains(key)) throw Error(where + ": " + key + ": missing (a run with status 'ok' has it)");
    }
  }
}

}  // namespace

nlohmann::json merge_sweeps(const std::vector<std::pair<std::string, nlohmann::json>>& shards) {
  if (shards.empty()) throw Error("merge: no shard files given");
  const auto field = [](const std::string& file, const nlohmann::json& d, const char* key) {
    if (!d.is_object() || !d.contains(key)) {
      throw Error(file + ": not a capsim sweep result (no '" + std::string(key) + "' field)");
    }
    return d.at(key);
  };
  const std::string& first_file = shards.front().first;
  const nlohmann::json& first = shards.front().second;
  const nlohmann::json name = field(first_file, first, "sweep");
  const nlohmann::json grid = field(first_file, first, "grid");
  const nlohmann::json runs = field(first_file, first, "runs");
  if (!runs.is_number_unsigned() || runs.get<std::size_t>() > kMaxSweepRuns) {
    throw Error(first_file + ": runs: expected a whole number <= " + std::to_string(kMaxSweepRuns));
  }
  const auto n = runs.get<std::size_t>();
  std::vector<nlohmann::json> by_index(n);
  std::vector<std::string> from(n);
  for (const auto& [file, d] : shards) {
    if (field(file, d, "sweep") != name || field(file, d, "grid") != grid || field(file, d, "runs") != runs) {
      throw Error(file + ": belongs to a different sweep (or grid) than " + first_file);
    }
    const nlohmann::json results = field(file, d, "results");
    if (!results.is_array()) throw Error(file + ": results: expected a list");
    for (const nlohmann::json& r : results) {
      if (!r.is_object() || !r.contains("index") || !r["index"].is_number_unsigned() ||
          r["index"].get<std::size_t>() >= n) {
        throw Error(file + ": results: a run without a valid index (0.." + std::to_string(n) + ")");
      }
      const auto i = r["index"].get<std::size_t>();
      check_run_record(r, file + ": run " + std::to_string(i));
      if (!from[i].empty()) {
        throw Error(file + ": run " + std::to_string(i) + " is also in " + from[i] + " (a shard given twice?)");
      }
      from[i] = file;
      by_index[i] = r;
    }
  }
  std::vector<std::size_t> missing;
  for (std::size_t i = 0; i < n; ++i) {
    if (from[i].empty()) missing.push_back(i);
  }
  if (!missing.empty()) {
    std::string list;
    for (std::size_t k = 0; k < missing.size() && k < 10; ++k) {
      if (k) list += ", ";
      list += std::to_string(missing[k]);
    }
    throw Error("merge: " + std::to_string(missing.size()) + " of " + std::to_string(n) +
                " runs missing (" + list + (missing.size() > 10 ? ", ..." : "") +
                "): a shard's file was not given or its job did not finish");
  }
  nlohmann::json doc;
  doc["sweep"] = name;
  doc["grid"] = grid;
  doc["runs"] = runs;
  doc["results"] = by_index;
  return doc;
}

std::string sweep_csv(const nlohmann::json& doc) {
  std::string out;
  for (std::size_t c = 0; c < kColumns.size(); ++c) {
    if (c) out += ',';
    out += kColumns[c];
  }
  out += "\n";
  for (const nlohmann::json& r : doc.at("results")) {
    for (std::size_t c = 0; c < kColumns.size(); ++c) {
      const auto it = r.find(kColumns[c]);
      if (c) out += ',';
      out += csv_field(it == r.end() ? "" : cell(*it));
    }
    out += "\n";
  }
  return out;
}

std::string sweep_report_html(const nlohmann::json& doc) {
  HtmlReport page("capsim sweep: " + doc.at("sweep").get<std::string>());
  page.heading("Sweep " + doc.at("sweep").get<std::string>(), 1);
  page.paragraph(std::to_string(doc.at("results").size()) + " runs; grid " + doc.at("grid").dump());
  std::vector<std::string> header = kColumns;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> classes;
  for (const nlohmann::json& r : doc.at("results")) {
    std::vector<std::string> row;
    for (const std::string& c : kColumns) {
      const auto it = r.find(c);
      row.push_back(it == r.end() ? "" : cell(*it));
    }
    rows.push_back(std::move(row));
    const std::string slo = r.value("slo", "");
    classes.push_back(r.value("status", "") != "ok" || slo == "FAIL" ? "fail" : slo == "PASS" ? "pass" : "");
  }
  page.table(header, rows, classes);
  return page.render();
}

}  // namespace capsim::plan
