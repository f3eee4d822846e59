// Multi-LoRA serving (docs/deployment-options.md#multi-lora-serving): adapters of rank r on the
// linear layers of one base model, served together as vLLM serves them (--enable-lora):
//   - max_loras GPU slots, each preallocated at max_lora_rank for every targeted layer
//     (vLLM's LoRA wrappers stack max_loras x max_lora_rank A and B matrices per layer), so
//     the reservation comes out of the KV cache whatever the adapters' own rank;
//   - max_cpu_loras adapters cached in host memory; one not in a GPU slot is copied over PCIe
//     before the step that needs it;
//   - a step holds requests of at most max_loras distinct adapters (the V1 scheduler skips a
//     waiting request whose adapter would exceed that);
//   - the extra work per step: for each targeted linear layer the shrink (x A) and expand (x B)
//     kernels of punica/SGMV, 2 x tokens x R x (in + out) FLOPs with R = max_lora_rank (the
//     kernels run at the slot's padded rank), reading the A and B of each distinct adapter.
// Per adapter (at its own rank r): bytes = sum over targeted layers of r x (in + out) x 2 B
// x layers (16-bit).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/llm/model_spec.h"

namespace capsim {

struct LoraModule {
  std::string name;  // q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj
  double in = 0, out = 0;  // features of the whole layer (not per GPU)
  bool row_parallel = false;  // o_proj, down_proj: input sharded under TP; else output sharded
  std::int64_t layers = 0;    // layers that have it (MLP modules: the dense layers only)
};

struct LoraConfig {
  int max_loras = 1;        // vLLM's --max-loras (default 1)
  int max_lora_rank = 16;   // vLLM's --max-lora-rank (default 16)
  int max_cpu_loras = 0;    // vLLM's --max-cpu-loras (0 = max_loras, vLLM's default)
  int rank = 0;             // the adapters' own rank (0 = max_lora_rank)
  // Linear layers the adapters target (PEFT's target_modules).
  std::vector<std::string> target_modules = {"q_proj", "k_proj", "v_proj", "o_proj",
                                             "gate_proj", "up_proj", "down_proj"};

  int adapter_rank() const { return rank > 0 ? rank : max_lora_rank; }
  int cpu_slots() const { return max_cpu_loras > 0 ? max_cpu_loras : max_loras; }
};

// The targeted layers of `m`, with their shapes. Throws capsim::Error for MLA models (their
// low-rank q/kv projections are not modelled) and unknown module names.
std::vector<LoraModule> lora_modules(const LoraConfig& c, const ModelSpec& m);
// Sum over targeted layers of (in + out) x layers: one adapter's parameters per unit rank.
double lora_params_per_rank(const LoraConfig& c, const ModelSpec& m);
// One adapter at its own rank, all GPUs together, bytes (16-bit).
double lora_adapter_bytes(const LoraConfig& c, const ModelSpec& m);
// The GPU slots vLLM preallocates, per GPU of a TP group of `tp`: max_loras x max_lora_rank x
// sum over targeted layers of (in or in/TP) + (out/TP or out), x 2 B.
double lora_reserved_bytes_per_gpu(const LoraConfig& c, const ModelSpec& m, int tp);

// Throws capsim::Error naming `where` for limits vLLM refuses: max_loras < 1, max_lora_rank
// not one of vLLM's sizes, max_cpu_loras < max_loras, an adapter rank above max_lora_rank.
void validate_lora(const LoraConfig& c, const std::string& where);

// Which adapter each request names: `count` adapters, uniform or Zipf(s) over their ranks.
struct AdapterMix {
  int count = 0;            // 0 = requests name no adapter (the base model)
  double zipf_s = 0;        // 0 = uniform; else P(adapter i) ~ 1 / i^s, i = 1..count
  std::uint64_t seed = 0;
  // Parses "uniform" or "zipf:S" (S > 0); throws naming `where`.
  static double parse_distribution(const std::string& text, const std::string& where);
  // The adapter of request `id` (0..count-1): a pure function of (seed, id), one uniform draw
  // of Rng(seed).split(id) against the cumulative weights (std::pow: the libm caveat of rng.h).
  std::int32_t adapter_of(std::uint64_t id) const;
  std::vector<double> cumulative() const;
};

}  // namespace capsim
