// Implicit decode and skip-ahead: the replica's functions that drive its decode cohort
// (engine/decode_cohort.h holds the state, its invariants, and why a member's per-sequence
// fields are stale). schedule_step stands in for the policy's schedule(): when the cohort's
// bulk step is exactly the policy's running walk it plans it in O(boundaries), otherwise it
// materializes the cohort and lets the policy walk every sequence. tests/cluster/skip_ahead_test.cc
// compares runs with and without the cohort bit for bit.
#include "sim/engine/replica.h"

#include <algorithm>
#include <cassert>
#include <functional>

namespace capsim {

void Replica::set_implicit_decode(bool on) {
  assert(!stepping_);
  // Speculative decodes emit a drawn number of tokens, LoRA steps may load adapters and sliding
  // windows free blocks as sequences advance: their steps are only run one sequence at a time.
  on = on && policy_->decodes_then_admits() && spec_k_ == 0 && !deployment_->lora &&
       !layout_.hybrid() && !cpu_;
  if (!on) materialize_cohort();
  implicit_ = on;
  if (on && cohort_.boundaries.size() != static_cast<std::size_t>(block_size_)) {
    cohort_.boundaries.assign(static_cast<std::size_t>(block_size_), {});
    cohort_.boundary_allocs.assign(static_cast<std::size_t>(block_size_), 0);
  }
}

// The policy's running walk, done in bulk for the cohort, is exact when the members (a prefix of
// running_, each decoding one token: the walk gives it min(1, budget)) all fit the budget (the
// walk stops at none), and every block the step's walk needs is free: the boundaries' blocks and
// those of the running sequences after the members, which the walk then gives min(pending,
// budget left) tokens each in running order (no grow() fails, so nothing is preempted: the walk
// grows and publishes in running order, as schedule_step does).
bool Replica::cohort_step_possible() const {
  if (cohort_.n > limits().max_num_batched_tokens) return false;
  std::int64_t need = cohort_.boundary_allocs[cohort_.phase];
  std::int64_t budget = limits().max_num_batched_tokens - cohort_.n;
  for (std::size_t i = static_cast<std::size_t>(cohort_.n); i < running_.size() && budget > 0; ++i) {
    const Sequence& s = seq(running_[i]);
    const std::int64_t tokens = std::min(s.pending(), budget);  // no lookahead: implicit decode has no speculation
    need += std::max<std::int64_t>(0, (s.computed + tokens + block_size_ - 1) / block_size_ -
                                          static_cast<std::int64_t>(s.blocks.size()));
    budget -= tokens;
  }
  return need <= kv_.free_blocks();
}

void Replica::schedule_step() {
  cohort_.planned = 0;
  // Without members the policy's own walk is the same work (and handles preemption).
  if (!implicit_ || cohort_.n == 0) {
    policy_->schedule(*this, plan_);
    return;
  }
  if (!cohort_step_possible()) {
    materialize_cohort();
    policy_->schedule(*this, plan_);
    return;
  }
  std::int64_t budget = limits().max_num_batched_tokens;
  const std::int64_t n = cohort_.n;
  // Each member that had computed c tokens grows to c + 1 (a new block on a boundary) and
  // publishes the block that token fills, in running order.
  for (const DecodeCohort::Boundary& b : cohort_.boundaries[cohort_.phase]) {
    Sequence& s = seq(b.slot);
    const std::int64_t total = s.computed + (cohort_.d - s.cohort_base) + 1;
    if (b.allocate) {
      // On a boundary a member holds exactly computed / B blocks and needs one more (what
      // grow(s, total) allocates; cohort_step_possible checked that it is free).
      assert((total + block_size_ - 1) / block_size_ == static_cast<std::int64_t>(s.blocks.size()) + 1);
      const bool ok = kv_.allocate_one(s.blocks);
      assert(ok);
      (void)ok;
    }
    if (b.publish) register_full_blocks(s, total);
  }
  // plan_item's add_decode for each: contexts c + 1 summed (integers, so the double sum is
  // exact in any order).
  plan_.shape.decode_sequences += n;
  plan_.shape.decode_context_tokens += static_cast<double>(cohort_.ctx + n * (cohort_.d + 1));
  plan_.shape.logit_sequences += n;
  budget -= n;
  cohort_.planned = n;
  // The running sequences after the members (a prefill chunk still under way, and those admitted
  // after it), one by one as the policy's walk takes them; their blocks fit (checked above).
  for (std::size_t i = static_cast<std::size_t>(n); i < running_.size() && budget > 0; ++i) {
    const std::int32_t slot = running_[i];
    Sequence& s = seq(slot);
    const std::int64_t tokens = std::min(s.pending(), budget);
    const bool ok = grow(s, s.computed + tokens);
    assert(ok);
    (void)ok;
    plan_item(plan_, slot, tokens);
    budget -= tokens;
  }
  policy_->schedule_waiting(*this, plan_, budget);
}

namespace {
std::size_t residue(std::int64_t x, std::int64_t b) { return static_cast<std::size_t>(((x % b) + b) % b); }
}  // namespace

void Replica::join_cohort(std::int32_t slot, ReplicaObserver& obs) {
  Sequence& s = seq(slot);
  s.cohort_base = cohort_.d;
  ++cohort_.n;
  if (obs.counts(s)) ++cohort_.counted;
  cohort_.ctx += s.computed - s.cohort_base;
  // Joins come in running order (admission order), so appending keeps each bucket sorted.
  const std::size_t ra = residue(s.cohort_base - s.computed, block_size_);
  const std::size_t rp = residue(s.cohort_base - s.computed - 1, block_size_);
  const bool publish = publishes_in_cohort(s);
  s.cohort_publishes = publish;
  assert(cohort_.boundaries[ra].empty() || cohort_.boundaries[ra].back().admitted < s.admitted);
  if (ra == rp) {
    cohort_.boundaries[ra].push_back({s.admitted, slot, true, publish});
  } else {
    cohort_.boundaries[ra].push_back({s.admitted, slot, true, false});
    if (publish) cohort_.boundaries[rp].push_back({s.admitted, slot, false, true});
  }
  ++cohort_.boundary_allocs[ra];
  // The step at D emits token generated + (D - base) + 1: the last when that is output_tokens.
  cohort_.finishes.push_back({s.cohort_base + s.req.output_tokens - s.generated - 1, s.admitted, slot});
  std::push_heap(cohort_.finishes.begin(), cohort_.finishes.end(), std::greater<>{});
}

void Replica::leave_cohort(Sequence& s, ReplicaObserver& obs) {
  const std::int32_t slot = static_cast<std::int32_t>(&s - seqs_.data());
  const std::size_t ra = residue(s.cohort_base - s.computed, block_size_);
  const std::size_t rp = residue(s.cohort_base - s.computed - 1, block_size_);
  const auto drop = [&](std::size_t r) {
    std::vector<DecodeCohort::Boundary>& v = cohort_.boundaries[r];
    v.erase(std::find_if(v.begin(), v.end(), [slot](const DecodeCohort::Boundary& b) { return b.slot == slot; }));
  };
  drop(ra);
  if (rp != ra && s.cohort_publishes) drop(rp);
  --cohort_.boundary_allocs[ra];
  --cohort_.n;
  if (obs.counts(s)) --cohort_.counted;
  cohort_.ctx -= s.computed - s.cohort_base;
  settle_cohort_member(s);
}

void Replica::settle_cohort_member(Sequence& s) const {
  const std::int64_t steps = cohort_.d - s.cohort_base;
  s.computed += steps;
  s.generated += steps;
  s.last_token = cohort_.last;
  s.cohort_base = -1;
  catch_up_registered(s);
}

void Replica::materialize_cohort() {
  if (cohort_.n == 0) return;
  for (const std::int32_t slot : running_) {
    Sequence& s = seq(slot);
    if (s.cohort_base < 0) continue;
    settle_cohort_member(s);
  }
  for (std::vector<DecodeCohort::Boundary>& v : cohort_.boundaries) v.clear();
  std::fill(cohort_.boundary_allocs.begin(), cohort_.boundary_allocs.end(), 0);
  cohort_.finishes.clear();
  cohort_.n = cohort_.counted = cohort_.ctx = 0;
}

// After a step: the running sequences that are not members (this step's admissions, a prefill
// finishing its last chunk, or all of them after a step run one by one) join, in running order up
// to the first that cannot (members stay a prefix of running_): one can when it decodes next (one
// pending token, not finished), received its latest token with the members, and holds exactly
// the blocks (and published blocks) of its computed tokens, as a member does between steps.
void Replica::try_join(ReplicaObserver& obs) {
  const auto first = static_cast<std::size_t>(cohort_.n);  // members are a prefix of running_
  if (first >= running_.size()) return;
  const SimTime last = cohort_.n > 0 ? cohort_.last : seq(running_[first]).last_token;
  // The longest run of joinable sequences right after the members joins (members stay a prefix).
  std::size_t end = first;
  for (; end < running_.size(); ++end) {
    const Sequence& s = seq(running_[end]);
    assert(s.cohort_base < 0);
    if (s.generated < 1 || s.generated >= s.req.output_tokens || s.pending() != 1 ||
        s.last_token != last || s.last_token < 0) {
      break;
    }
    if (static_cast<std::int64_t>(s.blocks.size()) != (s.computed + block_size_ - 1) / block_size_) break;
    if (kv_.prefix_caching() && s.registered != s.computed / block_size_) break;
  }
  if (end == first) return;
  cohort_.last = last;
  for (std::size_t i = first; i < end; ++i) join_cohort(running_[i], obs);
}

SimTime Replica::fast_forward(SimTime end, SimTime horizon, ReplicaObserver& obs) {
  SimTime cur = end;
  // The step in flight ends at `cur` before anything else happens: when it only decodes the
  // cohort and nobody finishes in it, its end reports tokens only (no completion, so no new
  // event), and the event loop would begin the next step at once.
  while (cur < horizon && stepping_ && cohort_.planned > 0 && plan_.items.empty() &&
         (cohort_.finishes.empty() || cohort_.finishes.front().d != cohort_.d)) {
    end_step(cur, obs);
    const SimTime dur = begin_step(cur);
    if (dur == 0) return -1;
    ++stats_.skipped_steps;
    cur += dur;
  }
  return cur;
}

}  // namespace capsim
