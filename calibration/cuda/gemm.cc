// cuBLASLt GEMMs at serving shapes: Y[m,n] = X[m,k] · W[n,k]ᵀ, as a linear layer runs them
// (row-major activations X, weights W stored [out, in] as PyTorch and vLLM keep them). In
// cuBLAS's column-major terms that is Yᵀ (n x m) = op_T(W) · Xᵀ, the "TN" layout FP8 requires.
// fp16/bf16 inputs write 16-bit outputs; fp8 (e4m3) inputs write bf16. Compute is fp32 accumulate,
// the rate the card files quote. The algorithm is cuBLASLt's first heuristic choice, as a
// framework would get it.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "calibration/cuda/bench.h"

namespace capcal {
namespace {

#define CAPCAL_LT(call)                                                                           \
  do {                                                                                            \
    const cublasStatus_t capcal_st_ = (call);                                                     \
    if (capcal_st_ != CUBLAS_STATUS_SUCCESS) {                                                    \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " +  \
                               #call + ": cuBLAS status " + std::to_string(static_cast<int>(capcal_st_))); \
    }                                                                                             \
  } while (0)

constexpr std::size_t kWorkspace = 32u << 20;

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::kF16: return CUDA_R_16F;
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kFP8E4M3: return CUDA_R_8F_E4M3;
  }
  return CUDA_R_16BF;
}

DType out_type(DType d) { return d == DType::kFP8E4M3 ? DType::kBF16 : d; }

// One planned GEMM: descriptors, layouts and the heuristic's algorithm.
class Plan {
 public:
  Plan(cublasLtHandle_t lt, DType dt, std::int64_t m, std::int64_t n, std::int64_t k) : lt_(lt) {
    CAPCAL_LT(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t t = CUBLAS_OP_T, nop = CUBLAS_OP_N;
    CAPCAL_LT(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    CAPCAL_LT(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &nop, sizeof nop));
    CAPCAL_LT(cublasLtMatrixLayoutCreate(&a_, cuda_type(dt), k, n, k));        // W as k x n, ld k
    CAPCAL_LT(cublasLtMatrixLayoutCreate(&b_, cuda_type(dt), k, m, k));        // X as k x m, ld k
    CAPCAL_LT(cublasLtMatrixLayoutCreate(&c_, cuda_type(out_type(dt)), n, m, n));  // Y as n x m
    CAPCAL_LT(cublasLtMatmulPreferenceCreate(&pref_));
    const std::size_t ws = kWorkspace;
    CAPCAL_LT(cublasLtMatmulPreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    int found = 0;
    CAPCAL_LT(cublasLtMatmulAlgoGetHeuristic(lt_, desc_, a_, b_, c_, c_, pref_, 1, &heuristic_, &found));
    if (found == 0) throw std::runtime_error("cuBLASLt has no algorithm for this GEMM");
  }
  ~Plan() {
    cublasLtMatmulPreferenceDestroy(pref_);
    cublasLtMatrixLayoutDestroy(a_);
    cublasLtMatrixLayoutDestroy(b_);
    cublasLtMatrixLayoutDestroy(c_);
    cublasLtMatmulDescDestroy(desc_);
  }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  void run(const void* w, const void* x, void* y, void* workspace, cudaStream_t s) const {
    const float alpha = 1.0f, beta = 0.0f;
    CAPCAL_LT(cublasLtMatmul(lt_, desc_, &alpha, w, a_, x, b_, &beta, y, c_, y, c_, &heuristic_.algo,
                             workspace, kWorkspace, s));
  }

 private:
  cublasLtHandle_t lt_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic_{};
};

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { CAPCAL_CUDA(cudaMalloc(&p, std::max<std::size_t>(bytes, 256))); }
  ~DeviceBuffer() {
    if (p) cudaFree(p);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

bool fp8_supported(const BenchConfig& cfg) { return cfg.cc_major * 10 + cfg.cc_minor >= 89; }

}  // namespace

std::vector<GemmResult> bench_gemm(const BenchConfig& cfg, const std::vector<GemmShape>& shapes,
                                   const std::vector<std::int64_t>& ms, const std::vector<DType>& dtypes,
                                   std::vector<std::string>& notes) {
  std::vector<GemmResult> out;
  cublasLtHandle_t lt;
  CAPCAL_LT(cublasLtCreate(&lt));
  cudaStream_t s;
  CAPCAL_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  DeviceBuffer workspace(kWorkspace);
  for (const DType dt : dtypes) {
    if (dt == DType::kFP8E4M3 && !fp8_supported(cfg)) {
      notes.push_back("gemm: fp8 skipped: compute capability " + std::to_string(cfg.cc_major) + "." +
                      std::to_string(cfg.cc_minor) + " < 8.9 has no fp8 tensor cores");
      continue;
    }
    const std::size_t eb = dtype_bytes(dt), ob = dtype_bytes(out_type(dt));
    for (const auto& shape : shapes) {
      const std::int64_t m_max = *std::max_element(ms.begin(), ms.end());
      // Weight copies rotate so that consecutive GEMMs read W from DRAM, not L2.
      const std::size_t w_bytes = static_cast<std::size_t>(shape.n * shape.k) * eb;
      std::size_t copies = std::clamp<std::size_t>((4 * cfg.l2_bytes + w_bytes - 1) / w_bytes, 1, 64);
      std::size_t free_b = 0, total_b = 0;
      CAPCAL_CUDA(cudaMemGetInfo(&free_b, &total_b));
      const std::size_t xy = static_cast<std::size_t>(m_max) * (shape.k * eb + shape.n * ob);
      if (w_bytes + xy > free_b * 0.8) {
        notes.push_back("gemm: " + shape.label + " skipped: does not fit in free memory");
        continue;
      }
      const double room = std::max(0.0, (static_cast<double>(free_b) * 0.5 - static_cast<double>(xy)) /
                                            static_cast<double>(w_bytes));
      copies = std::max<std::size_t>(1, std::min(copies, static_cast<std::size_t>(room)));
      DeviceBuffer w(w_bytes * copies);
      DeviceBuffer x(static_cast<std::size_t>(m_max * shape.k) * eb);
      DeviceBuffer y(static_cast<std::size_t>(m_max * shape.n) * ob);
      // Values ~U(-1,1)/sqrt(k) keep outputs O(1) in every dtype (no inf in fp16 or fp8 ranges).
      const float scale = dt == DType::kFP8E4M3 ? 1.0f : 1.0f / std::sqrt(static_cast<float>(shape.k));
      fill_random(w.p, static_cast<std::size_t>(shape.n * shape.k) * copies, dt, 1, scale, s);
      fill_random(x.p, static_cast<std::size_t>(m_max * shape.k), dt, 2, 1.0f, s);
      CAPCAL_CUDA(cudaStreamSynchronize(s));
      for (const std::int64_t m : ms) {
        GemmResult r;
        r.dtype = dtype_name(dt);
        r.label = shape.label;
        r.m = m;
        r.n = shape.n;
        r.k = shape.k;
        try {
          const Plan plan(lt, dt, m, shape.n, shape.k);
          r.seconds = time_op(cfg, s, [&](long long i) {
            const char* wp = static_cast<const char*>(w.p) + (static_cast<std::size_t>(i) % copies) * w_bytes;
            plan.run(wp, x.p, y.p, workspace.p, s);
          }, &r.timing);
        } catch (const std::exception& e) {
          notes.push_back(std::string("gemm: ") + r.dtype + " m=" + std::to_string(m) + " n=" + std::to_string(shape.n) +
                          " k=" + std::to_string(shape.k) + " failed: " + e.what());
          cudaGetLastError();
          CAPCAL_CUDA(cudaStreamSynchronize(s));
          continue;
        }
        if (cfg.verbose) {
          const double t = *std::min_element(r.seconds.begin(), r.seconds.end());
          std::printf("  gemm %-4s %-28s m=%6lld n=%6lld k=%6lld: %9.2f us %7.1f TFLOP/s %6.0f GB/s\n", r.dtype.c_str(),
                      shape.label.c_str(), static_cast<long long>(m), static_cast<long long>(shape.n),
                      static_cast<long long>(shape.k), t * 1e6, 2.0 * m * shape.n * shape.k / t / 1e12,
                      (static_cast<double>(m * shape.k + shape.n * shape.k) * eb + static_cast<double>(m * shape.n) * ob) /
                          t / 1e9);
        }
        out.push_back(std::move(r));
      }
    }
  }
  CAPCAL_CUDA(cudaStreamDestroy(s));
  cublasLtDestroy(lt);
  return out;
}

std::map<std::string, std::string> check_gemm(const BenchConfig& cfg, const std::vector<DType>& dtypes) {
  std::map<std::string, std::string> out;
  cublasLtHandle_t lt;
  CAPCAL_LT(cublasLtCreate(&lt));
  cudaStream_t s;
  CAPCAL_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  DeviceBuffer workspace(kWorkspace);
  const int m = 37, n = 96, k = 256;
  for (const DType dt : dtypes) {
    if (dt == DType::kFP8E4M3 && !fp8_supported(cfg)) continue;
    const std::string name = std::string("gemm_") + dtype_name(dt);
    try {
      DeviceBuffer w(static_cast<std::size_t>(n) * k * dtype_bytes(dt)), x(static_cast<std::size_t>(m) * k * dtype_bytes(dt));
      DeviceBuffer y(static_cast<std::size_t>(m) * n * 2), yf(static_cast<std::size_t>(m) * n * 4),
          ref(static_cast<std::size_t>(m) * n * 4);
      fill_random(w.p, static_cast<std::size_t>(n) * k, dt, 3, 0.5f, s);
      fill_random(x.p, static_cast<std::size_t>(m) * k, dt, 4, 0.5f, s);
      const Plan plan(lt, dt, m, n, k);
      plan.run(w.p, x.p, y.p, workspace.p, s);
      launch_reference_gemm(x.p, w.p, static_cast<float*>(ref.p), m, n, k, dt, s);
      launch_to_float(y.p, static_cast<float*>(yf.p), static_cast<std::size_t>(m) * n, out_type(dt), s);
      std::vector<float> got(static_cast<std::size_t>(m) * n), want(got.size());
      CAPCAL_CUDA(cudaMemcpyAsync(got.data(), yf.p, got.size() * 4, cudaMemcpyDeviceToHost, s));
      CAPCAL_CUDA(cudaMemcpyAsync(want.data(), ref.p, want.size() * 4, cudaMemcpyDeviceToHost, s));
      CAPCAL_CUDA(cudaStreamSynchronize(s));
      double worst = 0, norm = 0;
      bool finite = true;
      for (std::size_t i = 0; i < got.size(); ++i) {
        finite = finite && std::isfinite(got[i]);
        worst = std::max(worst, static_cast<double>(std::fabs(got[i] - want[i])));
        norm = std::max(norm, static_cast<double>(std::fabs(want[i])));
      }
      const double rel = worst / std::max(norm, 1e-6);
      char buf[128];
      std::snprintf(buf, sizeof buf, "%s (max error %.3g of max |y| %.3g)", finite && rel < 2e-2 ? "ok" : "FAILED",
                    worst, norm);
      out[name] = buf;
    } catch (const std::exception& e) {
      out[name] = std::string("FAILED (") + e.what() + ")";
      cudaGetLastError();
    }
  }
  CAPCAL_CUDA(cudaStreamDestroy(s));
  cublasLtDestroy(lt);
  return out;
}

}  // namespace capcal
