// capsim-calibrate: what the benchmark parts share. Host-only declarations (no kernels), so
// both g++ (main.cc, gemm.cc, ...) and nvcc (kernels.cu) compile it.
//
// Every benchmark returns seconds per operation, one number per sample. A sample is `reps`
// back-to-back operations between two CUDA events, replayed from a CUDA graph when the
// operation can be captured (so CPU launch cost is not in the kernel time), divided by reps;
// reps is chosen so that one sample lasts about BenchConfig::target_sample_s. Warm-up runs
// precede the samples. Buffers that must come from DRAM rotate through copies that together
// exceed the L2 cache several times over.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace capcal {

// Throws std::runtime_error("<file>:<line>: <call>: <CUDA error>") on failure.
#define CAPCAL_CUDA(call)                                                                        \
  do {                                                                                           \
    const cudaError_t capcal_err_ = (call);                                                      \
    if (capcal_err_ != cudaSuccess) {                                                            \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + \
                               #call + ": " + cudaGetErrorString(capcal_err_));                  \
    }                                                                                            \
  } while (0)

struct BenchConfig {
  bool quick = false;
  int device = 0;
  int samples = 10;            // samples per configuration
  int warmup = 3;              // operations before timing
  double target_sample_s = 5e-3;
  std::size_t l2_bytes = 0;
  int sms = 0;
  int cc_major = 0, cc_minor = 0;
  bool verbose = false;
};

enum class DType { kF16, kBF16, kFP8E4M3 };
const char* dtype_name(DType d);
std::size_t dtype_bytes(DType d);

// Times `op(i)` (i = 0, 1, 2, ... so the caller can rotate buffers). Returns seconds per
// operation per sample; *mode says "graph" or "stream".
std::vector<double> time_op(const BenchConfig& cfg, cudaStream_t stream,
                            const std::function<void(long long i)>& op, std::string* mode = nullptr,
                            int max_reps = 1000);

// ---- kernels.cu ----
void fill_random(void* ptr, std::size_t elements, DType dtype, std::uint64_t seed, float scale,
                 cudaStream_t stream);
void launch_read(const void* buffer, std::size_t bytes, unsigned* sink, int blocks, cudaStream_t s);
void launch_copy(const void* src, void* dst, std::size_t bytes, int blocks, cudaStream_t s);
// A naive reference GEMM Y[m,n] = X[m,k] W[n,k]^T (float result) for the self-check.
void launch_reference_gemm(const void* x, const void* w, float* y, int m, int n, int k, DType dtype,
                           cudaStream_t s);
// Converts a 16-bit (bf16 output for fp8 GEMMs) matrix to float for the self-check.
void launch_to_float(const void* src, float* dst, std::size_t n, DType dtype, cudaStream_t s);

struct GemmResult {
  std::string dtype, label, timing;
  std::int64_t m = 0, n = 0, k = 0;
  std::vector<double> seconds;
};
struct BandwidthResult {
  std::string kernel;
  double buffer_bytes = 0, bytes_moved = 0;
  std::vector<double> seconds;
};
struct AttentionShape {
  int q_heads = 32, kv_heads = 8, head_dim = 128;
  std::string label;
};
struct DecodeCase {
  AttentionShape shape;
  int batch = 1, context = 1024;
};
struct DecodeResult {
  DecodeCase c;
  int block_size = 16;
  std::string timing;
  std::vector<double> seconds;
};
struct PrefillCase {
  AttentionShape shape;
  int batch = 1, tokens = 1024, cached = 0;
};
struct PrefillResult {
  PrefillCase c;
  std::string timing;
  std::vector<double> seconds;
};
struct LaunchResult {
  int kernels_per_sample = 0;
  std::vector<double> launch_s, graph_s, small_graph_s, roundtrip_s;
  std::string small_kernel;
};
struct AllReduceResult {
  int gpus = 0;
  double bytes = 0;
  std::vector<double> seconds;
};

struct GemmShape {
  std::int64_t n = 0, k = 0;
  std::string label;
};

// gemm.cc: cuBLASLt GEMMs for every dtype x shape x m. Appends notes (skipped dtypes, failures).
std::vector<GemmResult> bench_gemm(const BenchConfig& cfg, const std::vector<GemmShape>& shapes,
                                   const std::vector<std::int64_t>& ms, const std::vector<DType>& dtypes,
                                   std::vector<std::string>& notes);
// gemm.cc: cuBLASLt against the naive kernel on small shapes; name -> "ok ..." or "FAILED ...".
std::map<std::string, std::string> check_gemm(const BenchConfig& cfg, const std::vector<DType>& dtypes);

// kernels.cu
std::vector<BandwidthResult> bench_bandwidth(const BenchConfig& cfg, const std::vector<std::size_t>& sizes);
std::vector<DecodeResult> bench_decode(const BenchConfig& cfg, const std::vector<DecodeCase>& cases,
                                       std::vector<std::string>& notes);
std::vector<PrefillResult> bench_prefill(const BenchConfig& cfg, const std::vector<PrefillCase>& cases,
                                         std::vector<std::string>& notes);
LaunchResult bench_launch(const BenchConfig& cfg);
std::map<std::string, std::string> check_attention(const BenchConfig& cfg);
extern const char* const kDecodeKernelName;
extern const char* const kPrefillKernelName;

// allreduce.cc: NCCL all-reduce of bf16 buffers over `gpus` GPUs of this process; empty and a
// note when NCCL is not compiled in or fewer than 2 GPUs are visible.
std::vector<AllReduceResult> bench_allreduce(const BenchConfig& cfg, int gpus,
                                             const std::vector<double>& sizes,
                                             std::vector<std::string>& notes);
std::string nccl_version();

}  // namespace capcal
