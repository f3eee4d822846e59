// One serving replica (one TP group): its waiting and running sequences, its paged KV cache and
// the mechanisms a scheduling policy combines — admission with prefix lookup, incremental block
// allocation, preemption by recompute. Policies (engine/policy_*.cc) decide what one step runs;
// the replica applies the step when it ends. One event per engine step, never per token.
//
// The replica is split along its seams, each with its own contract:
//   engine/sequence.h          a sequence, a step's plan, the observer of progress
//   engine/scheduler_policy.h  the policy interface (one file per policy: engine/policy_*.cc)
//   engine/replica_stats.h     what a replica counts
//   engine/replica.cc          requests in, steps begun and ended, abort, statistics
//   engine/replica_kv.cc       the paged KV cache and prefix caching: lookup, admission,
//                              growth, publishing full blocks, preemption, release
//   engine/stream_blocks.h     stream blocks (Request::stream) published by tag
//   engine/replica_offloading.cc  the CPU KV tier (--kv-offloading-size; engine/cpu_kv_tier.h)
//   engine/lora_residency.h    multi-LoRA adapter residency
//   engine/sliding_window.h    sliding-window layouts
//   engine/decode_cohort.h     the skip-ahead decode cohort (engine/replica_cohort.cc), under
//                              which per-sequence fields are deliberately stale
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/core/invariant.h"
#include "sim/core/stats.h"
#include "sim/core/time.h"
#include "sim/core/weighted_samples.h"
#include "sim/cost/batch_shape.h"
#include "sim/cost/step_cost.h"
#include "sim/engine/cpu_kv_tier.h"
#include "sim/engine/decode_cohort.h"
#include "sim/engine/kv_block_manager.h"
#include "sim/engine/lora_residency.h"
#include "sim/engine/replica_stats.h"
#include "sim/engine/scheduler_policy.h"
#include "sim/engine/sequence.h"
#include "sim/engine/sliding_window.h"
#include "sim/engine/stream_blocks.h"
#include "sim/llm/deployment.h"
#include "sim/llm/memory_plan.h"
#include "sim/workload/request.h"

namespace capsim {

// The CPU tier of a replica (--kv-offloading-size; engine/cpu_kv_tier.h). blocks 0 = none.
struct CpuTierConfig {
  std::int64_t blocks = 0;
  double load_seconds_per_block = 0;  // one block's bytes on one GPU over its host-to-device link
};

class Replica {
 public:
  // `layout` says how tokens map to blocks (memory_plan.h); the default is full attention.
  Replica(std::uint32_t index, const Deployment& d, std::shared_ptr<const StepCost> cost,
          std::int64_t kv_blocks, std::unique_ptr<SchedulerPolicy> policy,
          KvLayout layout = KvLayout{}, CpuTierConfig cpu = CpuTierConfig{});

  std::uint32_t index() const { return index_; }
  const Deployment& deployment() const { return *deployment_; }
  const SchedulerLimits& limits() const { return deployment_->limits; }

  // `now` is when the request reaches the engine core (the client sent it at r.arrival).
  void add_request(Request r, SimTime now);
  // Whether the scheduler forming the coming step can see `s` yet. With asynchronous
  // scheduling a step is formed while the previous one runs, from the requests that had
  // reached the engine when that previous step started (vllm/v1/engine/core.py
  // step_with_batch_queue; vllm-v1-notes.md section 5).
  bool schedulable(const Sequence& s) const { return s.engine_arrival <= visible_until_; }
  bool stepping() const { return stepping_; }
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  // Plans a step at `now`; returns its duration (>= 1 ns), or 0 when nothing can run.
  SimTime begin_step(SimTime now);
  // begin_step in two halves, for the DP ranks of a DP-attention engine, which plan their steps
  // before any is timed (their step time depends on every rank's batch: cluster/lockstep.h).
  // plan_step plans at `now`: kNothing (nothing can run, no step begins), kLoadsOnly (a step
  // without a forward pass polls CPU-tier loads; it lasts polling_step()), or kForward (a
  // forward pass of planned_shape(); time_step gives its duration).
  enum class PlannedStep { kNothing, kLoadsOnly, kForward };
  PlannedStep plan_step(SimTime now);
  const BatchShape& planned_shape() const { return plan_.shape; }
  SimTime polling_step() const { return poll_; }
  const StepCost& step_cost() const { return *cost_; }
  // Times the forward pass planned by plan_step at `seconds` (>= its own cost `own`, which the
  // statistics keep as its compute/memory/communication split); returns its duration.
  SimTime time_step(const StepBreakdown& own, double seconds);
  // Applies the step that began last; reports tokens and completions to `obs`.
  void end_step(SimTime now, ReplicaObserver& obs);
  // Implicit decode (off by default): running sequences that only decode one token per step,
  // all received their latest token together and hold exactly the blocks their tokens need
  // form a cohort whose progress is one replica counter, so a step costs O(sequences whose
  // state changes: admitted, finishing, crossing a block boundary) instead of O(running).
  // Tokens of the cohort reach the observer through on_decode_step. Anything else (another
  // policy, speculation, LoRA, sliding windows, a step that may preempt or runs out of budget)
  // makes every sequence explicit again first, so results are those of stepping each sequence
  // (tests/cluster/skip_ahead_test.cc compares both bit for bit). Seq state read from outside
  // (seq(), running()) is only current while it is off; turning it off makes it current.
  void set_implicit_decode(bool on);
  // Skip-ahead over a quiet decode stretch (implicit decode only). Called right after
  // begin_step() began a step that ends at `end`: while the step in flight only decodes the
  // cohort, no sequence finishes in it and it ends before `horizon` (the next event that could
  // touch this replica or the metrics), runs its end_step and the next begin_step at once,
  // exactly as the event loop would. Returns the end of the step now in flight (`end` when
  // nothing was skipped), or -1 when a begin_step found nothing to run.
  SimTime fast_forward(SimTime end, SimTime horizon, ReplicaObserver& obs);

  std::size_t outstanding() const { return running_.size() + waiting_.size(); }
  // Requests a router sent here that have not reached the engine core yet (in the API server's
  // front end, or a decode pool's KV transfer). A router counts what it has sent and not seen
  // finish; counting only the engine's queues sends every request of a burst to one replica,
  // because none of them has arrived when the next is routed.
  void note_routed() { ++routed_in_transit_; }
  void note_delivered() {
    CAPSIM_INVARIANT(routed_in_transit_ > 0, "a routed request reached its engine twice");
    --routed_in_transit_;
  }
  // What a load-balancing router compares: unfinished requests sent to this replica.
  std::size_t routed_load() const { return outstanding() + routed_in_transit_; }
  std::size_t running_count() const { return running_.size(); }
  // Removes request `id` from the waiting queue or the running batch and frees its KV blocks, as
  // vLLM's abort does (a prefix-cached block stays cached). A running request while a step is in
  // flight stays (the step holds it until end_step): kInStep, abort again after end_step.
  enum class AbortResult { kNotHere, kAborted, kInStep };
  AbortResult abort(std::uint64_t id, SimTime now);
  // Leading prompt blocks of `r` already in this replica's prefix cache (for routing).
  std::int64_t cached_prefix_blocks(const Request& r) const;
  // The same, keeping the prompt's block hashes in r.block_hashes (recomputed only for another
  // block size), so asking every replica hashes a prompt once; add_request then hands them to
  // the sequence, whose admission would otherwise hash the prompt again.
  std::int64_t cached_prefix_blocks_keep(Request& r) const;
  // False when block `i` of r's prompt is certainly not in this replica's prefix cache, known
  // without hashing (r.block_hashes at this block size, or r's stream blocks); true otherwise.
  bool may_cache_block(const Request& r, std::int64_t i) const;
  const ReplicaStats& stats() const { return stats_; }
  // Before the first step: the per-step distributions (step time, batch size) go to bounded
  // histograms (SimulationConfig::bounded_memory).
  void bound_step_samples() {
    stats_.step_ms_distribution.bound_memory();
    stats_.batch_sequences_distribution.bound_memory(BoundedSamples::Kind::kIntegers);
  }
  const KvBlockManager& kv() const { return kv_; }
  void close_stats(SimTime end);

  // ---- Mechanisms for policies ----
  std::vector<std::int32_t>& running() { return running_; }
  std::deque<std::int32_t>& waiting() { return waiting_; }
  Sequence& seq(std::int32_t slot) { return seqs_[static_cast<std::size_t>(slot)]; }
  const Sequence& seq(std::int32_t slot) const { return seqs_[static_cast<std::size_t>(slot)]; }
  KvBlockManager& kv() { return kv_; }
  // Makes room for `s` to hold `total_tokens`; false when too few blocks are free.
  bool grow(Sequence& s, std::int64_t total_tokens);
  // Frees `slot`'s blocks, resets it for recompute and puts it at the front of the waiting queue.
  void preempt(std::int32_t slot);
  // Prefix-cache lookup for a waiting sequence that has computed nothing: takes the hits (at
  // most floor((tokens-1)/B) blocks, as vLLM always recomputes the last token) if, together with
  // the blocks `chunk` more tokens need, they fit; returns false and changes nothing otherwise.
  // `chunk` is chosen by the caller after lookup_hits().
  std::int64_t lookup_hits(Sequence& s);
  // Tokens of `s` whose KV is ready at admission: its prefix-cache hits (hit_blocks x
  // block_size), or more when the KV came from another instance (Request::external_computed, a
  // P/D connector; blocks allocated fresh). Policies admit tokens() - ready_tokens() of work.
  std::int64_t ready_tokens(const Sequence& s, std::int64_t hit_blocks) const;
  bool admit(std::int32_t slot, std::int64_t hit_blocks, std::int64_t chunk);
  // Adds `tokens` of work for `slot` to the plan and its BatchShape. A decode (one pending
  // token) given more than one token verifies the rest as speculative drafts.
  void plan_item(StepPlan& plan, std::int32_t slot, std::int64_t tokens);
  // Speculative decoding: the drafts a decoding sequence verifies on top of its pending token
  // (num_speculative_tokens), 0 for a prefill or without speculation.
  std::int64_t lookahead(const Sequence& s) const {
    return spec_k_ > 0 && s.generated > 0 && s.pending() == 1 ? spec_k_ : 0;
  }
  // Multi-LoRA: whether admitting `s` keeps the running batch within max_loras distinct
  // adapters (vLLM V1's scheduler skips a waiting request that would exceed it). Counts every
  // running sequence's adapter, so that no later step can exceed the GPU slots either.
  bool lora_admissible(const Sequence& s) const {
    return !deployment_->lora || LoraResidency::admissible(s.req.adapter, deployment_->lora->max_loras, running_, seqs_);
  }

  // ---- CPU KV tier (--kv-offloading-size), as vLLM's OffloadingConnector runs it ----
  // Full blocks are stored as they are computed (register_full_blocks); a waiting request that
  // computed nothing looks its blocks beyond the GPU hits up in the tier (cpu_lookup); a hit is
  // loaded asynchronously while the request waits (WAITING_FOR_REMOTE_KVS: it keeps its queue
  // place, others may be admitted behind it) and is admitted (admit_loaded) by the first
  // schedule after the step in which the load finished (vllm/v1/core/sched/scheduler.py
  // _update_waiting_for_remote_kv; the worker reports finished loads after each step).
  bool offloading() const { return cpu_ != nullptr; }
  const CpuKvTier* cpu_tier() const { return cpu_.get(); }
  // Ready CPU blocks following the `gpu_hits` GPU-hit blocks, over the sequence's full blocks
  // (floor(tokens / B): unlike the GPU lookup the last full block counts). 0 when less than a
  // block would load. Touches the sequence's blocks in the tier (the connector's lookup does).
  std::int64_t cpu_lookup(Sequence& s, std::int64_t gpu_hits);
  // Takes the GPU hits and fresh blocks for `cpu_blocks` and starts their load at this step;
  // false (nothing changes) when the blocks are not free.
  bool start_cpu_load(std::int32_t slot, std::int64_t gpu_hits, std::int64_t cpu_blocks);
  bool cpu_loading(std::int32_t slot) const {
    return cpu_ && cpu_seq_[static_cast<std::size_t>(slot)].loading > 0;
  }
  // The load finished in a step whose end this schedule can see.
  bool cpu_loaded(std::int32_t slot) const {
    const SimTime at = cpu_seq_[static_cast<std::size_t>(slot)].ready_at;
    return at >= 0 && at <= visible_until_;
  }
  // Tokens of a loaded sequence whose KV is ready: its blocks' tokens, less the last token when
  // they are all of them (vLLM always computes at least one).
  std::int64_t loaded_tokens(std::int32_t slot) const;
  // Admits a loaded sequence with `chunk` tokens to compute; false when its blocks do not fit.
  bool admit_loaded(std::int32_t slot, std::int64_t chunk);

 private:
  void sample_timeline(SimTime now);
  // begin_step's bookkeeping once the plan is formed: state statistics at `now`, then (for a
  // non-empty plan) the step statistics of a step costed `b` that lasts `seconds`; returns the
  // step's duration.
  void record_state(SimTime now);
  SimTime record_step(const StepBreakdown& b, double seconds);
  // Publishes `s`'s blocks that are full once `computed_after` tokens are computed (prefix
  // caching: vLLM publishes a block's hash when a step is scheduled to fill it).
  void register_full_blocks(Sequence& s, std::int64_t computed_after);
  // Implicit decode: the cohort (see set_implicit_decode).
  void schedule_step();        // the policy's schedule(), in bulk for the cohort when it can be
  bool cohort_step_possible() const;
  void materialize_cohort();   // every sequence explicit again
  void join_cohort(std::int32_t slot, ReplicaObserver& obs);
  void leave_cohort(Sequence& s, ReplicaObserver& obs);  // makes s explicit (it finishes)
  // Applies the cohort's steps since s joined to s itself (tokens, last token, published blocks).
  void settle_cohort_member(Sequence& s) const;
  void try_join(ReplicaObserver& obs);
  // Whether a member's block boundaries include publishing the block it fills. A member whose
  // blocks are tagged when released (tags_on_release) needs no visit: while in the cohort it
  // publishes every full block, so leaving it catches its count up (catch_up_registered).
  // A stream member publishes at release every block it fills once it has passed defer_from.
  bool publishes_in_cohort(const Sequence& s) const {
    if (s.stream_slot >= 0) return s.registered < s.defer_from;
    return kv_.prefix_caching() && !tags_on_release(s);
  }
  void catch_up_registered(Sequence& s) const {
    if (kv_.prefix_caching() && !s.cohort_publishes) s.registered = s.computed / block_size_;
  }
  // Sliding-window layouts (engine/sliding_window.h): frees the sliding blocks wholly before the
  // window of a sequence that has computed `computed` tokens, and returns the sliding blocks it
  // needs to hold `total`.
  std::int64_t trim_window(Sequence& s, std::int64_t computed) {
    return capsim::trim_window(layout_, block_size_, kv_, s, computed);
  }
  std::int64_t sliding_need(const Sequence& s, std::int64_t first, std::int64_t total) const {
    return capsim::sliding_need(layout_, block_size_, s, first, total);
  }
  // Frees s's blocks; `preempted`: s will look them up again when readmitted.
  void release_all(Sequence& s, bool preempted = false);
  // Unique-content sequences whose blocks are tagged when released (see Sequence::unique_owner).
  bool tags_on_release(const Sequence& s) const {
    return s.unique_owner != 0 && s.unique_published.empty();
  }
  void extend_hashes(Sequence& s, std::int64_t blocks) const;
  // CPU tier: stores s's blocks below `full` not stored yet; completes its stores (finish,
  // preemption or abort: its blocks become ready in the tier).
  void cpu_store(Sequence& s, std::int64_t full);
  void cpu_release(Sequence& s);

  std::uint32_t index_;
  const Deployment* deployment_;
  std::shared_ptr<const StepCost> cost_;
  std::unique_ptr<SchedulerPolicy> policy_;
  KvBlockManager kv_;
  std::int64_t block_size_;
  KvLayout layout_;
  std::int64_t spec_k_ = 0;  // num_speculative_tokens (0 = no speculation)
  LoraResidency lora_;  // multi-LoRA only

  std::vector<Sequence> seqs_;
  std::vector<std::int32_t> free_slots_;
  std::vector<std::int32_t> running_;
  std::deque<std::int32_t> waiting_;
  std::size_t routed_in_transit_ = 0;
  StepPlan plan_;
  bool stepping_ = false;
  SimTime step_start_ = 0;
  SimTime last_step_end_ = -1;
  SimTime visible_until_ = 0;
  SimTime poll_ = 0;  // the duration of the CPU-tier polling step plan_step began
  ReplicaStats stats_;
  std::int64_t admissions_ = 0;  // Sequence::admitted counter
  std::uint64_t unique_owners_ = 0;  // Sequence::unique_owner and StreamBlocks::owner counter
  StreamTable streams_;
  // ---- CPU KV tier (null without offloading) ----
  std::unique_ptr<CpuKvTier> cpu_;
  double cpu_load_block_s_ = 0;
  SimTime h2d_free_ = 0;     // loads run one after another (the handler orders them)
  SimTime sched_now_ = 0;    // start of the step being scheduled (when its loads start)
  struct CpuSeq {
    std::vector<std::int32_t> pending;  // tier slots of stores in flight
    std::int64_t stored = 0;            // leading full blocks handed to the tier
    std::int64_t loading = 0;           // blocks being loaded (> 0: WAITING_FOR_REMOTE_KVS)
    SimTime load_start = -1, load_done = -1, ready_at = -1;
  };
  std::vector<CpuSeq> cpu_seq_;          // by slot
  std::vector<std::int32_t> loads_in_flight_;
  // ---- Implicit decode ----
  bool implicit_ = false;
  DecodeCohort cohort_;
};

}  // namespace capsim
