#include "sim/core/threads.h"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

namespace capsim {

std::optional<unsigned> cpus_from_cgroup_cpu_max(const std::string& line) {
  std::istringstream in(line);
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return std::nullopt;
  char* end = nullptr;
  const double q = std::strtod(quota.c_str(), &end);
  if (end == quota.c_str() || *end != '\0' || !(q > 0)) return std::nullopt;
  return static_cast<unsigned>(std::max(1.0, std::ceil(q / period)));
}

unsigned default_threads() {
  if (const char* env = std::getenv("CAPSIM_THREADS")) {
    const int n = std::atoi(env);
    if (n >= 1) return static_cast<unsigned>(n);
  }
  unsigned n = std::thread::hardware_concurrency();
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0) {
    const int allowed = CPU_COUNT(&mask);
    if (allowed > 0 && (n == 0 || static_cast<unsigned>(allowed) < n)) n = static_cast<unsigned>(allowed);
  }
  // cgroup v2, as a container sees its own group at the root of its cgroup namespace.
  std::ifstream cpu_max("/sys/fs/cgroup/cpu.max");
  std::string line;
  if (cpu_max && std::getline(cpu_max, line)) {
    if (const auto quota = cpus_from_cgroup_cpu_max(line); quota && (n == 0 || *quota < n)) n = *quota;
  }
  return n ? n : 1;
}

std::optional<double> usable_cpus_between(const CpuSample& a, const CpuSample& b, unsigned cpus) {
  const double jiffies = b.total_jiffies - a.total_jiffies, wall = b.wall_s - a.wall_s;
  if (!(jiffies > 0) || !(wall > 0) || cpus == 0) return std::nullopt;
  const double idle = std::clamp((b.idle_jiffies - a.idle_jiffies) / jiffies, 0.0, 1.0) * cpus;
  const double own = std::max(0.0, (b.process_cpu_s - a.process_cpu_s) / wall);
  return std::min(static_cast<double>(cpus), idle + own);
}

namespace {

// Now, or nullopt where /proc/stat cannot be read (not Linux, a sandbox).
std::optional<CpuSample> sample_cpus() {
  std::ifstream stat("/proc/stat");
  std::string label;
  if (!(stat >> label) || label != "cpu") return std::nullopt;
  // user nice system idle iowait irq softirq steal (guest time is inside user already)
  double f[8] = {};
  for (double& x : f) {
    if (!(stat >> x)) return std::nullopt;
  }
  CpuSample s;
  for (double x : f) s.total_jiffies += x;
  s.idle_jiffies = f[3] + f[4];
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  s.process_cpu_s = static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return s;
}

}  // namespace

unsigned pool_width(unsigned wanted) {
  if (wanted <= 1) return std::max(1u, wanted);
  if (const char* env = std::getenv("CAPSIM_THREADS"); env && std::atoi(env) >= 1) return wanted;
  static std::mutex m;
  static std::optional<CpuSample> last;
  static std::optional<double> usable;
  const std::lock_guard<std::mutex> lock(m);
  const std::optional<CpuSample> now = sample_cpus();
  if (!now) return wanted;
  if (!last) {
    last = now;  // the first pool starts as wide as asked; later ones follow the machine
    return wanted;
  }
  // Every 50 ms at most; before a first estimate, from any interval /proc/stat counted ticks in
  // (10 ms each at the usual 100 Hz), so that the first pools follow the machine too.
  if (now->wall_s - last->wall_s >= 0.05 || (!usable && now->total_jiffies > last->total_jiffies)) {
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    usable = usable_cpus_between(*last, *now, online > 0 ? static_cast<unsigned>(online) : 1u);
    last = now;
  }
  if (!usable) return wanted;
  const unsigned cpus = static_cast<unsigned>(std::max(1.0, std::floor(*usable + 0.5)));
  return std::min(wanted, cpus);
}

}  // namespace capsim
