#include "sim/cost/roofline_cost.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "sim/cost/expert_parallel.h"
#include "sim/cost/roofline_group.h"
#include "sim/hardware/link_efficiency.h"
#include "sim/hardware/measured_allreduce.h"

namespace capsim {

const char* bound_name(Bound b) {
  switch (b) {
    case Bound::kCompute: return "compute";
    case Bound::kMemory: return "memory";
    case Bound::kCommunication: return "communication";
    case Bound::kOverhead: return "overhead";
    case Bound::kFloor: return "kernel floor";
  }
  return "?";
}

namespace {

// Bytes per parameter of a quantised linear layer, as ModelSpec::weight_bytes counts them:
// the element plus its group scales (int4, nvfp4, mxfp4; fp8/int8 per-channel scales are
// negligible at this granularity).
double linear_bytes_per_param(Precision w) { return quantized_weight_bytes(w); }

}  // namespace

double gemm_flops_per_s(const Card& c, const EngineProfile& e, Precision math) {
  const double own = math == Precision::kFp8 ? c.compute_efficiency_fp8 : is_fp4(math) ? c.compute_efficiency_fp4 : 0;
  const double efficiency = own > 0 ? own : c.compute_efficiency;
  return c.peak(math) * std::min(1.0, efficiency * e.compute_efficiency_scale);
}

double weight_bytes_per_s(const Card& c, const EngineProfile& e, Precision math, double kernel_scale) {
  const double own = math == Precision::kFp8 ? c.bandwidth_efficiency_fp8 : is_fp4(math) ? c.bandwidth_efficiency_fp4 : 0;
  const double efficiency = own > 0 ? own : c.bandwidth_efficiency;
  return c.memory_bandwidth * std::min(1.0, efficiency * e.bandwidth_efficiency_scale * kernel_scale);
}

GemmRoofline linear_layer_roofline(const Card& c, const EngineProfile& e, Precision p) {
  GemmRoofline r;
  r.flops_per_s = gemm_flops_per_s(c, e, p);
  r.bytes_per_s = weight_bytes_per_s(c, e, p);
  r.weight_bytes = linear_bytes_per_param(p);
  r.activation_bytes = 2.0;
  r.kernel_floor_s = c.kernel_floor_s;
  return r;
}

RooflineCost::RooflineCost(const Deployment& d, const RooflineScope& scope) {
  const ModelSpec& m = d.model;
  tp_ = d.tp;
  const double tp = d.tp;
  hidden_ = static_cast<double>(m.hidden);
  layers_ = scope.layers >= 0 ? scope.layers : static_cast<double>(m.layers);
  dense_layers_ = scope.dense_layers >= 0 ? scope.dense_layers : static_cast<double>(m.dense_layers);
  moe_layers_ = scope.moe_layers >= 0 ? scope.moe_layers : static_cast<double>(m.moe_layers);
  embedding_ = scope.embedding;
  lm_head_ = scope.lm_head;
  overhead_ = scope.overhead;
  // A pipeline stage never holds sliding-window layers (validate_parallelism refuses PP for
  // such models), so the whole model's count applies.
  if (m.has_sliding_window()) {
    sliding_layers_ = static_cast<double>(m.sliding_layers);
    window_ = static_cast<double>(m.sliding_window);
  }
  experts_ = static_cast<double>(m.experts);
  experts_per_token_ = static_cast<double>(m.experts_per_token);

  // Split the attention block's parameters into the projections before and after attention.
  const double attn = static_cast<double>(m.attention_params_per_layer());
  if (m.attention == AttentionKind::kLatent) {
    o_params_ = static_cast<double>(m.heads * m.v_head_dim * m.hidden) / tp;
  } else {
    o_params_ = static_cast<double>(m.heads * m.head_dim * m.hidden) / tp;
  }
  qkv_params_ = attn / tp - o_params_;
  dense_mlp_params_ = static_cast<double>(m.dense_mlp_params()) / tp;
  expert_params_ = static_cast<double>(m.expert_params()) / tp;
  shared_params_ = static_cast<double>(m.shared_expert_params()) / tp;
  router_params_ = static_cast<double>(m.router_params());
  lm_head_params_ = static_cast<double>(m.vocab * m.hidden) / tp;
  linear_bytes_per_param_ = linear_bytes_per_param(d.weights);
  expert_bytes_per_param_ = linear_bytes_per_param(d.routed_expert_weights());
  kv_bytes_per_token_layer_ = m.kv_elements_per_token_per_layer(d.tp) * element_bytes(d.kv_cache);
  const double heads_per_rank = static_cast<double>(m.heads) / tp;
  if (m.attention == AttentionKind::kLatent) {
    // vLLM's MLA backends (vllm/v1/attention/backends/mla/common.py, module docstring) run
    // prefill in the "compute friendly" form: k_nope and v are up-projected from the latent, then
    // MHA with a QK head dim of qk_nope + qk_rope and a V head dim of v_head_dim. Decode runs the
    // "data-movement friendly" form: W_UK is absorbed into the query and W_UV applied after, so
    // every head attends the cached latent itself, MQA with a QK head dim of kv_lora_rank +
    // qk_rope and a V head dim of kv_lora_rank (FlashMLA's 576 / 512). The absorbed products
    // (q x W_UK, o x W_UV) have kv_b_proj's parameter count, which qkv_params_ already charges.
    prefill_flops_per_pair_ =
        2.0 * heads_per_rank * static_cast<double>(m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim);
    decode_flops_per_pair_ =
        2.0 * heads_per_rank * static_cast<double>(m.kv_lora_rank + m.qk_rope_head_dim + m.kv_lora_rank);
    // A prefill chunk after a cached context gathers the context's latents and runs kv_b_proj
    // on them (common.py, "Chunked Prefill": cache_kv_c_chunk @ W_UK and @ W_UV), per chunk.
    kv_up_params_ = static_cast<double>(m.kv_lora_rank) * heads_per_rank *
                    static_cast<double>(m.qk_nope_head_dim + m.v_head_dim);
    kv_up_head_elements_ = heads_per_rank * static_cast<double>(m.qk_nope_head_dim + m.v_head_dim);
  } else {
    prefill_flops_per_pair_ = decode_flops_per_pair_ = 4.0 * heads_per_rank * static_cast<double>(m.head_dim);
  }

  const Card& c = d.card;
  const EngineProfile& e = d.engine;
  peak_flops_ = c.peak(d.compute_precision());
  peak_bandwidth_ = c.memory_bandwidth;
  gemm_rate_ = capsim::gemm_flops_per_s(c, e, d.compute_precision());
  // Attention runs in 16-bit (fp8 KV is dequantised in the kernel), or in fp32 for fp32 models.
  const Precision attention_precision =
      d.compute_precision() == Precision::kFp32 ? Precision::kFp32 : native_half(c);
  attention_rate_ = c.peak(attention_precision) *
                    std::min(1.0, c.compute_efficiency * e.compute_efficiency_scale *
                                      e.attention_compute_scale);
  // One rate for the step's memory-bound groups: the weight reads of the linear layers dominate
  // them, so it is the bandwidth their GEMM kernels reach in the step's math format.
  bandwidth_ = weight_bytes_per_s(c, e, d.compute_precision());
  // The attention kernels' KV reads are long, contiguous-per-block streams that reach a
  // different share of peak than the weight GEMMs (docs/cost-model.md#attention).
  const double attention_read_efficiency =
      c.attention_bandwidth_efficiency > 0 ? c.attention_bandwidth_efficiency : c.bandwidth_efficiency;
  attention_bandwidth_ = peak_bandwidth_ * std::min(1.0, attention_read_efficiency *
                                                             e.bandwidth_efficiency_scale *
                                                             e.attention_bandwidth_scale);
  // W8A8 experts quantise their input before each of the two grouped GEMMs, one kernel each
  // (vllm/model_executor/layers/fused_moe/utils.py moe_kernel_quantize_input).
  moe_dispatch_kernels_ = static_cast<double>(e.moe_dispatch_kernels) +
                          (e.moe_dispatch_kernels > 0 && d.compute_precision() == Precision::kFp8 ? 2.0 : 0.0);
  // vLLM's fused-MoE grouped GEMMs, measured (calibration/kernels/*/moe-bf16.csv): weights
  // stream faster than the card's dense-layer efficiency (one long stream of every expert hit)
  // and large token counts compute slower than a dense GEMM (docs/cost-model.md#moe).
  moe_gemm_rate_ = gemm_rate_ * e.moe_compute_scale;
  moe_bandwidth_ = weight_bytes_per_s(c, e, d.compute_precision(), e.moe_bandwidth_scale);
  kernel_floor_ = c.kernel_floor_s;

  // Link: Card::tp_link (NVLink inside its domain, else PCIe, halved without peer-to-peer since
  // data is staged through host memory), at NCCL's share of it (sim/hardware/link_efficiency.h).
  if (d.tp > 1) {
    const Card::TpLink link = c.tp_link(d.tp);
    link_bandwidth_ = link.bandwidth * kLinkEfficiency;
    allreduce_latency_ = (link.kind == Card::TpLink::Kind::kNvlink ? e.allreduce_latency_nvlink_s
                                                                   : e.allreduce_latency_pcie_s) +
                         e.allreduce_latency_per_peer_s * std::max(0, d.tp - 2);
  }
  step_overhead_ = e.step_overhead_s;
  per_sequence_overhead_ = e.per_sequence_overhead_s;
  measured_on_ = MeasuredKernels::enabled(e.measured_kernels);
  choose_measured_tables(d);
  choose_moe_allreduce_tables(d);
  choose_attention_tables(d);
  if (d.expert_parallel && m.is_moe()) {
    ExpertParallelMoe::Rates r;
    r.gemm_flops_per_s = gemm_rate_;
    r.bytes_per_s = bandwidth_;
    r.moe_gemm_flops_per_s = moe_gemm_rate_;
    r.moe_bytes_per_s = moe_bandwidth_;
    r.kernel_floor_s = kernel_floor_;
    r.linear_bytes_per_param = linear_bytes_per_param_;
    r.expert_bytes_per_param = expert_bytes_per_param_;
    r.dispatch_kernels = moe_dispatch_kernels_;
    r.moe_table = moe_table_;
    r.moe_layout = moe_layout_;
    ep_ = std::make_shared<const ExpertParallelMoe>(d, r);
  }
}

void RooflineCost::choose_measured_tables(const Deployment& d) {
  const ModelSpec& m = d.model;
  const double tp = d.tp;
  // The linear layers as the engine runs them on one GPU: vLLM fuses q, k and v into one GEMM and
  // gate and up into another; with fewer KV heads than GPUs each GPU keeps a copy of one.
  const double kv_heads_per_rank = std::max(1.0, static_cast<double>(m.kv_heads) / tp);
  qkv_shape_ = {(static_cast<double>(m.heads) / tp + 2 * kv_heads_per_rank) * static_cast<double>(m.head_dim), hidden_};
  o_shape_ = {hidden_, o_params_ / hidden_};
  const double intermediate = static_cast<double>(m.intermediate) / tp;
  up_shape_ = {m.gated_mlp ? 2 * intermediate : intermediate, hidden_};
  down_shape_ = {hidden_, intermediate};
  lm_head_shape_ = {static_cast<double>(m.vocab) / tp, hidden_};
  measured_qkv_ = m.attention != AttentionKind::kLatent;

  measured_ = d.card.measured_kernels;
  const std::string roofline = "roofline (" + d.card.name + " datasheet peak x card-file efficiencies)";
  if (!measured_) {
    gemm_source_ = roofline + ": no measured kernel tables for " + d.card.name;
    return;
  }
  if (!measured_on_) {
    gemm_source_ = roofline + ": " + d.card.name + " has measured GEMM tables, off (engine " + d.engine.name +
                   " kernels.measured_kernels false; capsim --measured-kernels or CAPSIM_MEASURED_KERNELS=1)";
    measured_.reset();
    return;
  }
  // The tables time one serving stack's kernels; another engine's may differ (TensorRT-LLM's
  // own GEMM plugins), so it keeps the roofline.
  const MeasuredGemmTable* any = measured_->gemm(Precision::kBf16);
  const Precision math = d.compute_precision();
  const MeasuredGemmTable* linear = d.weights == math ? measured_->gemm(math) : nullptr;
  const MeasuredGemmTable* head = math == Precision::kFp32 ? nullptr : measured_->gemm(native_half(d.card));
  const MeasuredGemmTable* shown = linear ? linear : head ? head : any;
  const std::string framework = shown ? shown->info().framework : "";
  if (shown && framework.rfind(d.engine.name + " ", 0) != 0) {
    gemm_source_ = roofline + ": the measured tables time " + framework + ", not " + d.engine.name;
    return;
  }
  linear_table_ = linear;
  lm_head_table_ = head;
  if (linear_table_) {
    gemm_source_ = "measured: " + d.card.name + " " + framework + " GEMM table (" + linear_table_->info().dtype + ")" +
                   (m.is_moe() || !measured_qkv_ ? std::string(" for the dense linear layers") +
                                                       (measured_qkv_ ? "" : "; MLA projections: roofline")
                                                 : "");
  } else {
    gemm_source_ = roofline + " for the linear layers: no measured " + std::string(precision_name(d.weights)) +
                   (d.weights == math ? "" : " weight-only (" + std::string(precision_name(math)) + " math)") +
                   " GEMM table for " + d.card.name;
    if (lm_head_table_) gemm_source_ += "; LM head measured (" + lm_head_table_->info().dtype + " table)";
  }
}

void RooflineCost::choose_moe_allreduce_tables(const Deployment& d) {
  const ModelSpec& m = d.model;
  const std::shared_ptr<const MeasuredKernels>& tables = d.card.measured_kernels;
  std::string off;  // why no table applies to either, empty when they may
  if (!tables) {
    off = "no measured kernel tables for " + d.card.name;
  } else if (!measured_on_) {
    off = d.card.name + " has measured tables, off (engine " + d.engine.name +
          " kernels.measured_kernels false; capsim --measured-kernels or CAPSIM_MEASURED_KERNELS=1)";
  }
  // The tables time vLLM's kernels; another engine's may differ, so it keeps the roofline.
  const auto other_engine = [&](const KernelTableInfo& info) {
    return info.framework.rfind(d.engine.name + " ", 0) != 0
               ? "the measured tables time " + info.framework + ", not " + d.engine.name
               : std::string();
  };
  if (m.is_moe()) {
    // The table of the experts' kernel as vLLM runs it: 16-bit; fp8_block for checkpoints
    // shipped with quant_method fp8 (128x128 block scales: DeepSeek-V3, Qwen3-FP8); nvfp4. Only
    // where the experts' math runs in that format (not weight-only). Other fp8 experts
    // (compressed-tensors per-tensor checkpoints, --weights fp8) run kernels no table timed: the
    // `fp8` tables time ModelOpt checkpoints' FlashInfer CUTLASS kernel, up to 4x slower than
    // the roofline on Hopper (docs/kernel-validation.md), so they keep the roofline.
    const Precision w = d.routed_expert_weights();
    std::string dtype;
    if (w == Precision::kBf16 || w == Precision::kFp16) dtype = "bf16";
    const bool fp8_math = w == Precision::kFp8 && d.compute_precision() == Precision::kFp8;
    if (fp8_math && m.checkpoint_quant == "fp8") dtype = "fp8_block";
    if (w == Precision::kNvfp4 && d.compute_precision() == Precision::kNvfp4) dtype = "nvfp4";
    const MeasuredMoeTable* table = off.empty() && !dtype.empty() ? tables->moe(dtype) : nullptr;
    // Expert parallelism over the TP x DP group (whole experts, the table's `ep` rows); else
    // every expert sliced over the TP group (its `tp` rows).
    const bool ep = d.expert_parallel;
    moe_layout_ = {static_cast<double>(m.hidden), static_cast<double>(m.expert_intermediate),
                   experts_, experts_per_token_, ep ? 1.0 : static_cast<double>(d.tp),
                   ep ? static_cast<double>(d.tp * d.dp) : 1.0};
    std::ostringstream layout;
    layout << "hidden " << m.hidden << ", inter " << m.expert_intermediate << ", " << m.experts << " experts, top-"
           << m.experts_per_token << ", " << (ep ? "EP " : "TP ") << (ep ? d.tp * d.dp : d.tp);
    if (!off.empty()) {
      moe_source_ = "roofline: " + off;
    } else if (fp8_math && dtype.empty()) {
      moe_source_ = "roofline: the fp8 MoE tables time block-scaled (quant_method fp8) and ModelOpt checkpoints' "
                    "kernels, not these per-tensor fp8 experts";
    } else if (!table) {
      moe_source_ = "roofline: no measured " + (dtype.empty() ? std::string(precision_name(w)) : dtype) +
                    " MoE table for " + d.card.name;
    } else if (const std::string why = other_engine(table->info()); !why.empty()) {
      moe_source_ = "roofline: " + why;
    } else if (!table->has(moe_layout_)) {
      moe_source_ = "roofline: the " + d.card.name + " " + dtype + " MoE table did not measure " + layout.str();
    } else {
      moe_table_ = table;
      moe_source_ = "measured: " + d.card.name + " " + table->info().framework + " MoE table (" + dtype + "), " +
                    layout.str();
    }
  }
  if (d.tp > 1) {
    const MeasuredAllReduceTable* table = off.empty() ? tables->allreduce() : nullptr;
    // vLLM's custom all-reduce runs inside an NVLink domain, or over PCIe between 2 GPUs with
    // peer-to-peer (vllm/distributed/device_communicators/custom_all_reduce.py); elsewhere it
    // falls back to NCCL, which the table did not time.
    const Card::TpLink link = d.card.tp_link(d.tp);
    const bool custom = link.kind == Card::TpLink::Kind::kNvlink ||
                        (link.kind == Card::TpLink::Kind::kPcieP2p && d.tp == 2);
    if (!off.empty()) {
      allreduce_source_ = "roofline: " + off;
    } else if (!table) {
      allreduce_source_ = "roofline: no measured all-reduce table for " + d.card.name;
    } else if (const std::string why = other_engine(table->info()); !why.empty()) {
      allreduce_source_ = "roofline: " + why;
    } else if (!custom) {
      allreduce_source_ = "roofline: the table times vLLM's custom all-reduce, which TP " + std::to_string(d.tp) +
                          " over " + link.name() + " does not run (NCCL)";
    } else if (!table->has(d.tp)) {
      allreduce_source_ = "roofline: the " + d.card.name + " all-reduce table did not measure " +
                          std::to_string(d.tp) + " GPUs";
    } else {
      allreduce_table_ = table;
      allreduce_source_ = "measured: " + d.card.name + " " + table->info().framework + " custom all-reduce table, " +
                          std::to_string(d.tp) + " GPUs over " + link.name();
    }
  }
}

RooflineTerm RooflineCost::routed_experts_term(double t, double repeat) const {
  const double act = 2.0;
  // Routed tokens pick k of E experts; with uniform, independent routing (docs/cost-model.md#moe
  // cites the measurements) the expected number of distinct experts a step reads is
  // E (1 - (1 - k/E)^T).
  const double hit = experts_ * (1.0 - std::pow(1.0 - experts_per_token_ / experts_, t));
  return roofline_term(2 * t * experts_per_token_ * expert_params_,
                       hit * expert_params_ * expert_bytes_per_param_ + 2 * t * hidden_ * act, moe_gemm_rate_, 3,
                       repeat, moe_bandwidth_, kernel_floor_);
}

RooflineTerm RooflineCost::shared_router_term(double t, double repeat, double router_kernels) const {
  // The router GEMM is replicated on every rank and read at 16-bit; shared experts are an
  // ordinary gated MLP (two GEMMs) in the weights' format.
  return roofline_term(2 * t * (shared_params_ + router_params_),
                       shared_params_ * linear_bytes_per_param_ + router_params_ * 2.0, gemm_rate_,
                       (shared_params_ > 0 ? 2 : 0) + router_kernels, repeat, bandwidth_, kernel_floor_);
}

double RooflineCost::routed_moe_roofline_s(double t) const {
  const double act = 2.0;
  double s = routed_experts_term(t, 1).seconds;
  if (moe_dispatch_kernels_ > 0) {
    s += roofline_term(0, (2 + 2 * experts_per_token_) * t * hidden_ * act, gemm_rate_, moe_dispatch_kernels_, 1,
                       bandwidth_, kernel_floor_)
             .seconds;
  }
  return s;
}

void RooflineCost::choose_attention_tables(const Deployment& d) {
  const ModelSpec& m = d.model;
  const std::string roofline = "roofline (" + d.card.name + " datasheet peak x card-file efficiencies)";
  const std::shared_ptr<const MeasuredKernels>& tables = d.card.measured_kernels;
  if (!tables || !tables->has_attention()) {
    attention_source_ = roofline + ": no measured attention tables for " + d.card.name;
    return;
  }
  if (!measured_on_) {
    attention_source_ = roofline + ": " + d.card.name + " has measured attention tables, off (engine " +
                        d.engine.name + " kernels.measured_kernels false; capsim --measured-kernels or CAPSIM_MEASURED_KERNELS=1)";
    return;
  }
  if (m.attention == AttentionKind::kLatent) {
    attention_source_ = roofline + ": the measured attention tables time MHA/GQA kernels, not MLA";
    return;
  }
  if (d.compute_precision() == Precision::kFp32) {
    attention_source_ = roofline + ": the measured attention tables time 16-bit attention, not fp32";
    return;
  }
  // Read only now: the tables are off by default and reading them is most of a short run's start-up.
  const MeasuredAttentionTable* decode = tables->attention_decode(d.kv_cache);
  const MeasuredAttentionTable* prefill = tables->attention_prefill(d.kv_cache);
  const MeasuredAttentionTable* any = decode ? decode : prefill;
  if (!any) {
    attention_source_ = roofline + ": no measured attention tables for a " + std::string(precision_name(d.kv_cache)) +
                        " KV cache on " + d.card.name;
    return;
  }
  const std::string& framework = any->info().framework;
  if (framework.rfind(d.engine.name + " ", 0) != 0) {
    attention_source_ = roofline + ": the measured attention tables time " + framework + ", not " + d.engine.name;
    return;
  }
  measured_ = tables;
  decode_table_ = decode;
  prefill_table_ = prefill;
  kv_element_bytes_ = element_bytes(d.kv_cache);
  const double tp = d.tp;
  attention_heads_.heads = static_cast<double>(m.heads) / tp;
  attention_heads_.kv_heads = m.kv_elements_per_token_per_layer(d.tp) / (2.0 * static_cast<double>(m.head_dim));
  attention_heads_.head_dim = static_cast<double>(m.head_dim);
  AttentionShape windowed = attention_heads_;
  windowed.window = window_;
  if (decode_table_) {
    decode_layout_ = decode_table_->nearest_layout(attention_heads_);
    decode_window_layout_ = decode_table_->nearest_layout(windowed);
  }
  if (prefill_table_) {
    prefill_layout_ = prefill_table_->nearest_layout(attention_heads_);
    prefill_window_layout_ = prefill_table_->nearest_layout(windowed);
  }
  std::string phases = decode_table_ && prefill_table_ ? "decode, prefill" : decode_table_ ? "decode; prefill: roofline"
                                                                                          : "prefill; decode: roofline";
  attention_source_ = "measured: " + d.card.name + " " + framework + " attention tables (" + any->info().dtype +
                      " KV; " + phases + ")";
  const MeasuredAttentionTable::Layout& l = any->layout(decode_table_ ? decode_layout_ : prefill_layout_);
  const AttentionShape& h = attention_heads_;
  if (l.heads != h.heads || l.kv_heads != h.kv_heads || l.head_dim != h.head_dim) {
    const auto num = [](double v) {
      std::string s = std::to_string(v);
      s.erase(s.find_last_not_of('0') + 1);
      if (s.back() == '.') s.pop_back();
      return s;
    };
    attention_source_ += "; " + num(h.heads) + " heads / " + num(h.kv_heads) + " KV heads x " + num(h.head_dim) +
                         " per GPU carried from the measured " + num(l.heads) + " / " + num(l.kv_heads) + " x " +
                         num(l.head_dim) + " by the roofline";
  }
}

double RooflineCost::attention_roofline_seconds(bool decode, const AttentionShape& s) const {
  const double per_pair = 4.0 * s.heads * s.head_dim;
  const double kv_bytes = 2.0 * s.kv_heads * s.head_dim * kv_element_bytes_;
  const bool windowed = s.window > 0 && s.length > s.window;
  if (decode) {
    const double keys = windowed ? s.window : s.length;
    return roofline_term(per_pair * s.batch * keys, s.batch * keys * kv_bytes, attention_rate_, 1, 1,
                         attention_bandwidth_, kernel_floor_).seconds;
  }
  // Causal pairs of a prompt of `length` tokens, each query reaching at most `window` keys; the
  // KV read twice (the cached part, here none, plus the chunk), as the cost model counts it.
  const double w = s.window;
  const double pairs = windowed ? w * (w + 1) / 2 + (s.length - w) * w : s.length * (s.length + 1) / 2;
  return roofline_term(per_pair * s.batch * pairs, 2 * s.batch * s.length * kv_bytes, attention_rate_, 1, 1,
                       attention_bandwidth_, kernel_floor_).seconds;
}

RooflineTerm RooflineCost::measured_attention_term(const MeasuredAttentionTable& table, std::size_t layout,
                                                   bool decode, const AttentionShape& shape, RooflineTerm roofline,
                                                   double repeat) const {
  const AttentionRoofline r = [this, decode](const AttentionShape& s) { return attention_roofline_seconds(decode, s); };
  const double measured = table.seconds(layout, shape, r);
  roofline.seconds = measured * (roofline.seconds / repeat) / r(shape) * repeat;
  roofline.measured = true;
  return roofline;
}

GemmRoofline RooflineCost::gemm_roofline() const {
  GemmRoofline r;
  r.flops_per_s = gemm_rate_;
  r.bytes_per_s = bandwidth_;
  r.weight_bytes = linear_bytes_per_param_;
  r.activation_bytes = 2.0;
  r.kernel_floor_s = kernel_floor_;
  return r;
}

RooflineTerm RooflineCost::measured_term(const MeasuredGemmTable& table, double t,
                                         std::initializer_list<LinearShape> shapes, RooflineTerm roofline,
                                         double repeat) const {
  GemmRoofline r = gemm_roofline();
  if (&table == lm_head_table_ && &table != linear_table_) r.weight_bytes = 2.0;
  double seconds = 0;
  for (const LinearShape& s : shapes) seconds += table.seconds(t, s.n, s.k, r);
  roofline.seconds = seconds * repeat;
  roofline.measured = true;
  return roofline;
}

RooflineCost::TokenTerms RooflineCost::token_terms(double t) const {
  const auto term = [&](double flops, double bytes, double rate, double kernels, double repeat,
                        double bandwidth) {
    return roofline_term(flops, bytes, rate, kernels, repeat, bandwidth, kernel_floor_);
  };
  const double act = 2.0;  // bytes per activation element (16-bit)
  const double wb = linear_bytes_per_param_;
  TokenTerms out;
  out.qkv = term(2 * t * qkv_params_, qkv_params_ * wb + t * hidden_ * act, gemm_rate_, 1, layers_,
                 bandwidth_);
  out.o_proj = term(2 * t * o_params_, o_params_ * wb + t * hidden_ * act, gemm_rate_, 1, layers_,
                    bandwidth_);
  if (dense_layers_ > 0) {
    out.mlp = term(2 * t * dense_mlp_params_, dense_mlp_params_ * wb + 2 * t * hidden_ * act,
                   gemm_rate_, 2, dense_layers_, bandwidth_);
  }
  if (linear_table_) {
    if (measured_qkv_) out.qkv = measured_term(*linear_table_, t, {qkv_shape_}, out.qkv, layers_);
    out.o_proj = measured_term(*linear_table_, t, {o_shape_}, out.o_proj, layers_);
    if (dense_layers_ > 0) out.mlp = measured_term(*linear_table_, t, {up_shape_, down_shape_}, out.mlp, dense_layers_);
  }
  if (moe_layers_ > 0 && !ep_) {
    // The routed experts (vLLM's fused_moe grouped GEMMs) and the router GEMM with any shared
    // experts are separate kernels at their own rates; one group.
    out.moe_mlp = sum_terms(routed_experts_term(t, moe_layers_), shared_router_term(t, moe_layers_, 0));
    // Routing around the expert GEMMs: top-k selection, sorting tokens by expert, the
    // activation between the two grouped GEMMs and the weighted combine, each its own kernel;
    // each token's hidden state is copied to its k expert slots and back.
    if (moe_dispatch_kernels_ > 0) {
      out.moe_dispatch = term(0, (2 + 2 * experts_per_token_) * t * hidden_ * act, gemm_rate_,
                              moe_dispatch_kernels_, moe_layers_, bandwidth_);
    }
    if (moe_table_) {
      // The table's layer is the routed experts with their routing kernels; the shared experts
      // and the router GEMM stay on the roofline. FLOPs and bytes stay the roofline's (for MFU).
      const double routed = moe_table_->seconds(t, moe_layout_, [this](double x) { return routed_moe_roofline_s(x); });
      // The table times the fused kernel from given router logits: the router GEMM is its own kernel.
      const double rest = shared_params_ + router_params_ > 0 ? shared_router_term(t, 1, 1).seconds : 0.0;
      out.moe_mlp.seconds = (routed + rest) * moe_layers_;
      out.moe_mlp.measured = true;
      out.moe_dispatch = RooflineTerm{};
    }
  }
  // Norms, rotary embedding, activation function, residual adds: ~10 reads/writes of the hidden
  // state per token per layer, in three fused kernels.
  out.elementwise = term(0, 10 * t * hidden_ * act, gemm_rate_, 3, layers_, bandwidth_);

  // Tensor parallelism: two all-reduces per layer of t x hidden 16-bit values.
  if (tp_ > 1) {
    const double bytes = t * hidden_ * act;
    const double per = allreduce_table_ ? allreduce_table_->seconds(tp_, bytes)
                                        : allreduce_latency_ + 2.0 * (tp_ - 1) / tp_ * bytes / link_bandwidth_;
    // Under DP attention the MoE layers' all-reduce gives way to the all-to-all (ep_ adds it).
    const double reduces = ep_ && ep_->all_to_all() ? 2 * dense_layers_ + moe_layers_ : 2 * layers_;
    const double embedding = embedding_ ? 1.0 : 0.0;
    // + the embedding's all-reduce of the same t x hidden values: its latency on the roofline,
    // its measured time with the table.
    out.all_reduce_s = per * reduces + (allreduce_table_ ? per : allreduce_latency_) * embedding;
    out.all_reduce_bytes = bytes * (reduces + embedding);
  }
  return out;
}

RooflineTerm RooflineCost::lm_head_term(double n) const {
  const double act = 2.0;
  const RooflineTerm roofline =
      roofline_term(2 * n * lm_head_params_, lm_head_params_ * act + n * lm_head_params_ / hidden_ * 4,
                    gemm_rate_, 1, 1, bandwidth_, kernel_floor_);
  return lm_head_table_ ? measured_term(*lm_head_table_, n, {lm_head_shape_}, roofline, 1) : roofline;
}

template <typename T, typename F>
const T& RooflineCost::memo(std::vector<std::optional<T>>& table, std::int64_t i, F compute) {
  if (static_cast<std::size_t>(i) >= table.size()) table.resize(static_cast<std::size_t>(i) + 1);
  std::optional<T>& slot = table[static_cast<std::size_t>(i)];
  if (!slot) slot = compute();
  return *slot;
}

template <bool Keep>
StepBreakdown RooflineCost::compute(const BatchShape& b) const {
  constexpr bool keep = Keep;
  StepBreakdown out;
  if (b.empty()) return out;
  const std::int64_t tokens = b.tokens();
  const double t = static_cast<double>(tokens);
  // The step's terms in order, from the token-count terms `tt`.
  const auto sum_step = [&](const TokenTerms& tt) {
    const auto add = [&](const char* group, double flops, double bytes, double rate, double kernels,
                         double repeat, double bandwidth) {
      add_roofline_group(out, keep, group, flops, bytes, rate, kernels, repeat, bandwidth, kernel_floor_);
    };

    // Per layer, all layers alike.
    add_roofline_term(out, keep, "qkv_proj", tt.qkv);
    // Full-attention layers attend over the whole context. Sliding-window layers over at most the
    // last window_ tokens: BatchShape keeps sums, not each sequence, so their work is bounded by
    // min(sum, count x window), exact when every context (or every query's reach) is on the same
    // side of the window: all of gpt-oss's (window 128) past the first few hundred tokens, all of
    // Gemma 2's (window 4096) below 4096.
    const double full_layers = layers_ - sliding_layers_;
    // An attention group's roofline, or its time from the measured tables when set: the step's
    // sequences as one call of `sequences` x their mean `length` (docs/cost-model.md#measured-kernels).
    const auto attention = [&](const char* group, double flops, double bytes, double repeat,
                               const MeasuredAttentionTable* table, std::size_t layout, bool decode,
                               double sequences, double length, double window) {
      RooflineTerm term = roofline_term(flops, bytes, attention_rate_, 1, repeat, attention_bandwidth_, kernel_floor_);
      if (table) {
        AttentionShape shape = attention_heads_;
        shape.batch = sequences;
        shape.length = length;
        shape.window = window;
        term = measured_attention_term(*table, layout, decode, shape, term, repeat);
      }
      add_roofline_term(out, keep, group, term);
    };
    if (b.prefill_tokens > 0) {
      const double chunk_tokens = static_cast<double>(b.prefill_tokens);
      const double chunks = static_cast<double>(b.prefill_sequences);
      if (full_layers > 0) {
        attention("attention_prefill", prefill_flops_per_pair_ * b.prefill_attention_pairs,
                  (b.prefill_kv_tokens + chunk_tokens) * kv_bytes_per_token_layer_, full_layers, prefill_table_,
                  prefill_layout_, false, chunks, chunk_tokens / chunks, 0);
        const double cached = b.prefill_kv_tokens - chunk_tokens;
        if (kv_up_params_ > 0 && cached > 0) {
          // Three kernels (the cache gather, the kv_b GEMM, the k_nope/k_pe concatenation);
          // they read the cached entries and kv_b's weights and write the 16-bit k_nope and v.
          add("mla_kv_up_proj", 2 * cached * kv_up_params_,
              kv_up_params_ * linear_bytes_per_param_ + cached * (kv_bytes_per_token_layer_ + 2.0 * kv_up_head_elements_),
              gemm_rate_, 3, full_layers, bandwidth_);
        }
      }
      if (sliding_layers_ > 0) {
        // Each query reaches at most window_ keys; a chunk reads at most the window - 1 tokens
        // before it plus itself.
        const double pairs = std::min(b.prefill_attention_pairs, chunk_tokens * window_);
        const double kv = std::min(b.prefill_kv_tokens,
                                   static_cast<double>(b.prefill_sequences) * (window_ - 1) + chunk_tokens);
        attention("attention_prefill_window", prefill_flops_per_pair_ * pairs, (kv + chunk_tokens) * kv_bytes_per_token_layer_,
                  sliding_layers_, prefill_table_, prefill_window_layout_, false, chunks, chunk_tokens / chunks, window_);
      }
    }
    if (b.decode_sequences > 0) {
      // Speculative drafts add query tokens over the same KV (read once per sequence): each of
      // the decode_sequences + spec_tokens queries reaches at most window_ keys in a sliding layer.
      const double decodes = static_cast<double>(b.decode_sequences);
      if (full_layers > 0) {
        attention("attention_decode", decode_flops_per_pair_ * (b.decode_context_tokens + b.spec_attention_pairs),
                  b.decode_context_tokens * kv_bytes_per_token_layer_, full_layers, decode_table_, decode_layout_,
                  true, decodes, b.decode_context_tokens / decodes, 0);
      }
      if (sliding_layers_ > 0) {
        const double context = std::min(b.decode_context_tokens,
                                        static_cast<double>(b.decode_sequences) * window_);
        const double pairs = b.spec_tokens > 0
                                 ? std::min(b.decode_context_tokens + b.spec_attention_pairs,
                                            static_cast<double>(b.decode_sequences + b.spec_tokens) * window_)
                                 : context;
        attention("attention_decode_window", decode_flops_per_pair_ * pairs, context * kv_bytes_per_token_layer_,
                  sliding_layers_, decode_table_, decode_window_layout_, true, decodes,
                  b.decode_context_tokens / decodes, window_);
      }
    }
    add_roofline_term(out, keep, "o_proj", tt.o_proj);
    if (dense_layers_ > 0) add_roofline_term(out, keep, "mlp", tt.mlp);
    if (moe_layers_ > 0 && ep_) {
      ep_->add(out, keep, t, moe_layers_);
    } else if (moe_layers_ > 0) {
      add_roofline_term(out, keep, "moe_mlp", tt.moe_mlp);
      if (moe_dispatch_kernels_ > 0 && !moe_table_) add_roofline_term(out, keep, "moe_dispatch", tt.moe_dispatch);
    }
    add_roofline_term(out, keep, "elementwise", tt.elementwise);

    // Once per step: the LM head for sequences that sample.
    if (lm_head_ && b.logit_sequences > 0) {
      const std::int64_t n = b.logit_sequences;
      if (!keep && n <= kMaxMemoTokens) {
        add_roofline_term(out, keep, "lm_head",
                          memo(by_logits_, n, [&] { return lm_head_term(static_cast<double>(n)); }));
      } else {
        add_roofline_term(out, keep, "lm_head", lm_head_term(static_cast<double>(n)));
      }
    }

    if (tp_ > 1) {
      out.seconds += tt.all_reduce_s;
      out.communication_s += tt.all_reduce_s;
      if (keep) {
        out.groups.push_back({"all_reduce", 0, tt.all_reduce_bytes, 0, 0, tt.all_reduce_s, Bound::kCommunication,
                              allreduce_table_ != nullptr});
      }
    }
    if (overhead_) {
      const double overhead = step_overhead_ + per_sequence_overhead_ * static_cast<double>(b.sequences());
      out.seconds += overhead;
      out.overhead_s += overhead;
      if (keep) out.groups.push_back({"overhead", 0, 0, 0, 0, overhead, Bound::kOverhead});
    }
  };
  // The simulator's steps repeat a few hundred token counts: their token-count terms are
  // computed once (a breakdown, for reports, computes them afresh), and summed by `sum_step`
  // from the table or a fresh value (no std::optional of the 300-byte terms on the way).
  if (!keep && tokens <= kMaxMemoTokens) {
    sum_step(memo(by_tokens_, tokens, [&] { return token_terms(t); }));
  } else {
    sum_step(token_terms(t));
  }
  out.mfu = out.flops / (peak_flops_ * out.seconds);
  out.mbu = out.bytes / (peak_bandwidth_ * out.seconds);
  return out;
}

double RooflineCost::seconds(const BatchShape& b) const { return compute<false>(b).seconds; }

StepBreakdown RooflineCost::breakdown(const BatchShape& b) const { return compute<true>(b); }

StepCost::ExpertLayers RooflineCost::expert_layers(double tokens) const {
  if (!ep_ || !ep_->all_to_all() || moe_layers_ <= 0 || tokens <= 0) return {};
  StepBreakdown moe;
  ep_->add(moe, false, tokens, moe_layers_);
  const double all_to_all = ep_->all_to_all_seconds(tokens) * moe_layers_;
  return {moe.seconds - all_to_all, all_to_all};
}

template StepBreakdown RooflineCost::compute<false>(const BatchShape&) const;
template StepBreakdown RooflineCost::compute<true>(const BatchShape&) const;

}  // namespace capsim
