// `capsim emulate`'s HTTP server: an OpenAI-compatible endpoint (vLLM's flavour) whose answers
// take the time the simulated deployment would take. One thread runs Boost.Asio's event loop,
// the HTTP connections (Boost.Beast) and a LiveSimulation of the cluster; simulated time is the
// wall time since start multiplied by --time-scale. A request enters the simulation when it
// arrives; each token is written to its client when the simulation's clock reaches the time the
// client would receive it; a client that disconnects aborts its request (its KV is freed).
//
// Routes: GET /v1/models, POST /v1/completions, POST /v1/chat/completions (streaming as
// server-sent events, or whole), GET /metrics (prometheus.h), GET /health.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "sim/cluster/simulation.h"
#include "sim/workload/distributions.h"

namespace capsim::emulate {

struct EmulateOptions {
  std::string bind = "127.0.0.1";
  int port = 8000;             // 0: any free port (the one taken is printed)
  double time_scale = 1.0;     // simulated seconds per wall-clock second
  std::string served_model;    // the name clients send as "model"
  std::uint64_t seed = 0;      // for answer lengths drawn from output_lengths
  Distribution output_lengths = Distribution::fixed(128, Distribution::Unit::kTokens);
};

// Serves until SIGINT or SIGTERM. Prints "capsim emulate: serving MODEL on http://HOST:PORT ..."
// on stdout once it listens. Throws capsim::Error when the deployment does not fit or the
// address cannot be bound.
void run_emulator(const SimulationConfig& config, const EmulateOptions& options);

}  // namespace capsim::emulate
