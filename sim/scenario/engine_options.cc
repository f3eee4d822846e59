#include "sim/scenario/engine_options.h"

#include <type_traits>

namespace capsim::scenario {
namespace {

using T = FieldType;
using D = DeploymentSpec;
using S = ScenarioSpec;

// Row order: the scenario reader applies rows in it (prefix_caching, then enable_prefix_caching:
// the later wins), `unknown field` messages list the keys in it, the command line lists the
// flags in it.
const EngineOption kEngineOptions[] = {
    {{.key = "max_num_seqs", .type = T::kWhole, .doc = "sequences in one batch", .default_text = "the engine's for the card",
      .lo = 1, .hi = 1 << 20, .flag = "--max-num-seqs", .origin = true},
     "most sequences per step (vLLM default: 1024 on >=70 GiB non-A100 GPUs, else 256)", &D::max_num_seqs, true},
    {{.key = "max_num_batched_tokens", .type = T::kWhole, .doc = "tokens in one step",
      .default_text = "the engine's for the card", .lo = 1, .hi = 1 << 24, .flag = "--max-num-batched-tokens",
      .origin = true},
     "token budget per step (vLLM default: 8192 on >=70 GiB non-A100 GPUs, else 2048)", &D::max_num_batched_tokens,
     true},
    {{.key = "block_size", .type = T::kWhole, .doc = "tokens per KV-cache block", .default_text = "16", .unit = "tokens",
      .lo = 1, .hi = 4096, .flag = "--block-size", .origin = true},
     "KV-cache block size in tokens (vLLM: 16)", &D::block_size, true},
    {{.key = "gpu_memory_utilization", .type = T::kNumber, .doc = "share of each GPU's memory the engine takes",
      .default_text = "0.9", .lo = 0.05, .hi = 1, .lo_open = true, .range_error = "must be in (0.05, 1]",
      .flag = "--gpu-memory-utilization", .origin = true},
     "fraction of GPU memory the engine may use (vLLM: 0.9)", &D::gpu_memory_utilization, true},
    {{.key = "prefix_caching", .type = T::kBool, .doc = "reuse cached KV blocks of shared prefixes",
      .default_text = "true (vLLM V1)", .flag = "--prefix-caching"},
     "true/false (vLLM V1 default: true)", &S::prefix_caching},
    {{.key = "enable_prefix_caching", .type = T::kBool, .doc = "the same as prefix_caching (vLLM's name)",
      .default_text = "true (vLLM V1)", .flag = "--prefix-caching"},
     "", &S::prefix_caching},
    {{.key = "policy", .type = T::kText, .doc = "the engine's scheduler",
      .default_text = "the engine profile's (vllm-v1; sglang for --engine sglang)",
      .accepted = "vllm-v1, prefill-first, sglang, static", .flag = "--scheduler"},
     "engine scheduler: vllm-v1, prefill-first, sglang, static (default: the engine's, vllm-v1 for vllm)", &S::policy},
    {{.key = "max_model_len", .type = T::kWhole,
      .doc = "longest prompt + output served, longer requests rejected; at most the model's context, and the KV "
             "cache must hold one such sequence",
      .default_text = "the model's context, capped by the KV cache", .unit = "tokens", .lo = 1, .hi = 100'000'000,
      .flag = "--max-model-len", .origin = true},
     "longest prompt + output a replica serves; longer requests are rejected (vLLM: the model's "
     "max_position_embeddings; must be <= it, and the KV cache must hold one such sequence)",
     &D::max_model_len, true},
    {{.key = "async_scheduling", .type = T::kBool, .doc = "schedule the next step while this one runs (vLLM --async-scheduling)",
      .default_text = "the engine profile's", .flag = "--async-scheduling", .origin = true},
     "true/false: schedule the next step while one runs (vLLM >= 0.14 default: true; the engine profile's "
     "request_path.async_scheduling)",
     &D::async_scheduling},
    {{.key = "kv_offloading_size", .type = T::kNumber,
      .doc = "host memory for a CPU tier of KV blocks, all ranks together (vLLM --kv-offloading-size; "
             "docs/cost-model.md#cpu-kv-offloading)",
      .default_text = "none", .unit = "GiB", .lo = 0, .hi = 1e6, .lo_open = true,
      .range_error = "must be in (0, 1000000] GiB", .flag = "--kv-offloading-size", .origin = true},
     "GiB of host memory for a CPU tier of KV blocks (vLLM's OffloadingConnector, all ranks together; "
     "vLLM default: off), e.g. 8",
     &D::kv_offloading_size, true},
    {{.key = "kv_offloading_backend", .type = T::kText, .doc = "the CPU tier's backend", .default_text = "native",
      .accepted = "native (vLLM's default, the only one modelled)", .flag = "--kv-offloading-backend", .origin = true},
     "the CPU tier's backend: native (vLLM's default; lmcache is not modelled)", &D::kv_offloading_backend},
};

template <class V>
void assign(V& dst, const FieldValue& v) {
  if constexpr (std::is_same_v<V, std::optional<int>>) {
    dst = v.whole();
  } else if constexpr (std::is_same_v<V, std::optional<long long>>) {
    dst = static_cast<long long>(v.number);
  } else if constexpr (std::is_same_v<V, std::optional<double>>) {
    dst = v.number;
  } else if constexpr (std::is_same_v<V, std::optional<bool>>) {
    dst = v.flag;
  } else {
    static_assert(std::is_same_v<V, std::string> || std::is_same_v<V, std::optional<std::string>>);
    dst = v.text;
  }
}

}  // namespace

std::span<const EngineOption> engine_options() { return kEngineOptions; }

std::vector<FieldDoc> engine_option_docs() {
  std::vector<FieldDoc> docs;
  for (const auto& r : kEngineOptions) docs.push_back(r.doc);
  return docs;
}

void apply_field(const EngineOption& row, ScenarioSpec& s, const FieldValue& v) {
  std::visit([&](auto m) { assign(member_of(s, m), v); }, row.member);
}

std::string engine_option_refusal(const EngineOption& row, const std::string& text) {
  if (row.doc.type != FieldType::kWhole && row.doc.type != FieldType::kNumber) return "";
  return number_refusal(row.doc, text);
}

}  // namespace capsim::scenario
