// Parallelism beyond tensor parallelism (docs/cost-model.md#pipeline-and-expert-parallelism):
// how a deployment's layers split over pipeline stages (vLLM --pipeline-parallel-size), how its
// routed experts split over the GPUs of an engine (vLLM --enable-expert-parallel,
// --data-parallel-size), which link joins two of its GPUs, and what one GPU of a stage holds.
//
// GPUs of one engine are numbered data-parallel rank major, then stage, then TP rank:
// gpu = (dp_rank x pp + stage) x tp + tp_rank, filled server by server as a launcher places them.
#pragma once

#include <string>
#include <vector>

#include "sim/hardware/link_efficiency.h"
#include "sim/llm/deployment.h"

namespace capsim {

// GPUs per server: HGX/DGX boards (H100, H200, B200, MI300X) and 8-GPU PCIe servers hold 8.
inline constexpr int kGpusPerServer = 8;
// The scale-out network per GPU: one 400 Gb/s ConnectX-7 NDR InfiniBand/RoCE port per GPU
// (DGX H100 user guide: 8 x single-port ConnectX-7 for compute traffic; DeepEP's tests: "CX7
// InfiniBand 400 Gb/s RDMA network card (~50 GB/s maximum bandwidth)", deepseek-ai/DeepEP
// docs/legacy.md), bytes/s per direction before the collective's efficiency.
inline constexpr double kNetworkBandwidth = 50e9;
// Fixed cost of one send or all-to-all over that network (seconds): what DeepEP's low-latency
// kernels take beyond their bytes at 40 GB/s, EP16-EP256, 5-23 us (docs/cost-model.md#expert-parallel).
inline constexpr double kNetworkLatencyS = 10e-6;

struct GpuLink {
  enum class Kind { kSame, kNvlink, kPcieP2p, kPcieHost, kNetwork } kind = Kind::kSame;
  double bandwidth = 0;  // bytes/s per direction, datasheet (before kLinkEfficiency)
  double latency_s = 0;  // one transfer's fixed cost
  std::string name() const;  // "NVLink", "PCIe P2P", "PCIe via host", "network (400 Gb/s)", "-"
};
// How GPUs `a` and `b` of one engine talk: NVLink inside the card's NVLink domain (nvlink_gpus),
// PCIe inside a server of kGpusPerServer, else the scale-out network. Latencies are the engine
// profile's small all-reduce latencies (one hop) or kNetworkLatencyS.
GpuLink link_between(const Deployment& d, int a, int b);
// The same link between GPUs `a` and `b` of `card`, without an engine: the latency is
// kNetworkLatencyS over the network and 0 otherwise (the data-parallel ring of fine-tuning).
GpuLink link_between(const Card& card, int a, int b);

// One pipeline stage as one of its GPUs sees it.
struct PipelineStage {
  int index = 0;
  int first_layer = 0;
  int layers = 0;
  // The stage's share of the dense and MoE layers. capsim does not know where a model puts its
  // dense layers (DeepSeek: first; Llama 4: interleaved), so each stage gets them in proportion
  // to its layers (fractional counts; docs/cost-model.md#pipeline-parallel).
  double dense_layers = 0;
  double moe_layers = 0;
  bool embedding = false;  // the first stage embeds
  bool lm_head = false;    // the last stage runs the final norm, LM head and sampler
  double weight_bytes = 0;  // per GPU of the stage
};

// The stages as vLLM splits the layers (vllm/distributed/utils.py get_pp_indices: L // pp each,
// the remainder one layer each to the stages before the last, from the second-to-last back).
// A plain deployment (pp 1) is one stage of every layer.
std::vector<PipelineStage> pipeline_stages(const Deployment& d);

// Bytes of the routed experts' matrices (all MoE layers) at the deployment's expert precision.
double routed_expert_bytes(const Deployment& d);

// GPUs over which each MoE layer's routed experts are split: TP x DP (vLLM shards them over the
// whole TP x DP group: whole experts with --enable-expert-parallel, slices of every expert
// without). 1 for a dense model.
int moe_shard_gpus(const Deployment& d);

// Throws capsim::Error (exit 2) for a combination capsim cannot run: pp above the layers,
// expert parallelism on a dense model, more expert-parallel GPUs than experts, ...
void validate_parallelism(const Deployment& d);

}  // namespace capsim
