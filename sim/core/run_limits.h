// Limits on what one run may ask for: requests, users, replicas, cards. Input within the hard
// type limits (sim/core/checked.h) can still ask for hours of work and gigabytes of memory
// ("1000000000x h100-sxm", 2e9 requests); these limits stop such a run before it starts (or,
// for workloads whose size is not known up front, when it passes the limit) with a message that
// says how to lift them.
//
// Contract: check_run_limit throws capsim::Error "WHERE: N WHAT is more than one run may ask
// for (at most LIMIT ...); pass --allow-large to run it anyway" unless the limits were lifted.
// The limits are process-wide: a front end lifts them once (capsim's --allow-large), before any
// work starts. Lifting leaves the hard type limits in force.
#pragma once

#include <cstdint>
#include <string_view>

namespace capsim {

enum class RunLimit { kRequests, kUsers, kReplicas, kCards };

// The limit of each kind (defaults: 2e6 requests, 1e6 users, 1000 replicas, 8192 cards). Measured
// (docs/robustness.md): 1e6 requests take ~50 s and ~280 MB, 1e6 chat users for a minute ~56 s
// and ~880 MB.
std::int64_t run_limit(RunLimit kind);

// Sets one limit (a front end's own policy, or a test that needs a small one).
void set_run_limit(RunLimit kind, std::int64_t limit);
void lift_run_limits();
bool run_limits_lifted();

// Throws unless `asked` <= the limit of `kind` (or the limits are lifted).
void check_run_limit(RunLimit kind, double asked, std::string_view where);

}  // namespace capsim
