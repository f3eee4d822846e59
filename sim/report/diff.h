// `capsim diff A.json B.json`: what moved between two results of the same command (simulate,
// plan, capacity or compare --json), by how much, and which configuration fields changed — the
// likely reasons. Results are flattened to dotted paths; list entries are matched by what they
// are (a plan option by card, TP and precisions; a capacity point by its load; an SLO by name),
// not by position.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace capsim::diff {

struct Input {
  std::string path;
  nlohmann::json json;
  std::string kind;  // "simulate", "plan", "capacity", "compare"
};

// Reads and recognises a result. Throws capsim::Error "<path>: ..." when it cannot be read, is
// not JSON, or is not a capsim simulate/plan/capacity/compare --json result.
Input load_result(const std::string& path);
// The same for a result already parsed (the HTTP API's body); `name` stands for the path in
// every message and in the answer.
Input recognise_result(nlohmann::json json, const std::string& name);

struct MetricChange {
  std::string path;
  double a = 0, b = 0;
  double change = 0;                     // b - a
  std::optional<double> change_percent;  // 100 (b - a) / |a|; none when a is 0
};

struct FieldChange {
  std::string path;
  std::string a, b;  // JSON text; "(absent)" when one side lacks it
};

struct Diff {
  std::string kind;
  std::vector<FieldChange> configuration;  // inputs: deployment, scenario, workload, seed, SLOs...
  std::vector<MetricChange> metrics;       // numbers that moved, the largest relative move first
  std::vector<FieldChange> other;          // other results that changed (verdicts, binding resource)
  std::vector<std::string> only_a, only_b; // entries (plan options, curve points) on one side only
  int unchanged = 0;                       // numeric metrics present on both sides that did not move
};

// Throws capsim::Error when the kinds differ. `min_percent` hides smaller relative moves.
Diff compare(const Input& a, const Input& b, double min_percent = 0);

// The likely reasons, in words, from the configuration changes ("configuration identical" when
// none: then capsim itself — code, calibration or catalogue — changed).
std::vector<std::string> likely_causes(const Diff& d);

nlohmann::json diff_json(const Input& a, const Input& b, const Diff& d);

}  // namespace capsim::diff
