// `capsim emulate`'s HTTP server: an OpenAI-compatible endpoint (vLLM's flavour) whose answers
// take the time the simulated deployment would take. One thread runs Boost.Asio's event loop,
// the HTTP connections (Boost.Beast) and a LiveSimulation of the cluster; simulated time is the
// wall time since start multiplied by --time-scale. A request enters the simulation when it
// arrives; each token is written to its client when the simulation's clock reaches the time the
// client would receive it; a client that disconnects aborts its request (its KV is freed).
//
// Routes: GET /v1/models, POST /v1/completions, POST /v1/chat/completions (streaming as
// server-sent events, or whole), GET /metrics (prometheus.h), GET /health.
//
// Hostile clients (the same guarantees as `capsim serve`: the same HTTP server, sim/http/server.h,
// with the emulator's routes): every request passes
// the guard (Host, Origin, the API key, Content-Type: request_path.h); a request's header and
// body must arrive within read_timeout_s (16 KiB of header, max_body_bytes of body, nested at
// most 128 deep, else 431/413/400); at max_connections a new connection takes the place of the
// one waiting longest for its request; request bodies are parsed on a thread of their own, so a
// large one never delays the streams; nothing a request carries can stop the event loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "sim/cluster/simulation.h"
#include "sim/http/request_guard.h"
#include "sim/workload/distributions.h"

namespace capsim::emulate {

struct EmulateOptions {
  std::string bind = "127.0.0.1";
  int port = 8000;             // 0: any free port (the one taken is printed)
  double time_scale = 1.0;     // simulated seconds per wall-clock second, kMinTimeScale..kMaxTimeScale
  std::string served_model;    // the name clients send as "model"
  std::uint64_t seed = 0;      // for answer lengths drawn from output_lengths
  Distribution output_lengths = Distribution::fixed(128, Distribution::Unit::kTokens);
  double read_timeout_s = 15;
  unsigned max_connections = 256;
  std::size_t max_body_bytes = std::size_t{4} << 20;  // a 128k-token prompt as text or ids is under 1 MiB
  http::GuardPolicy guard;                            // allowed Host names, the API key
};

// --time-scale's range. Simulated time is int64 nanoseconds (292 years): at 1e4 it lasts ten
// days of wall time; below 1e-3 a one-second answer takes over a quarter of an hour.
inline constexpr double kMinTimeScale = 1e-3;
inline constexpr double kMaxTimeScale = 1e4;

// Serves until SIGINT or SIGTERM. Prints "capsim emulate: serving MODEL on http://HOST:PORT ..."
// on stdout once it listens. Throws capsim::Error when the deployment does not fit or the
// address cannot be bound.
void run_emulator(const SimulationConfig& config, const EmulateOptions& options);

}  // namespace capsim::emulate
