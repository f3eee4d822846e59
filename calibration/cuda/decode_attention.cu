// capsim-calibrate's paged decode attention (flash-decoding over a paged bf16 KV cache), its
// benchmark and its self-check against a naive reference. Simple on purpose: see kernels.cu.
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

const char* const kDecodeKernelName =
    "capsim-calibrate paged decode (split-K over 256-token partitions, bf16 KV, block 16)";

// ---------------------------------------------------------------------------------------------
// Paged decode attention. K and V caches are [num_blocks][kv_heads][block_size][head_dim] bf16;
// a sequence's blocks are listed in its row of the block table. One CTA per (partition of 256
// tokens, KV head, sequence) computes the G = q_heads / kv_heads query heads that share the KV
// head: scores into shared memory, softmax, then P·V, and writes an unnormalised partial result
// with its max and sum; a second kernel combines the partitions (flash-decoding).

namespace {

constexpr int kDecodePartition = 256;
constexpr int kDecodeWarps = 4;

__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 x = __bfloat1622float2(h[i]);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

template <int HD, int G>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    paged_decode_partial(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ kc,
                         const __nv_bfloat16* __restrict__ vc, const int* __restrict__ tables,
                         int max_blocks, int context, int block_size, int kv_heads, float scale,
                         float* __restrict__ part_acc, float* __restrict__ part_max,
                         float* __restrict__ part_sum, int partitions) {
  constexpr int LPT = HD * 2 / 16;  // lanes per token: 16 bytes each
  constexpr int TPW = 32 / LPT;     // tokens per warp step
  const int part = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const int q_heads = kv_heads * G;
  const int t0 = part * kDecodePartition;
  const int t1 = min(context, t0 + kDecodePartition);
  __shared__ float logits[G][kDecodePartition];
  __shared__ float stat[G][2];
  __shared__ float acc_s[G][HD];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int sub = lane / LPT, sl = lane % LPT;
  const int* table = tables + static_cast<std::size_t>(b) * max_blocks;

  float qr[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const uint4 v = *reinterpret_cast<const uint4*>(q + (static_cast<std::size_t>(b) * q_heads + kvh * G + g) * HD + sl * 8);
    unpack8(v, qr[g]);
#pragma unroll
    for (int j = 0; j < 8; ++j) qr[g][j] *= scale;
  }
  for (int i = threadIdx.x; i < G * HD; i += blockDim.x) (&acc_s[0][0])[i] = 0.0f;

  // Scores.
  for (int base = t0 + warp * TPW; base < t1; base += kDecodeWarps * TPW) {
    const int t = base + sub;
    const bool valid = t < t1;
    float kf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (valid) {
      const int blk = table[t / block_size];
      const std::size_t off = ((static_cast<std::size_t>(blk) * kv_heads + kvh) * block_size + t % block_size) * HD + sl * 8;
      unpack8(*reinterpret_cast<const uint4*>(kc + off), kf);
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float s = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) s += qr[g][j] * kf[j];
#pragma unroll
      for (int o = LPT / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (valid && sl == 0) logits[g][t - t0] = s;
    }
  }
  __syncthreads();
  const int n = t1 - t0;
  for (int g = warp; g < G; g += kDecodeWarps) {
    float m = -INFINITY;
    for (int i = lane; i < n; i += 32) m = fmaxf(m, logits[g][i]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float sum = 0;
    for (int i = lane; i < n; i += 32) {
      const float e = __expf(logits[g][i] - m);
      logits[g][i] = e;
      sum += e;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) {
      stat[g][0] = m;
      stat[g][1] = sum;
    }
  }
  __syncthreads();

  // P·V.
  float acc[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[g][j] = 0;
  }
  for (int base = t0 + warp * TPW; base < t1; base += kDecodeWarps * TPW) {
    const int t = base + sub;
    if (t >= t1) continue;
    const int blk = table[t / block_size];
    const std::size_t off = ((static_cast<std::size_t>(blk) * kv_heads + kvh) * block_size + t % block_size) * HD + sl * 8;
    float vf[8];
    unpack8(*reinterpret_cast<const uint4*>(vc + off), vf);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float p = logits[g][t - t0];
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[g][j] += p * vf[j];
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int j = 0; j < 8; ++j) atomicAdd(&acc_s[g][sl * 8 + j], acc[g][j]);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < G * HD; i += blockDim.x) {
    const int g = i / HD, d = i % HD;
    const std::size_t row = static_cast<std::size_t>(b) * q_heads + kvh * G + g;
    part_acc[(row * partitions + part) * HD + d] = acc_s[g][d];
  }
  if (threadIdx.x < G) {
    const std::size_t row = static_cast<std::size_t>(b) * q_heads + kvh * G + threadIdx.x;
    part_max[row * partitions + part] = stat[threadIdx.x][0];
    part_sum[row * partitions + part] = stat[threadIdx.x][1];
  }
}

__global__ void paged_decode_combine(const float* __restrict__ part_acc, const float* __restrict__ part_max,
                                     const float* __restrict__ part_sum, __nv_bfloat16* __restrict__ out,
                                     int partitions, int head_dim) {
  const std::size_t row = static_cast<std::size_t>(blockIdx.y) * gridDim.x + blockIdx.x;  // b * q_heads + h
  const int d = threadIdx.x;
  float m = -INFINITY;
  for (int p = 0; p < partitions; ++p) m = fmaxf(m, part_max[row * partitions + p]);
  float l = 0, o = 0;
  for (int p = 0; p < partitions; ++p) {
    const float w = __expf(part_max[row * partitions + p] - m);
    l += w * part_sum[row * partitions + p];
    o += w * part_acc[(row * partitions + p) * head_dim + d];
  }
  out[row * head_dim + d] = __float2bfloat16(o / l);
}

// Reference: one CTA per (head, sequence), scores in dynamic shared memory.
__global__ void reference_decode(const __nv_bfloat16* q, const __nv_bfloat16* kc, const __nv_bfloat16* vc,
                                 const int* tables, int max_blocks, int context, int block_size, int kv_heads,
                                 int group, int head_dim, float scale, float* out) {
  extern __shared__ float sc[];
  const int h = blockIdx.x, b = blockIdx.y, q_heads = gridDim.x, kvh = h / group;
  const __nv_bfloat16* qp = q + (static_cast<std::size_t>(b) * q_heads + h) * head_dim;
  for (int t = threadIdx.x; t < context; t += blockDim.x) {
    const int blk = tables[static_cast<std::size_t>(b) * max_blocks + t / block_size];
    const __nv_bfloat16* kp = kc + ((static_cast<std::size_t>(blk) * kv_heads + kvh) * block_size + t % block_size) * head_dim;
    float s = 0;
    for (int d = 0; d < head_dim; ++d) s += __bfloat162float(qp[d]) * __bfloat162float(kp[d]);
    sc[t] = s * scale;
  }
  reference_softmax(sc, context);
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float o = 0;
    for (int t = 0; t < context; ++t) {
      const int blk = tables[static_cast<std::size_t>(b) * max_blocks + t / block_size];
      o += sc[t] * __bfloat162float(vc[((static_cast<std::size_t>(blk) * kv_heads + kvh) * block_size + t % block_size) * head_dim + d]);
    }
    out[(static_cast<std::size_t>(b) * q_heads + h) * head_dim + d] = o;
  }
}

struct DecodeBuffers {
  int batch = 0, context = 0, q_heads = 0, kv_heads = 0, head_dim = 0, block_size = 16;
  int max_blocks = 0, partitions = 0, copies = 1;
  std::size_t pool_blocks = 0;
  __nv_bfloat16 *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;
  int* tables = nullptr;  // copies x batch x max_blocks
  float *part_acc = nullptr, *part_max = nullptr, *part_sum = nullptr;

  std::size_t kv_bytes_per_op() const {
    return static_cast<std::size_t>(batch) * max_blocks * block_size * kv_heads * head_dim * 2 * 2;
  }
  void allocate(const DecodeCase& c, std::size_t l2, cudaStream_t s) {
    batch = c.batch;
    context = c.context;
    q_heads = c.shape.q_heads;
    kv_heads = c.shape.kv_heads;
    head_dim = c.shape.head_dim;
    max_blocks = (context + block_size - 1) / block_size;
    partitions = (context + kDecodePartition - 1) / kDecodePartition;
    const std::size_t per_op = kv_bytes_per_op();
    copies = static_cast<int>(std::clamp<std::size_t>((4 * l2 + per_op - 1) / std::max<std::size_t>(per_op, 1), 1, 64));
    pool_blocks = static_cast<std::size_t>(batch) * max_blocks * copies;
    const std::size_t block_elems = static_cast<std::size_t>(kv_heads) * block_size * head_dim;
    CAPCAL_CUDA(cudaMalloc(&k, pool_blocks * block_elems * 2));
    CAPCAL_CUDA(cudaMalloc(&v, pool_blocks * block_elems * 2));
    const std::size_t qn = static_cast<std::size_t>(batch) * q_heads * head_dim;
    CAPCAL_CUDA(cudaMalloc(&q, qn * 2));
    CAPCAL_CUDA(cudaMalloc(&out, qn * 2));
    CAPCAL_CUDA(cudaMalloc(&part_acc, qn * partitions * sizeof(float)));
    CAPCAL_CUDA(cudaMalloc(&part_max, static_cast<std::size_t>(batch) * q_heads * partitions * sizeof(float)));
    CAPCAL_CUDA(cudaMalloc(&part_sum, static_cast<std::size_t>(batch) * q_heads * partitions * sizeof(float)));
    fill_random(k, pool_blocks * block_elems, DType::kBF16, 11, 1.0f, s);
    fill_random(v, pool_blocks * block_elems, DType::kBF16, 12, 1.0f, s);
    fill_random(q, qn, DType::kBF16, 13, 1.0f, s);
    // Blocks scattered at random over the pool, as a paged cache holds them after some churn.
    std::vector<int> perm(pool_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937 rng(42);
    std::shuffle(perm.begin(), perm.end(), rng);
    CAPCAL_CUDA(cudaMalloc(&tables, perm.size() * sizeof(int)));
    CAPCAL_CUDA(cudaMemcpy(tables, perm.data(), perm.size() * sizeof(int), cudaMemcpyHostToDevice));
    CAPCAL_CUDA(cudaStreamSynchronize(s));
  }
  void release() {
    for (void* p : {static_cast<void*>(q), static_cast<void*>(k), static_cast<void*>(v), static_cast<void*>(out),
                    static_cast<void*>(tables), static_cast<void*>(part_acc), static_cast<void*>(part_max),
                    static_cast<void*>(part_sum)}) {
      if (p) cudaFree(p);
    }
    *this = DecodeBuffers{};
  }
};

template <int HD, int G>
void decode_launch_t(const DecodeBuffers& d, int copy, cudaStream_t s) {
  const int* tables = d.tables + static_cast<std::size_t>(copy) * d.batch * d.max_blocks;
  paged_decode_partial<HD, G><<<dim3(d.partitions, d.kv_heads, d.batch), kDecodeWarps * 32, 0, s>>>(
      d.q, d.k, d.v, tables, d.max_blocks, d.context, d.block_size, d.kv_heads, 1.0f / std::sqrt(static_cast<float>(HD)),
      d.part_acc, d.part_max, d.part_sum, d.partitions);
  paged_decode_combine<<<dim3(d.q_heads, d.batch), HD, 0, s>>>(d.part_acc, d.part_max, d.part_sum, d.out,
                                                              d.partitions, HD);
  CAPCAL_CUDA(cudaGetLastError());
}

template <int HD>
bool decode_launch_hd(const DecodeBuffers& d, int copy, cudaStream_t s) {
  switch (d.q_heads / d.kv_heads) {
    case 1: decode_launch_t<HD, 1>(d, copy, s); return true;
    case 2: decode_launch_t<HD, 2>(d, copy, s); return true;
    case 4: decode_launch_t<HD, 4>(d, copy, s); return true;
    case 8: decode_launch_t<HD, 8>(d, copy, s); return true;
    default: return false;
  }
}

bool decode_launch(const DecodeBuffers& d, int copy, cudaStream_t s) {
  if (d.q_heads % d.kv_heads != 0) return false;
  switch (d.head_dim) {
    case 64: return decode_launch_hd<64>(d, copy, s);
    case 128: return decode_launch_hd<128>(d, copy, s);
    case 256: return decode_launch_hd<256>(d, copy, s);
    default: return false;
  }
}

bool decode_supported(const AttentionShape& a) {
  const int g = a.kv_heads > 0 && a.q_heads % a.kv_heads == 0 ? a.q_heads / a.kv_heads : 0;
  return (g == 1 || g == 2 || g == 4 || g == 8) && (a.head_dim == 64 || a.head_dim == 128 || a.head_dim == 256);
}

}  // namespace

std::vector<DecodeResult> bench_decode(const BenchConfig& cfg, const std::vector<DecodeCase>& cases,
                                       std::vector<std::string>& notes) {
  std::vector<DecodeResult> out;
  cudaStream_t s;
  CAPCAL_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (const auto& c : cases) {
    if (!decode_supported(c.shape)) {
      notes.push_back("attention_decode: " + c.shape.label + " skipped: the kernel takes head_dim 64/128/256 and " +
                      "q_heads/kv_heads of 1, 2, 4 or 8");
      continue;
    }
    DecodeBuffers d;
    d.batch = c.batch;
    d.context = c.context;
    d.kv_heads = c.shape.kv_heads;
    d.head_dim = c.shape.head_dim;
    d.max_blocks = (c.context + d.block_size - 1) / d.block_size;
    std::size_t free_b = 0, total_b = 0;
    CAPCAL_CUDA(cudaMemGetInfo(&free_b, &total_b));
    if (d.kv_bytes_per_op() > free_b / 3) {
      notes.push_back("attention_decode: batch " + std::to_string(c.batch) + " context " + std::to_string(c.context) +
                      " skipped: its KV cache does not fit in a third of free memory");
      continue;
    }
    d.allocate(c, cfg.l2_bytes, s);
    DecodeResult r;
    r.c = c;
    r.block_size = d.block_size;
    r.seconds = time_op(cfg, s, [&](long long i) { decode_launch(d, static_cast<int>(i % d.copies), s); }, &r.timing);
    out.push_back(r);
    if (cfg.verbose) {
      const double t = *std::min_element(r.seconds.begin(), r.seconds.end());
      std::printf("  decode %-14s batch %4d context %6d: %8.1f us, %.0f GB/s\n", c.shape.label.c_str(), c.batch,
                  c.context, t * 1e6, static_cast<double>(c.batch) * c.context * c.shape.kv_heads * c.shape.head_dim * 4 / t / 1e9);
    }
    d.release();
  }
  CAPCAL_CUDA(cudaStreamDestroy(s));
  return out;
}

// The decode kernel against the naive reference on a small GQA case of three partitions.
std::string check_decode_attention(cudaStream_t s) {
  DecodeCase c;
  c.shape = {8, 2, 128, "check"};
  c.batch = 3;
  c.context = 600;  // three partitions, the last one partial
  DecodeBuffers d;
  d.allocate(c, 0, s);
  // Larger queries make the softmax peaked, so a wrong weighting of the keys cannot hide
  // behind a near-uniform average.
  fill_random(d.q, static_cast<std::size_t>(c.batch) * c.shape.q_heads * c.shape.head_dim, DType::kBF16, 14, 8.0f, s);
  decode_launch(d, 0, s);
  float* ref = nullptr;
  const std::size_t n = static_cast<std::size_t>(c.batch) * c.shape.q_heads * c.shape.head_dim;
  CAPCAL_CUDA(cudaMalloc(&ref, n * sizeof(float)));
  reference_decode<<<dim3(c.shape.q_heads, c.batch), 128, c.context * sizeof(float), s>>>(
      d.q, d.k, d.v, d.tables, d.max_blocks, c.context, d.block_size, c.shape.kv_heads,
      c.shape.q_heads / c.shape.kv_heads, c.shape.head_dim, 1.0f / std::sqrt(128.0f), ref);
  CAPCAL_CUDA(cudaGetLastError());
  std::vector<std::uint16_t> got(n);
  std::vector<float> want(n);
  CAPCAL_CUDA(cudaMemcpyAsync(got.data(), d.out, n * 2, cudaMemcpyDeviceToHost, s));
  CAPCAL_CUDA(cudaMemcpyAsync(want.data(), ref, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  CAPCAL_CUDA(cudaStreamSynchronize(s));
  const std::string verdict = compare_with_reference(got, want, 2e-2);
  CAPCAL_CUDA(cudaFree(ref));
  d.release();
  return verdict;
}

}  // namespace capcal
