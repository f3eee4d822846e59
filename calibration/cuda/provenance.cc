#include "calibration/cuda/provenance.h"

#include "sim/core/wall_clock.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace capcal {
namespace {

// NVML through dlopen, so the program neither needs nvml.h nor links the driver library.
struct Nvml {
  using Init = int (*)();
  using DriverVersion = int (*)(char*, unsigned);
  using HandleByIndex = int (*)(unsigned, void**);
  using ClockInfo = int (*)(void*, int, unsigned*);
  using PowerLimit = int (*)(void*, unsigned*);
  void* lib = nullptr;
  Init init = nullptr;
  DriverVersion driver = nullptr;
  HandleByIndex handle = nullptr;
  ClockInfo clock = nullptr, max_clock = nullptr;
  PowerLimit power_limit = nullptr;
  bool ok = false;

  Nvml() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY);
    if (!lib) return;
    init = reinterpret_cast<Init>(dlsym(lib, "nvmlInit_v2"));
    driver = reinterpret_cast<DriverVersion>(dlsym(lib, "nvmlSystemGetDriverVersion"));
    handle = reinterpret_cast<HandleByIndex>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    clock = reinterpret_cast<ClockInfo>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    max_clock = reinterpret_cast<ClockInfo>(dlsym(lib, "nvmlDeviceGetMaxClockInfo"));
    power_limit = reinterpret_cast<PowerLimit>(dlsym(lib, "nvmlDeviceGetEnforcedPowerLimit"));
    ok = init && init() == 0;
  }
  static Nvml& get() {
    static Nvml n;
    return n;
  }
  // NVML numbers devices as the driver does; CUDA_VISIBLE_DEVICES may renumber them, so the
  // NVML index is the CUDA ordinal only when that variable is unset (noted in the profile).
  void* device(int index) const {
    void* h = nullptr;
    if (!ok || !handle || handle(static_cast<unsigned>(index), &h) != 0) return nullptr;
    return h;
  }
};

constexpr int kNvmlClockSm = 1, kNvmlClockMem = 2;

std::string driver_version() {
  Nvml& n = Nvml::get();
  if (n.ok && n.driver) {
    char buf[96] = {0};
    if (n.driver(buf, sizeof buf) == 0) return buf;
  }
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (std::getline(in, line)) {
    // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  ..."
    std::istringstream ss(line);
    std::string w, last;
    while (ss >> w) {
      if (!w.empty() && std::isdigit(static_cast<unsigned char>(w[0])) && w.find('.') != std::string::npos) return w;
    }
  }
  return "unknown";
}

std::string version_string(int v) {  // 12080 -> "12.8"
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

}  // namespace

nlohmann::json current_clocks(int device) {
  nlohmann::json j = nlohmann::json::object();
  Nvml& n = Nvml::get();
  void* h = n.device(device);
  if (!h) return j;
  unsigned v = 0;
  if (n.clock && n.clock(h, kNvmlClockSm, &v) == 0) j["sm_mhz"] = v;
  if (n.clock && n.clock(h, kNvmlClockMem, &v) == 0) j["memory_mhz"] = v;
  return j;
}

nlohmann::json device_provenance(BenchConfig& cfg, const std::string& command_line) {
  cudaDeviceProp p{};
  CAPCAL_CUDA(cudaGetDeviceProperties(&p, cfg.device));
  cfg.sms = p.multiProcessorCount;
  cfg.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
  cfg.cc_major = p.major;
  cfg.cc_minor = p.minor;
  int clock_khz = 0, mem_khz = 0, bus_bits = 0, count = 0, drv = 0, rt = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, cfg.device);
  cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, cfg.device);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, cfg.device);
  cudaGetDeviceCount(&count);
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);

  nlohmann::json clocks = {{"sm_max_mhz_cuda", clock_khz / 1000}, {"memory_max_mhz_cuda", mem_khz / 1000}};
  Nvml& n = Nvml::get();
  if (void* h = n.device(cfg.device)) {
    unsigned v = 0;
    if (n.max_clock && n.max_clock(h, kNvmlClockSm, &v) == 0) clocks["sm_max_mhz"] = v;
    if (n.max_clock && n.max_clock(h, kNvmlClockMem, &v) == 0) clocks["memory_max_mhz"] = v;
    clocks["at_start"] = current_clocks(cfg.device);
  }
  nlohmann::json j = {
      {"tool", std::string("capsim-calibrate ") + CAPSIM_VERSION},
      {"gpu_name", p.name},
      {"gpu_index", cfg.device},
      {"gpu_count", count},
      {"compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor)},
      {"sm_count", p.multiProcessorCount},
      {"memory_bytes", static_cast<double>(p.totalGlobalMem)},
      {"memory_bus_bits", bus_bits},
      {"l2_bytes", static_cast<double>(p.l2CacheSize)},
      {"ecc", p.ECCEnabled != 0},
      {"driver", driver_version()},
      {"cuda_driver_api", version_string(drv)},
      {"cuda_runtime", version_string(rt)},
      {"cublaslt", std::to_string(cublasLtGetVersion())},
      {"clocks", clocks},
      {"date", capsim::utc_now()},
      {"command_line", command_line},
      {"hostname", host},
  };
  if (n.ok) {
    if (void* h = n.device(cfg.device)) {
      unsigned mw = 0;
      if (n.power_limit && n.power_limit(h, &mw) == 0) j["power_limit_w"] = mw / 1000.0;
    }
  }
  if (const char* vis = std::getenv("CUDA_VISIBLE_DEVICES")) {
    j["cuda_visible_devices"] = vis;
  }
  return j;
}

}  // namespace capcal
