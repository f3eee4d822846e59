// Numeric precisions of weights, KV cache and tensor-core math.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace capsim {

enum class Precision { kFp32, kTf32, kFp16, kBf16, kFp8, kInt8, kInt4 };

// "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "int4".
std::string_view precision_name(Precision p);

// Accepts the names above plus common spellings ("float16", "bfloat16", "fp8_e4m3", "awq",
// "gptq" = int4). Throws capsim::Error naming `where` and the accepted names.
Precision parse_precision(std::string_view text, std::string_view where);

// Storage bytes of one element (int4 = 0.5), without quantisation scales.
double element_bytes(Precision p);

const std::vector<Precision>& all_precisions();

}  // namespace capsim
