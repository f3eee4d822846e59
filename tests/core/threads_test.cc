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

TEST_CASE("usable_cpus_between: the idle CPUs plus the ones this process used itself", "[threads]") {
  using capsim::CpuSample;
  using capsim::usable_cpus_between;
  // 2 CPUs for 1 s at 100 jiffies/s: 200 jiffies.
  const CpuSample a{1000, 400, 5.0, 10.0};
  // Both idle, the process asleep: 2 CPUs.
  CHECK(*usable_cpus_between(a, {1200, 600, 5.0, 11.0}, 2) == Approx(2.0));
  // Both busy with two spinners of other sessions while the process got 0.6 of a CPU: idle 0,
  // own 0.6 -> 0.6 (pool_width rounds to 1 thread).
  CHECK(*usable_cpus_between(a, {1200, 400, 5.6, 11.0}, 2) == Approx(0.6));
  // The process alone on both: idle 0, own 2 -> 2.
  CHECK(*usable_cpus_between(a, {1200, 400, 7.0, 11.0}, 2) == Approx(2.0));
  // One spinner, the process on the other CPU: 1 -> a second thread is worth nothing.
  CHECK(*usable_cpus_between(a, {1200, 400, 6.0, 11.0}, 2) == Approx(1.0));
  // A quarter idle (50 of 200 jiffies: 0.5 CPU) and 0.9 used: 1.4.
  CHECK(*usable_cpus_between(a, {1200, 450, 5.9, 11.0}, 2) == Approx(1.4));
  // Never more than the machine has (clock skew between the two sources).
  CHECK(*usable_cpus_between(a, {1200, 600, 6.5, 11.0}, 2) == Approx(2.0));
  // No time or no jiffies: nothing to say.
  CHECK_FALSE(usable_cpus_between(a, a, 2).has_value());
  CHECK_FALSE(usable_cpus_between(a, {1000, 400, 5.0, 11.0}, 2).has_value());
}

TEST_CASE("pool_width: $CAPSIM_THREADS is the user's choice and is never narrowed, and 1 stays 1", "[threads]") {
  const char* env = std::getenv("CAPSIM_THREADS");
  const std::optional<std::string> saved = env ? std::optional<std::string>(env) : std::nullopt;
  setenv("CAPSIM_THREADS", "8", 1);
  for (int i = 0; i < 3; ++i) CHECK(capsim::pool_width(8) == 8);
  CHECK(capsim::pool_width(1) == 1);
  CHECK(capsim::pool_width(0) == 1);
  if (saved) setenv("CAPSIM_THREADS", saved->c_str(), 1); else unsetenv("CAPSIM_THREADS");
  // Without it: between 1 and what was asked, whatever the machine is doing.
  if (!saved) {
    for (int i = 0; i < 3; ++i) {
      const unsigned w = capsim::pool_width(4);
      CHECK(w >= 1);
      CHECK(w <= 4);
    }
  }
}
