// Prefill/decode disaggregation (sim/cluster/disaggregation.h): the KV a prompt moves, the time
// the move takes, and the cluster that prefills in one pool and decodes in another. Numbers
// worked by hand in the comments.
#include <catch2/catch.hpp>

#include <string>

#include "sim/cluster/disaggregation.h"
#include "sim/cluster/simulation.h"
#include "sim/core/error.h"
#include "sim/hardware/link_efficiency.h"
#include "sim/scenario/catalogues.h"
#include "sim/scenario/deployment_spec.h"
#include "sim/scenario/scenario.h"

namespace {

using namespace capsim;
using namespace capsim::scenario;

Deployment llama8b(const std::string& kv = "auto") {
  DeploymentSpec s;
  s.model = "llama-3.1-8b";
  s.card = "h100-sxm";
  s.kv_cache = kv;
  return s.resolve();
}

// One request of `prompt` tokens and `output` tokens, disaggregated 1 prefill + 1 decode H100.
ScenarioSpec pd_spec(const std::string& link, int prompt, int output) {
  ScenarioSpec s;
  s.deployment.model = "llama-3.1-8b";
  s.deployment.card = "h100-sxm";
  s.serving = "pd-disaggregated";
  s.decode_pool = ScenarioSpec::ExtraGroup{"h100-sxm", 1, 1, "auto", ""};
  s.kv_link = link;
  s.rate = "1";
  s.requests = 1;
  s.input_tokens = std::to_string(prompt);
  s.output_tokens = std::to_string(output);
  return s;
}

SimulationResult run(const ScenarioSpec& s) {
  BuiltScenario b = build_scenario(s);
  return simulate(b.config, *b.workload);
}

std::string error_of(const ScenarioSpec& s) {
  try {
    build_scenario(s);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("disaggregation: KV bytes of a prompt and its transfer time", "[pd]") {
  // Llama-3.1-8B: 32 layers x (K and V) x 8 KV heads x 128 dims = 65536 elements per token,
  // x 2 B (bf16) = 131072 B per token. 2000 tokens: 262,144,000 B.
  const Deployment d = llama8b();
  CHECK(kv_transfer_bytes(d, 2000) == Approx(262'144'000.0));
  // An fp8 KV cache moves half.
  CHECK(kv_transfer_bytes(llama8b("fp8"), 2000) == Approx(131'072'000.0));

  const KvLink& ib = kv_links().find("ib-ndr-400");
  // 400 Gb/s = 50 GB/s per GPU, of which a transfer gets kLinkEfficiency 0.8 (the TP all-reduce's
  // share, sim/hardware/link_efficiency.h): 40 GB/s; 50 us per transfer:
  // 262.144e6 / 40e9 = 6.5536 ms + 0.05 ms.
  CHECK(kLinkEfficiency == 0.8);
  CHECK(ib.bandwidth_bytes_per_s == Approx(50e9));
  CHECK(kv_transfer_seconds(ib, 262'144'000.0, 1, 1) == Approx(6.6036e-3));
  // TP 2 to TP 2: each GPU sends its half over its own NIC: 3.2768 ms + 0.05 ms.
  CHECK(kv_transfer_seconds(ib, 262'144'000.0, 2, 2) == Approx(3.3268e-3));
  // TP 4 to TP 1: the single decode GPU receives at one link's rate.
  CHECK(kv_transfer_seconds(ib, 262'144'000.0, 4, 1) == Approx(6.6036e-3));
  // PCIe 4.0 x16: 31.5 GB/s x 0.8 = 25.2 GB/s: 10.40254 ms + 0.05 ms.
  CHECK(kv_transfer_seconds(kv_links().find("pcie-gen4-x16"), 262'144'000.0, 1, 1) == Approx(10.45254e-3).epsilon(1e-5));
}

TEST_CASE("disaggregation: the transfer sits on the first token's path, and only there", "[pd]") {
  // One request on idle pools: the decode engine receives it later by exactly the difference
  // of the two transfers, and starts its step at once, so TTFT moves by that difference:
  //   PCIe 4.0: 262.144e6 / (31.5e9 x 0.8) + 50 us = 10.452540 ms
  //   NVLink (H100, 450 GB/s each way): 262.144e6 / (450e9 x 0.8) + 20 us = 0.748178 ms
  //   difference 9.704362 ms.
  const SimulationResult slow = run(pd_spec("pcie-gen4-x16", 2000, 10));
  const SimulationResult fast = run(pd_spec("nvlink-h100", 2000, 10));
  REQUIRE(slow.completed == 1);
  REQUIRE(fast.completed == 1);
  CHECK(slow.ttft.mean - fast.ttft.mean == Approx(9.704362e-3).margin(2e-9));
  // The decode steps after the first token are the same on both.
  CHECK(slow.tpot.mean == Approx(fast.tpot.mean).margin(1e-12));
  REQUIRE(slow.pd);
  CHECK(slow.pd->kv_transfer.mean == Approx(10.452540e-3).epsilon(1e-6));
  CHECK(slow.pd->mean_kv_bytes == Approx(262'144'000.0));
  CHECK(slow.pd->prefill_replicas == 1);
  // The handoff (request -> decode engine) holds the prefill, the return to the proxy, the
  // decode front end and the transfer; the first token comes one decode step later.
  CHECK(slow.pd->handoff.mean > slow.pd->kv_transfer.mean);
  CHECK(slow.ttft.mean > slow.pd->handoff.mean);
}

TEST_CASE("disaggregation: every token is served once, by the decode pool", "[pd]") {
  ScenarioSpec pd = pd_spec("ib-ndr-400", 0, 0);
  pd.rate = "8";
  pd.requests = 300;
  pd.input_tokens = "lognormal:1500:6000";
  pd.output_tokens = "lognormal:200:800";
  ScenarioSpec agg = pd;
  agg.serving = "aggregated";
  agg.decode_pool.reset();
  agg.replicas = 2;
  const SimulationResult a = run(agg), p = run(pd);
  REQUIRE(p.completed == 300);
  CHECK(p.total_output_tokens == a.total_output_tokens);
  CHECK(p.total_input_tokens == a.total_input_tokens);
  REQUIRE(p.replicas.size() == 2);
  // The prefill replica's steps never decode more than the one token each request asks of it;
  // the decode replica computes one prompt token per request (the last, to sample the first
  // output token), not the prompt: 300 requests -> 300 prompt tokens.
  CHECK(p.replicas[1].stats.prompt_tokens_computed == 300);
  CHECK(p.replicas[0].stats.prompt_tokens_computed == p.total_input_tokens);
  // Same inputs and seed: the same result.
  const SimulationResult again = run(pd);
  CHECK(again.ttft.p95 == p.ttft.p95);
  CHECK(again.tpot.p95 == p.tpot.p95);
}

TEST_CASE("disaggregation: long prompts no longer stall the decode batch", "[pd]") {
  // Aggregated, an 8000-token prompt runs as one chunk (8192 tokens per step) in a step shared
  // with the running decodes: 2 x 8e9 params x 8000 tokens = 1.3e14 FLOP at ~0.7 x 989 TFLOPS is
  // ~0.19 s, so those decodes wait ~0.2 s for their next token. Disaggregated, the decode pool
  // runs only decodes (plus one recomputed token per arriving request): no such gap, and TPOT's
  // tail shrinks; the first token pays the handoff instead.
  ScenarioSpec pd = pd_spec("ib-ndr-400", 8000, 300);
  pd.rate = "2";
  pd.requests = 200;
  ScenarioSpec agg = pd;
  agg.serving = "aggregated";
  agg.decode_pool.reset();
  agg.replicas = 2;
  const SimulationResult a = run(agg), p = run(pd);
  CHECK(a.itl.max > 0.1);
  CHECK(p.itl.max < 0.25 * a.itl.max);
  CHECK(p.tpot.p95 < a.tpot.p95);
  CHECK(p.ttft.p95 > a.ttft.p95);
}

TEST_CASE("disaggregation: bad input names the field and what is accepted", "[pd]") {
  ScenarioSpec s = pd_spec("", 100, 10);
  CHECK(error_of(s).find("--kv-link: serving pd-disaggregated needs the link between the pools; accepted: nvlink-h100") == 0);
  s.kv_link = "infiniband";
  CHECK(error_of(s).find("--kv-link: unknown KV link 'infiniband'") == 0);
  s.kv_link = "ib-ndr-400";
  s.policy = "static";
  CHECK(error_of(s).find("--scheduler: static batching cannot join") == 0);
  s.policy = "vllm-v1";
  s.serving = "split";
  CHECK(error_of(s).find("--serving: unknown serving model 'split'") == 0);
  s.serving = "pd-disaggregated";
  s.decode_pool.reset();
  CHECK(error_of(s).find("--decode-pool: serving pd-disaggregated needs a decode pool") == 0);
}
