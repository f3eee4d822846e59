// A measured calibration profile: what `capsim-calibrate` (calibration/cuda) writes, or what the
// Vidur reader (vidur.h) turns Vidur's per-operator CSVs into. Format: docs/calibration.md#profile.
//
// Contract: load_profile / parse_profile accept exactly the documented JSON and refuse anything
// else with capsim::Error "<file>: <field>: <what is wrong>; accepted: <what is>". Every timing is
// a list of repetitions in seconds; the fit uses their median.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/hardware/precision.h"

namespace capsim::calibration {

inline constexpr const char* kProfileFormat = "capsim-calibration-profile";
inline constexpr int kProfileVersion = 1;

struct Provenance {
  std::string gpu_name;            // as the driver names it: "NVIDIA H100 80GB HBM3"
  std::string compute_capability;  // "9.0"
  std::string date;                // ISO 8601, UTC
  std::string driver, cuda_runtime, hostname, command_line;
  double l2_bytes = 0;             // 0 = unknown
  nlohmann::json raw;              // the whole object, copied into the fitted card profile
};

// One dense GEMM Y[m,n] = X[m,k] W[n,k]^T as a linear layer runs it: m tokens, n outputs, k
// inputs. fp16/bf16 inputs with 16-bit output; fp8 (e4m3) inputs with bf16 output.
struct GemmSample {
  Precision dtype = Precision::kBf16;
  std::int64_t m = 0, n = 0, k = 0;
  std::string label;  // "llama-3.1-8b qkv_proj"
  std::vector<double> seconds;
};

// A streaming kernel over a buffer: "read" (reads buffer_bytes) or "copy" (reads and writes
// buffer_bytes each). bytes_moved is what crosses the memory bus per call.
struct BandwidthSample {
  std::string kernel;
  double buffer_bytes = 0;
  double bytes_moved = 0;
  std::vector<double> seconds;
};

// Decode attention: `batch` sequences, one query token each, over `context` cached tokens each.
struct AttentionDecodeSample {
  std::int64_t batch = 0, context = 0, q_heads = 0, kv_heads = 0, head_dim = 0, block_size = 0;
  double kv_element_bytes = 2;
  std::string kernel;
  std::vector<double> seconds;
};

// Causal prefill attention: `batch` sequences of `tokens` new tokens after `cached` ones.
struct AttentionPrefillSample {
  std::int64_t batch = 0, tokens = 0, cached = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  double kv_element_bytes = 2;
  std::string kernel;
  std::vector<double> seconds;
};

struct LaunchStats {
  bool present = false;
  std::vector<double> launch_s;              // one empty kernel, back-to-back stream launches
  std::vector<double> graph_kernel_s;        // one empty kernel inside a replayed CUDA graph
  std::vector<double> small_kernel_graph_s;  // one small real kernel inside a CUDA graph
  std::string small_kernel;                  // what that kernel is
};

struct AllReduceSample {
  int gpus = 0;
  double bytes = 0;
  std::vector<double> seconds;
};

struct Profile {
  std::string path;    // where it was read from (for messages and provenance)
  std::string source;  // "capsim-calibrate" or "vidur"
  Provenance provenance;
  std::vector<GemmSample> gemm;
  std::vector<BandwidthSample> bandwidth;
  std::vector<AttentionDecodeSample> attention_decode;
  std::vector<AttentionPrefillSample> attention_prefill;
  LaunchStats launch;
  std::vector<AllReduceSample> allreduce;
};

// Reads a capsim-calibrate profile. Throws capsim::Error for an unreadable file, malformed JSON
// or any field that is missing, of the wrong type or out of range.
Profile load_profile(const std::string& path);
// The same from parsed JSON; `where` names the file in messages.
Profile parse_profile(const nlohmann::json& j, const std::string& where);

// Median of repetitions. REQUIRES: non-empty.
double median(std::vector<double> v);
// The q-quantile (0..1) by linear interpolation. REQUIRES: non-empty.
double quantile(std::vector<double> v, double q);

}  // namespace capsim::calibration
