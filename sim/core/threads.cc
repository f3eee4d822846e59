#include "sim/core/threads.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
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

}  // namespace capsim
