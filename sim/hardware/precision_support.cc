#include "sim/hardware/precision_support.h"

#include <algorithm>
#include <cctype>

namespace capsim {
namespace {

// One row per architecture named by calibration/cards/*.yaml. Columns follow [vllm-hw] (see the
// header); Blackwell, CDNA3 and the CPU rows are read from the same page's "AMD GPU" and
// "x86 CPU" columns where it has them.
const std::vector<ArchitectureSupport> kTable = {
    // Turing (T4): no bf16 [vllm-bf16]; no FP8 of any kind: FP8 W8A8 needs 8.9 and FP8 Marlin
    // needs 8.0 [vllm-fp8, vllm-hw Marlin row]; INT8 W8A8 and AWQ/GPTQ have Turing kernels
    // [vllm-hw]. FP8 KV cache: UNVERIFIED for sm75 in vLLM V1's attention backends, refused.
    {"turing", "7.5", false, false, false, true, true, false, false, false,
     "vLLM supported_hardware.html (Turing column: AWQ, GPTQ, INT8 W8A8 yes; Marlin, FP8 W8A8 no); "
     "bf16 needs compute capability 8.0; fp8 KV cache on Turing UNVERIFIED, refused"},
    // Ampere (A100, A10, A10G, RTX 3090): bf16; FP8 weight-only through FP8 Marlin; INT8 W8A8;
    // AWQ/GPTQ (incl. Marlin). FP8 KV cache: stored as fp8, computed in 16-bit [vllm-kv].
    {"ampere", "8.0/8.6", true, false, true, true, true, false, true, true,
     "vLLM supported_hardware.html (Ampere column: AWQ, GPTQ, Marlin GPTQ/AWQ/FP8, INT8 W8A8 yes; "
     "FP8 W8A8 no); fp8.html: FP8 models run weight-only (W8A16) on compute capability 8.0; "
     "quantized_kvcache.html: fp8 KV cache; nvfp4/mxfp4 weight-only through Marlin FP4 "
     "(marlin_utils_fp4.py, vllm issue #31085)"},
    // Ada (L4, L40S, RTX 4090): FP8 W8A8 from 8.9 [vllm-fp8].
    {"ada", "8.9", true, true, true, true, true, false, true, true,
     "vLLM supported_hardware.html (Ada column: all of AWQ, GPTQ, Marlin, INT8 W8A8, FP8 W8A8); "
     "fp8.html: FP8 computation from compute capability 8.9; nvfp4/mxfp4 weight-only through "
     "Marlin FP4 (marlin_utils_fp4.py, vllm issue #31085)"},
    {"hopper", "9.0", true, true, true, true, true, false, true, true,
     "vLLM supported_hardware.html (Hopper column: all of AWQ, GPTQ, Marlin, INT8 W8A8, FP8 W8A8); "
     "nvfp4/mxfp4 weight-only (no FP4 tensor cores): Triton MXFP4 MoE or Marlin FP4 "
     "(mxfp4.py, marlin_utils_fp4.py, vllm issue #31085)"},
    // Blackwell (B200): FP4 tensor cores [nvfp4]; the quantisation table predates a Blackwell
    // column, so the rest is ASSUMED as Hopper (UNVERIFIED).
    {"blackwell", "10.0", true, true, true, true, true, true, true, true,
     "NVIDIA Blackwell technical brief (FP4 tensor cores); other columns ASSUMED as Hopper, "
     "UNVERIFIED (vLLM supported_hardware.html has no Blackwell column)"},
    // CDNA3 (MI300X): the "AMD GPU" column lists FP8 W8A8 only; AWQ, GPTQ, Marlin and INT8 W8A8
    // are not listed for AMD GPUs (recalled; UNVERIFIED line by line).
    {"cdna3", "-", true, true, false, false, false, false, false, true,
     "vLLM supported_hardware.html (AMD GPU column: FP8 W8A8 yes; AWQ, GPTQ, Marlin, INT8 W8A8 "
     "no; UNVERIFIED line by line); quantized_kvcache.html: fp8 KV cache on ROCm"},
    // CDNA4 (MI355X): as CDNA3, plus FP4 matrix math: CDNA 4 multiplies the OCP MXFP4/MXFP6
    // formats natively (AMD CDNA 4 whitepaper; ROCm gpu-specs, gfx950), and vLLM's gpt-oss
    // recipe runs the MXFP4 checkpoints on MI355X. UNVERIFIED line by line, as the CDNA3 row.
    {"cdna4", "-", true, true, false, false, false, true, false, true,
     "vLLM supported_hardware.html (AMD GPU column: FP8 W8A8 yes; AWQ, GPTQ, Marlin, INT8 W8A8 "
     "no; UNVERIFIED line by line); MXFP4 on CDNA 4 (gfx950) matrix cores (AMD CDNA 4 "
     "architecture whitepaper); quantized_kvcache.html: fp8 KV cache on ROCm"},
    // x86 CPU (Sapphire Rapids server): AWQ, GPTQ, INT8 W8A8 yes; FP8 no [vllm-hw x86 column];
    // bf16 through AMX. FP8 KV cache on CPU: UNVERIFIED, refused.
    {"sapphire-rapids", "-", true, false, false, true, true, false, false, false,
     "vLLM supported_hardware.html (x86 CPU column: AWQ, GPTQ, INT8 W8A8 yes; FP8 no); fp8 KV "
     "cache on CPU UNVERIFIED, refused"},
};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace


const ArchitectureSupport* architecture_support(std::string_view architecture) {
  const std::string a = lower(architecture);
  for (const ArchitectureSupport& row : kTable) {
    if (row.architecture == a) return &row;
  }
  return nullptr;
}

bool fp8_weight_only(const Card& card) {
  const ArchitectureSupport* s = architecture_support(card.architecture);
  if (!s) return !card.supports(Precision::kFp8);
  return !s->fp8_w8a8 && s->fp8_weight_only;
}

std::optional<std::string> precision_unsupported(const Card& card, Precision w, Precision kv) {
  const ArchitectureSupport* s = architecture_support(card.architecture);
  if (!s) return std::nullopt;  // a user's own architecture: only dense_peak decides
  const std::string arch = std::string(s->architecture) +
                           (s->compute_capability == "-" ? "" : " (compute capability " +
                                                                    std::string(s->compute_capability) + ")");
  const auto refuse = [&](const std::string& flag, Precision p, const std::string& what) {
    return flag + ": " + std::string(precision_name(p)) + " is not supported on " + card.name + ": " +
           arch + " has no " + what + " kernel in the serving engines (" + std::string(s->source) + ")";
  };
  switch (w) {
    case Precision::kBf16:
      if (!s->bf16) return refuse("--weights", w, "bf16");
      break;
    case Precision::kFp8:
      if (!s->fp8_w8a8 && !s->fp8_weight_only) return refuse("--weights", w, "FP8 (W8A8 or weight-only)");
      break;
    case Precision::kInt8:
      if (!s->int8_w8a8) return refuse("--weights", w, "INT8 W8A8");
      break;
    case Precision::kInt4:
      if (!s->int4_weight_only) return refuse("--weights", w, "INT4 AWQ/GPTQ");
      break;
    case Precision::kNvfp4:
    case Precision::kMxfp4:
      if (!s->fp4 && !s->fp4_weight_only) return refuse("--weights", w, "FP4 (tensor-core or Marlin weight-only)");
      break;
    default: break;
  }
  if (kv == Precision::kBf16 && !s->bf16) return refuse("--kv-cache", kv, "bf16");
  if (kv == Precision::kFp8 && !s->fp8_kv_cache) return refuse("--kv-cache", kv, "FP8 KV-cache");
  return std::nullopt;
}

}  // namespace capsim
