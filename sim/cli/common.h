// What the subcommands share: where the data lives, the catalogues, and the deployment flags
// (named as vLLM names them) turned into a validated Deployment.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "sim/cost/engine_profile.h"
#include "sim/hardware/card.h"
#include "sim/llm/deployment.h"
#include "sim/llm/model_spec.h"

namespace capsim::cli {

// The data root holds calibration/cards, calibration/engines, models, workloads. Chosen by
// --data-dir, else $CAPSIM_DATA_DIR, else the source tree capsim was built from.
std::string data_dir();
void set_data_dir(const std::string& dir);

const CardCatalogue& cards();
const ModelCatalogue& models();
const EngineCatalogue& engines();

struct DeploymentFlags {
  std::string model = "llama-3.1-8b";
  std::string card = "h100-sxm";
  int tp = 1;
  std::string weights = "auto";
  std::string kv_cache = "auto";
  std::string engine = "vllm";
  std::optional<int> max_num_seqs;
  std::optional<int> max_num_batched_tokens;
  std::optional<int> block_size;
  std::optional<double> gpu_memory_utilization;
  std::optional<long long> max_model_len;  // vLLM's --max-model-len; unset: see SchedulerLimits
  // vLLM's --async-scheduling (on by default from v0.14); unset = the engine profile's.
  std::optional<bool> async_scheduling;

  // Registers --model, --card, --tp, --weights, --kv-cache, --engine and the scheduler limits.
  void add_to(CLI::App& app, bool with_limits = true);
  // Resolves names against the catalogues and validates; throws capsim::Error.
  Deployment resolve() const;
};

// Adds to every floating-point option of `app` and its subcommands a check that refuses NaN and
// infinities (CLI11 parses "nan" and "inf", and its range checks let NaN through).
void refuse_non_finite(CLI::App& app);

// Adds --allow-large (lift the run limits of sim/core/run_limits.h) to `app` and every
// subcommand.
void add_allow_large(CLI::App& app);

// Prints "capsim: error: <message>" and returns the exit code for bad input (2).
int report_error(const std::exception& e);

}  // namespace capsim::cli
