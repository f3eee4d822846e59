// capsim-calibrate's causal prefill attention (WMMA tensor cores, online softmax), its benchmark
// and its self-check against a naive reference. Simple on purpose: see kernels.cu.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <mma.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "calibration/cuda/attention_check.cuh"
#include "calibration/cuda/bench.h"

namespace capcal {

const char* const kPrefillKernelName =
    "capsim-calibrate causal prefill (WMMA bf16 tensor cores, 64x32 tiles, online softmax)";

// ---------------------------------------------------------------------------------------------
// Causal prefill attention with tensor cores (WMMA, bf16 in, fp32 accumulate). Q, K, V and O are
// [batch][tokens or kv_len][heads][head_dim] bf16 (contiguous, not paged). One CTA of 4 warps
// takes 64 query rows of one head (16 per warp) and walks the keys in tiles of 32 up to the
// causal limit, with the online softmax of FlashAttention: S = Q Kᵀ (WMMA) -> row max / sum ->
// P (bf16) -> P V (WMMA) -> O = O · correction + P V, O kept in registers.

namespace {

namespace wmma = nvcuda::wmma;
constexpr int kPrefillRows = 64;
constexpr int kPrefillKeys = 32;

constexpr std::size_t align128(std::size_t x) { return (x + 127) / 128 * 128; }

template <int HD>
struct PrefillSmem {
  static constexpr std::size_t q = 0;
  static constexpr std::size_t k = align128(q + kPrefillRows * HD * 2);
  static constexpr std::size_t v = align128(k + kPrefillKeys * HD * 2);
  static constexpr std::size_t warps = align128(v + kPrefillKeys * HD * 2);
  static constexpr std::size_t scratch = 0;                                   // 16 x HD float
  static constexpr std::size_t p = align128(scratch + 16 * HD * 4);           // 16 x 32 bf16
  static constexpr std::size_t rows = align128(p + 16 * kPrefillKeys * 2);    // m, l, corr: 3 x 16 float
  static constexpr std::size_t per_warp = align128(rows + 3 * 16 * 4);
  static constexpr std::size_t total = warps + 4 * per_warp;
};

template <int HD>
__global__ void __launch_bounds__(128)
    prefill_attention(const __nv_bfloat16* __restrict__ Q, const __nv_bfloat16* __restrict__ K,
                      const __nv_bfloat16* __restrict__ V, __nv_bfloat16* __restrict__ O, int tokens,
                      int cached, int q_heads, int kv_heads, float scale) {
  using S = PrefillSmem<HD>;
  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(smem + S::q);
  __nv_bfloat16* k_s = reinterpret_cast<__nv_bfloat16*>(smem + S::k);
  __nv_bfloat16* v_s = reinterpret_cast<__nv_bfloat16*>(smem + S::v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned char* wbase = smem + S::warps + warp * S::per_warp;
  float* scratch = reinterpret_cast<float*>(wbase + S::scratch);
  __nv_bfloat16* p_s = reinterpret_cast<__nv_bfloat16*>(wbase + S::p);
  float* row_m = reinterpret_cast<float*>(wbase + S::rows);
  float* row_l = row_m + 16;
  float* row_c = row_m + 32;

  const int q0 = blockIdx.x * kPrefillRows, h = blockIdx.y, b = blockIdx.z;
  const int kvh = h / (q_heads / kv_heads);
  const int kv_len = cached + tokens;
  constexpr int V16 = HD / 8;  // uint4 per row

  for (int i = threadIdx.x; i < kPrefillRows * V16; i += blockDim.x) {
    const int r = i / V16, c = i % V16;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (q0 + r < tokens) {
      val = reinterpret_cast<const uint4*>(Q + ((static_cast<std::size_t>(b) * tokens + q0 + r) * q_heads + h) * HD)[c];
    }
    reinterpret_cast<uint4*>(q_s + r * HD)[c] = val;
  }
  if (lane < 16) {
    row_m[lane] = -INFINITY;
    row_l[lane] = 0;
  }
  constexpr int PER_LANE = 16 * HD / 32;
  float o[PER_LANE];
#pragma unroll
  for (int j = 0; j < PER_LANE; ++j) o[j] = 0;

  const int last_row = min(q0 + kPrefillRows, tokens) - 1;
  const int kv_end = min(kv_len, cached + last_row + 1);
  const int my_row0 = q0 + warp * 16;
  for (int kv0 = 0; kv0 < kv_end; kv0 += kPrefillKeys) {
    __syncthreads();  // the previous tile is consumed
    for (int i = threadIdx.x; i < kPrefillKeys * V16; i += blockDim.x) {
      const int r = i / V16, c = i % V16;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
      if (kv0 + r < kv_len) {
        const std::size_t off = ((static_cast<std::size_t>(b) * kv_len + kv0 + r) * kv_heads + kvh) * HD;
        kv = reinterpret_cast<const uint4*>(K + off)[c];
        vv = reinterpret_cast<const uint4*>(V + off)[c];
      }
      reinterpret_cast<uint4*>(k_s + r * HD)[c] = kv;
      reinterpret_cast<uint4*>(v_s + r * HD)[c] = vv;
    }
    __syncthreads();
    if (my_row0 >= tokens || kv0 > cached + my_row0 + 15) continue;  // nothing for this warp

    // S (16 x 32) = Q_w (16 x HD) K_tile^T.
#pragma unroll
    for (int nt = 0; nt < kPrefillKeys / 16; ++nt) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> bf;
        wmma::load_matrix_sync(a, q_s + warp * 16 * HD + kk * 16, HD);
        wmma::load_matrix_sync(bf, k_s + nt * 16 * HD + kk * 16, HD);
        wmma::mma_sync(acc, a, bf, acc);
      }
      wmma::store_matrix_sync(scratch + nt * 16, acc, kPrefillKeys, wmma::mem_row_major);
    }
    __syncwarp();
    // Online softmax: two lanes per row, 16 columns each.
    {
      const int r = lane / 2, half = lane % 2;
      const int qpos = cached + my_row0 + r;
      const bool row_ok = my_row0 + r < tokens;
      float sv[16];
      float mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < 16; ++c) {
        const int col = half * 16 + c, kp = kv0 + col;
        const bool ok = row_ok && kp < kv_len && kp <= qpos;
        sv[c] = ok ? scratch[r * kPrefillKeys + col] * scale : -INFINITY;
        mx = fmaxf(mx, sv[c]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      const float m_old = row_m[r];
      const float m_new = fmaxf(m_old, mx);
      const float corr = m_new == -INFINITY ? 1.0f : __expf(m_old - m_new);
      float sum = 0;
#pragma unroll
      for (int c = 0; c < 16; ++c) {
        const float p = sv[c] == -INFINITY ? 0.0f : __expf(sv[c] - m_new);
        p_s[r * kPrefillKeys + half * 16 + c] = __float2bfloat16(p);
        sum += p;
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      __syncwarp();
      if (half == 0) {
        row_m[r] = m_new;
        row_l[r] = row_l[r] * corr + sum;
        row_c[r] = corr;
      }
    }
    __syncwarp();
    // PV (16 x HD) = P (16 x 32) V_tile (32 x HD).
#pragma unroll
    for (int nt = 0; nt < HD / 16; ++nt) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < kPrefillKeys / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> bf;
        wmma::load_matrix_sync(a, p_s + kk * 16, kPrefillKeys);
        wmma::load_matrix_sync(bf, v_s + kk * 16 * HD + nt * 16, HD);
        wmma::mma_sync(acc, a, bf, acc);
      }
      wmma::store_matrix_sync(scratch + nt * 16, acc, HD, wmma::mem_row_major);
    }
    __syncwarp();
#pragma unroll
    for (int j = 0; j < PER_LANE; ++j) {
      const int idx = lane + 32 * j;
      o[j] = o[j] * row_c[idx / HD] + scratch[idx];
    }
    __syncwarp();
  }
  if (my_row0 >= tokens) return;
#pragma unroll
  for (int j = 0; j < PER_LANE; ++j) {
    const int idx = lane + 32 * j, r = idx / HD, c = idx % HD;
    if (my_row0 + r < tokens) {
      const float l = row_l[r];
      O[((static_cast<std::size_t>(b) * tokens + my_row0 + r) * q_heads + h) * HD + c] =
          __float2bfloat16(l > 0 ? o[j] / l : 0.0f);
    }
  }
}

// Reference: one CTA per (query row, head, sequence).
__global__ void reference_prefill(const __nv_bfloat16* Q, const __nv_bfloat16* K, const __nv_bfloat16* V,
                                  float* O, int tokens, int cached, int q_heads, int kv_heads, int head_dim,
                                  float scale) {
  extern __shared__ float sc[];
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, kv_len = cached + tokens;
  const int kvh = h / (q_heads / kv_heads), n = cached + i + 1;
  const __nv_bfloat16* qp = Q + ((static_cast<std::size_t>(b) * tokens + i) * q_heads + h) * head_dim;
  for (int t = threadIdx.x; t < n; t += blockDim.x) {
    const __nv_bfloat16* kp = K + ((static_cast<std::size_t>(b) * kv_len + t) * kv_heads + kvh) * head_dim;
    float s = 0;
    for (int d = 0; d < head_dim; ++d) s += __bfloat162float(qp[d]) * __bfloat162float(kp[d]);
    sc[t] = s * scale;
  }
  reference_softmax(sc, n);
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float o = 0;
    for (int t = 0; t < n; ++t) {
      o += sc[t] * __bfloat162float(V[((static_cast<std::size_t>(b) * kv_len + t) * kv_heads + kvh) * head_dim + d]);
    }
    O[((static_cast<std::size_t>(b) * tokens + i) * q_heads + h) * head_dim + d] = o;
  }
}

template <int HD>
void prefill_launch_t(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o,
                      const PrefillCase& c, cudaStream_t s) {
  constexpr std::size_t smem = PrefillSmem<HD>::total;
  static bool configured = false;
  if (!configured) {
    CAPCAL_CUDA(cudaFuncSetAttribute(prefill_attention<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)));
    configured = true;
  }
  const dim3 grid((c.tokens + kPrefillRows - 1) / kPrefillRows, c.shape.q_heads, c.batch);
  prefill_attention<HD><<<grid, 128, smem, s>>>(q, k, v, o, c.tokens, c.cached, c.shape.q_heads, c.shape.kv_heads,
                                                1.0f / std::sqrt(static_cast<float>(HD)));
  CAPCAL_CUDA(cudaGetLastError());
}

bool prefill_launch(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o,
                    const PrefillCase& c, cudaStream_t s) {
  if (c.shape.kv_heads <= 0 || c.shape.q_heads % c.shape.kv_heads != 0) return false;
  switch (c.shape.head_dim) {
    case 64: prefill_launch_t<64>(q, k, v, o, c, s); return true;
    case 128: prefill_launch_t<128>(q, k, v, o, c, s); return true;
    default: return false;
  }
}

struct PrefillBuffers {
  __nv_bfloat16 *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  std::size_t q_elems = 0, kv_elems = 0;
  void allocate(const PrefillCase& c, cudaStream_t s) {
    q_elems = static_cast<std::size_t>(c.batch) * c.tokens * c.shape.q_heads * c.shape.head_dim;
    kv_elems = static_cast<std::size_t>(c.batch) * (c.cached + c.tokens) * c.shape.kv_heads * c.shape.head_dim;
    CAPCAL_CUDA(cudaMalloc(&q, q_elems * 2));
    CAPCAL_CUDA(cudaMalloc(&o, q_elems * 2));
    CAPCAL_CUDA(cudaMalloc(&k, kv_elems * 2));
    CAPCAL_CUDA(cudaMalloc(&v, kv_elems * 2));
    fill_random(q, q_elems, DType::kBF16, 21, 1.0f, s);
    fill_random(k, kv_elems, DType::kBF16, 22, 1.0f, s);
    fill_random(v, kv_elems, DType::kBF16, 23, 1.0f, s);
    CAPCAL_CUDA(cudaStreamSynchronize(s));
  }
  void release() {
    for (void* p : {static_cast<void*>(q), static_cast<void*>(k), static_cast<void*>(v), static_cast<void*>(o)}) {
      if (p) cudaFree(p);
    }
    *this = PrefillBuffers{};
  }
};

}  // namespace

std::vector<PrefillResult> bench_prefill(const BenchConfig& cfg, const std::vector<PrefillCase>& cases,
                                         std::vector<std::string>& notes) {
  std::vector<PrefillResult> out;
  cudaStream_t s;
  CAPCAL_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (const auto& c : cases) {
    if (!(c.shape.head_dim == 64 || c.shape.head_dim == 128) || c.shape.kv_heads <= 0 ||
        c.shape.q_heads % c.shape.kv_heads != 0) {
      notes.push_back("attention_prefill: " + c.shape.label + " skipped: the kernel takes head_dim 64 or 128");
      continue;
    }
    PrefillBuffers p;
    p.allocate(c, s);
    PrefillResult r;
    r.c = c;
    r.seconds = time_op(cfg, s, [&](long long) { prefill_launch(p.q, p.k, p.v, p.o, c, s); }, &r.timing);
    out.push_back(r);
    if (cfg.verbose) {
      const double t = *std::min_element(r.seconds.begin(), r.seconds.end());
      const double pairs = static_cast<double>(c.batch) * c.tokens * (c.cached + (c.tokens + 1) / 2.0);
      std::printf("  prefill %-14s batch %2d tokens %6d cached %6d: %9.1f us, %.0f TFLOP/s\n", c.shape.label.c_str(),
                  c.batch, c.tokens, c.cached, t * 1e6, 4.0 * c.shape.q_heads * c.shape.head_dim * pairs / t / 1e12);
    }
    p.release();
  }
  CAPCAL_CUDA(cudaStreamDestroy(s));
  return out;
}

// The prefill kernel of head size `hd` against the naive reference, with a cached prefix.
std::string check_prefill_attention(int hd, cudaStream_t s) {
  PrefillCase c;
  c.shape = {4, 2, hd, "check"};
  c.batch = 2;
  c.tokens = 150;  // three row tiles, the last partial
  c.cached = 37;
  PrefillBuffers p;
  p.allocate(c, s);
  fill_random(p.q, p.q_elems, DType::kBF16, 24, 8.0f, s);  // a peaked softmax, as above
  prefill_launch(p.q, p.k, p.v, p.o, c, s);
  float* ref = nullptr;
  CAPCAL_CUDA(cudaMalloc(&ref, p.q_elems * sizeof(float)));
  reference_prefill<<<dim3(c.tokens, c.shape.q_heads, c.batch), 128, (c.cached + c.tokens) * sizeof(float), s>>>(
      p.q, p.k, p.v, ref, c.tokens, c.cached, c.shape.q_heads, c.shape.kv_heads, hd,
      1.0f / std::sqrt(static_cast<float>(hd)));
  CAPCAL_CUDA(cudaGetLastError());
  std::vector<std::uint16_t> got(p.q_elems);
  std::vector<float> want(p.q_elems);
  CAPCAL_CUDA(cudaMemcpyAsync(got.data(), p.o, p.q_elems * 2, cudaMemcpyDeviceToHost, s));
  CAPCAL_CUDA(cudaMemcpyAsync(want.data(), ref, p.q_elems * sizeof(float), cudaMemcpyDeviceToHost, s));
  CAPCAL_CUDA(cudaStreamSynchronize(s));
  const std::string verdict = compare_with_reference(got, want, 3e-2);
  CAPCAL_CUDA(cudaFree(ref));
  p.release();
  return verdict;
}

}  // namespace capcal
