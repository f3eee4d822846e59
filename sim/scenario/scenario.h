// A scenario: model, deployment, engine settings, workload, SLOs and run settings, from a YAML
// file (docs/scenarios.md) or a JSON body of the same fields, with a front end's overrides (the
// CLI's flags) on top. Everything optional here has a default named in `capsim simulate --help`.
// This is the one API the front ends (sim/cli/, sim/server/) and plan/check drive.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "sim/scenario/deployment_spec.h"
#include "sim/cluster/simulation.h"
#include "sim/workload/generators.h"

namespace capsim::scenario {

struct SloSpec {
  std::string metric;      // ttft, tpot, itl, e2el
  std::string statistic;   // mean, p50, p90, p95, p99
  double seconds = 0;
};
// "ttft_p95<=1s", "tpot_p99<=100ms" (also the YAML form key ttft_p95: 1s). Throws with accepted forms.
SloSpec parse_slo(const std::string& key, const std::string& value, const std::string& where);
SloSpec parse_slo_expression(const std::string& text, const std::string& where);

struct ScenarioSpec {
  std::string name = "command-line";
  std::string description;
  std::string file;

  DeploymentSpec deployment;
  int replicas = 1;
  struct ExtraGroup {
    std::string card;
    int tp = 1;
    int replicas = 1;
    std::string weights = "auto";
    std::string where;  // "a.yaml: deployment[1]" when read from a file, for messages; else empty
    std::string kv_cache = "auto";  // a further group's own KV precision (compare's 'kv:fp8')
  };
  std::vector<ExtraGroup> extra_groups;  // mixed card types behind the same router
  // Serving model (cluster/disaggregation.h, `capsim list serving`): "aggregated", or
  // "pd-disaggregated", where the main deployment (card, tp, replicas, weights) is the prefill
  // pool, `decode_pool` the decode pool, and `kv_link` (calibration/links.yaml) the link the
  // prompt's KV crosses between them.
  std::string serving = "aggregated";
  std::optional<ExtraGroup> decode_pool;
  std::string kv_link;
  std::string router = "least-outstanding";
  // --scheduler; empty = the engine profile's (scheduler_policy below resolves it).
  std::string policy;
  std::optional<bool> prefix_caching;

  // Workload (one kind is chosen: trace > users > concurrency > rate/offline).
  std::optional<std::string> trace;
  std::optional<std::string> trace_format;
  double time_scale = 1.0;
  std::optional<int> users;
  std::optional<int> concurrency;
  std::string think_time = "0s";
  std::string turns = "1";
  std::optional<std::string> rate;  // "5" or "5@10min,10@10min" (stages)
  std::string arrival = "poisson";
  double burstiness = 1.0;
  std::string input_tokens = "512";
  std::string output_tokens = "128";
  std::int64_t system_prompt_tokens = 0;
  int prefix_groups = 1;
  int prompts_per_group = 0;  // open loop: recurring questions per group (0 = all unique)
  std::optional<std::int64_t> requests;
  std::optional<std::string> duration;
  std::string warmup = "0s";
  // The client's total timeout per request ("300s"; SimulationConfig::request_timeout); unset:
  // clients wait as long as it takes.
  std::optional<std::string> request_timeout;
  std::uint64_t seed = 0;
  // SimulationConfig::bounded_memory (--bounded-memory): per-step distributions in bounded
  // histograms; a run option, not read from scenario files.
  bool bounded_memory = false;
  // Multi-LoRA workload: requests name one of `lora_adapters` adapters (0 = none), drawn
  // "uniform" or "zipf:S" (llm/lora.h AdapterMix).
  int lora_adapters = 0;
  std::string lora_distribution = "uniform";

  std::vector<SloSpec> slos;

  // A front end's stop switch for every simulation built from this spec (and its copies: plan's
  // candidates, capacity's curve); unset for the CLI. Not a scenario field: never read or written.
  CancelFlag cancel;

  // Where each field given in a file came from ("a.yaml: workload.duration"), by the name of the
  // flag that overrides it ("--duration"); a flag given on the command line removes its entry.
  std::map<std::string, std::string> origin;
  // The field's origin for messages: the file and field, else the flag's name.
  std::string where(const std::string& flag) const {
    const auto it = origin.find(flag);
    return it == origin.end() ? flag : it->second;
  }
  // A message that starts with a flag ("--tp: 3 does not divide ...", as DeploymentSpec::resolve
  // words them), with the file and field in place of the flag where the value came from a file.
  std::string attribute(const std::string& message) const;
};

// Reads a scenario file into `spec` (fields present in the file replace the defaults).
void load_scenario_file(const std::string& path, ScenarioSpec& spec);
// Applies the scenario fields of a YAML mapping to `spec`, as load_scenario_file does for a
// file's root; used again on top of a file, it overrides it: fields present replace spec's, a
// workload kind named (users, concurrency, rate/stages, trace) replaces the one spec had, `slo`
// replaces the SLOs, a deployment list replaces the groups. Messages name `label` for the
// mapping ("file.yaml") and `prefix` + field for fields ("file.yaml: " or "a.yaml:
// assertions[0]."); relative trace paths resolve against `base_dir`. `own_keys` are the
// caller's fields in the same mapping: accepted and left alone (name, description included).
void apply_scenario_yaml(const YAML::Node& root, const std::string& label, const std::string& prefix,
                         const std::string& base_dir, ScenarioSpec& spec,
                         const std::vector<std::string>& own_keys = {});
// A front end that replaces a scenario file's card (the CLI's --card over a file): what the file
// pinned only because it is the file card's default (its 16-bit type for weights and KV cache,
// vLLM's batch limits for that card) follows the new card, unless the front end set it too.
// Deliberate choices (fp8, int4, a tuned max_num_seqs) stay and are validated against the new
// card. `from_file` is the file's deployment before the overrides; `s` carries them.
struct ExplicitFields {
  bool weights = false, kv_cache = false, max_num_seqs = false, max_num_batched_tokens = false;
};
void follow_card_defaults(ScenarioSpec& s, const DeploymentSpec& from_file, const ExplicitFields& given);

// The scheduler policy the spec runs: --scheduler when given, else its engine profile's
// (`scheduler.policy`, vllm-v1 when the profile names none). Throws for an unknown engine.
std::string scheduler_policy(const ScenarioSpec& spec);

// Resolves every name the spec carries — model, card, engine, router, scheduler, each extra
// group's card — and throws capsim::Error (exit 2) for an unknown one, naming the flag and the
// accepted names. Commands that search (plan, compare, capacity) call it before simulating, so an
// unknown name is bad input and never "no candidate fits".
void validate_names(const ScenarioSpec& spec);

// The deployment groups the spec describes, resolved as the simulation runs them: the main one
// (replicas x card at TP), then each extra group (kv cache and batch limits at that card's
// defaults; the engine's async scheduling as the main group's). Throws capsim::Error.
std::vector<ReplicaGroup> resolve_groups(const ScenarioSpec& spec);

// The decode pool of a pd-disaggregated spec, resolved (its card's limits, the prefill pool's
// model, engine and KV-cache precision) with its link. Throws capsim::Error for bad input.
DecodePool resolve_decode_pool(const ScenarioSpec& spec);

struct BuiltScenario {
  SimulationConfig config;
  std::unique_ptr<Workload> workload;
  std::string workload_description;
};
BuiltScenario build_scenario(const ScenarioSpec& spec);

}  // namespace capsim::scenario
