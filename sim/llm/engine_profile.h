// A serving engine's profile (vLLM, TensorRT-LLM, LMDeploy TurboMind): the fixed costs it adds
// to every step, the kernel efficiency it reaches relative to the card's defaults, its memory
// overheads, and its scheduler defaults. Read from calibration/engines/<name>.yaml
// (docs/data-formats.md#engines).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace capsim {

struct EngineProfile {
  std::string name;
  std::string display_name;
  std::string file;

  // Per step: scheduling, input preparation, sampling and the GPU->CPU sync (seconds).
  double step_overhead_s = 0;
  // Per sequence in the batch per step (bookkeeping, sampling, detokenisation), seconds.
  double per_sequence_overhead_s = 0;
  // Multipliers on the card's default efficiencies (1 = as the card file says).
  double compute_efficiency_scale = 1;
  double bandwidth_efficiency_scale = 1;
  // Attention kernels reach this fraction of the card's GEMM compute efficiency.
  double attention_compute_scale = 1;
  // Attention's KV-cache reads reach this multiple of the card's bandwidth efficiency.
  double attention_bandwidth_scale = 1;
  // Kernels per MoE layer besides the expert GEMMs (routing, token permutation, combine).
  int moe_dispatch_kernels = 0;
  // The routed experts' grouped GEMMs (vLLM's fused_moe) reach this fraction of the card's GEMM
  // compute rate, and stream the experts' weights at this multiple of the card's bandwidth
  // efficiency (docs/cost-model.md#moe). Optional in the profile; 1 = as dense GEMMs.
  double moe_compute_scale = 1;
  double moe_bandwidth_scale = 1;
  // Time kernels from the card's measured tables (calibration/kernels/<card>/) where it has them
  // and they time this engine's kernels, instead of the roofline (docs/cost-model.md#measured-kernels).
  // Optional in the profile (`kernels.measured_kernels`); `capsim --measured-kernels` and
  // CAPSIM_MEASURED_KERNELS override it for the process.
  bool measured_kernels = false;

  // Latency of one small all-reduce (seconds): over NVLink/P2P (custom all-reduce kernels) and
  // over PCIe through NCCL.
  double allreduce_latency_nvlink_s = 10e-6;
  double allreduce_latency_pcie_s = 30e-6;
  // Added per GPU beyond the second (TP 4 adds 2x, TP 8 6x): a one-shot all-reduce signals and
  // reads every peer, so its fixed cost grows with the group (docs/cost-model.md#tensor-parallel).
  // Optional in the profile; 0 = the same latency at every TP.
  double allreduce_latency_per_peer_s = 0;

  // Memory the engine uses on each GPU besides weights, activations and KV (bytes): NCCL and
  // cuBLAS workspaces, allocator fragmentation. Counted inside gpu_memory_utilization.
  double runtime_memory_bytes = 0;
  // Extra per-GPU runtime memory when TP > 1 (NCCL communicators, custom all-reduce buffers).
  double runtime_memory_tp_extra_bytes = 0;
  // Bytes per sequence slot per vocabulary entry that the engine's sampler ("decoder") allocates
  // for max_num_seqs slots before the KV cache is sized: TensorRT-LLM's dynamic decoder keeps
  // [max_batch_size x vocab] logits, penalty and top-p sort buffers on every rank
  // (docs/cost-model.md#sampler-buffers). Optional in the profile; 0 = none (vLLM's sampler
  // buffers are in the activation peak).
  double decoder_bytes_per_seq_vocab = 0;
  // Memory outside the budget, in the 1 - gpu_memory_utilization headroom: CUDA context and
  // captured graphs (bytes, per GPU).
  double outside_budget_bytes = 0;

  // The path of a request outside the GPU step (docs/cost-model.md#request-path), as the
  // client sees it. Front end: HTTP handling and tokenisation in the API server before the
  // engine core can schedule the request (seconds, plus seconds per prompt token). Return: from
  // the end of the step that sampled a token to the client receiving it (output processing,
  // detokenisation, streaming; seconds, plus seconds per sequence that emitted a token in that
  // step, since the output processor walks them all before sending).
  double frontend_s = 0;
  double frontend_per_prompt_token_s = 0;
  double return_s = 0;
  double return_per_sequence_s = 0;
  // Asynchronous scheduling (vLLM >= 0.14 default): step N+1 is scheduled while step N runs, so
  // a request that reaches the engine core during step N can run no earlier than step N+2.
  bool async_scheduling = false;

  // The scheduler policy the engine runs (engine/policies.cc), from the optional `scheduler.policy`;
  // a scenario's --scheduler overrides it.
  std::string scheduler_policy = "vllm-v1";
  // SGLang's admission estimate (policy "sglang", engine/policy_sglang.cc): a running request is
  // expected to need new_token_ratio x min(its remaining max_new_tokens, clip) more tokens. The
  // ratio starts at init, falls by (init - init x min_factor) / decay_steps per decode step, is
  // re-estimated after a retraction as (decoded + retract_steps x running) / (max_new_tokens + 1),
  // and returns to init when the engine idles. Optional `scheduler.*` fields; the defaults are
  // SGLang's (python/sglang/srt/global_config.py / environ.py).
  double init_new_token_ratio = 0.7;
  double min_new_token_ratio_factor = 0.14;
  double new_token_ratio_decay_steps = 600;
  double clip_max_new_tokens = 4096;
  double retract_decode_steps = 20;

  // Scheduler defaults (vLLM names).
  int block_size = 16;
  double gpu_memory_utilization = 0.9;
  bool prefix_caching = true;
  bool chunked_prefill = true;

  std::map<std::string, std::string> sources;  // field -> citation
};

class EngineCatalogue {
 public:
  static EngineCatalogue load_dir(const std::string& dir);
  static EngineProfile load_file(const std::string& path);
  const EngineProfile& find(const std::string& name) const;  // throws with accepted names
  std::vector<std::string> names() const;
  const std::vector<EngineProfile>& engines() const { return engines_; }

 private:
  std::vector<EngineProfile> engines_;
};

}  // namespace capsim
