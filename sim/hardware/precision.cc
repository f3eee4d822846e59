#include "sim/hardware/precision.h"

#include <algorithm>
#include <cctype>

#include "sim/core/error.h"

namespace capsim {

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kTf32: return "tf32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
    case Precision::kFp8: return "fp8";
    case Precision::kInt8: return "int8";
    case Precision::kInt4: return "int4";
    case Precision::kNvfp4: return "nvfp4";
    case Precision::kMxfp4: return "mxfp4";
  }
  return "?";
}

const std::vector<Precision>& all_precisions() {
  static const std::vector<Precision> all = {Precision::kFp32, Precision::kTf32, Precision::kFp16,
                                             Precision::kBf16, Precision::kFp8,  Precision::kInt8,
                                             Precision::kInt4, Precision::kNvfp4, Precision::kMxfp4};
  return all;
}

Precision parse_precision(std::string_view text, std::string_view where) {
  std::string t(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "fp32" || t == "float32") return Precision::kFp32;
  if (t == "tf32") return Precision::kTf32;
  if (t == "fp16" || t == "float16" || t == "half") return Precision::kFp16;
  if (t == "bf16" || t == "bfloat16") return Precision::kBf16;
  if (t == "fp8" || t == "fp8_e4m3" || t == "fp8_e5m2") return Precision::kFp8;
  if (t == "int8" || t == "w8a8") return Precision::kInt8;
  if (t == "int4" || t == "awq" || t == "gptq" || t == "w4a16") return Precision::kInt4;
  // "fp4" is NVFP4, the format Blackwell's FP4 tensor cores and NVIDIA's ModelOpt checkpoints use.
  if (t == "nvfp4" || t == "fp4" || t == "modelopt_fp4") return Precision::kNvfp4;
  if (t == "mxfp4") return Precision::kMxfp4;
  throw Error(std::string(where) + ": unknown precision '" + std::string(text) +
              "'; accepted: fp32, tf32, fp16, bf16, fp8, int8, int4, nvfp4, mxfp4 (also float16, "
              "bfloat16, fp8_e4m3, fp8_e5m2, awq, gptq, fp4 = nvfp4)");
}

double element_bytes(Precision p) {
  switch (p) {
    case Precision::kFp32:
    case Precision::kTf32: return 4;
    case Precision::kFp16:
    case Precision::kBf16: return 2;
    case Precision::kFp8:
    case Precision::kInt8: return 1;
    case Precision::kInt4:
    case Precision::kNvfp4:
    case Precision::kMxfp4: return 0.5;
  }
  return 2;
}

double quantized_weight_bytes(Precision p) {
  switch (p) {
    case Precision::kInt4: return 0.5 + 4.0 / 128.0;
    case Precision::kNvfp4: return 0.5 + 1.0 / 16.0;
    case Precision::kMxfp4: return 0.5 + 1.0 / 32.0;
    default: return element_bytes(p);
  }
}

bool is_fp4(Precision p) { return p == Precision::kNvfp4 || p == Precision::kMxfp4; }

bool is_kv_cache_precision(Precision p) {
  return p == Precision::kFp32 || p == Precision::kBf16 || p == Precision::kFp16 || p == Precision::kFp8;
}

}  // namespace capsim
