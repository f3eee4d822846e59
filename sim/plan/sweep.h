// Sweeps (`capsim sweep`, `capsim merge`; docs/scale.md): a grid of independent simulations —
// workloads x models x cards x TP x weight precisions x loads x seeds — expanded in that order
// (the last axis varies fastest) and numbered 0..N-1. A shard i/N runs the runs whose number is
// i modulo N, so shards get a similar mix of light and heavy runs; `merge` joins shards' results
// into the document the unsharded sweep writes, byte for byte (same runs, same numbers, same
// order, no shard field). Every run is deterministic (its seed), so where it ran does not matter.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "sim/scenario/scenario.h"

namespace capsim::plan {

struct SweepRun {
  std::size_t index = 0;
  scenario::ScenarioSpec spec;  // the workload's scenario with this run's grid values applied
  std::string workload;    // the scenario file as the sweep file names it ("" = command-line defaults)
  std::optional<double> load;  // users, concurrency or requests/s (see docs/scale.md); none = the scenario's
};

struct Sweep {
  std::string name;
  std::string file;
  nlohmann::json grid;  // the axes as resolved (what merge checks shards against)
  std::vector<SweepRun> runs;
};

// Reads and expands SWEEP.yaml. Throws capsim::Error naming the file and field for bad input:
// an unknown key, an empty or malformed axis, an unknown model/card/precision/router name, a
// grid beyond kMaxSweepRuns runs.
constexpr std::size_t kMaxSweepRuns = 100000;
Sweep load_sweep(const std::string& path);

// The same for a sweep document already read (`root`; messages name it `path`; `default_name`
// when it has no name): `base_of(workload, set)` gives the scenario of one entry of the
// workloads axis ("" when the axis is absent) with the document's `set` (a null node when
// absent) applied. load_sweep reads scenario files; the HTTP API answers with the body's scenario.
Sweep expand_sweep(const YAML::Node& root, const std::string& path, const std::string& default_name,
                   const std::function<scenario::ScenarioSpec(const std::string&, const YAML::Node&)>& base_of);

struct Shard {
  std::size_t index = 0, count = 1;
  bool whole() const { return count == 1; }
  bool has(std::size_t run) const { return run % count == index; }
};
// "i/N" with 0 <= i < N (a Slurm array index or Kubernetes completion index and the count).
Shard parse_shard(const std::string& text, const std::string& where);

// Runs the shard's runs on `threads` threads and returns the sweep document: {"sweep", "grid",
// "runs" (the whole grid's count), "shard" ("i/N", only when sharded), "results" (one object per
// run, by index)}. A run that cannot be simulated (the model does not fit the card) is a result
// with "status": "failed" and the reason, not an error of the sweep. Throws Cancelled once a
// run's cancel flag (its spec's) is set: no further run starts.
nlohmann::json run_sweep(const Sweep& sweep, Shard shard, unsigned threads, bool progress);

// Joins shard documents (file name, document) into the unsharded document. Throws capsim::Error
// naming the files when they belong to different sweeps, a run is missing or appears twice.
nlohmann::json merge_sweeps(const std::vector<std::pair<std::string, nlohmann::json>>& shards);

// The results as CSV (one header line, one line per run; docs/scale.md lists the columns) and as
// a self-contained HTML page with the same table.
std::string sweep_csv(const nlohmann::json& doc);
std::string sweep_report_html(const nlohmann::json& doc);

}  // namespace capsim::plan
