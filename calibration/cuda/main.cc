// capsim-calibrate: measures one GPU with CUDA microbenchmarks and writes a calibration profile
// (JSON, docs/calibration.md#profile) for `capsim calibrate fit PROFILE --card CARD`.
//
//   capsim-calibrate --quick --out h100.json        # estimated 1-2 minutes on an H100 (not yet timed)
//   capsim-calibrate --out h100.json                # the full sweep, several minutes
//   capsim-calibrate --config models/qwen2.5-7b/config.json --tp 1,2 --out q.json
//   capsim-calibrate --quick --gemm-grid --out h100.json   # then: capsim calibrate tables h100.json --card h100-sxm
//
// Benchmarks: cuBLASLt GEMMs at serving shapes (fp16, bf16, fp8 on compute capability >= 8.9),
// streaming read/copy bandwidth beyond L2, paged decode attention and causal prefill attention
// (capsim-calibrate's own kernels), kernel launch and CUDA-graph replay overhead, and NCCL
// all-reduce across the visible GPUs. Self-checks compare the GEMMs and attention kernels with
// naive reference kernels first.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "calibration/cuda/bench.h"
#include "calibration/cuda/provenance.h"

namespace {

using nlohmann::json;
using namespace capcal;

struct ModelShapes {
  std::string name;
  std::int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0;
};

const ModelShapes kLlama8B = {"llama-3.1-8b", 4096, 32, 8, 128, 14336};
const ModelShapes kLlama70B = {"llama-3.1-70b", 8192, 64, 8, 128, 28672};

ModelShapes read_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot read file");
  json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": malformed JSON: " + e.what());
  }
  if (j.contains("text_config") && j["text_config"].is_object()) j = j["text_config"];
  const auto get = [&](const char* key) -> std::int64_t {
    if (!j.contains(key) || !j[key].is_number_integer()) {
      throw std::runtime_error(path + ": " + key + ": missing or not a whole number");
    }
    return j[key].get<std::int64_t>();
  };
  ModelShapes m;
  m.name = std::filesystem::path(path).parent_path().filename().string();
  if (m.name.empty()) m.name = path;
  m.hidden = get("hidden_size");
  m.heads = get("num_attention_heads");
  m.kv_heads = j.contains("num_key_value_heads") && j["num_key_value_heads"].is_number_integer()
                   ? j["num_key_value_heads"].get<std::int64_t>()
                   : m.heads;
  m.head_dim = j.contains("head_dim") && j["head_dim"].is_number_integer() ? j["head_dim"].get<std::int64_t>()
                                                                           : m.hidden / m.heads;
  if (j.contains("moe_intermediate_size") && j["moe_intermediate_size"].is_number_integer()) {
    m.intermediate = j["moe_intermediate_size"].get<std::int64_t>();  // one expert's GEMM
  } else {
    m.intermediate = get("intermediate_size");
  }
  return m;
}

// The four linear layers of one TP shard (gate and up fused, as vLLM runs them).
void add_shapes(std::vector<GemmShape>& out, const ModelShapes& m, int tp) {
  const std::string tag = m.name + (tp > 1 ? " tp" + std::to_string(tp) : "");
  const std::int64_t q = m.heads * m.head_dim, kv = m.kv_heads * m.head_dim;
  const std::int64_t kv_shard = std::max<std::int64_t>(m.head_dim, kv / tp);
  out.push_back({q / tp + 2 * kv_shard, m.hidden, tag + " qkv_proj"});
  out.push_back({m.hidden, q / tp, tag + " o_proj"});
  out.push_back({2 * m.intermediate / tp, m.hidden, tag + " gate_up_proj"});
  out.push_back({m.hidden, m.intermediate / tp, tag + " down_proj"});
}

AttentionShape attention_of(const ModelShapes& m, int tp) {
  AttentionShape a;
  a.q_heads = static_cast<int>(m.heads / tp);
  a.kv_heads = static_cast<int>(std::max<std::int64_t>(1, m.kv_heads / tp));
  a.head_dim = static_cast<int>(m.head_dim);
  a.label = m.name + (tp > 1 ? " tp" + std::to_string(tp) : "");
  return a;
}

template <typename T>
std::vector<T> parse_list(const std::string& text, const char* flag) {
  std::vector<T> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    try {
      std::size_t used = 0;
      const double v = std::stod(item, &used);
      if (used != item.size() || v <= 0) throw std::invalid_argument(item);
      out.push_back(static_cast<T>(v));
    } catch (const std::exception&) {
      throw CLI::ValidationError(flag, "'" + item + "' is not a positive number");
    }
  }
  return out;
}

json seconds_json(const std::vector<double>& s) {
  json a = json::array();
  for (const double v : s) a.push_back(v);
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"capsim-calibrate: measure this GPU for `capsim calibrate fit` (docs/calibration.md)"};
  bool quick = false, quiet = false, gemm_grid = false;
  std::string out_path = "calibration-profile.json";
  int device = 0, samples = 0, warmup = 3, allreduce_gpus = 0;
  double target_ms = 0;
  std::vector<std::string> configs;
  std::string tp_list = "1", m_list, dtype_list = "fp16,bf16,fp8", skip_list;
  app.add_flag("--quick", quick, "a short sweep (estimated 1-2 minutes on an H100-class GPU)");
  app.add_option("--out,-o", out_path, "profile to write (JSON)")->capture_default_str();
  app.add_option("--device", device, "CUDA device ordinal")->capture_default_str();
  app.add_option("--config", configs,
                 "a model's config.json (e.g. models/llama-3.1-8b/config.json); repeatable. Default: "
                 "built-in Llama-3.1-8B and Llama-3.1-70B shapes");
  app.add_option("--tp", tp_list, "tensor-parallel shards of each --config model, e.g. 1,2,4")->capture_default_str();
  app.add_option("--m", m_list, "GEMM token counts M, e.g. 1,16,256,4096 (default: a sweep 1..16384)");
  app.add_option("--dtypes", dtype_list, "GEMM dtypes: fp16, bf16, fp8")->capture_default_str();
  app.add_flag("--gemm-grid", gemm_grid,
               "also time every n with every k of 1024..16384 (25 shapes), so that `capsim calibrate tables` "
               "can write all of them as a measured-kernel table");
  app.add_option("--samples", samples, "timed samples per configuration (default 5 quick, 10 full)");
  app.add_option("--warmup", warmup, "warm-up operations before timing")->capture_default_str();
  app.add_option("--target-ms", target_ms, "length of one timed sample (default 2 quick, 5 full)");
  app.add_option("--skip", skip_list, "benchmarks to skip: gemm,bandwidth,decode,prefill,launch,allreduce,checks");
  app.add_option("--allreduce-gpus", allreduce_gpus, "GPUs in the all-reduce (0 = all visible)")->capture_default_str();
  app.add_flag("--quiet,-q", quiet, "print only the summary");
  CLI11_PARSE(app, argc, argv);

  try {
    std::set<std::string> skip;
    {
      std::stringstream ss(skip_list);
      const std::set<std::string> known = {"gemm", "bandwidth", "decode", "prefill", "launch", "allreduce", "checks"};
      for (std::string s; std::getline(ss, s, ',');) {
        if (s.empty()) continue;
        if (!known.count(s)) {
          std::cerr << "capsim-calibrate: --skip: '" << s
                    << "' is not a benchmark; accepted: gemm, bandwidth, decode, prefill, launch, allreduce, checks\n";
          return 2;
        }
        skip.insert(s);
      }
    }
    std::vector<DType> dtypes;
    {
      std::stringstream ss(dtype_list);
      for (std::string s; std::getline(ss, s, ',');) {
        if (s == "fp16") dtypes.push_back(DType::kF16);
        else if (s == "bf16") dtypes.push_back(DType::kBF16);
        else if (s == "fp8") dtypes.push_back(DType::kFP8E4M3);
        else if (!s.empty()) {
          std::cerr << "capsim-calibrate: --dtypes: '" << s << "' is not a GEMM dtype; accepted: fp16, bf16, fp8\n";
          return 2;
        }
      }
    }
    std::string command_line;
    for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);

    BenchConfig cfg;
    cfg.quick = quick;
    cfg.device = device;
    cfg.samples = samples > 0 ? samples : (quick ? 5 : 10);
    cfg.warmup = warmup;
    cfg.target_sample_s = (target_ms > 0 ? target_ms : (quick ? 2.0 : 5.0)) / 1e3;
    cfg.verbose = !quiet;
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      std::cerr << "capsim-calibrate: no CUDA device (" << (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices")
                << "); run it on the GPU to calibrate\n";
      return 1;
    }
    if (device < 0 || device >= count) {
      std::cerr << "capsim-calibrate: --device: " << device << " is not a device; accepted: 0.." << count - 1 << "\n";
      return 2;
    }
    CAPCAL_CUDA(cudaSetDevice(device));
    const auto t_start = std::chrono::steady_clock::now();
    json prov = device_provenance(cfg, command_line);
    prov["mode"] = quick ? "quick" : "full";
    prov["samples_per_configuration"] = cfg.samples;
    prov["warmup"] = cfg.warmup;
    prov["target_sample_s"] = cfg.target_sample_s;
    prov["timing"] = "CUDA events around reps back-to-back operations (replayed from a CUDA graph where "
                     "capturable), divided by reps; weights and KV rotate through copies > 4x L2";
    prov["nccl"] = nccl_version();
    std::printf("capsim-calibrate: %s (cc %s, %d SMs, %.0f MB L2), %s mode\n", prov["gpu_name"].get<std::string>().c_str(),
                prov["compute_capability"].get<std::string>().c_str(), cfg.sms, cfg.l2_bytes / 1e6,
                quick ? "quick" : "full");

    // Shapes.
    std::vector<ModelShapes> models;
    std::vector<int> tps = parse_list<int>(tp_list, "--tp");
    std::vector<GemmShape> shapes;
    std::vector<AttentionShape> attn;
    if (configs.empty()) {
      add_shapes(shapes, kLlama8B, 1);
      attn.push_back(attention_of(kLlama8B, 1));
      for (const int tp : quick ? std::vector<int>{8} : std::vector<int>{1, 4, 8}) {
        add_shapes(shapes, kLlama70B, tp);
      }
      attn.push_back(attention_of(kLlama70B, 8));
      if (!quick) attn.push_back(attention_of(kLlama70B, 4));
    } else {
      for (const auto& c : configs) {
        const ModelShapes m = read_config(c);
        for (const int tp : tps) {
          add_shapes(shapes, m, tp);
          attn.push_back(attention_of(m, tp));
        }
      }
    }
    // Small GEMMs whose roofline time is below a kernel's minimum: they measure the floor.
    for (const std::int64_t s : quick ? std::vector<std::int64_t>{512, 1024} : std::vector<std::int64_t>{256, 512, 1024, 2048}) {
      shapes.push_back({s, s, "floor probe"});
    }
    // The measured-kernel table interpolates between (n, k) points, so it needs a complete grid.
    if (gemm_grid) {
      const std::vector<std::int64_t> sides = {1024, 2048, 4096, 8192, 16384};
      for (const std::int64_t n : sides) {
        for (const std::int64_t k : sides) shapes.push_back({n, k, "grid"});
      }
    }
    std::vector<std::int64_t> ms;
    if (!m_list.empty()) {
      ms = parse_list<std::int64_t>(m_list, "--m");
    } else if (quick) {
      ms = {1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
    } else {
      for (std::int64_t m = 1; m <= 16384; m *= 2) {
        ms.push_back(m);
        if (m >= 8 && m < 16384) ms.push_back(m * 3 / 2);
      }
    }

    json notes = json::array();
    std::vector<std::string> note_list;
    json checks = json::object();
    if (!skip.count("checks")) {
      std::printf("self-checks against reference kernels\n");
      for (const auto& [k, v] : check_gemm(cfg, dtypes)) checks[k] = v;
      for (const auto& [k, v] : check_attention(cfg)) checks[k] = v;
      for (const auto& [k, v] : checks.items()) {
        std::printf("  %-24s %s\n", k.c_str(), v.get<std::string>().c_str());
        if (v.get<std::string>().rfind("ok", 0) != 0) {
          note_list.push_back("self-check " + k + " " + v.get<std::string>() + ": treat that benchmark with suspicion");
        }
      }
    }
    prov["checks"] = checks;

    json profile = {{"format", "capsim-calibration-profile"}, {"version", 1}};
    if (!skip.count("gemm")) {
      std::printf("GEMMs (cuBLASLt): %zu shapes x %zu token counts x %zu dtypes\n", shapes.size(), ms.size(), dtypes.size());
      json a = json::array();
      for (const auto& r : bench_gemm(cfg, shapes, ms, dtypes, note_list)) {
        a.push_back({{"dtype", r.dtype}, {"m", r.m}, {"n", r.n}, {"k", r.k}, {"label", r.label},
                     {"timing", r.timing}, {"seconds", seconds_json(r.seconds)}});
      }
      profile["gemm"] = a;
    }
    if (!skip.count("bandwidth")) {
      std::printf("memory bandwidth (read, copy)\n");
      const std::vector<std::size_t> sizes =
          quick ? std::vector<std::size_t>{16u << 20, 256u << 20, 1u << 30, std::size_t{4} << 30}
                : std::vector<std::size_t>{1u << 20, 4u << 20, 16u << 20, 64u << 20, 256u << 20, 1u << 30,
                                           std::size_t{2} << 30, std::size_t{4} << 30, std::size_t{8} << 30};
      json a = json::array();
      for (const auto& r : bench_bandwidth(cfg, sizes)) {
        a.push_back({{"kernel", r.kernel}, {"buffer_bytes", r.buffer_bytes}, {"bytes_moved", r.bytes_moved},
                     {"in_l2", r.buffer_bytes < 4.0 * cfg.l2_bytes}, {"seconds", seconds_json(r.seconds)}});
      }
      profile["bandwidth"] = a;
    }
    if (!skip.count("decode")) {
      std::printf("decode attention over a paged KV cache (%s)\n", kDecodeKernelName);
      std::vector<DecodeCase> cases;
      for (std::size_t i = 0; i < attn.size(); ++i) {
        const std::vector<int> batches = quick ? (i == 0 ? std::vector<int>{1, 8, 32, 128} : std::vector<int>{1, 32, 128})
                                               : std::vector<int>{1, 4, 16, 64, 256};
        const std::vector<int> contexts = quick ? (i == 0 ? std::vector<int>{512, 2048, 8192} : std::vector<int>{2048, 8192})
                                                : std::vector<int>{128, 512, 2048, 8192, 32768};
        for (const int b : batches) {
          for (const int c : contexts) cases.push_back({attn[i], b, c});
        }
      }
      json a = json::array();
      for (const auto& r : bench_decode(cfg, cases, note_list)) {
        a.push_back({{"batch", r.c.batch}, {"context", r.c.context}, {"q_heads", r.c.shape.q_heads},
                     {"kv_heads", r.c.shape.kv_heads}, {"head_dim", r.c.shape.head_dim}, {"block_size", r.block_size},
                     {"kv_dtype", "bf16"}, {"label", r.c.shape.label}, {"kernel", kDecodeKernelName},
                     {"timing", r.timing}, {"seconds", seconds_json(r.seconds)}});
      }
      profile["attention_decode"] = a;
    }
    if (!skip.count("prefill")) {
      std::printf("prefill attention, causal (%s)\n", kPrefillKernelName);
      std::vector<PrefillCase> cases;
      for (std::size_t i = 0; i < attn.size(); ++i) {
        if (quick && i > 0) break;
        const std::vector<int> tokens = quick ? std::vector<int>{256, 1024, 4096, 8192}
                                              : std::vector<int>{128, 256, 512, 1024, 2048, 4096, 8192, 16384};
        for (const int t : tokens) cases.push_back({attn[i], 1, t, 0});
        cases.push_back({attn[i], 1, 1024, 3072});
        cases.push_back({attn[i], 4, 512, 0});
        if (!quick) {
          for (const int t : {512, 2048}) cases.push_back({attn[i], 1, t, 8192});
          cases.push_back({attn[i], 8, 1024, 0});
        }
      }
      json a = json::array();
      for (const auto& r : bench_prefill(cfg, cases, note_list)) {
        a.push_back({{"batch", r.c.batch}, {"tokens", r.c.tokens}, {"cached", r.c.cached},
                     {"q_heads", r.c.shape.q_heads}, {"kv_heads", r.c.shape.kv_heads}, {"head_dim", r.c.shape.head_dim},
                     {"dtype", "bf16"}, {"causal", true}, {"label", r.c.shape.label}, {"kernel", kPrefillKernelName},
                     {"timing", r.timing}, {"seconds", seconds_json(r.seconds)}});
      }
      profile["attention_prefill"] = a;
    }
    if (!skip.count("launch")) {
      std::printf("launch overhead\n");
      const LaunchResult r = bench_launch(cfg);
      profile["launch"] = {{"kernels_per_sample", r.kernels_per_sample},
                           {"empty_kernel_launch_s", seconds_json(r.launch_s)},
                           {"empty_kernel_graph_s", seconds_json(r.graph_s)},
                           {"small_kernel_graph_s", seconds_json(r.small_graph_s)},
                           {"small_kernel", r.small_kernel},
                           {"launch_and_sync_roundtrip_s", seconds_json(r.roundtrip_s)}};
      if (cfg.verbose) {
        const auto med = [](std::vector<double> v) {
          std::sort(v.begin(), v.end());
          return v[v.size() / 2];
        };
        std::printf("  per kernel: stream launch %.2f us, in a graph %.2f us, small kernel in a graph %.2f us, "
                    "launch+sync %.1f us\n",
                    med(r.launch_s) * 1e6, med(r.graph_s) * 1e6, med(r.small_graph_s) * 1e6, med(r.roundtrip_s) * 1e6);
      }
    }
    if (!skip.count("allreduce")) {
      std::vector<double> sizes;
      for (int p = quick ? 11 : 10; p <= (quick ? 27 : 30); p += quick ? 2 : 1) sizes.push_back(std::ldexp(1.0, p));
      json a = json::array();
      for (const auto& r : bench_allreduce(cfg, allreduce_gpus, sizes, note_list)) {
        a.push_back({{"gpus", r.gpus}, {"bytes", r.bytes}, {"dtype", "bf16"}, {"seconds", seconds_json(r.seconds)}});
      }
      profile["allreduce"] = a;
    }
    prov["clocks"]["at_end"] = current_clocks(cfg.device);
    prov["duration_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    profile["provenance"] = prov;
    for (const auto& n : note_list) notes.push_back(n);
    profile["notes"] = notes;

    // Written beside the target under a name of its own, created exclusively and never through
    // a link (a planted OUT.partial -> victim must not be written), then renamed into place.
    const std::string text = profile.dump(1) + "\n";
    std::string tmp;
    int fd = -1;
    for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
      tmp = out_path + "." + std::to_string(::getpid()) + "-" + std::to_string(attempt) + ".partial";
      fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
      if (fd < 0 && errno != EEXIST) break;
    }
    bool written = fd >= 0;
    for (std::size_t done = 0; written && done < text.size();) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) written = false; else done += static_cast<std::size_t>(n);
    }
    if (fd >= 0 && ::close(fd) != 0) written = false;
    std::error_code renamed;
    if (written) std::filesystem::rename(tmp, out_path, renamed);
    if (!written || renamed) {
      if (fd >= 0) ::unlink(tmp.c_str());
      std::cerr << "capsim-calibrate: --out: cannot write " << out_path << ": "
                << (renamed ? renamed.message() : std::string(std::strerror(errno))) << "\n";
      return 2;
    }
    std::printf("\nwrote %s (%.0f s)\n", out_path.c_str(), prov["duration_s"].get<double>());
    for (const auto& n : note_list) std::printf("  note: %s\n", n.c_str());
    std::printf("next: capsim calibrate fit %s --card <card>   (capsim list cards)\n", out_path.c_str());
    std::printf("      capsim calibrate tables %s --card <card>   (its GEMMs as measured-kernel tables%s)\n",
                out_path.c_str(), gemm_grid ? "" : "; --gemm-grid measures a complete grid");
    return 0;
  } catch (const std::exception& ex) {
    std::cerr << "capsim-calibrate: error: " << ex.what() << "\n";
    return 1;
  }
}
