// Limits on what one run may ask for: requests, users, replicas, cards, and the memory the KV
// caches' bookkeeping implies. Input within the hard type limits (sim/core/checked.h) can still
// ask for hours of work and gigabytes of memory ("1000000000x h100-sxm", 2e9 requests, a 1e5 GiB
// CPU KV tier); these limits stop such a run before it starts (or, for workloads whose size is
// not known up front, when it passes the limit) with a message that says how to lift them.
//
// Contract: check_run_limit throws capsim::Error "WHERE: N WHAT is more than one run may ask
// for (at most LIMIT ...); pass --allow-large to run it anyway" unless the limits were lifted.
// The limits are process-wide: a front end lifts them once (capsim's --allow-large), before any
// work starts. Lifting leaves the hard type limits in force.
#pragma once

#include <cstdint>
#include <string_view>

namespace capsim {

// kKvBookkeepingBytes: the bytes the simulator's KV-block bookkeeping takes once every replica's
// GPU cache and CPU tier have filled (KvBlockManager::bookkeeping_bytes, CpuKvTier::
// bookkeeping_bytes), a number the deployment implies before anything is allocated.
enum class RunLimit { kRequests, kUsers, kReplicas, kCards, kKvBookkeepingBytes };

// The limit of each kind (defaults: 2e6 requests, 1e6 users, 1000 replicas, 8192 cards, 2 GiB of
// KV bookkeeping). Measured (docs/robustness.md): 1e6 requests take ~50 s and ~280 MB, 1e6 chat
// users for a minute ~56 s and ~880 MB; one H100's KV cache of Llama-3.1-8B is ~28k blocks, 3 MB.
std::int64_t run_limit(RunLimit kind);

// Sets one limit (a front end's own policy, or a test that needs a small one).
void set_run_limit(RunLimit kind, std::int64_t limit);
void lift_run_limits();
bool run_limits_lifted();

// Throws unless `asked` <= the limit of `kind` (or the limits are lifted). Bytes are shown in GiB.
void check_run_limit(RunLimit kind, double asked, std::string_view where);

}  // namespace capsim
