// How many threads capsim may use: $CAPSIM_THREADS (a positive count), else the CPUs this process
// may actually run on. The plan's parallel runs and a long run's end-of-run summaries both ask here.
#pragma once

#include <optional>
#include <string>

namespace capsim {

// $CAPSIM_THREADS when it is a positive count; else the smaller of the CPUs in this thread's
// affinity mask (taskset, a container's cpuset) and the cgroup's CPU quota rounded up (a
// container started with --cpus=2 on a 16-core host gets 2), and at least 1.
// std::thread::hardware_concurrency() counts every online CPU of the host and ignores both, so
// a plan in a 2-CPU container used to start one thread per host core, each then getting a
// fraction of a CPU and the runs finishing later than on 2 threads.
unsigned default_threads();

// What the machine's CPUs did between two moments: from /proc/stat's aggregate "cpu" line
// (jiffies over every CPU, and those idle or waiting on I/O), this process's CPU seconds
// (CLOCK_PROCESS_CPUTIME_ID) and the steady clock.
struct CpuSample {
  double total_jiffies = 0, idle_jiffies = 0;
  double process_cpu_s = 0, wall_s = 0;
};
// The CPUs this process could have used between `a` and `b` of a machine with `cpus` CPUs: those
// idle, plus those it used itself. Two idle cores and a process using neither: 2; two cores
// both busy with other sessions' work while it used 0.6 of one: 0.6. nullopt when the samples
// say nothing (no time passed, no jiffies counted).
std::optional<double> usable_cpus_between(const CpuSample& a, const CpuSample& b, unsigned cpus);

// How many of `wanted` threads a pool of plan's should start now: `wanted` when $CAPSIM_THREADS is
// set (the user chose) or when the machine's load cannot be read; else at most the CPUs this
// process could use over the last interval of at least 50 ms (usable_cpus_between, rounded to
// the nearest whole CPU, at least 1). On a machine whose cores other sessions keep busy, a second
// thread gets no more CPU than the first (Linux shares CPU time between sessions first:
// autogroups) and only adds its own overhead: `capsim plan` on 2 cores beside two spinning
// processes took 9.7-10.3 s with 2 threads and 7.8 s with 1. The answer never depends on the
// thread count (tests/plan/plan_verify_test.cc), only the wall time does.
unsigned pool_width(unsigned wanted);

// The CPUs a cgroup v2 `cpu.max` line ("QUOTA PERIOD", or "max PERIOD" for no limit) allows,
// rounded up: "150000 100000" -> 2. nullopt for no limit or a line it cannot read.
std::optional<unsigned> cpus_from_cgroup_cpu_max(const std::string& line);

}  // namespace capsim
