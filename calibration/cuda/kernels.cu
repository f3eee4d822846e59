// capsim-calibrate's own kernels and the benchmarks built on them: timing, random fill, streaming
// read/copy, the reference GEMM, launch overhead and the attention self-checks (the attention
// kernels: decode_attention.cu, prefill_attention.cu). See bench.h for the timing method.
//
// These are deliberately simple kernels, not FlashAttention/FlashInfer: the attention
// efficiencies fitted from them are lower bounds of what a serving engine's kernels reach, and
// `capsim calibrate fit` reports them as diagnostics only (docs/calibration.md#attention).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <mma.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "calibration/cuda/attention_check.cuh"
#include "calibration/cuda/bench.h"

namespace capcal {


const char* dtype_name(DType d) {
  switch (d) {
    case DType::kF16: return "fp16";
    case DType::kBF16: return "bf16";
    case DType::kFP8E4M3: return "fp8";
  }
  return "?";
}

std::size_t dtype_bytes(DType d) { return d == DType::kFP8E4M3 ? 1 : 2; }

// ---------------------------------------------------------------------------------------------
// Timing.

namespace {

struct Events {
  cudaEvent_t a = nullptr, b = nullptr;
  Events() {
    CAPCAL_CUDA(cudaEventCreate(&a));
    CAPCAL_CUDA(cudaEventCreate(&b));
  }
  ~Events() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  double seconds() const {
    float ms = 0;
    CAPCAL_CUDA(cudaEventElapsedTime(&ms, a, b));
    return ms / 1e3;
  }
};

}  // namespace

std::vector<double> time_op(const BenchConfig& cfg, cudaStream_t stream,
                            const std::function<void(long long)>& op, std::string* mode, int max_reps) {
  long long next = 0;
  for (int i = 0; i < cfg.warmup; ++i) op(next++);
  CAPCAL_CUDA(cudaStreamSynchronize(stream));
  Events ev;
  const int probe = 3;
  CAPCAL_CUDA(cudaEventRecord(ev.a, stream));
  for (int i = 0; i < probe; ++i) op(next++);
  CAPCAL_CUDA(cudaEventRecord(ev.b, stream));
  CAPCAL_CUDA(cudaEventSynchronize(ev.b));
  const double one = std::max(ev.seconds() / probe, 1e-7);
  const int reps = std::clamp(static_cast<int>(std::ceil(cfg.target_sample_s / one)), 1, max_reps);

  cudaGraphExec_t exec = nullptr;
  if (reps > 1) {
    cudaGraph_t graph = nullptr;
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
      bool failed = false;
      try {
        for (int i = 0; i < reps; ++i) op(next + i);
      } catch (const std::exception&) {
        failed = true;
      }
      const cudaError_t end = cudaStreamEndCapture(stream, &graph);
      if (!failed && end == cudaSuccess && graph != nullptr &&
          cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
        exec = nullptr;
      }
      if (graph) cudaGraphDestroy(graph);
    }
    cudaGetLastError();  // a failed capture leaves a sticky-free error; clear it
    if (exec) {
      CAPCAL_CUDA(cudaGraphLaunch(exec, stream));  // upload and warm the graph once
      CAPCAL_CUDA(cudaStreamSynchronize(stream));
    }
  }
  if (mode) *mode = exec ? "graph" : "stream";
  std::vector<double> out;
  for (int s = 0; s < cfg.samples; ++s) {
    CAPCAL_CUDA(cudaEventRecord(ev.a, stream));
    if (exec) {
      CAPCAL_CUDA(cudaGraphLaunch(exec, stream));
    } else {
      for (int i = 0; i < reps; ++i) op(next + i);
    }
    CAPCAL_CUDA(cudaEventRecord(ev.b, stream));
    CAPCAL_CUDA(cudaEventSynchronize(ev.b));
    out.push_back(ev.seconds() / reps);
    next += exec ? 0 : reps;
  }
  if (exec) cudaGraphExecDestroy(exec);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Random fill, streaming kernels, reference GEMM.

namespace {

__device__ __forceinline__ float hash_uniform(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;  // [-1, 1)
}

__global__ void fill_kernel(void* p, std::size_t n, int dtype, std::uint64_t seed, float scale) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float v = hash_uniform(seed, i) * scale;
    if (dtype == 0) static_cast<__half*>(p)[i] = __float2half(v);
    else if (dtype == 1) static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v);
    else static_cast<__nv_fp8_e4m3*>(p)[i] = __nv_fp8_e4m3(v);
  }
}

__global__ void read_kernel(const uint4* __restrict__ p, std::size_t n, unsigned* sink) {
  unsigned acc = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = p[i], b = p[i + stride], c = p[i + 2 * stride], d = p[i + 3 * stride];
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = p[i];
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // keeps the loads; practically never true
}

__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

__device__ __forceinline__ float load_as_float(const void* p, std::size_t i, int dtype) {
  if (dtype == 0) return __half2float(static_cast<const __half*>(p)[i]);
  if (dtype == 1) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  return static_cast<float>(static_cast<const __nv_fp8_e4m3*>(p)[i]);
}

__global__ void reference_gemm_kernel(const void* x, const void* w, float* y, int m, int n, int k, int dtype) {
  const int row = blockIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m || col >= n) return;
  float acc = 0;
  for (int i = 0; i < k; ++i) {
    acc += load_as_float(x, static_cast<std::size_t>(row) * k + i, dtype) *
           load_as_float(w, static_cast<std::size_t>(col) * k + i, dtype);
  }
  y[static_cast<std::size_t>(row) * n + col] = acc;
}

__global__ void to_float_kernel(const void* src, float* dst, std::size_t n, int dtype) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    dst[i] = load_as_float(src, i, dtype);
  }
}

int dtype_code(DType d) { return d == DType::kF16 ? 0 : d == DType::kBF16 ? 1 : 2; }

int grid_for(std::size_t n, int threads) {
  return static_cast<int>(std::min<std::size_t>((n + threads - 1) / threads, 65535));
}

}  // namespace

void fill_random(void* ptr, std::size_t elements, DType dtype, std::uint64_t seed, float scale,
                 cudaStream_t stream) {
  if (elements == 0) return;
  fill_kernel<<<grid_for(elements, 256), 256, 0, stream>>>(ptr, elements, dtype_code(dtype), seed, scale);
  CAPCAL_CUDA(cudaGetLastError());
}

void launch_read(const void* buffer, std::size_t bytes, unsigned* sink, int blocks, cudaStream_t s) {
  read_kernel<<<blocks, 512, 0, s>>>(static_cast<const uint4*>(buffer), bytes / 16, sink);
  CAPCAL_CUDA(cudaGetLastError());
}

void launch_copy(const void* src, void* dst, std::size_t bytes, int blocks, cudaStream_t s) {
  copy_kernel<<<blocks, 512, 0, s>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), bytes / 16);
  CAPCAL_CUDA(cudaGetLastError());
}

void launch_reference_gemm(const void* x, const void* w, float* y, int m, int n, int k, DType dtype,
                           cudaStream_t s) {
  reference_gemm_kernel<<<dim3((n + 127) / 128, m), 128, 0, s>>>(x, w, y, m, n, k, dtype_code(dtype));
  CAPCAL_CUDA(cudaGetLastError());
}

void launch_to_float(const void* src, float* dst, std::size_t n, DType dtype, cudaStream_t s) {
  to_float_kernel<<<grid_for(n, 256), 256, 0, s>>>(src, dst, n, dtype_code(dtype));
  CAPCAL_CUDA(cudaGetLastError());
}

std::vector<BandwidthResult> bench_bandwidth(const BenchConfig& cfg, const std::vector<std::size_t>& sizes) {
  std::vector<BandwidthResult> out;
  cudaStream_t s;
  CAPCAL_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned* sink = nullptr;
  CAPCAL_CUDA(cudaMalloc(&sink, sizeof(unsigned)));
  const int blocks = std::max(1, cfg.sms) * 4;
  for (std::size_t want : sizes) {
    std::size_t free_b = 0, total_b = 0;
    CAPCAL_CUDA(cudaMemGetInfo(&free_b, &total_b));
    const std::size_t bytes = std::min(want, free_b / 3) / 4096 * 4096;
    if (bytes == 0) continue;
    void *src = nullptr, *dst = nullptr;
    CAPCAL_CUDA(cudaMalloc(&src, bytes));
    CAPCAL_CUDA(cudaMalloc(&dst, bytes));
    fill_random(src, bytes / 2, DType::kBF16, 7, 1.0f, s);
    CAPCAL_CUDA(cudaStreamSynchronize(s));
    BandwidthResult r;
    r.kernel = "read";
    r.buffer_bytes = static_cast<double>(bytes);
    r.bytes_moved = static_cast<double>(bytes);
    r.seconds = time_op(cfg, s, [&](long long) { launch_read(src, bytes, sink, blocks, s); });
    out.push_back(r);
    BandwidthResult c;
    c.kernel = "copy";
    c.buffer_bytes = static_cast<double>(bytes);
    c.bytes_moved = 2.0 * static_cast<double>(bytes);
    c.seconds = time_op(cfg, s, [&](long long) { launch_copy(src, dst, bytes, blocks, s); });
    out.push_back(c);
    CAPCAL_CUDA(cudaFree(src));
    CAPCAL_CUDA(cudaFree(dst));
    if (cfg.verbose) {
      std::printf("  bandwidth %8.1f MB: read %.0f GB/s, copy %.0f GB/s\n", bytes / 1e6,
                  r.bytes_moved / *std::min_element(r.seconds.begin(), r.seconds.end()) / 1e9,
                  c.bytes_moved / *std::min_element(c.seconds.begin(), c.seconds.end()) / 1e9);
    }
  }
  CAPCAL_CUDA(cudaFree(sink));
  CAPCAL_CUDA(cudaStreamDestroy(s));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Self-checks of the attention kernels against the naive references.

std::map<std::string, std::string> check_attention(const BenchConfig& cfg) {
  (void)cfg;
  std::map<std::string, std::string> out;
  cudaStream_t s;
  CAPCAL_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  out["attention_decode"] = check_decode_attention(s);
  for (const int hd : {64, 128}) out["attention_prefill_hd" + std::to_string(hd)] = check_prefill_attention(hd, s);
  CAPCAL_CUDA(cudaStreamDestroy(s));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Launch overhead.

namespace {

__global__ void empty_kernel() {}

// RMSNorm of one 4096-wide bf16 row: the smallest real kernel of a decode step.
__global__ void small_rmsnorm(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y, int hidden) {
  __shared__ float partial[8];
  float ss = 0;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = __bfloat162float(x[i]);
    ss += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += partial[w];
  const float inv = rsqrtf(total / hidden + 1e-5f);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) y[i] = __float2bfloat16(__bfloat162float(x[i]) * inv);
}

}  // namespace

LaunchResult bench_launch(const BenchConfig& cfg) {
  LaunchResult r;
  r.kernels_per_sample = cfg.quick ? 1000 : 4000;
  r.small_kernel = "RMSNorm of one 4096-wide bf16 row (256 threads)";
  const int n = r.kernels_per_sample;
  cudaStream_t s;
  CAPCAL_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  __nv_bfloat16 *x = nullptr, *y = nullptr;
  CAPCAL_CUDA(cudaMalloc(&x, 4096 * 2));
  CAPCAL_CUDA(cudaMalloc(&y, 4096 * 2));
  fill_random(x, 4096, DType::kBF16, 5, 1.0f, s);
  Events ev;
  for (int w = 0; w < 100; ++w) empty_kernel<<<1, 32, 0, s>>>();
  CAPCAL_CUDA(cudaStreamSynchronize(s));
  for (int k = 0; k < cfg.samples; ++k) {
    CAPCAL_CUDA(cudaEventRecord(ev.a, s));
    for (int i = 0; i < n; ++i) empty_kernel<<<1, 32, 0, s>>>();
    CAPCAL_CUDA(cudaEventRecord(ev.b, s));
    CAPCAL_CUDA(cudaEventSynchronize(ev.b));
    r.launch_s.push_back(ev.seconds() / n);
  }
  const auto graph_of = [&](bool small) {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t e = nullptr;
    CAPCAL_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < n; ++i) {
      if (small) small_rmsnorm<<<1, 256, 0, s>>>(x, y, 4096);
      else empty_kernel<<<1, 32, 0, s>>>();
    }
    CAPCAL_CUDA(cudaStreamEndCapture(s, &g));
    CAPCAL_CUDA(cudaGraphInstantiate(&e, g, 0));
    CAPCAL_CUDA(cudaGraphDestroy(g));
    return e;
  };
  for (const bool small : {false, true}) {
    cudaGraphExec_t e = graph_of(small);
    CAPCAL_CUDA(cudaGraphLaunch(e, s));
    CAPCAL_CUDA(cudaStreamSynchronize(s));
    for (int k = 0; k < cfg.samples; ++k) {
      CAPCAL_CUDA(cudaEventRecord(ev.a, s));
      CAPCAL_CUDA(cudaGraphLaunch(e, s));
      CAPCAL_CUDA(cudaEventRecord(ev.b, s));
      CAPCAL_CUDA(cudaEventSynchronize(ev.b));
      (small ? r.small_graph_s : r.graph_s).push_back(ev.seconds() / n);
    }
    CAPCAL_CUDA(cudaGraphExecDestroy(e));
  }
  // Host round trip: launch one empty kernel and wait for it.
  for (int k = 0; k < cfg.samples; ++k) {
    const int trips = 100;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < trips; ++i) {
      empty_kernel<<<1, 32, 0, s>>>();
      CAPCAL_CUDA(cudaStreamSynchronize(s));
    }
    r.roundtrip_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / trips);
  }
  CAPCAL_CUDA(cudaFree(x));
  CAPCAL_CUDA(cudaFree(y));
  CAPCAL_CUDA(cudaStreamDestroy(s));
  return r;
}

}  // namespace capcal
