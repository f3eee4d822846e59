// The skip-ahead decode cohort of one replica (Replica::set_implicit_decode): its state. The
// replica's functions that drive it are in engine/replica_cohort.cc.
//
// Owns: the running sequences that only decode one token per step, all received their latest
// token together and hold exactly the blocks (and published blocks) their tokens need. Their
// progress is one counter, D (`d`): a step decodes every member at once, so it costs
// O(sequences whose state changes: admitted, finishing, crossing a block boundary), not
// O(running).
//
// Why per-sequence fields are stale: a member's Sequence::computed, generated and last_token
// are not written while it is a member (writing them is the O(running) cost the cohort
// removes). The true values are computed + (D - cohort_base), generated + (D - cohort_base) and
// `last`; Replica::settle_cohort_member writes them back when the member leaves (it finishes)
// or the cohort is materialized: before a step the bulk walk cannot plan exactly (the budget or
// the free blocks fall short: cohort_step_possible), before an abort, and when implicit decode
// is turned off. Nothing outside the replica may read a member's fields.
//
// Invariants: members are a prefix of the replica's running order (joins append in running
// order); n counts them, counted those the observer counts (ReplicaObserver::counts, fixed at
// join); ctx is the sum over members of computed - cohort_base, so the bulk step's decode
// context is ctx + n x (D + 1); each bucket of `boundaries` is sorted by admission;
// boundary_allocs[r] is the number of members that need a fresh block at a step with
// D mod block_size == r.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/core/time.h"

namespace capsim {

struct DecodeCohort {
  std::int64_t d = 0;        // D: cohort decode steps so far
  std::size_t phase = 0;     // D mod block_size (kept, not divided, every step)
  std::int64_t n = 0;        // members (all in the replica's running order)
  std::int64_t counted = 0;  // members for which obs.counts() was true
  std::int64_t ctx = 0;      // sum over members of computed - cohort_base
  SimTime last = -1;         // when members received their latest token
  std::int64_t planned = 0;  // members the step in flight decodes in bulk (0: none)
  // Block boundaries of members by residue of D modulo block_size, in running order: a member
  // that had computed c0 at base needs a block in the step at D when (c0 + D - base) % B == 0
  // and fills one (prefix caching publishes it) when (c0 + D - base + 1) % B == 0.
  struct Boundary {
    std::int64_t admitted;
    std::int32_t slot;
    bool allocate, publish;
  };
  std::vector<std::vector<Boundary>> boundaries;
  std::vector<std::int64_t> boundary_allocs;
  // Members by the D of the step that emits their last token, then running order (a min-heap).
  struct Finish {
    std::int64_t d, admitted;
    std::int32_t slot;
    bool operator>(const Finish& o) const { return d != o.d ? d > o.d : admitted > o.admitted; }
  };
  std::vector<Finish> finishes;
};

}  // namespace capsim
