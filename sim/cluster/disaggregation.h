// Prefill/decode disaggregation (docs/deployment-options.md#prefilldecode-disaggregation), as
// vLLM's P/D connectors (NixlConnector), SGLang's PD mode, NVIDIA Dynamo and llm-d run it: a
// prefill pool computes each prompt, its KV cache moves over a link to a decode pool, which joins
// it to its continuous batch. Each pool is an ordinary group of replicas (sim/engine/replica.h)
// with its own card, TP and replica count, its own router and queue; this file holds the model's
// arithmetic and its place in the serving-model table. The cluster (cluster.cc) drives it.
//
// How the first token is counted (vLLM's NixlConnector, the default path): the proxy sends the
// request to a prefill instance with max_tokens 1; the prefill computes the prompt and returns;
// the proxy then sends the original request to a decode instance, which pulls the prompt's KV and
// recomputes the last prompt token to sample the first output token itself (vllm-project/vllm
// RFC #50913 and PR #51919: "recomputing a token the prefill already sampled"). The client's TTFT
// therefore runs from its request to the decode instance's first token: prefill queue + prefill +
// return to the proxy + decode front end + KV transfer + the decode step that samples it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/hardware/kv_link.h"
#include "sim/llm/deployment.h"

namespace capsim {

// Bytes of KV cache a prompt of `tokens` tokens leaves (all layers, all TP ranks together), at
// the deployment's KV-cache precision: tokens x layers x KV elements per token per layer (TP 1)
// x bytes per element. Llama-3.1-8B bf16: 32 x (2 x 8 x 128) x 2 B = 131072 B per token.
// Sliding-window layers are counted in full (capsim moves the whole prompt's KV; the window's
// share alone would do).
double kv_transfer_bytes(const Deployment& prefill, std::int64_t tokens);

// Seconds to move `bytes` from a prefill replica of TP `tp_prefill` to a decode replica of TP
// `tp_decode`: latency + bytes / (bandwidth x kLinkEfficiency x streams), streams =
// min(tp_prefill, tp_decode) (each GPU sends its shard over its own link; a narrower side
// receives at its own links' rate), at the same share of the line rate as the TP all-reduce
// (sim/hardware/link_efficiency.h).
double kv_transfer_seconds(const KvLink& link, double bytes, int tp_prefill, int tp_decode);

// The serving models a scenario names (`serving:`), one line each, for `capsim list` and messages.
struct ServingModelInfo {
  std::string name;
  std::string description;
};
const std::vector<ServingModelInfo>& serving_models();
// Throws capsim::Error naming `where` and the accepted names.
const ServingModelInfo& find_serving_model(const std::string& name, const std::string& where);

}  // namespace capsim
