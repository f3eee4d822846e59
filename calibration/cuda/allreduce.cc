// NCCL all-reduce across the GPUs of this process (ncclCommInitAll, one thread), bf16 sum, as
// tensor parallelism all-reduces the hidden state. Compiled to a note when NCCL is absent.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "calibration/cuda/bench.h"

#ifdef CAPSIM_HAVE_NCCL
#include <nccl.h>
#endif

namespace capcal {

#ifdef CAPSIM_HAVE_NCCL

namespace {

#define CAPCAL_NCCL(call)                                                                        \
  do {                                                                                           \
    const ncclResult_t capcal_r_ = (call);                                                       \
    if (capcal_r_ != ncclSuccess) {                                                              \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + \
                               #call + ": " + ncclGetErrorString(capcal_r_));                    \
    }                                                                                            \
  } while (0)

}  // namespace

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "";
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::vector<AllReduceResult> bench_allreduce(const BenchConfig& cfg, int gpus, const std::vector<double>& sizes,
                                             std::vector<std::string>& notes) {
  std::vector<AllReduceResult> out;
  int visible = 0;
  CAPCAL_CUDA(cudaGetDeviceCount(&visible));
  if (gpus <= 0) gpus = visible;
  gpus = std::min(gpus, visible);
  if (gpus < 2) {
    notes.push_back("allreduce: skipped: " + std::to_string(visible) + " GPU visible (needs 2 or more)");
    return out;
  }
  std::vector<int> devs(gpus);
  for (int i = 0; i < gpus; ++i) devs[i] = i;
  std::vector<ncclComm_t> comms(gpus);
  CAPCAL_NCCL(ncclCommInitAll(comms.data(), gpus, devs.data()));
  std::vector<cudaStream_t> streams(gpus);
  std::vector<void*> bufs(gpus, nullptr);
  const double max_bytes = *std::max_element(sizes.begin(), sizes.end());
  for (int i = 0; i < gpus; ++i) {
    CAPCAL_CUDA(cudaSetDevice(devs[i]));
    CAPCAL_CUDA(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
    CAPCAL_CUDA(cudaMalloc(&bufs[i], static_cast<std::size_t>(max_bytes)));
    fill_random(bufs[i], static_cast<std::size_t>(max_bytes) / 2, DType::kBF16, 100 + i, 1e-3f, streams[i]);
  }
  const auto run = [&](std::size_t count, int times) {
    for (int t = 0; t < times; ++t) {
      CAPCAL_NCCL(ncclGroupStart());
      for (int i = 0; i < gpus; ++i) {
        CAPCAL_NCCL(ncclAllReduce(bufs[i], bufs[i], count, ncclBfloat16, ncclSum, comms[i], streams[i]));
      }
      CAPCAL_NCCL(ncclGroupEnd());
    }
  };
  const auto sync_all = [&] {
    for (int i = 0; i < gpus; ++i) {
      CAPCAL_CUDA(cudaSetDevice(devs[i]));
      CAPCAL_CUDA(cudaStreamSynchronize(streams[i]));
    }
  };
  CAPCAL_CUDA(cudaSetDevice(devs[0]));
  cudaEvent_t a, b;
  CAPCAL_CUDA(cudaEventCreate(&a));
  CAPCAL_CUDA(cudaEventCreate(&b));
  for (const double bytes : sizes) {
    const std::size_t count = static_cast<std::size_t>(bytes) / 2;
    if (count == 0) continue;
    run(count, cfg.warmup + 2);
    sync_all();
    // Reps so that a sample lasts ~target (estimated from one timed op).
    CAPCAL_CUDA(cudaSetDevice(devs[0]));
    CAPCAL_CUDA(cudaEventRecord(a, streams[0]));
    run(count, 1);
    CAPCAL_CUDA(cudaSetDevice(devs[0]));
    CAPCAL_CUDA(cudaEventRecord(b, streams[0]));
    sync_all();
    float ms = 0;
    CAPCAL_CUDA(cudaEventElapsedTime(&ms, a, b));
    const int reps = std::clamp(static_cast<int>(cfg.target_sample_s / std::max(ms / 1e3, 1e-6)), 1, 200);
    AllReduceResult r;
    r.gpus = gpus;
    r.bytes = static_cast<double>(count * 2);
    for (int sample = 0; sample < cfg.samples; ++sample) {
      sync_all();
      CAPCAL_CUDA(cudaSetDevice(devs[0]));
      CAPCAL_CUDA(cudaEventRecord(a, streams[0]));
      run(count, reps);
      CAPCAL_CUDA(cudaSetDevice(devs[0]));
      CAPCAL_CUDA(cudaEventRecord(b, streams[0]));
      sync_all();
      CAPCAL_CUDA(cudaEventElapsedTime(&ms, a, b));
      r.seconds.push_back(ms / 1e3 / reps);
    }
    if (cfg.verbose) {
      const double t = *std::min_element(r.seconds.begin(), r.seconds.end());
      std::printf("  allreduce %d GPUs %10.0f B: %8.1f us, bus %.0f GB/s\n", gpus, r.bytes, t * 1e6,
                  2.0 * (gpus - 1) / gpus * r.bytes / t / 1e9);
    }
    out.push_back(r);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  for (int i = 0; i < gpus; ++i) {
    CAPCAL_CUDA(cudaSetDevice(devs[i]));
    cudaFree(bufs[i]);
    cudaStreamDestroy(streams[i]);
    ncclCommDestroy(comms[i]);
  }
  CAPCAL_CUDA(cudaSetDevice(cfg.device));
  return out;
}

#else

std::string nccl_version() { return ""; }

std::vector<AllReduceResult> bench_allreduce(const BenchConfig&, int, const std::vector<double>&,
                                             std::vector<std::string>& notes) {
  notes.push_back("allreduce: skipped: capsim-calibrate was built without NCCL");
  return {};
}

#endif

}  // namespace capcal
