#include "sim/llm/lora.h"

#include <algorithm>
#include <cmath>

#include "sim/core/error.h"
#include "sim/core/rng.h"
#include "sim/core/yaml_fields.h"

namespace capsim {
namespace {

const std::vector<std::string>& known_modules() {
  static const std::vector<std::string> names = {"q_proj", "k_proj", "v_proj", "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"};
  return names;
}

// vLLM's accepted --max-lora-rank values (vllm/config/lora.py MaxLoRARanks).
const std::vector<int>& vllm_ranks() {
  static const std::vector<int> ranks = {1, 8, 16, 32, 64, 128, 256, 320, 512};
  return ranks;
}

}  // namespace

std::vector<LoraModule> lora_modules(const LoraConfig& c, const ModelSpec& m) {
  if (m.attention == AttentionKind::kLatent) {
    throw Error("LoRA: " + m.name + " uses latent attention (MLA), whose low-rank q/kv "
                "projections capsim's LoRA model does not cover");
  }
  const double h = static_cast<double>(m.hidden);
  const double q = static_cast<double>(m.heads * m.head_dim);
  const double kv = static_cast<double>(m.kv_heads * m.head_dim);
  const double inter = static_cast<double>(m.intermediate);
  std::vector<LoraModule> out;
  for (const std::string& name : c.target_modules) {
    if (std::find(known_modules().begin(), known_modules().end(), name) == known_modules().end()) {
      std::string list;
      for (const auto& k : known_modules()) list += (list.empty() ? "" : ", ") + k;
      throw Error("LoRA target module '" + name + "' is unknown; accepted: " + list);
    }
    LoraModule mod;
    mod.name = name;
    mod.layers = m.layers;
    if (name == "q_proj") { mod.in = h; mod.out = q; }
    if (name == "k_proj" || name == "v_proj") { mod.in = h; mod.out = kv; }
    if (name == "o_proj") { mod.in = q; mod.out = h; mod.row_parallel = true; }
    // MLP adapters sit on the dense layers; MoE experts' adapters are not modelled.
    if (name == "gate_proj" || name == "up_proj") { mod.in = h; mod.out = inter; mod.layers = m.dense_layers; }
    if (name == "down_proj") { mod.in = inter; mod.out = h; mod.row_parallel = true; mod.layers = m.dense_layers; }
    if (name == "gate_proj" && !m.gated_mlp) continue;  // a two-matrix MLP has no gate
    if (mod.layers == 0 || mod.in * mod.out == 0) continue;
    out.push_back(mod);
  }
  return out;
}

double lora_params_per_rank(const LoraConfig& c, const ModelSpec& m) {
  double p = 0;
  for (const LoraModule& mod : lora_modules(c, m)) p += (mod.in + mod.out) * static_cast<double>(mod.layers);
  return p;
}

double lora_adapter_bytes(const LoraConfig& c, const ModelSpec& m) {
  return static_cast<double>(c.adapter_rank()) * lora_params_per_rank(c, m) * 2.0;
}

double lora_reserved_bytes_per_gpu(const LoraConfig& c, const ModelSpec& m, int tp) {
  double per_rank = 0;
  for (const LoraModule& mod : lora_modules(c, m)) {
    // Column-parallel: A (in x r) whole on every GPU, B (r x out) split; row-parallel: A split
    // by its input, B whole.
    const double in = mod.row_parallel ? mod.in / tp : mod.in;
    const double out = mod.row_parallel ? mod.out : mod.out / tp;
    per_rank += (in + out) * static_cast<double>(mod.layers);
  }
  return static_cast<double>(c.max_loras) * static_cast<double>(c.max_lora_rank) * per_rank * 2.0;
}

void validate_lora(const LoraConfig& c, const std::string& where) {
  if (c.max_loras < 1 || c.max_loras > 4096) {
    throw Error(where + ".max_loras: " + std::to_string(c.max_loras) + " is not in 1..4096");
  }
  const auto& ranks = vllm_ranks();
  if (std::find(ranks.begin(), ranks.end(), c.max_lora_rank) == ranks.end()) {
    std::string list;
    for (int r : ranks) list += (list.empty() ? "" : ", ") + std::to_string(r);
    throw Error(where + ".max_lora_rank: " + std::to_string(c.max_lora_rank) +
                " is not one of vLLM's ranks: " + list);
  }
  if (c.max_cpu_loras != 0 && c.max_cpu_loras < c.max_loras) {
    throw Error(where + ".max_cpu_loras: " + std::to_string(c.max_cpu_loras) +
                " is below max_loras " + std::to_string(c.max_loras) + " (vLLM refuses this)");
  }
  if (c.rank < 0 || c.rank > c.max_lora_rank) {
    throw Error(where + ".rank: " + std::to_string(c.rank) + " is not in 1..max_lora_rank (" +
                std::to_string(c.max_lora_rank) + ")");
  }
  if (c.target_modules.empty()) throw Error(where + ".target_modules: empty; name at least one layer");
}

double AdapterMix::parse_distribution(const std::string& text, const std::string& where) {
  if (text == "uniform") return 0;
  if (text.rfind("zipf:", 0) == 0) {
    const double s = parse_number(text.substr(5), where);
    if (!(s > 0 && s <= 10)) throw Error(where + ": zipf exponent '" + text.substr(5) + "' is not in (0, 10]");
    return s;
  }
  throw Error(where + ": '" + text + "' is not a distribution; accepted: uniform, zipf:S (S in (0, 10], e.g. zipf:1.0)");
}

std::vector<double> AdapterMix::cumulative() const {
  std::vector<double> c(static_cast<std::size_t>(count));
  double sum = 0;
  for (int i = 0; i < count; ++i) {
    sum += zipf_s > 0 ? 1.0 / std::pow(static_cast<double>(i + 1), zipf_s) : 1.0;
    c[static_cast<std::size_t>(i)] = sum;
  }
  for (double& v : c) v /= sum;
  return c;
}

std::int32_t AdapterMix::adapter_of(std::uint64_t id) const {
  if (count <= 0) return -1;
  thread_local std::vector<double> cdf;
  thread_local int cdf_count = -1;
  thread_local double cdf_s = -1;
  if (cdf_count != count || cdf_s != zipf_s) {
    cdf = cumulative();
    cdf_count = count;
    cdf_s = zipf_s;
  }
  const double u = Rng(seed).split(id).uniform01();
  const auto it = std::upper_bound(cdf.begin(), cdf.end(), u);
  const auto i = static_cast<std::int32_t>(it - cdf.begin());
  return std::min(i, count - 1);
}

}  // namespace capsim
