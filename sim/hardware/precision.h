// Numeric precisions of weights, KV cache and tensor-core math.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace capsim {

// kNvfp4: NVIDIA's 4-bit float (E2M1) with one FP8 E4M3 scale per 16 values; kMxfp4: the OCP
// microscaling 4-bit float (E2M1) with one 8-bit power-of-two (E8M0) scale per 32 values, as
// gpt-oss ships its experts. Both multiply on Blackwell's FP4 tensor cores; elsewhere the
// engines dequantise them to 16-bit (weight-only), see precision_support.h.
enum class Precision { kFp32, kTf32, kFp16, kBf16, kFp8, kInt8, kInt4, kNvfp4, kMxfp4 };

// "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "int4", "nvfp4", "mxfp4".
std::string_view precision_name(Precision p);

// Accepts the names above plus common spellings ("float16", "bfloat16", "fp8_e4m3", "awq",
// "gptq" = int4). Throws capsim::Error naming `where` and the accepted names.
Precision parse_precision(std::string_view text, std::string_view where);

// Storage bytes of one element (int4 = 0.5), without quantisation scales.
double element_bytes(Precision p);

// Bytes of one quantised linear-layer weight with its group scales: int4 (AWQ/GPTQ) 0.5 + one
// fp16 scale and one fp16 zero point per 128 = 0.53125; nvfp4 0.5 + one FP8 scale per 16 =
// 0.5625; mxfp4 0.5 + one E8M0 scale per 32 = 0.53125; other precisions their element size
// (fp8/int8 per-channel scales are counted per output row where the rows are known).
double quantized_weight_bytes(Precision p);

// True for the 4-bit float formats (nvfp4, mxfp4).
bool is_fp4(Precision p);
// True for the precisions a KV cache is modelled in: fp32, bf16, fp16, fp8.
bool is_kv_cache_precision(Precision p);

const std::vector<Precision>& all_precisions();

}  // namespace capsim
