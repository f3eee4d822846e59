// `batch-serve`'s answer as every front end gives it: a dynamic-batching server for models that
// do one forward pass per item (BERT-class encoders from the catalogue, or any model given by
// FLOPs and weight bytes) under Poisson load, simulated: latency percentiles, throughput,
// utilisation, mean batch, the SLOs, and cost. batch_serve_json is exactly what
// `capsim batch-serve --json -` prints (docs/json-output.md#capsim-batch-serve---json).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sim/batchserve/batch_cost.h"
#include "sim/batchserve/batch_server.h"
#include "sim/hardware/card.h"
#include "sim/plan/prices.h"

namespace capsim::answers {

// The flags of `capsim batch-serve`, as text where the command line gives text. Messages name
// the flags (--rate, --max-batch, ...); the server words them as its body's fields.
struct BatchServeRequest {
  std::optional<std::string> model;  // encoder-only catalogue model (or config.json)
  std::optional<double> flops_per_item;
  std::optional<std::string> weights_bytes;
  std::string card;
  std::string precision = "fp32";
  std::optional<double> rate;
  std::optional<double> per_day;
  int max_batch = 8;
  std::string max_delay = "10ms";
  long long seq_len = 128;
  std::optional<long long> requests;
  std::optional<std::string> duration;
  std::vector<std::string> slos;  // "p95<=3s"
  std::string overhead = "1ms";
  std::uint64_t seed = 0;
  std::vector<std::string> price_overrides;  // "t4=0.35"
  std::string prices_file;                   // empty: calibration/prices.yaml of the data root
};

// "p95<=3s": a statistic of the per-item latency and its bound.
struct LatencySlo {
  std::string text;       // as given
  std::string statistic;  // mean, p50, p90, p95, p99
  double seconds = 0;
};

struct LatencySloOutcome {
  std::string slo;  // as given
  double value_s = 0;
  bool met = false;
};

// A request validated and resolved: everything the run needs, nothing run yet.
struct BatchServeSetup {
  std::string model_name;
  Card card;
  Precision precision = Precision::kFp32;
  ItemWork work;
  BatchServeConfig config;  // rate, max batch, delay, seed, run length, and the batch cost
  double overhead_s = 0;
  std::vector<LatencySlo> slos;
  PriceBook prices;
};

// mean, p50, p90, p95, p99 (and max) of per-item seconds.
struct LatencyStatistics {
  double mean = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0, max = 0;
};

struct BatchServeAnswer {
  BatchServeSetup setup;
  double capacity = 0;  // items/s at back-to-back full batches
  bool weights_fit = true;
  BatchServeResult result;
  // The statistics of result's samples, taken once for the JSON and the text.
  LatencyStatistics latency, wait;
  std::vector<LatencySloOutcome> slos;
  bool slos_met = true;  // every SLO met (the CLI's exit status 0, else 1)
};

// Validates in the order a user reads the flags and resolves the model, card and prices. Throws
// capsim::Error naming the flag for bad input. Cheap: no simulation.
BatchServeSetup resolve_batch_serve(const BatchServeRequest& request);
// Simulates a resolved request.
BatchServeAnswer answer_batch_serve(const BatchServeSetup& setup);

nlohmann::json batch_serve_json(const BatchServeAnswer& a);
// The readable report `capsim batch-serve` prints.
void print_batch_serve(std::ostream& os, const BatchServeAnswer& a);

}  // namespace capsim::answers
