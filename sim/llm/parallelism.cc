#include "sim/llm/parallelism.h"

#include <algorithm>

#include "sim/core/error.h"
#include "sim/hardware/precision.h"

namespace capsim {

std::string GpuLink::name() const {
  switch (kind) {
    case Kind::kSame: return "-";
    case Kind::kNvlink: return "NVLink";
    case Kind::kPcieP2p: return "PCIe P2P";
    case Kind::kPcieHost: return "PCIe via host (no P2P)";
    case Kind::kNetwork: return "network (400 Gb/s per GPU)";
  }
  return "?";
}

GpuLink link_between(const Card& c, int a, int b) {
  GpuLink l;
  if (a == b) return l;
  if (c.nvlink_bandwidth > 0 && c.nvlink_gpus > 1 && a / c.nvlink_gpus == b / c.nvlink_gpus) {
    l.kind = GpuLink::Kind::kNvlink;
    l.bandwidth = c.nvlink_bandwidth / 2;  // card files give both directions together
  } else if (a / kGpusPerServer == b / kGpusPerServer) {
    // As Card::tp_link: PCIe peer-to-peer where the card file says it works, else staged
    // through host memory (each transfer crosses PCIe twice).
    l.kind = c.peer_to_peer ? GpuLink::Kind::kPcieP2p : GpuLink::Kind::kPcieHost;
    l.bandwidth = c.peer_to_peer ? c.pcie_bandwidth() : c.pcie_bandwidth() * 0.5;
  } else {
    l.kind = GpuLink::Kind::kNetwork;
    l.bandwidth = kNetworkBandwidth;
    l.latency_s = kNetworkLatencyS;
  }
  return l;
}

GpuLink link_between(const Deployment& d, int a, int b) {
  GpuLink l = link_between(d.card, a, b);
  if (l.kind == GpuLink::Kind::kNvlink) l.latency_s = d.engine.allreduce_latency_nvlink_s;
  if (l.kind == GpuLink::Kind::kPcieP2p || l.kind == GpuLink::Kind::kPcieHost) l.latency_s = d.engine.allreduce_latency_pcie_s;
  return l;
}

double routed_expert_bytes(const Deployment& d) {
  return d.model.routed_expert_bytes(d.routed_expert_weights());
}

int moe_shard_gpus(const Deployment& d) { return d.model.is_moe() ? d.tp * d.dp : 1; }

std::vector<PipelineStage> pipeline_stages(const Deployment& d) {
  const ModelSpec& m = d.model;
  const int pp = std::max(1, d.pp);
  const int layers = static_cast<int>(m.layers);
  std::vector<int> split(static_cast<std::size_t>(pp), layers / pp);
  for (int i = 2; i < layers % pp + 2; ++i) split[static_cast<std::size_t>(pp - i)] += 1;

  // Per-GPU bytes: the layers' weights in proportion to the stage's layers, the routed experts
  // divided over the MoE shard (TP x DP), everything else over TP; the input embedding on the
  // first stage, the LM head on the last (a tied head is a second copy there under PP: the
  // last stage holds the embedding matrix for its head, vLLM's PPMissingLayer elsewhere).
  const double eb = d.weights == Precision::kFp32 ? 4.0 : 2.0;  // embeddings stay 16-bit
  const double emb = eb * static_cast<double>(m.embedding_params());
  const double head = eb * static_cast<double>(m.lm_head_params());
  const double experts = routed_expert_bytes(d);
  const double body = d.weight_bytes() - emb - head - experts;
  const double tp = d.tp;
  const double shard = moe_shard_gpus(d);

  std::vector<PipelineStage> out;
  int first = 0;
  for (int s = 0; s < pp; ++s) {
    PipelineStage st;
    st.index = s;
    st.first_layer = first;
    st.layers = split[static_cast<std::size_t>(s)];
    const double share = layers > 0 ? static_cast<double>(st.layers) / layers : 0.0;
    st.dense_layers = static_cast<double>(m.dense_layers) * share;
    st.moe_layers = static_cast<double>(m.moe_layers) * share;
    st.embedding = s == 0;
    st.lm_head = s == pp - 1;
    st.weight_bytes = body * share / tp + experts * share / shard + (st.embedding ? emb / tp : 0.0);
    if (st.lm_head) st.weight_bytes += (head > 0 ? head : (pp > 1 && !m.encoder_only ? emb : 0.0)) / tp;
    out.push_back(st);
    first += st.layers;
  }
  return out;
}

void validate_parallelism(const Deployment& d) {
  const ModelSpec& m = d.model;
  if (d.pp < 1 || d.pp > 64) {
    throw Error("--pipeline-parallel-size: " + std::to_string(d.pp) +
                " is outside the accepted range 1..64");
  }
  if (d.dp < 1 || d.dp > 1024) {
    throw Error("--data-parallel-size: " + std::to_string(d.dp) +
                " is outside the accepted range 1..1024");
  }
  if (d.pp > 1) {
    if (d.pp > m.layers) {
      throw Error("--pipeline-parallel-size: " + std::to_string(d.pp) + " stages for the " +
                  std::to_string(m.layers) + " layers of " + m.name +
                  " leave a stage without a layer; accepted: 1 to " + std::to_string(m.layers));
    }
    if (m.encoder_only) {
      throw Error("--pipeline-parallel-size: " + m.name +
                  " is an encoder-only model; pipeline parallelism is modelled for decoders only "
                  "(use --pipeline-parallel-size 1)");
    }
    if (m.has_sliding_window()) {
      throw Error("--pipeline-parallel-size: " + m.name +
                  " has sliding-window layers, whose hybrid KV-cache layout capsim does not split "
                  "over pipeline stages; accepted: --pipeline-parallel-size 1 for this model");
    }
    if (d.card.is_cpu) {
      throw Error("--pipeline-parallel-size: pipeline parallelism across CPU servers is not "
                  "modelled; use --pipeline-parallel-size 1");
    }
  }
  if (d.expert_parallel && !m.is_moe()) {
    throw Error("--enable-expert-parallel: " + m.name + " is a dense model (no routed experts in " +
                m.config_path + "); accepted only for MoE models (capsim list models shows them)");
  }
  if (d.expert_parallel && d.tp * d.dp < 2) {
    throw Error("--enable-expert-parallel: the expert-parallel group is TP x DP = 1 GPU; "
                "accepted with --tensor-parallel-size x --data-parallel-size >= 2");
  }
  if (d.expert_parallel && d.tp * d.dp > m.experts) {
    throw Error("--enable-expert-parallel: an expert-parallel group of " +
                std::to_string(d.tp * d.dp) + " GPUs (TP x DP) for the " +
                std::to_string(m.experts) + " routed experts of " + m.name +
                " leaves a GPU without an expert; accepted: TP x DP <= " + std::to_string(m.experts));
  }
  if (!(d.expert_imbalance >= 1.0 && d.expert_imbalance <= 64.0)) {
    throw Error("--expert-imbalance: " + std::to_string(d.expert_imbalance) +
                " is not a max/mean load ratio; accepted: 1 (perfect balance) to 64");
  }
  if (d.dp > 1 && m.is_moe() && !d.expert_parallel) {
    // vLLM then shards every expert over TP x DP and gathers all ranks' tokens (all-gather /
    // reduce-scatter); capsim models the DP-attention layout DeepSeek-class recipes use.
    throw Error("--data-parallel-size: " + std::to_string(d.dp) + " ranks of the MoE model " +
                m.name + " without --enable-expert-parallel (experts sharded over TP x DP) is not "
                "modelled; add --enable-expert-parallel (DP attention with expert parallelism), "
                "or use --replicas for independent copies");
  }
  if (d.dp > 1 && d.card.is_cpu) {
    throw Error("--data-parallel-size: data parallelism inside one engine across CPU servers is "
                "not modelled; use --replicas");
  }
  if (d.tp * d.pp * d.dp > 4096) {
    throw Error("--tensor-parallel-size x --pipeline-parallel-size x --data-parallel-size: " +
                std::to_string(d.tp * d.pp * d.dp) + " GPUs per engine; accepted: at most 4096");
  }
}

}  // namespace capsim
