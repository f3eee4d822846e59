// `roofline`'s answer as every front end gives it: one engine step of a deployment (decode
// sequences of one context length, optionally a prefill chunk), its time by operator group with
// each group's bound, MFU and MBU, and where each kind of kernel time comes from (measured table
// or roofline). `json` is exactly what `capsim roofline --json -` prints
// (docs/json-output.md#roofline); `text` what it prints without --json.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "sim/scenario/deployment_spec.h"

namespace capsim::answers {

struct RooflineRequest {
  scenario::DeploymentSpec deployment;
  long long batch = 1;            // decode sequences in the step, 0..1e6
  long long context = 1024;       // tokens of each decode sequence, 1..1e8
  long long prefill = 0;          // tokens of one prefill chunk in the same step, 0..1e8
  long long prefill_cached = 0;   // tokens cached before that chunk, 0..1e8
};

struct RooflineAnswer {
  nlohmann::json json;
  std::string text;
};

// Throws capsim::Error naming the flag (--batch, --context, ...) for a number out of range or an
// empty step (no decode sequence and no prefill), and for an encoder-only model.
RooflineAnswer answer_roofline(const RooflineRequest& request);

}  // namespace capsim::answers
