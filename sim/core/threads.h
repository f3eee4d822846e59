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

// The CPUs a cgroup v2 `cpu.max` line ("QUOTA PERIOD", or "max PERIOD" for no limit) allows,
// rounded up: "150000 100000" -> 2. nullopt for no limit or a line it cannot read.
std::optional<unsigned> cpus_from_cgroup_cpu_max(const std::string& line);

}  // namespace capsim
