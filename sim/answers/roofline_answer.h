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

// The bounds every front end checks the step against (the flags' ranges, the HTTP body's).
inline constexpr long long kRooflineMaxBatch = 1'000'000;      // decode sequences
inline constexpr long long kRooflineMaxTokens = 100'000'000;   // context or prefill tokens

struct RooflineRequest {
  scenario::DeploymentSpec deployment;
  long long batch = 1;            // decode sequences in the step, 0..kRooflineMaxBatch
  long long context = 1024;       // tokens of each decode sequence, 1..kRooflineMaxTokens
  long long prefill = 0;          // tokens of one prefill chunk in the same step, 0..kRooflineMaxTokens
  long long prefill_cached = 0;   // tokens cached before that chunk, 0..kRooflineMaxTokens
};

struct RooflineAnswer {
  nlohmann::json json;
  std::string text;
};

// Throws capsim::Error naming the flag (--batch, --context, ...) for a number out of range or an
// empty step (no decode sequence and no prefill), and for an encoder-only model.
RooflineAnswer answer_roofline(const RooflineRequest& request);

}  // namespace capsim::answers
