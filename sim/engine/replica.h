// One serving replica (one TP group): its waiting and running sequences, its paged KV cache and
// the mechanisms a scheduling policy combines — admission with prefix lookup, incremental block
// allocation, preemption by recompute. Policies (engine/policy_*.cc) decide what one step runs;
// the replica applies the step when it ends. One event per engine step, never per token.
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
#include "sim/engine/kv_block_manager.h"
#include "sim/llm/deployment.h"
#include "sim/llm/memory_plan.h"
#include "sim/workload/request.h"

namespace capsim {

struct Sequence {
  Request req;
  std::int64_t computed = 0;   // tokens whose KV is computed
  std::int64_t generated = 0;  // output tokens sampled so far
  std::vector<std::int32_t> blocks;      // full-attention blocks, one per block_size tokens
  // Sliding-window models: blocks of the sliding groups (sliding_groups per block of tokens)
  // for logical blocks [sw_first, sw_first + sw_blocks.size() / sliding_groups); blocks wholly
  // before the window are freed as the sequence advances. Never hashed: not prefix-cached.
  std::vector<std::int32_t> sw_blocks;
  std::int64_t sw_first = 0;
  std::vector<std::uint64_t> hashes;  // hashes of this sequence's full blocks, computed lazily
  std::int64_t registered = 0;        // leading blocks published to the prefix cache
  // Content unique to this request (no segments) under prefix caching: nobody else can hit its
  // blocks, so they are not hashed (KvBlockManager::unique_tag). `unique_owner` (>= 1; 0 = the
  // hashed path) names the sequence in its blocks' tags; `unique_published[i]` is the block an
  // earlier run (before a preemption) published at index i, or -1. While it is empty nothing
  // can compete with this run's blocks, so they are tagged only when released (the tags matter
  // only once nobody holds the blocks); after a preemption each is tagged when published, as the
  // hash table would take it then.
  std::uint64_t unique_owner = 0;
  std::vector<std::int32_t> unique_published;
  // Stream blocks (Request::stream, under prefix caching): `stream_slot` (>= 0) is the stream's
  // entry in the replica's table of published stream blocks. Blocks [0, shared_blocks) are
  // hashed as usual; block i >= shared_blocks is named unique_tag(the stream's owner, i).
  // Blocks from `defer_from` on (past every index the stream published before this admission)
  // are published when released: until then no request can look them up (only a later request
  // of the stream could, and it is sent after this one finishes), and nothing else can publish
  // them, so the table sees them as if published when filled.
  std::int32_t stream_slot = -1;
  std::int64_t shared_blocks = 0;
  std::int64_t defer_from = 0;
  // Implicit decode: whether this member's block boundaries include publishing (fixed at join).
  bool cohort_publishes = false;
  SimTime engine_arrival = -1;  // reached the engine core (after the front end)
  SimTime first_scheduled = -1;
  SimTime first_token_engine = -1;  // end of the step that sampled the first token
  // When the client receives the first and the latest token (engine time + return path).
  SimTime first_token = -1, last_token = -1;
  std::int32_t preemptions = 0;
  std::int64_t prefix_hit_tokens = 0;  // at first admission
  std::int64_t admitted = -1;  // the replica's admission counter when last admitted (running order)
  // Implicit decode (Replica::set_implicit_decode): while >= 0 the sequence is in the replica's
  // decode cohort and computed, generated and last_token are stale: the true values are
  // computed + (D - cohort_base), generated + (D - cohort_base) and the cohort's last delivery,
  // D being the replica's count of cohort decode steps. Inside the replica only.
  std::int64_t cohort_base = -1;

  std::int64_t tokens() const { return req.prompt_tokens + generated; }
  std::int64_t pending() const { return tokens() - computed; }
};

struct ScheduledItem {
  std::int32_t slot;
  std::int64_t tokens;
};

struct StepPlan {
  std::vector<ScheduledItem> items;
  BatchShape shape;
  std::int32_t preempted = 0;
  std::vector<std::int32_t> adapters;  // distinct LoRA adapters of the step (multi-LoRA only)
  void clear() { items.clear(); shape = BatchShape{}; preempted = 0; adapters.clear(); }
};

class Replica;

// What the replica reports as sequences progress.
class ReplicaObserver {
 public:
  virtual ~ReplicaObserver() = default;
  // `now` is when the client receives the token (the step's end plus the return path).
  virtual void on_token(const Sequence& s, SimTime now) = 0;     // after s.generated grew
  virtual void on_finish(const Sequence& s, SimTime now) = 0;    // s is complete
  // Implicit decode only (Replica::set_implicit_decode). A step decoded every sequence of the
  // replica's decode cohort once: each received a token at `delivered`, its previous one at
  // `previous`, and each already had a token before. `counted` of them are sequences for which
  // counts() was true when they joined the cohort. Equivalent to on_token for each of them (in
  // running order, before any of them finishes: on_finish follows for those that did).
  virtual void on_decode_step(std::int64_t counted, SimTime previous, SimTime delivered) = 0;
  // Implicit decode only: whether `s`'s tokens count for on_decode_step (asked once, when s joins
  // the cohort; the answer must not change while s runs).
  virtual bool counts(const Sequence& s) const = 0;
};

// Contract: schedule() fills `plan` with this step's work using the replica's mechanisms; it
// may preempt and admit. An empty plan means nothing can run now.
class SchedulerPolicy {
 public:
  virtual ~SchedulerPolicy() = default;
  virtual void schedule(Replica& r, StepPlan& plan) = 0;
  // True when schedule() first walks the running sequences in running order, giving each
  // min(pending + lookahead, budget) tokens (budget = max_num_batched_tokens minus what earlier
  // ones took) through grow() and plan_item(), preempting only when a grow() fails, and then,
  // when nothing was preempted, calls schedule_waiting() with the budget left. Replica's
  // implicit decode relies on it: a step whose running sequences all decode one token, with
  // enough blocks free, is that walk done in bulk followed by schedule_waiting().
  virtual bool decodes_then_admits() const { return false; }
  // The waiting part of schedule() (only for decodes_then_admits() policies).
  virtual void schedule_waiting(Replica& r, StepPlan& plan, std::int64_t budget);
};

struct PolicyInfo {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<SchedulerPolicy>()> make;
};
// The policy table (engine/policies.cc). Unknown names throw with the accepted ones.
const std::vector<PolicyInfo>& scheduler_policies();
std::unique_ptr<SchedulerPolicy> make_policy(const std::string& name);

// One point of a replica's timeline: its state at the start of an engine step.
struct TimelineSample {
  double time_s = 0;
  double kv_used_fraction = 0;
  std::int32_t running = 0;
  std::int32_t waiting = 0;
};

struct ReplicaStats {
  StreamingStats step_seconds;
  StreamingStats batch_tokens;
  StreamingStats batch_sequences;
  WeightedSamples step_ms_distribution;         // every step's duration, ms
  WeightedSamples batch_sequences_distribution; // every step's sequence count
  TimeWeightedStats kv_used_fraction;
  TimeWeightedStats running;
  TimeWeightedStats waiting;
  std::int64_t steps = 0;
  std::int64_t skipped_steps = 0;  // of them, run by fast_forward without the event loop (not a result)
  std::int64_t preemptions = 0;
  std::int64_t prompt_tokens_computed = 0;  // incl. recomputation
  std::int64_t prefix_hit_tokens = 0;
  std::int64_t prefix_lookup_tokens = 0;
  // Speculative decoding: decodes that verified drafts, the drafts verified, those accepted.
  std::int64_t spec_verifies = 0, spec_drafts = 0, spec_accepted = 0;
  // Multi-LoRA: adapters copied to a GPU slot; of them, not in the host cache (max_cpu_loras).
  std::int64_t lora_loads = 0, lora_host_misses = 0;
  // CPU KV tier (--kv-offloading-size): prompt tokens found there at first admission (beyond
  // the GPU prefix hits), loads started and the blocks they moved, and the time requests spent
  // waiting for their load (from the step that started it to the step that admits them).
  std::int64_t cpu_hit_tokens = 0, cpu_loads = 0, cpu_loaded_blocks = 0;
  double cpu_load_wait_s = 0;
  // The tier's own counts, copied at close_stats: blocks stored, evicted, refused (no room).
  std::int64_t cpu_stored_blocks = 0, cpu_evictions = 0, cpu_refused_blocks = 0;
  double busy_seconds = 0, compute_s = 0, memory_s = 0, communication_s = 0, overhead_s = 0;
  double flops = 0, bytes = 0;  // per GPU
  // Sampled state over time, for plots: at most one sample per `timeline_interval` (1 simulated
  // second at first), taken at the first step (or arrival) at or after each interval boundary.
  // Bounded: past kMaxTimelineSamples every other sample is dropped and the interval doubles.
  static constexpr std::size_t kMaxTimelineSamples = 4096;
  std::vector<TimelineSample> timeline;
  SimTime timeline_interval = kNsPerSecond;
  SimTime timeline_next = 0;
};

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
  bool lora_admissible(const Sequence& s) const;

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
  // non-empty plan) the step's cost and step statistics; returns the step's duration.
  void record_state(SimTime now);
  SimTime record_step();
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
  // Multi-LoRA: makes the plan's adapters resident in the GPU slots (LRU), counting the loads.
  void load_adapters();
  // Sliding-window layouts: frees the sliding blocks wholly before the window of a sequence that
  // has computed `computed` tokens, and returns the sliding blocks it needs to hold `total`.
  std::int64_t trim_window(Sequence& s, std::int64_t computed);
  std::int64_t sliding_need(const Sequence& s, std::int64_t first, std::int64_t total) const;
  // Frees s's blocks; `preempted`: s will look them up again when readmitted.
  void release_all(Sequence& s, bool preempted = false);
  // Unique-content sequences whose blocks are tagged when released (see Sequence::unique_owner).
  bool tags_on_release(const Sequence& s) const {
    return s.unique_owner != 0 && s.unique_published.empty();
  }
  void extend_hashes(Sequence& s, std::int64_t blocks) const;
  // ---- Stream blocks (Request::stream) ----
  // A stream's published blocks in this replica: published[i] is the block published at index
  // i (-1: none), valid while it holds unique_tag(owner, i) (KvBlockManager::holds). `active`:
  // the stream's sequences in this replica.
  struct StreamBlocks {
    std::uint64_t stream = 0, owner = 0;
    std::vector<std::int32_t> published;
    std::int64_t active = 0;
  };
  const StreamBlocks* find_stream(std::uint64_t stream) const;
  std::int32_t open_stream(std::uint64_t stream);
  void sweep_streams();
  // Leading blocks [from, n) of `st` still published, counted from `from`.
  std::int64_t stream_hits(const StreamBlocks& st, std::int64_t from, std::int64_t n) const;
  // The prefix-cache lookup of a stream request (hashes: its leading shared hashes, extended).
  std::int64_t stream_lookup(const Request& r, const StreamBlocks* st, std::vector<std::uint64_t>& hashes,
                             std::int64_t max_blocks) const;
  // Publishes s's stream blocks [from, to) whose index no live block holds (as the hash table's
  // insert keeps the first block of a hash).
  void publish_stream(Sequence& s, std::int64_t from, std::int64_t to);
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
  // Multi-LoRA residency, most recently used last: GPU slots (<= max_loras), host cache
  // (<= max_cpu_loras).
  std::vector<std::int32_t> lora_gpu_, lora_host_;

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
  ReplicaStats stats_;
  std::int64_t admissions_ = 0;  // Sequence::admitted counter
  std::uint64_t unique_owners_ = 0;  // Sequence::unique_owner and StreamBlocks::owner counter
  std::unordered_map<std::uint64_t, std::int32_t> stream_index_;  // Request::stream -> streams_
  std::vector<StreamBlocks> streams_;
  std::vector<std::int32_t> free_streams_;
  std::size_t streams_swept_ = 0;  // entries in use after the last sweep_streams()
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
  std::int64_t cohort_d_ = 0;       // D: cohort decode steps so far
  std::size_t cohort_phase_ = 0;    // D mod block_size (kept, not divided, every step)
  std::int64_t cohort_n_ = 0;       // members (all in running_)
  std::int64_t cohort_counted_ = 0; // members for which obs.counts() was true
  std::int64_t cohort_ctx_ = 0;     // sum over members of computed - cohort_base
  SimTime cohort_last_ = -1;        // when members received their latest token
  std::int64_t cohort_planned_ = 0; // members the step in flight decodes in bulk (0: none)
  // Block boundaries of members by residue of D modulo block_size, in running order: a member
  // that had computed c0 at base needs a block in the step at D when (c0 + D - base) % B == 0
  // and fills one (prefix caching publishes it) when (c0 + D - base + 1) % B == 0.
  struct Boundary {
    std::int64_t admitted;
    std::int32_t slot;
    bool allocate, publish;
  };
  std::vector<std::vector<Boundary>> boundaries_;
  std::vector<std::int64_t> boundary_allocs_;
  // Members by the D of the step that emits their last token, then running order (a min-heap).
  struct Finish {
    std::int64_t d, admitted;
    std::int32_t slot;
    bool operator>(const Finish& o) const { return d != o.d ? d > o.d : admitted > o.admitted; }
  };
  std::vector<Finish> finishes_;
};

}  // namespace capsim
