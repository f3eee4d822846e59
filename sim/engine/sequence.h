// A request as one replica's engine holds it (Sequence), one engine step's work (StepPlan), and
// what the replica reports as sequences progress (ReplicaObserver).
//
// Contract: a Sequence is owned by its Replica (engine/replica.h), which alone changes it; the
// policies change it only through the replica's mechanisms. Under implicit decode
// (engine/decode_cohort.h) a member of the decode cohort has computed, generated and last_token
// deliberately stale: the cohort advances every member with one replica counter per step
// instead of writing each member, so a step costs O(sequences whose state changes), not
// O(running). The true values are derived from the counter (Sequence::cohort_base) and
// written back when the member leaves or the cohort is materialized; code outside the replica
// therefore reads sequences only while implicit decode is off, or in the observer's callbacks
// (which receive settled sequences).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/time.h"
#include "sim/cost/batch_shape.h"
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

}  // namespace capsim
