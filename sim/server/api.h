// The HTTP API of `capsim serve`, apart from the transport: which path is which endpoint, what a
// request body may ask for, and the answer of each endpoint as the exact text `--json -` prints
// for the same command (docs/server.md). The transport (sim/server/server.h) runs prepared jobs
// on its pool; the fuzz target (fuzz/fuzz_http.cc) drives route() and prepare() directly.
//
// Contract: request bodies are the scenario schema as JSON (docs/scenarios.md; the same fields
// as the YAML files) plus one object of the command's own options ("plan": {...}, ...); the
// commands without a scenario (batch-serve, finetune, calibrate) take their flags as fields. The
// server opens no file a request names: models, cards and engines resolve only in the catalogues
// (anything else, a path included, is 400 before any lookup touches the file system); traces,
// empirical distributions, price, scenario and baseline files are refused with 400. Runs larger
// than Limits are refused with 422 before they start.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "sim/core/cancel.h"

namespace capsim::server {

// What one request may ask of the server (flags of `capsim serve`).
struct Limits {
  std::size_t max_body_bytes = std::size_t{1} << 20;  // a scenario is under 8 KB
  std::int64_t max_requests = 200'000;  // simulated requests per run (1e5 take ~5 s, docs/robustness.md)
  double max_duration_s = 4 * 3600;     // simulated seconds per run
  int max_users = 50'000;               // closed-loop users or fixed concurrency
  int max_cards = 512;                  // replicas x TP of one deployment
  int max_sweep_runs = 256;             // runs of one POST /v1/sweep grid
};

// A refusal with its HTTP status (400 bad input, 404, 405, 413, 422 over a limit, ...).
class HttpError : public std::runtime_error {
 public:
  HttpError(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

enum class Endpoint {
  kHealth, kCards, kModels, kEngines, kServing, kLinks, kOpenApi, kPage,  // GET, answered at once
  kFit, kSimulate, kPlan, kCapacity, kCompare, kCheck,  // POST, run on the pool
  kBatchServe, kFinetune, kCalibrate, kCalibrateRuns,   // POST, run on the pool
  kRoofline, kKernels, kDiff, kSweep,                   // POST, run on the pool
};

// `path` without its query. Throws HttpError 404 for an unknown path, 405 (message lists the
// allowed method) for a known path with another method.
Endpoint route(std::string_view method, std::string_view path);
bool runs_on_pool(Endpoint e);
// Plan, capacity, compare and check: long enough to report progress (docs/server.md#progress).
// A sweep reports none: its runs finish in any order, and its answer is the whole grid.
bool reports_progress(Endpoint e);

// The answer of a GET endpoint other than kPage (JSON text, as `capsim list ... --json -`).
std::string answer_get(Endpoint e);

// Progress of a running job: {"phase": "...", "done": N, "total": M} (may be called from any
// thread of the job).
using ProgressFn = std::function<void(const nlohmann::json&)>;
// A validated POST request. Running it returns the JSON text (`--json -`'s bytes) or throws:
// Cancelled when the flag was set, capsim::Error for input only a run can find wrong (400),
// HttpError for a limit a run passed (422).
using Job = std::function<std::string(const CancelFlag&, const ProgressFn&)>;

// Parses and validates a POST body for `e`; throws HttpError (400, 413, 422) before any work.
Job prepare(Endpoint e, std::string_view body, const Limits& limits);

// {"error": message, "status": status} as JSON text.
std::string error_json(int status, const std::string& message);

// The OpenAPI 3.0 document of the API (GET /openapi.json).
const std::string& openapi_json();

}  // namespace capsim::server
