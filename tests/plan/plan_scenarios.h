// Small scenarios the plan tests search.
#pragma once

#include <string>

#include "sim/scenario/scenario.h"

namespace capsim::plan_test {

// Llama-3.1-8B, an open loop of `rate` requests/s of 512 tokens in, 128 out, for `duration`, under
// one SLO (e.g. "ttft_p95<=500ms").
inline scenario::ScenarioSpec open_loop_8b(const std::string& rate, const std::string& duration,
                                           const std::string& slo) {
  scenario::ScenarioSpec base;
  base.deployment.model = "llama-3.1-8b";
  base.rate = rate;
  base.input_tokens = "512";
  base.output_tokens = "128";
  base.duration = duration;
  base.slos = {scenario::parse_slo_expression(slo, "test")};
  return base;
}

}  // namespace capsim::plan_test
