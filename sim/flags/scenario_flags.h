// The scenario flags of simulate, plan, capacity and compare, and the deployment share of them
// that emulate takes: each flag given on the command line overrides the scenario file's field (the
// merge itself is the scenario API's). A layer below the front ends (docs/design.md), so that a
// front end takes the flags without linking another front end.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "sim/scenario/scenario.h"

namespace capsim::flags {

using scenario::ScenarioSpec;

class ScenarioFlags {
 public:
  // `with_deployment` false leaves out --card, --tp, --weights and --kv-cache (plan takes lists).
  void add_to(CLI::App& cmd, bool with_deployment = true);
  // Only what shapes a served deployment (emulate, whose clients are the workload): the model,
  // cards, engine flags, replicas, pools, router, scheduler, prefix caching, --output-tokens (the
  // length of an answer that stops by itself) and --seed. No workload (--rate, --requests,
  // --trace, --users, ...), no --time-scale, no --slo.
  void add_deployment_to(CLI::App& cmd);
  // The file's spec (if `file` is non-empty) with every flag that was given applied on top.
  ScenarioSpec resolve(const std::string& file) const;

 private:
  void add(CLI::App& cmd, bool with_deployment, bool with_workload);

  ScenarioSpec cli_;
  std::vector<std::pair<CLI::Option*, std::function<void(ScenarioSpec&, const ScenarioSpec&)>>> setters_;
  std::vector<std::string> slo_texts_;
  CLI::Option* slo_option_ = nullptr;
  CLI::Option* card_option_ = nullptr;
  CLI::Option* weights_option_ = nullptr;
  CLI::Option* kv_option_ = nullptr;
  CLI::Option* max_seqs_option_ = nullptr;
  CLI::Option* max_tokens_option_ = nullptr;
  // Disaggregated serving: the pools as 'N x CARD [tpK] [PRECISION]' (one group each).
  std::string prefill_pool_, decode_pool_;
  CLI::Option* prefill_option_ = nullptr;
  CLI::Option* decode_option_ = nullptr;
};

}  // namespace capsim::flags
