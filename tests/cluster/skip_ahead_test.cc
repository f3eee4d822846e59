// Skip-ahead over quiet decode stretches (Replica::fast_forward) must not change any result:
// every scenario below runs twice, stepping one by one (SimulationConfig::skip_ahead = false)
// and skipping ahead, and every number the simulation returns is compared bit for bit (doubles
// as hexadecimal floats): per-request records, percentiles, throughputs, each replica's
// statistics and timeline, the cluster timeline and the steady-state analysis. Each scenario
// also checks that skipping happened and that what it exercises (preemption, prefix hits,
// several replicas, waiting requests) really occurred, so the comparison cannot pass vacuously.
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "sim/cluster/simulation.h"
#include "sim/workload/generators.h"
#include "tests/cluster/result_fingerprint.h"
#include "tests/engine/test_support.h"

namespace {

using namespace capsim;
using namespace capsim::test;

std::int64_t skipped(const SimulationResult& r) {
  std::int64_t n = 0;
  for (const ReplicaSummary& rs : r.replicas) n += rs.stats.skipped_steps;
  return n;
}

// Runs `make()`'s workload on `c` both ways; returns the skip-ahead result after comparing.
template <typename MakeWorkload>
SimulationResult both_ways(SimulationConfig c, MakeWorkload make) {
  c.skip_ahead = false;
  auto w1 = make();
  const SimulationResult stepped = simulate(c, *w1);
  c.skip_ahead = true;
  auto w2 = make();
  SimulationResult skipping = simulate(c, *w2);
  CHECK(skipped(stepped) == 0);
  CHECK(skipped(skipping) > 0);
  CHECK(stepped.steps == skipping.steps);
  const std::string a = fingerprint(stepped), b = fingerprint(skipping);
  CHECK(a.size() > 1000);
  // Show the first difference rather than two long strings.
  if (a != b) FAIL(first_difference(a, "stepped", b, "skipping"));
  return skipping;
}

OpenLoopConfig open_loop(double rate, std::int64_t requests, double prompt, double output,
                         std::uint64_t seed) {
  OpenLoopConfig o;
  o.stages = {{rate, 0}};
  o.requests = requests;
  o.lengths.prompt = Distribution::parse("lognormal:" + std::to_string(prompt) + ":" +
                                             std::to_string(4 * prompt),
                                         Distribution::Unit::kTokens, "test");
  o.lengths.output = Distribution::parse("lognormal:" + std::to_string(output) + ":" +
                                             std::to_string(4 * output),
                                         Distribution::Unit::kTokens, "test");
  o.seed = seed;
  return o;
}

}  // namespace

TEST_CASE("skip-ahead: the issue's workload (Llama-2-7B, A100-80GB, 8 req/s) as shipped and synchronous",
          "[skip-ahead]") {
  // 512 in / 256 out, 128 sequences, 2,048-token budget; with the vLLM profile's request path
  // (front end, return path, asynchronous scheduling) and without it (synchronous, no delays).
  for (const bool request_path : {true, false}) {
    Deployment d = deployment("llama-2-7b", "a100-80gb-sxm", 1, "vllm", request_path);
    d.limits.max_num_seqs = 128;
    d.limits.max_num_batched_tokens = 2048;
    SimulationConfig c;
    c.groups = {ReplicaGroup{d, 1}};
    OpenLoopConfig o;
    o.stages = {{8.0, 0}};
    o.requests = 600;
    o.lengths.prompt = Distribution::fixed(512, Distribution::Unit::kTokens);
    o.lengths.output = Distribution::fixed(256, Distribution::Unit::kTokens);
    o.seed = 3;
    const SimulationResult r = both_ways(c, [&] { return make_open_loop(o); });
    CHECK(r.completed == 600);
    CHECK(r.frontend.mean == (request_path ? Approx(d.engine.frontend_s + 512 * d.engine.frontend_per_prompt_token_s) : Approx(0.0)));
  }
}

TEST_CASE("skip-ahead: chat users with prefix caching, warm-up and an SLO", "[skip-ahead]") {
  // Multi-turn sessions: each turn's prompt is the history, so prefix hits happen; blocks
  // published during decodes are looked up by later turns.
  Deployment d = deployment("mistral-7b", "h100-sxm", 1, "vllm", true);
  d.limits.enable_prefix_caching = true;
  SimulationConfig c;
  c.groups = {ReplicaGroup{d, 1}};
  c.warmup = from_seconds(20);
  c.stop_arrivals = from_seconds(120);
  c.slo.ttft_s = 0.2;
  ClosedLoopConfig u;
  u.users = 60;
  u.think = Distribution::parse("exponential:5s", Distribution::Unit::kSeconds, "test");
  u.turns = Distribution::parse("geometric:4", Distribution::Unit::kCount, "test");
  u.lengths = {Distribution::parse("lognormal:150:1200", Distribution::Unit::kTokens, "test"),
               Distribution::parse("lognormal:250:1000", Distribution::Unit::kTokens, "test"), nullptr};
  u.prefix.groups = 1;
  u.prefix.system_prompt_tokens = 300;
  u.seed = 5;
  const SimulationResult r = both_ways(c, [&] { return make_closed_loop(u); });
  CHECK(r.prefix_hit_rate > 0.3);
}

TEST_CASE("skip-ahead: preemption under a small KV cache and max_num_seqs with requests waiting",
          "[skip-ahead]") {
  // 25% of an H100's 80 GB for the engine leaves about 4 GB for the KV cache after 16 GB of
  // weights: some 30k tokens at 128 KiB per token, less than 24 sequences of ~1,500 + 600 tokens
  // need, so at 6 req/s sequences are preempted and recomputed; with 24 sequences at most,
  // requests also wait while the running set decodes (a quiet stretch with a non-empty queue).
  for (const bool request_path : {true, false}) {
    Deployment d = deployment("llama-3.1-8b", "h100-sxm", 1, "vllm", request_path);
    d.limits.gpu_memory_utilization = 0.25;
    d.limits.max_num_seqs = 24;
    d.validate();
    SimulationConfig c;
    c.groups = {ReplicaGroup{d, 1}};
    const OpenLoopConfig o = open_loop(6.0, 400, 1500, 600, 11);
    const SimulationResult r = both_ways(c, [&] { return make_open_loop(o); });
    CHECK(r.preemptions > 0);
    double peak_waiting = 0;
    for (const ReplicaSummary& rs : r.replicas) peak_waiting = std::max(peak_waiting, rs.stats.waiting.peak());
    CHECK(peak_waiting > 0);
  }
}

TEST_CASE("skip-ahead: several replicas of two card types behind each router", "[skip-ahead]") {
  // Three replicas (two H100s, one A100) step out of phase: a replica skips only up to the next
  // event anywhere, so arrivals routed by load or by prefix see every replica's exact state.
  for (const char* router : {"least-outstanding", "prefix-aware", "round-robin"}) {
    SimulationConfig c;
    c.groups = {ReplicaGroup{deployment("llama-3.1-8b", "h100-sxm", 1, "vllm", true), 2},
                ReplicaGroup{deployment("llama-3.1-8b", "a100-80gb-sxm", 1, "vllm", true), 1}};
    c.router = router;
    OpenLoopConfig o = open_loop(12.0, 500, 400, 300, 7);
    o.prefix.groups = 4;
    o.prefix.system_prompt_tokens = 200;
    const SimulationResult r = both_ways(c, [&] { return make_open_loop(o); });
    CHECK(r.replicas.size() == 3);
    for (const ReplicaSummary& rs : r.replicas) CHECK(rs.stats.steps > 0);
  }
}

TEST_CASE("skip-ahead: implicit decode across chunked prefills, 1- and 2-token outputs and warm-up",
          "[skip-ahead]") {
  // Prompts of ~3,000 tokens against a 512-token budget are prefilled in chunks: a running
  // sequence mid-prompt is walked one by one after the cohort's bulk walk (the cohort's steps
  // assume one token each), with those admitted after it, and joins once it decodes; a step
  // whose walk may run out of blocks makes every sequence explicit again. Outputs of 1 or 2
  // tokens finish at their first token or right after joining; a warm-up mixes counted and
  // uncounted sequences within the cohort (ITL counts only the counted ones).
  for (const bool request_path : {true, false}) {
    Deployment d = deployment("llama-3.1-8b", "h100-sxm", 1, "vllm", request_path);
    d.limits.max_num_batched_tokens = 512;
    d.limits.enable_chunked_prefill = true;
    SimulationConfig c;
    c.groups = {ReplicaGroup{d, 1}};
    c.warmup = from_seconds(15);
    const OpenLoopConfig o = open_loop(2.0, 300, 3000, 8, 13);
    const SimulationResult r = both_ways(c, [&] { return make_open_loop(o); });
    CHECK(r.replicas[0].stats.batch_tokens.max() == 512);  // budget-bound steps: chunks
    std::int64_t one = 0, two = 0;
    for (const RequestRecord& q : r.records) {
      one += q.output_tokens == 1;
      two += q.output_tokens == 2;
    }
    CHECK(one > 0);
    CHECK(two > 0);
    CHECK(r.records.size() < 300);  // the warm-up's requests are not measured
  }
}
