// A replica's life cycle: requests arrive (add_request), steps are planned (begin_step: the
// policy's schedule through schedule_step, then the step's cost) and applied (end_step: tokens,
// completions, finished CPU-tier loads), requests are aborted, statistics are closed. The
// mechanisms the policies call live by seam: engine/replica_kv.cc (KV cache and prefix
// caching), engine/replica_offloading.cc (CPU KV tier), engine/replica_cohort.cc (the decode
// cohort); see engine/replica.h for the map.
#include "sim/engine/replica.h"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <limits>

#include "sim/core/error.h"

namespace capsim {

Replica::Replica(std::uint32_t index, const Deployment& d, std::shared_ptr<const StepCost> cost,
                 std::int64_t kv_blocks, std::unique_ptr<SchedulerPolicy> policy,
                 KvLayout layout, CpuTierConfig cpu)
    : index_(index),
      deployment_(&d),
      cost_(std::move(cost)),
      policy_(std::move(policy)),
      kv_(kv_blocks, d.limits.enable_prefix_caching),
      block_size_(d.limits.block_size),
      layout_(layout) {
  if (d.speculative) spec_k_ = d.speculative->num_speculative_tokens;
  if (cpu.blocks > 0) {
    if (!kv_.prefix_caching()) {
      throw Error("--kv-offloading-size: the CPU tier is modelled with prefix caching on (--prefix-caching true)");
    }
    cpu_ = std::make_unique<CpuKvTier>(cpu.blocks);
    cpu_load_block_s_ = cpu.load_seconds_per_block;
  }
  if (layout_.hybrid() && layout_.full_groups != 1) {
    throw Error("KV layout: the block manager models one full-attention group, got " +
                std::to_string(layout_.full_groups));
  }
}

void Replica::add_request(Request r, SimTime now) {
  std::int32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
    // A fresh sequence, keeping the block table's storage (released, so empty): a block table
    // grows block by block, and reallocating it for every request was a tenth of the run's
    // allocations.
    Sequence& old = seqs_[static_cast<std::size_t>(slot)];
    std::vector<std::int32_t> table = std::move(old.blocks);
    table.clear();
    old = Sequence{};
    old.blocks = std::move(table);
  } else {
    slot = static_cast<std::int32_t>(seqs_.size());
    seqs_.emplace_back();
  }
  Sequence& s = seqs_[static_cast<std::size_t>(slot)];
  s.req = std::move(r);
  // With a CPU tier every block is hashed: the tier keys blocks by hash (unique content too
  // takes its room there, and a stream's private blocks as well).
  if (kv_.prefix_caching() && s.req.segments.empty() && !cpu_) s.unique_owner = ++unique_owners_;
  if (kv_.prefix_caching() && s.req.stream != 0 && !s.req.segments.empty() && !cpu_) {
    s.stream_slot = streams_.open(s.req.stream, unique_owners_, kv_);
    ++streams_.at(s.stream_slot).active;
    s.shared_blocks = std::max<std::int64_t>(0, s.req.private_from) / block_size_;
  }
  if (cpu_) {
    if (cpu_seq_.size() <= static_cast<std::size_t>(slot)) cpu_seq_.resize(static_cast<std::size_t>(slot) + 1);
    CpuSeq& c = cpu_seq_[static_cast<std::size_t>(slot)];
    assert(c.pending.empty());
    c.stored = c.loading = 0;
    c.load_start = c.load_done = c.ready_at = -1;
  }
  // The router's hashes of the prompt (or those the simulation's SessionHashCache proved), when
  // taken at this block size, are the sequence's first hashes (the same chain extend_hashes
  // would compute); otherwise they are dropped.
  if (s.req.hashed_block_size == block_size_) s.hashes = std::move(s.req.block_hashes);
  s.req.block_hashes = {};
  s.req.hashed_block_size = 0;
  s.engine_arrival = now;
  waiting_.push_back(slot);
  stats_.waiting.add(now, static_cast<double>(waiting_.size()));
  if (now >= stats_.timeline_next) sample_timeline(now);
}

void Replica::sample_timeline(SimTime now) {
  std::vector<TimelineSample>& t = stats_.timeline;
  if (t.size() >= ReplicaStats::kMaxTimelineSamples) {
    // Halve the resolution: keep every other sample, sample half as often from now on.
    std::size_t kept = 0;
    for (std::size_t i = 0; i < t.size(); i += 2) t[kept++] = t[i];
    t.resize(kept);
    stats_.timeline_interval *= 2;
  }
  t.push_back({to_seconds(now),
               kv_.num_blocks() ? static_cast<double>(kv_.used_blocks()) / kv_.num_blocks() : 0.0,
               static_cast<std::int32_t>(running_.size()), static_cast<std::int32_t>(waiting_.size())});
  stats_.timeline_next = (now / stats_.timeline_interval + 1) * stats_.timeline_interval;
}

SimTime Replica::begin_step(SimTime now) {
  switch (plan_step(now)) {
    case PlannedStep::kNothing: return 0;
    case PlannedStep::kLoadsOnly: return poll_;
    case PlannedStep::kForward: break;
  }
  const StepBreakdown b = cost_->totals(plan_.shape);
  return record_step(b, b.seconds);
}

Replica::PlannedStep Replica::plan_step(SimTime now) {
  assert(!stepping_);
  plan_.clear();
  // Back to back with the step that just ended, an asynchronous scheduler formed this step when
  // that one started; after an idle gap it forms it now. When the coming step would otherwise
  // be empty the engine waits for the step in flight and schedules afresh, so it sees `now`.
  const bool back_to_back = deployment_->engine.async_scheduling && last_step_end_ == now;
  visible_until_ = back_to_back ? step_start_ : now;
  sched_now_ = now;
  schedule_step();
  if (back_to_back && plan_.items.empty() && cohort_.planned == 0 && plan_.preempted == 0 &&
      !waiting_.empty()) {
    visible_until_ = now;
    schedule_step();
  }
  record_state(now);
  if (plan_.items.empty() && cohort_.planned == 0) {
    if (loads_in_flight_.empty()) return PlannedStep::kNothing;
    // Only loads from the CPU tier are under way: vLLM's engine keeps stepping without a
    // forward pass (gpu_model_runner kv_connector_no_forward), polling for finished transfers,
    // so it sees the first one finish when it does. No step is counted.
    SimTime done = std::numeric_limits<SimTime>::max();
    for (const std::int32_t slot : loads_in_flight_) done = std::min(done, cpu_seq_[static_cast<std::size_t>(slot)].load_done);
    stepping_ = true;
    step_start_ = now;
    poll_ = std::max<SimTime>(1, done - now);
    return PlannedStep::kLoadsOnly;
  }
  if (deployment_->lora) lora_.load(*deployment_->lora, plan_, stats_);
  for (const ScheduledItem& it : plan_.items) {
    Sequence& s = seq(it.slot);
    if (s.first_scheduled < 0) s.first_scheduled = now;
  }
  stepping_ = true;
  step_start_ = now;
  return PlannedStep::kForward;
}

SimTime Replica::time_step(const StepBreakdown& own, double seconds) {
  assert(stepping_);
  return record_step(own, seconds);
}

void Replica::record_state(SimTime now) {
  stats_.running.add(now, static_cast<double>(running_.size()));
  stats_.waiting.add(now, static_cast<double>(waiting_.size()));
  stats_.kv_used_fraction.add(
      now, kv_.num_blocks() ? static_cast<double>(kv_.used_blocks()) / kv_.num_blocks() : 0.0);
  if (now >= stats_.timeline_next) sample_timeline(now);
}

SimTime Replica::record_step(const StepBreakdown& b, double seconds) {
  const SimTime dur = std::max<SimTime>(1, from_seconds(seconds));
  stats_.steps += 1;
  stats_.step_seconds.add(seconds);
  stats_.batch_tokens.add(static_cast<double>(plan_.shape.tokens()));
  stats_.batch_sequences.add(static_cast<double>(plan_.shape.sequences()));
  stats_.step_ms_distribution.add(seconds * 1e3);
  stats_.batch_sequences_distribution.add(static_cast<double>(plan_.shape.sequences()));
  stats_.prompt_tokens_computed += plan_.shape.prefill_tokens;
  stats_.busy_seconds += seconds;
  stats_.compute_s += b.compute_s;
  stats_.memory_s += b.memory_s;
  // A DP-attention rank's step lasts the engine's (time_step): the difference from its own cost
  // (the wait at the MoE layers' all-to-all, less what sharing the experts with emptier ranks
  // saves) is communication, so that the parts still add up to the step.
  stats_.communication_s += b.communication_s + (seconds - b.seconds);
  stats_.overhead_s += b.overhead_s;
  stats_.flops += b.flops;
  stats_.bytes += b.bytes;
  return dur;
}

void Replica::end_step(SimTime now, ReplicaObserver& obs) {
  assert(stepping_);
  stepping_ = false;
  last_step_end_ = now;
  bool any_finished = false;
  if (!loads_in_flight_.empty()) {
    // The worker reports the loads finished by the end of this step (get_finished after the
    // forward); the scheduler sees them from the next schedule it forms after this output.
    std::size_t kept = 0;
    for (const std::int32_t slot : loads_in_flight_) {
      CpuSeq& c = cpu_seq_[static_cast<std::size_t>(slot)];
      if (c.load_done <= now) c.ready_at = now;
      else loads_in_flight_[kept++] = slot;
    }
    loads_in_flight_.resize(kept);
  }
  // The client receives this step's tokens after the return path, which walks every sequence
  // that emitted one (docs/cost-model.md#request-path): every cohort member decoded in bulk, and
  // the explicit items that emit.
  std::int64_t emitting = cohort_.planned;
  for (const ScheduledItem& it : plan_.items) {
    const Sequence& s = seq(it.slot);
    if (s.computed + it.tokens >= s.tokens()) ++emitting;
  }
  const EngineProfile& e = deployment_->engine;
  const SimTime delivered =
      now + from_seconds(e.return_s + e.return_per_sequence_s * static_cast<double>(emitting));
  // The slots that finish in this step, to drop from running_ by id (reading each running
  // sequence's state instead cost a cache miss per running sequence at every finish).
  std::int32_t finished[16];
  std::size_t n_finished = 0;
  const auto finish = [&](std::int32_t slot, Sequence& s) {
    if (n_finished < std::size(finished)) finished[n_finished] = slot;
    ++n_finished;
    release_all(s);
    obs.on_finish(s, delivered);
    free_slots_.push_back(slot);
    s.req.segments.clear();
    s.req.segments.shrink_to_fit();
    s.hashes.clear();
    s.hashes.shrink_to_fit();
    any_finished = true;
    s.computed = -1;  // marks the slot finished until it is reused
  };
  if (cohort_.planned > 0) {
    // The cohort comes first in plan order (it is the whole running set when the step began):
    // each member computes its token and receives it at `delivered`; those whose last token it
    // is leave in running order.
    const SimTime previous = cohort_.last;
    ++cohort_.d;
    if (++cohort_.phase == static_cast<std::size_t>(block_size_)) cohort_.phase = 0;
    cohort_.last = delivered;
    obs.on_decode_step(cohort_.counted, previous, delivered);
    while (!cohort_.finishes.empty() && cohort_.finishes.front().d == cohort_.d - 1) {
      const std::int32_t slot = cohort_.finishes.front().slot;
      std::pop_heap(cohort_.finishes.begin(), cohort_.finishes.end(), std::greater<>{});
      cohort_.finishes.pop_back();
      Sequence& s = seq(slot);
      leave_cohort(s, obs);
      finish(slot, s);
    }
    cohort_.planned = 0;
  }
  for (const ScheduledItem& it : plan_.items) {
    Sequence& s = seq(it.slot);
    std::int64_t emitted = 1;
    if (it.tokens > 1 && s.generated > 0 && s.pending() == 1) {
      // A speculative decode: the pending token and the accepted drafts keep their KV; the
      // target's token after them is emitted with them (never past the request's output).
      const auto drafts = static_cast<int>(it.tokens - 1);
      const std::int64_t accepted = std::min<std::int64_t>(
          deployment_->speculative->draw_accepted(s.req.id, s.generated, drafts),
          s.req.output_tokens - s.generated);
      stats_.spec_verifies += 1;
      stats_.spec_drafts += drafts;
      stats_.spec_accepted += accepted - 1;
      s.computed += accepted;
      emitted = accepted;
    } else {
      s.computed += it.tokens;
      if (s.computed < s.tokens()) continue;  // a prefill chunk that is not the last
    }
    s.generated += emitted;
    if (s.first_token < 0) {
      s.first_token_engine = now;
      s.first_token = delivered;
    }
    obs.on_token(s, delivered);
    s.last_token = delivered;
    if (s.generated >= s.req.output_tokens) finish(it.slot, s);
  }
  if (n_finished == 1) {
    running_.erase(std::remove(running_.begin(), running_.end(), finished[0]), running_.end());
  } else if (any_finished && n_finished <= std::size(finished)) {
    const std::int32_t* const fin_begin = finished;
    const std::int32_t* const fin_end = finished + n_finished;
    running_.erase(std::remove_if(running_.begin(), running_.end(),
                                  [&](std::int32_t slot) { return std::find(fin_begin, fin_end, slot) != fin_end; }),
                   running_.end());
  } else if (any_finished) {
    running_.erase(std::remove_if(running_.begin(), running_.end(),
                                  [&](std::int32_t slot) { return seq(slot).computed < 0; }),
                   running_.end());
  }
  if (implicit_) try_join(obs);
}

Replica::AbortResult Replica::abort(std::uint64_t id, SimTime now) {
  if (!stepping_) materialize_cohort();  // a step in flight keeps its running sequences anyway
  const auto is = [&](std::int32_t slot) { return seq(slot).req.id == id; };
  std::int32_t slot = -1;
  if (const auto it = std::find_if(running_.begin(), running_.end(), is); it != running_.end()) {
    if (stepping_) return AbortResult::kInStep;
    slot = *it;
    running_.erase(it);
  } else if (const auto w = std::find_if(waiting_.begin(), waiting_.end(), is); w != waiting_.end()) {
    slot = *w;  // waiting sequences are never in the step in flight
    waiting_.erase(w);
  } else {
    return AbortResult::kNotHere;
  }
  Sequence& s = seq(slot);
  release_all(s);
  s = Sequence{};
  s.computed = -1;  // marks the slot free until it is reused
  free_slots_.push_back(slot);
  stats_.running.add(now, static_cast<double>(running_.size()));
  stats_.waiting.add(now, static_cast<double>(waiting_.size()));
  return AbortResult::kAborted;
}

void Replica::close_stats(SimTime end) {
  if (cpu_) {
    stats_.cpu_stored_blocks = cpu_->stored_blocks();
    stats_.cpu_evictions = cpu_->evictions();
    stats_.cpu_refused_blocks = cpu_->refused_blocks();
  }
  if (end >= stats_.timeline_next) sample_timeline(end);
  stats_.running.add(end, static_cast<double>(running_.size()));
  stats_.waiting.add(end, static_cast<double>(waiting_.size()));
  stats_.kv_used_fraction.add(
      end, kv_.num_blocks() ? static_cast<double>(kv_.used_blocks()) / kv_.num_blocks() : 0.0);
}

}  // namespace capsim
