// default_threads(): the CPUs a process may run on, not the host's.
#include <sched.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <optional>
#include <string>

#include "sim/core/threads.h"

TEST_CASE("cgroup cpu.max: the quota over the period, rounded up, no limit reads as none", "[threads]") {
  using capsim::cpus_from_cgroup_cpu_max;
  CHECK(cpus_from_cgroup_cpu_max("200000 100000") == std::optional<unsigned>(2));  // --cpus=2
  CHECK(cpus_from_cgroup_cpu_max("150000 100000\n") == std::optional<unsigned>(2));  // 1.5 CPUs: 2 threads
  CHECK(cpus_from_cgroup_cpu_max("50000 100000") == std::optional<unsigned>(1));  // half a CPU: still 1
  CHECK(cpus_from_cgroup_cpu_max("max 100000") == std::nullopt);
  CHECK(cpus_from_cgroup_cpu_max("") == std::nullopt);
  CHECK(cpus_from_cgroup_cpu_max("12x 100000") == std::nullopt);
  CHECK(cpus_from_cgroup_cpu_max("100000 0") == std::nullopt);
}

TEST_CASE("default_threads follows the affinity mask (taskset, cpuset), not the host's CPU count", "[threads]") {
  cpu_set_t before;
  REQUIRE(sched_getaffinity(0, sizeof(before), &before) == 0);
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c) {
    if (CPU_ISSET(c, &before)) first = c;
  }
  REQUIRE(first >= 0);
  const char* env = std::getenv("CAPSIM_THREADS");
  const std::string saved = env ? env : "";
  unsetenv("CAPSIM_THREADS");
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
  const unsigned on_one_cpu = capsim::default_threads();
  setenv("CAPSIM_THREADS", "3", 1);
  const unsigned asked = capsim::default_threads();
  sched_setaffinity(0, sizeof(before), &before);
  if (env) {
    setenv("CAPSIM_THREADS", saved.c_str(), 1);
  } else {
    unsetenv("CAPSIM_THREADS");
  }
  CHECK(on_one_cpu == 1u);
  CHECK(asked == 3u);  // an explicit count wins
}
