// The OpenAPI 3.0 document of `capsim serve` (GET /openapi.json). Response schemas name the
// JSON documented in docs/json-output.md rather than repeating every field here; the scenario
// body's schema comes from the scenario reader's tables (sim/scenario/scenario_fields.h).
#include "sim/server/api.h"

#include <nlohmann/json.hpp>

#include "sim/scenario/scenario_fields.h"

namespace capsim::server {
namespace {

const char* const kOpenApi = R"json({
  "openapi": "3.0.3",
  "info": {
    "title": "capsim",
    "version": "0.1.0",
    "description": "Capacity planning for LLM inference servers by simulation. Each POST endpoint answers with exactly the JSON `capsim <command> --json -` prints (docs/json-output.md). Request bodies are the scenario schema as JSON (docs/scenarios.md: the fields of the YAML files) plus one object of the command's options. Long jobs (plan, capacity, compare, check) stream progress as server-sent events when the request says `Accept: text/event-stream`; closing the connection cancels the job. A full queue answers 429 with Retry-After. docs/server.md."
  },
  "paths": {
    "/healthz": {"get": {"summary": "liveness", "responses": {"200": {"description": "{\"status\": \"ok\"}", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
    "/v1/cards": {"get": {"summary": "the card catalogue (capsim list cards --json -)", "responses": {"200": {"$ref": "#/components/responses/List"}}}},
    "/v1/models": {"get": {"summary": "the model catalogue (capsim list models --json -)", "responses": {"200": {"$ref": "#/components/responses/List"}}}},
    "/v1/engines": {"get": {"summary": "the engine profiles (capsim list engines --json -)", "responses": {"200": {"$ref": "#/components/responses/List"}}}},
    "/v1/serving": {"get": {"summary": "the serving models: how a deployment's engine batches and schedules (capsim list serving --json -)", "responses": {"200": {"$ref": "#/components/responses/List"}}}},
    "/v1/links": {"get": {"summary": "the KV-transfer links of disaggregated serving (capsim list links --json -)", "responses": {"200": {"$ref": "#/components/responses/List"}}}},
    "/v1/fit": {"post": {"summary": "does a model fit on a card: memory per GPU, KV capacity, what would fit (capsim fit)",
      "requestBody": {"$ref": "#/components/requestBodies/Fit"}}},
    "/v1/simulate": {"post": {"summary": "simulate a serving cluster under load (capsim simulate)",
      "requestBody": {"$ref": "#/components/requestBodies/Simulate"}}},
    "/v1/plan": {"post": {"summary": "the cheapest card x TP x precision x replicas that meet the SLOs (capsim plan)",
      "requestBody": {"$ref": "#/components/requestBodies/Plan"}}},
    "/v1/capacity": {"post": {"summary": "the most load one deployment serves within the SLOs, and the latency curve (capsim capacity)",
      "requestBody": {"$ref": "#/components/requestBodies/Capacity"}}},
    "/v1/compare": {"post": {"summary": "named deployments on one workload: latency, cost, verdict (capsim compare)",
      "requestBody": {"$ref": "#/components/requestBodies/Compare"}}},
    "/v1/check": {"post": {"summary": "capacity assumptions checked by simulation (capsim check; an assumptions document with inline scenarios)",
      "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}}}},
    "/v1/batch-serve": {"post": {"summary": "a dynamic-batching server for one-pass models (BERT, image models) under Poisson load: latency, throughput, cost (capsim batch-serve)",
      "requestBody": {"$ref": "#/components/requestBodies/BatchServe"}}},
    "/v1/finetune": {"post": {"summary": "does fine-tuning fit (full, LoRA, QLoRA): memory per GPU by term, per card (capsim finetune)",
      "requestBody": {"$ref": "#/components/requestBodies/Finetune"}}},
    "/v1/calibrate": {"post": {"summary": "fit a card's efficiencies to a measured profile sent in the body; writes nothing, \"out\" is null (capsim calibrate fit)",
      "requestBody": {"$ref": "#/components/requestBodies/Calibrate"}}},
    "/v1/calibrate/runs": {"post": {"summary": "fit one deployment's engine overheads to its own vllm bench serve / GuideLLM results sent in the body; the profile is profile_yaml, \"out\" is null (capsim calibrate runs)",
      "requestBody": {"$ref": "#/components/requestBodies/CalibrateRuns"}}},
    "/v1/roofline": {"post": {"summary": "one engine step of a deployment by operator group: time, bound, MFU, MBU, and whether each kernel time is measured or roofline (capsim roofline)",
      "requestBody": {"$ref": "#/components/requestBodies/Roofline"}}},
    "/v1/kernels": {"post": {"summary": "a card's measured kernel tables, or GEMM shapes timed from its table and from the roofline side by side (capsim kernels)",
      "requestBody": {"$ref": "#/components/requestBodies/Kernels"}}},
    "/v1/diff": {"post": {"summary": "what moved between two results of the same command (simulate, plan, capacity, compare), and the configuration changes that likely moved it (capsim diff)",
      "requestBody": {"$ref": "#/components/requestBodies/Diff"}}},
    "/v1/sweep": {"post": {"summary": "a grid of simulations (models x cards x TP x precisions x loads x seeds) over the body's scenario, at most --max-sweep-runs runs (capsim sweep)",
      "requestBody": {"$ref": "#/components/requestBodies/Sweep"}}}
  },
  "components": {
    "schemas": {
      "Error": {"type": "object", "properties": {"error": {"type": "string"}, "status": {"type": "integer"}}, "required": ["error", "status"]}
    },
    "requestBodies": {
      "Scenario": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Scenario"}}}},
      "Simulate": {"required": true, "content": {"application/json": {"schema": {"allOf": [{"$ref": "#/components/schemas/Scenario"},
        {"type": "object", "properties": {"simulate": {"type": "object", "properties": {"replications": {"type": "integer", "minimum": 1, "maximum": 10}}}}}]}}}},
      "Fit": {"required": true, "content": {"application/json": {"schema": {"allOf": [{"$ref": "#/components/schemas/Scenario"},
        {"type": "object", "properties": {"fit": {"type": "object", "properties": {"context": {"type": "integer", "description": "tokens"}}}}}]}}}},
      "Plan": {"required": true, "content": {"application/json": {"schema": {"allOf": [{"$ref": "#/components/schemas/Scenario"},
        {"type": "object", "properties": {"plan": {"type": "object", "properties": {
          "cards": {"type": "array", "items": {"type": "string"}}, "tp": {"type": "array", "items": {"type": "integer"}},
          "card_class": {"type": "array", "items": {"type": "string", "enum": ["datacenter", "workstation", "consumer"]}},
          "explain": {"type": "string", "description": "a card: why each of its candidates fails or where it ranks"},
          "weights": {"type": "array", "items": {"type": "string"}}, "kv_cache": {"type": "array", "items": {"type": "string"}},
          "max_cards": {"type": "integer"}, "min_goodput": {"type": "number"}, "price": {"type": "object", "additionalProperties": {"type": "number"}},
          "load_profile": {"type": "array", "items": {"type": "number"}, "minItems": 24, "maxItems": 24},
          "top": {"type": "integer"}, "search_duration": {"type": "string"}, "replications": {"type": "integer"}}}}}]}}}},
      "Capacity": {"required": true, "content": {"application/json": {"schema": {"allOf": [{"$ref": "#/components/schemas/Scenario"},
        {"type": "object", "properties": {"capacity": {"type": "object", "properties": {"min_goodput": {"type": "number"}, "points": {"type": "integer"}, "replications": {"type": "integer", "minimum": 1, "maximum": 10}}}}}]}}}},
      "Compare": {"required": true, "content": {"application/json": {"schema": {"allOf": [{"$ref": "#/components/schemas/Scenario"},
        {"type": "object", "properties": {"compare": {"type": "object", "properties": {
          "deployments": {"type": "array", "items": {"type": "string"}, "example": ["4x rtx-4090", "1x h100-sxm"]},
          "search_mix": {"type": "string"}, "max_cards": {"type": "integer"}, "min_goodput": {"type": "number"},
          "price": {"type": "object", "additionalProperties": {"type": "number"}}}}}}]}}}},
      "BatchServe": {"required": true, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": false,
        "description": "the flags of capsim batch-serve as fields; a catalogue model or flops_per_item with weights_bytes; rate or per_day",
        "properties": {"model": {"type": "string", "example": "bert-base-uncased"}, "flops_per_item": {"type": "number"}, "weights_bytes": {"type": "string", "example": "500MB"},
          "card": {"type": "string", "example": "t4"}, "precision": {"type": "string", "enum": ["fp32", "bf16", "fp16", "int8"]},
          "rate": {"type": "number", "description": "items per second"}, "per_day": {"type": "number"}, "max_batch": {"type": "integer"},
          "max_delay": {"type": "string", "example": "10ms"}, "seq_len": {"type": "integer"}, "requests": {"type": "integer"}, "duration": {"type": "string"},
          "slo": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}], "example": ["p95<=3s"]},
          "overhead": {"type": "string", "example": "1ms"}, "seed": {"type": "integer"}, "price": {"type": "object", "additionalProperties": {"type": "number"}}},
        "required": ["card"]}}}},
      "Finetune": {"required": true, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": false,
        "description": "the flags of capsim finetune as fields",
        "properties": {"model": {"type": "string", "example": "llama-2-13b"}, "method": {"type": "string", "enum": ["full", "lora", "qlora"]},
          "optimizer": {"type": "string", "enum": ["adamw", "adamw-8bit", "sgd"]}, "batch": {"type": "integer"}, "seq_len": {"type": "integer"},
          "lora_rank": {"type": "integer"}, "gradient_checkpointing": {"type": "boolean"}, "flash_attention": {"type": "boolean"},
          "cards": {"type": "array", "items": {"type": "string"}, "example": ["rtx-4090", "l4", "t4"]}, "gpus": {"type": "integer"},
          "price": {"type": "object", "additionalProperties": {"type": "number"}},
          "tokens": {"type": "number", "description": "tokens to train on (dataset tokens x epochs): each card's time and cost"}}}}}},
      "Calibrate": {"required": true, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": false,
        "description": "capsim calibrate fit on a profile carried in the body (never a path)",
        "properties": {"card": {"type": "string", "example": "h100-sxm"}, "force": {"type": "boolean"},
          "profile": {"type": "object", "description": "capsim-calibrate's JSON (docs/calibration.md#profile)"}},
        "required": ["profile"]}}}},
      "CalibrateRuns": {"required": true, "content": {"application/json": {"schema": {"allOf": [{"$ref": "#/components/schemas/Scenario"},
        {"type": "object", "properties": {"calibrate_runs": {"type": "object", "additionalProperties": false, "required": ["runs"], "properties": {
          "runs": {"type": "array", "maxItems": 32, "description": "result files' JSON (vllm bench serve --save-result, GuideLLM's report), each the object itself or {name, result}; never a path",
            "items": {"type": "object"}},
          "date": {"type": "string", "example": "2026-12-06"}, "seed": {"type": "integer"}}}}}]}}}},
      "Roofline": {"required": true, "content": {"application/json": {"schema": {"allOf": [{"$ref": "#/components/schemas/Scenario"},
        {"type": "object", "properties": {"roofline": {"type": "object", "additionalProperties": false, "properties": {
          "batch": {"type": "integer", "minimum": 0, "maximum": 1000000, "default": 1, "description": "decode sequences in the step"},
          "context": {"type": "integer", "minimum": 1, "maximum": 100000000, "default": 1024, "description": "tokens of each decode sequence"},
          "prefill": {"type": "integer", "minimum": 0, "maximum": 100000000, "default": 0, "description": "tokens of one prefill chunk in the same step"},
          "prefill_cached": {"type": "integer", "minimum": 0, "maximum": 100000000, "default": 0, "description": "tokens cached before that chunk"}}}}}]}}}},
      "Kernels": {"required": true, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": false,
        "description": "the flags of capsim kernels as fields; no table file (the card's own measured tables only)",
        "properties": {"card": {"type": "string", "default": "h100-sxm"}, "engine": {"type": "string", "default": "vllm"},
          "dtype": {"type": "string", "enum": ["bf16", "fp8", "nvfp4"], "default": "bf16"},
          "shapes": {"oneOf": [{"type": "array", "items": {"type": "object", "required": ["n", "k", "m"], "properties": {
              "n": {"type": "number"}, "k": {"type": "number"}, "m": {"type": "number"}}}},
            {"type": "string", "description": "CSV text with columns n, k, m"}],
            "description": "GEMM shapes to time; absent: list the card's tables"}}}}}},
      "Diff": {"required": true, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": false,
        "description": "two results of the same command, as their JSON objects (never paths)",
        "properties": {"a": {"type": "object"}, "b": {"type": "object"},
          "min_change": {"type": "number", "minimum": 0, "description": "hide metrics that moved less than this many percent"}},
        "required": ["a", "b"]}}}},
      "Sweep": {"required": true, "content": {"application/json": {"schema": {"allOf": [{"$ref": "#/components/schemas/Scenario"},
        {"type": "object", "properties": {"sweep": {"type": "object", "additionalProperties": false,
          "description": "the axes of a sweep file (docs/scale.md) but workloads and set: the body's scenario is the one workload",
          "properties": {"name": {"type": "string"}, "description": {"type": "string"},
            "models": {"type": "array", "items": {"type": "string"}}, "cards": {"type": "array", "items": {"type": "string"}},
            "tp": {"type": "array", "items": {"type": "integer"}}, "precisions": {"type": "array", "items": {"type": "string"}},
            "loads": {"type": "array", "items": {"type": "number"}, "description": "users, concurrency or requests/s, as the scenario's workload is"},
            "seeds": {"type": "array", "items": {"type": "integer"}}}}}}]}}}}
    },
    "responses": {
      "List": {"description": "an array, as `capsim list ... --json -` prints", "content": {"application/json": {"schema": {"type": "array", "items": {"type": "object"}}}}},
      "Answer": {"description": "the command's JSON, as `--json -` prints it (docs/json-output.md); with Accept: text/event-stream, events `progress` then `result` (or `error`)",
        "content": {"application/json": {"schema": {"type": "object"}}, "text/event-stream": {"schema": {"type": "string"}}}},
      "Error": {"description": "bad input (400), unknown path (404), method (405), body too large (413), over a run limit (422), queue full (429, Retry-After), job time limit (503)",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    }
  }
}
)json";

}  // namespace

const std::string& openapi_json() {
  // The scenario body's schema is written from the tables the scenario reader reads with.
  static const std::string text = [] {
    nlohmann::ordered_json doc = nlohmann::ordered_json::parse(kOpenApi);
    // Every POST answers alike: the command's JSON, or an error with its status.
    for (auto& [path, item] : doc["paths"].items()) {
      if (!item.contains("post")) continue;
      nlohmann::ordered_json responses = {{"200", {{"$ref", "#/components/responses/Answer"}}}};
      for (const char* status : {"400", "413", "422", "429", "503"}) {
        responses[status] = {{"$ref", "#/components/responses/Error"}};
      }
      item["post"]["responses"] = std::move(responses);
    }
    nlohmann::ordered_json scenario = scenario::scenario_json_schema();
    scenario["description"] = "docs/data-formats.md#scenario-fields. The server takes catalogue names only (no file "
                              "paths, traces or empirical distributions).";
    doc["components"]["schemas"]["Scenario"] = std::move(scenario);
    return doc.dump(2) + "\n";
  }();
  return text;
}

}  // namespace capsim::server
