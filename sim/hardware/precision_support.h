// What each card architecture can run in the serving engines' kernels, as opposed to what its
// tensor cores can multiply (Card::dense_peak). A card can have INT8 tensor cores and still no
// engine kernel for a format (FP8 on Turing), or run a format weight-only by dequantising to
// 16-bit (FP8 Marlin on Ampere). Deployment::validate() consults this table, so fit, simulate,
// plan, compare and check refuse (or never suggest) what no engine can run.
//
// Sources (the table rows in precision_support.cc cite them per entry):
//  [vllm-hw]  vLLM docs, "Supported Hardware for Quantization Kernels",
//             https://docs.vllm.ai/en/latest/features/quantization/supported_hardware.html
//             (columns Volta, Turing, Ampere, Ada, Hopper, AMD GPU, x86 CPU; rows AWQ, GPTQ,
//             Marlin (GPTQ/AWQ/FP8), INT8 (W8A8), FP8 (W8A8)).
//  [vllm-fp8] vLLM docs, "FP8 W8A8", https://docs.vllm.ai/en/latest/features/quantization/fp8.html:
//             FP8 computation needs compute capability >= 8.9 (Ada, Hopper); on 8.0 (Ampere)
//             FP8 checkpoints run weight-only (W8A16) through FP8 Marlin.
//  [vllm-bf16] vLLM raises "Bfloat16 is only supported on GPUs with compute capability of at
//             least 8.0" and suggests --dtype=half (vllm/platforms/cuda.py, dtype check).
//  [vllm-kv]  vLLM docs, "Quantized KV Cache",
//             https://docs.vllm.ai/en/latest/features/quantization/quantized_kvcache.html.
//  [nvfp4]    NVIDIA Blackwell architecture technical brief: FP4 (NVFP4) tensor cores on B200.
//  [marlin-fp4] vLLM's FP4 weight-only fallback: on a GPU without FP4 tensor cores vLLM logs
//             "Your GPU does not have native support for FP4 computation but FP4 quantization is
//             being used. Weight-only FP4 compression will be used leveraging the Marlin kernel"
//             (vllm/model_executor/layers/quantization/utils/marlin_utils_fp4.py, quoted in
//             vllm-project/vllm issue #31085, v0.13, gpt-oss-120b MXFP4); mxfp4.py picks a
//             Triton MXFP4 MoE backend on compute capability 9.x and Marlin elsewhere; Marlin
//             needs compute capability 8.0 (NVFP4 checkpoints served on RTX 3090s through it:
//             noonghunna/club-3090 discussion #608, vLLM v0.24).
// Entries marked UNVERIFIED in the .cc were recalled, not re-read line by line.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/hardware/card.h"
#include "sim/hardware/precision.h"

namespace capsim {

struct ArchitectureSupport {
  std::string_view architecture;  // Card::architecture, e.g. "turing", "hopper"
  std::string_view compute_capability;  // "7.5", "9.0"; "-" for AMD and CPUs
  bool bf16 = false;              // bf16 weights and activations
  bool fp8_w8a8 = false;          // FP8 weights and FP8 math
  bool fp8_weight_only = false;   // FP8 weights dequantised to 16-bit math (FP8 Marlin)
  bool int8_w8a8 = false;         // INT8 weights and INT8 math
  bool int4_weight_only = false;  // AWQ / GPTQ 4-bit weights, 16-bit math
  bool fp4 = false;               // FP4 (NVFP4/MXFP4) tensor-core math
  bool fp4_weight_only = false;   // FP4 weights dequantised to 16-bit math (Marlin FP4)
  bool fp8_kv_cache = false;      // --kv-cache-dtype fp8
  std::string_view source;        // citation of the row
};

// The row for a card's architecture; nullptr for an architecture the table lacks (a user's own
// card file), in which case only the card's dense_peak decides.
const ArchitectureSupport* architecture_support(std::string_view architecture);

// Why `card` cannot run weights `w` with a KV cache `kv`, naming the kernel and the source;
// nullopt when it can.
std::optional<std::string> precision_unsupported(const Card& card, Precision w, Precision kv);

// True when fp8 weights on `card` run weight-only (16-bit math), as on Ampere.
bool fp8_weight_only(const Card& card);

}  // namespace capsim
