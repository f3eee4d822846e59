// What the attention self-checks share, internal to capsim-calibrate's .cu files: the naive
// references' softmax over scores in shared memory, and the comparison of a kernel's bf16 output
// with a reference's fp32 one.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace capcal {

// Turns the n scores sc[0..n) (shared memory) into softmax weights. Every thread of the block
// calls it: it synchronises the block before and after.
__device__ inline void reference_softmax(float* sc, int n) {
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = -INFINITY;
    for (int t = 0; t < n; ++t) m = fmaxf(m, sc[t]);
    float l = 0;
    for (int t = 0; t < n; ++t) {
      sc[t] = expf(sc[t] - m);
      l += sc[t];
    }
    for (int t = 0; t < n; ++t) sc[t] /= l;
  }
  __syncthreads();
}

inline float bf16_bits_to_float(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// "ok (max abs error E, tolerance T)" when every output is finite and within `tolerance` of the
// reference, else "FAILED (...)".
inline std::string compare_with_reference(const std::vector<std::uint16_t>& got, const std::vector<float>& want,
                                          double tolerance) {
  double worst = 0;
  bool finite = true;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float g = bf16_bits_to_float(got[i]);
    finite = finite && std::isfinite(g);
    worst = std::max(worst, static_cast<double>(std::fabs(g - want[i])));
  }
  char buf[128];
  std::snprintf(buf, sizeof buf, "%s (max abs error %.3g, tolerance %.3g)",
                finite && worst <= tolerance ? "ok" : "FAILED", worst, tolerance);
  return buf;
}

// The decode (decode_attention.cu) and prefill (prefill_attention.cu) kernels against their
// naive references; the verdict as compare_with_reference words it.
std::string check_decode_attention(cudaStream_t s);
std::string check_prefill_attention(int head_dim, cudaStream_t s);

}  // namespace capcal
