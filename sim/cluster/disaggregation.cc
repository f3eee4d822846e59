#include "sim/cluster/disaggregation.h"

#include <algorithm>

#include "sim/core/error.h"
#include "sim/hardware/link_efficiency.h"
#include "sim/hardware/precision.h"

namespace capsim {

double kv_transfer_bytes(const Deployment& d, std::int64_t tokens) {
  const ModelSpec& m = d.model;
  return static_cast<double>(tokens) * static_cast<double>(m.layers) *
         m.kv_elements_per_token_per_layer(1) * element_bytes(d.kv_cache);
}

double kv_transfer_seconds(const KvLink& link, double bytes, int tp_prefill, int tp_decode) {
  const int streams = std::max(1, std::min(tp_prefill, tp_decode));
  return link.latency_s + bytes / (link.bandwidth_bytes_per_s * kLinkEfficiency * streams);
}

const std::vector<ServingModelInfo>& serving_models() {
  static const std::vector<ServingModelInfo> table = {
      {"aggregated", "every replica prefills and decodes its own requests (vLLM, SGLang, TensorRT-LLM as launched alone)"},
      {"pd-disaggregated",
       "a prefill pool and a decode pool, each with its own card, TP and replicas; the prompt's KV moves over "
       "a link between them (vLLM NixlConnector, SGLang PD, NVIDIA Dynamo, llm-d)"},
  };
  return table;
}

const ServingModelInfo& find_serving_model(const std::string& name, const std::string& where) {
  std::vector<std::string> names;
  for (const ServingModelInfo& s : serving_models()) {
    if (s.name == name) return s;
    names.push_back(s.name);
  }
  throw Error(where + ": " + unknown_name_message("serving model", name, names));
}

}  // namespace capsim
