// Pipeline and expert parallelism (sim/llm/parallelism.h, sim/cost/pipeline_cost.h,
// sim/cost/expert_parallel.h, sim/cost/registry.h), worked out by hand. Card and engine numbers
// are data (calibration/cards/*.yaml, calibration/engines/vllm.yaml) and are read from the
// objects; the parallelism arithmetic is done here.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "sim/core/error.h"
#include "sim/cost/batch_shape.h"
#include "sim/cost/expert_parallel.h"
#include "sim/cost/pipeline_cost.h"
#include "sim/cost/registry.h"
#include "sim/cost/roofline_cost.h"
#include "sim/hardware/card.h"
#include "sim/llm/deployment.h"
#include "sim/llm/engine_profile.h"
#include "sim/llm/memory_plan.h"
#include "sim/llm/model_spec.h"
#include "sim/llm/parallelism.h"
#include "tests/support/catalogues.h"

namespace {

using namespace capsim;

const EngineProfile& vllm() { return capsim_test::engine_profile("vllm"); }

Deployment deploy(const std::string& model, const std::string& card, int tp, int pp, int dp = 1,
                  bool ep = false, Precision weights = Precision::kBf16) {
  Deployment d;
  d.model = capsim_test::model_catalogue().find(model);
  d.card = capsim_test::card_catalogue().find(card);
  d.engine = vllm();
  d.tp = tp;
  d.pp = pp;
  d.dp = dp;
  d.expert_parallel = ep;
  d.weights = weights;
  d.kv_cache = Precision::kBf16;
  d.limits = default_limits(d.card, d.engine);
  d.validate();
  return d;
}

BatchShape decodes(int batch, int context) {
  BatchShape b;
  for (int i = 0; i < batch; ++i) b.add_decode(context);
  return b;
}

}  // namespace

TEST_CASE("pipeline stages split the layers as vLLM's get_pp_indices does", "[parallelism]") {
  // DeepSeek-V3, 61 layers: 61 // 2 = 30 each, the remainder to the second-to-last stage:
  // [31, 30]; PP 4: 15 each, one more for the third stage: [15, 15, 16, 15] (vLLM's docs).
  const auto two = pipeline_stages(deploy("deepseek-v3", "h200", 8, 2, 1, false, Precision::kFp8));
  REQUIRE(two.size() == 2);
  CHECK(two[0].layers == 31);
  CHECK(two[1].layers == 30);
  CHECK(two[1].first_layer == 31);
  CHECK(two[0].embedding);
  CHECK_FALSE(two[0].lm_head);
  CHECK(two[1].lm_head);
  // 3 dense and 58 MoE layers in proportion: stage 0 holds 3 x 31/61 dense, 58 x 31/61 MoE.
  CHECK(two[0].dense_layers == Approx(3.0 * 31 / 61));
  CHECK(two[0].moe_layers == Approx(58.0 * 31 / 61));
  const auto four = pipeline_stages(deploy("deepseek-v3", "h200", 8, 4, 1, false, Precision::kFp8));
  REQUIRE(four.size() == 4);
  CHECK(four[0].layers == 15);
  CHECK(four[1].layers == 15);
  CHECK(four[2].layers == 16);
  CHECK(four[3].layers == 15);
}

TEST_CASE("Llama-3.1-405B: TP 8 does not fit 80 GB H100s, TP 8 x PP 2 does", "[parallelism]") {
  const Deployment tp8 = deploy("llama-3.1-405b", "h100-sxm", 8, 1);
  const Deployment pp2 = deploy("llama-3.1-405b", "h100-sxm", 8, 2);
  // bf16: W = weight_bytes() (~811 GB). Embedding and LM head (untied) are each
  // 128256 x 16384 x 2 B = 4,202,692,608 B. Per GPU of stage 0: (W - 2E)/2/8 + E/8; of stage 1
  // the same with the head instead of the embedding: both equal (63 layers each).
  const double e = 128256.0 * 16384.0 * 2.0;
  const double w = tp8.weight_bytes();
  const auto st = pipeline_stages(pp2);
  REQUIRE(st.size() == 2);
  CHECK(st[0].layers == 63);
  CHECK(st[0].weight_bytes == Approx((w - 2 * e) / 2 / 8 + e / 8));
  CHECK(st[1].weight_bytes == Approx((w - 2 * e) / 2 / 8 + e / 8));

  const MemoryPlan one = plan_memory(tp8, 2048);
  const MemoryPlan two = plan_memory(pp2, 2048);
  CHECK(one.weights == Approx(w / 8));
  CHECK_FALSE(one.fits);  // ~101 GB of weights per GPU > 0.9 x 79.11 GiB
  CHECK(two.fits);
  CHECK(two.weights == Approx(st[0].weight_bytes));
  // KV per GPU: 8 KV heads over TP 8 = 1 head x 128 x (K, V) = 256 elements x 2 B = 512 B per
  // layer per token; a stage's 63 layers: 32,256 B per token; a block of 16 tokens 516,096 B.
  CHECK(two.kv_bytes_per_token_per_gpu == Approx(63.0 * 512.0));
  CHECK(two.kv_block_bytes == Approx(16.0 * 63.0 * 512.0));
  CHECK(two.kv_blocks == static_cast<long long>(std::floor(two.kv_cache / (16.0 * 63.0 * 512.0))));
}

TEST_CASE("one decode through a 2-stage pipeline costs the TP-only step plus one hand-off", "[parallelism]") {
  // Llama-3.1-8B on H100s, TP 1: PP 2 puts 16 layers on each GPU. A single sequence is one
  // micro-batch (m = 1): the cycle is stage 0 + hand-off + stage 1 + the engine's CPU work,
  // and the stages' groups scale linearly with their layers, so s0 + s1 = the TP-only step
  // without its overhead. The hand-off (GPU 0 -> GPU 1, NVLink) carries hidden state and
  // residual: 2 x 1 token x 4096 x 2 B = 16,384 B at 450 GB/s x 0.8 = 360 GB/s, plus the
  // engine's NVLink latency.
  const Deployment plain = deploy("llama-3.1-8b", "h100-sxm", 1, 1);
  const Deployment pp2 = deploy("llama-3.1-8b", "h100-sxm", 1, 2);
  const RooflineCost roof(plain);
  const PipelineCost pipe(pp2);
  REQUIRE(pipe.stages() == 2);
  CHECK(pipe.link(0).kind == GpuLink::Kind::kNvlink);
  const BatchShape b = decodes(1, 1024);
  const double handoff = vllm().allreduce_latency_nvlink_s + 16384.0 / (450e9 * 0.8);
  CHECK(pipe.handoff_seconds(0, 1) == Approx(handoff));
  CHECK(pipe.seconds(b) == Approx(roof.seconds(b) + handoff).epsilon(1e-9));
  CHECK(step_cost_model_name(pp2) == "pipeline");
  CHECK(step_cost_model_name(plain) == "roofline");
}

TEST_CASE("a full pipeline: micro-batches, cycle and bubble", "[parallelism]") {
  const Deployment pp2 = deploy("llama-3.1-8b", "h100-sxm", 1, 2);
  const PipelineCost pipe(pp2);
  // The stages by hand: 16 layers each, embedding on the first, LM head on the last, no
  // per-step overhead (the pipeline adds it once per micro-batch).
  RooflineScope s0, s1;
  s0.layers = s1.layers = 16;
  s0.dense_layers = s1.dense_layers = 16;
  s0.moe_layers = s1.moe_layers = 0;
  s0.lm_head = false;
  s1.embedding = false;
  s0.overhead = s1.overhead = false;
  const RooflineCost c0(pp2, s0), c1(pp2, s1);

  // 64 decodes: m = min(2, 64) = 2 micro-batches of 32.
  const BatchShape b = decodes(64, 2048);
  REQUIRE(PipelineCost::micro_batches(b, 2) == 2);
  const BatchShape mb = decodes(32, 2048);
  const double t0 = c0.seconds(mb), t1 = c1.seconds(mb);
  const double h = vllm().allreduce_latency_nvlink_s + 2.0 * 32 * 4096 * 2 / (450e9 * 0.8);
  const double cpu = vllm().step_overhead_s + vllm().per_sequence_overhead_s * 64 / 2;
  const double cycle = std::max({t0 + h + t1 + cpu, 2 * std::max(t0 + h, t1), 2 * cpu});
  CHECK(pipe.seconds(b) == Approx(cycle).epsilon(1e-9));
  // Per GPU the breakdown sums to the cycle.
  const StepBreakdown br = pipe.breakdown(b);
  double sum = 0;
  for (const auto& g : br.groups) sum += g.seconds;
  CHECK(sum == Approx(br.seconds).epsilon(1e-9));

  // A lone sequence on 4 stages: one micro-batch, so 3 of 4 stages idle while one works. The
  // bubble is the latency minus the busiest stage: L - max_k (s_k + h_k).
  const Deployment pp4 = deploy("llama-3.1-8b", "h100-sxm", 1, 4);
  const PipelineCost p4(pp4);
  const BatchShape one = decodes(1, 2048);
  const StepBreakdown b4 = p4.breakdown(one);
  double bubble = -1;
  for (const auto& g : b4.groups) {
    if (g.group == "pipeline_bubble") bubble = g.seconds;
  }
  const double cpu1 = vllm().step_overhead_s + vllm().per_sequence_overhead_s;
  // cycle = L + cpu (m = 1); work = max_k (s_k + h_k); bubble = cycle - work - cpu.
  CHECK(bubble > 0);
  CHECK(b4.seconds - bubble - cpu1 > 0);
  CHECK(bubble > 0.5 * (b4.seconds - cpu1));  // 3 of the 4 stages' time at least half the latency
}

TEST_CASE("all-to-all bytes of one DeepSeek-V3 decode step at batch 64 over EP 8", "[parallelism]") {
  // DP 8 x TP 1 with expert parallelism on 8 H200s (DP attention). Each rank decodes 64
  // sequences; each token goes to k = 8 experts of hidden 7168. fp8 weights compute in fp8, so
  // the dispatch sends fp8 with one fp32 scale per 128 elements (1 + 4/128 = 1.03125 B per
  // element) and the combine bf16 (2 B). 7 of 8 copies leave the GPU:
  //   dispatch 64 x 8 x 7168 x 1.03125 x 7/8 = 3,311,616 B per GPU per MoE layer
  //   combine  64 x 8 x 7168 x 2       x 7/8 = 6,422,528 B
  // All 8 GPUs share an NVLink domain: 450 GB/s per direction x 0.8 = 360 GB/s, one fixed
  // cost (the engine's NVLink latency) per transfer:
  //   dispatch + combine = 2 x latency + 9,734,144 B / 360 GB/s = 2 x latency + 27.04 us.
  const Deployment d = deploy("deepseek-v3", "h200", 1, 1, 8, true, Precision::kFp8);
  RooflineCost roof(d);
  ExpertParallelMoe::Rates r;
  r.gemm_flops_per_s = roof.gemm_flops_per_s();
  r.bytes_per_s = roof.bytes_per_s();
  const ExpertParallelMoe ep(d, r);
  CHECK(ep.group_gpus() == 8);
  CHECK(ep.all_to_all());
  CHECK(ep.dispatch_bytes(64) == Approx(3311616.0));
  CHECK(ep.combine_bytes(64) == Approx(6422528.0));
  const double lat = vllm().allreduce_latency_nvlink_s;
  CHECK(ep.all_to_all_seconds(64) == Approx(2 * lat + 9734144.0 / 360e9));
  // Token-expert pairs on the busiest GPU: 8 ranks x 64 tokens x 8 / 8 GPUs x 1.3 = 665.6.
  CHECK(ep.local_pairs(64) == Approx(64 * 8 * 1.3));
  // The step has one all_to_all group of 58 MoE layers and no all-reduce (TP 1).
  const StepBreakdown br = roof.breakdown(decodes(64, 2048));
  double a2a = -1;
  for (const auto& g : br.groups) {
    CHECK(g.group != "all_reduce");
    if (g.group == "all_to_all") a2a = g.seconds;
  }
  CHECK(a2a == Approx(58 * (2 * lat + 9734144.0 / 360e9)));
  CHECK(step_cost_model_name(d) == "expert-parallel");
}

TEST_CASE("the all-to-all against DeepEP's published low-latency kernels (H800, CX7 400 Gb/s)", "[parallelism]") {
  // deepseek-ai/DeepEP docs/legacy.md, "Low-latency kernels with pure RDMA": 128 tokens per
  // rank, hidden 7168, top-8, FP8 dispatch, BF16 combine; latency per dispatch / combine:
  //   EP 16: 118 / 195 us; EP 32: 155 / 273; EP 64: 173 / 314; EP 128: 192 / 369; EP 256: 194 / 360.
  // capsim on H100s (8 per NVLink domain, 50 GB/s x 0.8 network, 10 us): EP 16 combine
  //   128 x 8 x 7168 x 2 B = 14,680,064 B, half to the other server: 7,340,032 / 40e9 = 183.5 us
  //   + 10 us = 193.5 us (DeepEP 195 us, -0.8%); dispatch 7,569,408 B / 2 / 40e9 + 10 = 104.6 us
  //   (118 us, -11%). Every EP >= 16 lands within 12% (docs/cost-model.md#expert-parallel).
  // At EP 8 DeepEP's low-latency kernels still go through the NIC (77 / 114 us) where capsim
  // sends over NVLink (29 / 46 us): the low-latency path is not what an NVLink-only group runs.
  struct Row { int ep; double dispatch_us, combine_us; };
  const Row rows[] = {{16, 118, 195}, {32, 155, 273}, {64, 173, 314}, {128, 192, 369}, {256, 194, 360}};
  for (const Row& row : rows) {
    const Deployment d = deploy("deepseek-v3", "h100-sxm", 1, 1, row.ep, true, Precision::kFp8);
    ExpertParallelMoe::Rates r;
    r.gemm_flops_per_s = 1;
    r.bytes_per_s = 1;
    const ExpertParallelMoe ep(d, r);
    const double remote = (row.ep - 8.0) / row.ep;  // the share going over the network
    const double dispatch = 10e-6 + 128.0 * 8 * 7168 * 1.03125 * remote / 40e9;
    const double combine = 10e-6 + 128.0 * 8 * 7168 * 2 * remote / 40e9;
    CHECK(ep.all_to_all_seconds(128) == Approx(dispatch + combine));
    CHECK(std::abs(dispatch * 1e6 / row.dispatch_us - 1) < 0.12);
    CHECK(std::abs(combine * 1e6 / row.combine_us - 1) < 0.12);
  }
}

TEST_CASE("DP attention: MLA KV per rank, experts over the group, weights per GPU", "[parallelism]") {
  // DeepSeek-V3 fp8 on 8 H200s. TP 8: every GPU holds 1/8 of every weight and a full copy of
  // the latent KV of every request (576 elements per layer per token are not split by TP).
  // DP 8 + EP 8: every GPU holds all non-expert weights and 1/8 of the routed experts, and the
  // KV of its own rank's requests only.
  const Deployment tp8 = deploy("deepseek-v3", "h200", 8, 1, 1, false, Precision::kFp8);
  const Deployment dp8 = deploy("deepseek-v3", "h200", 1, 1, 8, true, Precision::kFp8);
  const double w = tp8.weight_bytes();
  const double experts = routed_expert_bytes(tp8);
  const MemoryPlan a = plan_memory(tp8, 2048);
  const MemoryPlan b = plan_memory(dp8, 2048);
  CHECK(a.weights == Approx(w / 8));
  CHECK(b.weights == Approx(w - experts + experts / 8));
  CHECK(a.kv_bytes_per_token_per_gpu == Approx(61.0 * 576 * 2));
  CHECK(b.kv_bytes_per_token_per_gpu == Approx(61.0 * 576 * 2));
  REQUIRE(a.fits);
  REQUIRE(b.fits);
  // Cluster KV capacity: TP 8 is one cache of a.kv_blocks; DP 8 is 8 caches of b.kv_blocks.
  // DP 8 holds more weights per GPU, but 8 separate caches outweigh that.
  CHECK(8 * b.kv_blocks > a.kv_blocks);
}

TEST_CASE("bad parallelism is refused with the flag and the accepted values", "[parallelism]") {
  CHECK_THROWS_WITH(deploy("llama-3.1-8b", "h100-sxm", 1, 1, 1, true),
                    Catch::Contains("--enable-expert-parallel") && Catch::Contains("dense model"));
  CHECK_THROWS_WITH(deploy("llama-3.1-8b", "h100-sxm", 1, 33),
                    Catch::Contains("--pipeline-parallel-size: 33") && Catch::Contains("accepted: 1 to 32"));
  CHECK_THROWS_WITH(deploy("gpt-oss-20b", "h100-sxm", 1, 2),
                    Catch::Contains("sliding-window"));
  CHECK_THROWS_WITH(deploy("mixtral-8x7b", "h100-sxm", 1, 1, 16, true),
                    Catch::Contains("TP x DP <= 8"));
  CHECK_THROWS_WITH(deploy("mixtral-8x7b", "h100-sxm", 1, 1, 2, false),
                    Catch::Contains("--data-parallel-size") && Catch::Contains("--enable-expert-parallel"));
  CHECK_THROWS_WITH(make_step_cost("pipelined", deploy("llama-3.1-8b", "h100-sxm", 1, 2)),
                    Catch::Contains("accepted: expert-parallel, pipeline, roofline"));
}
