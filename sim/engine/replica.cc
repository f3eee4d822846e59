#include "sim/engine/replica.h"

#include <algorithm>
#include <cassert>
#include <limits>

#include "sim/core/error.h"
#include "sim/engine/block_hash.h"

namespace capsim {

Replica::Replica(std::uint32_t index, const Deployment& d, std::shared_ptr<const StepCost> cost,
                 std::int64_t kv_blocks, std::unique_ptr<SchedulerPolicy> policy,
                 KvLayout layout)
    : index_(index),
      deployment_(&d),
      cost_(std::move(cost)),
      policy_(std::move(policy)),
      kv_(kv_blocks, d.limits.enable_prefix_caching),
      block_size_(d.limits.block_size),
      layout_(layout) {
  if (d.speculative) spec_k_ = d.speculative->num_speculative_tokens;
  if (layout_.hybrid() && layout_.full_groups != 1) {
    throw Error("KV layout: the block manager models one full-attention group, got " +
                std::to_string(layout_.full_groups));
  }
}

// vLLM's SlidingWindowManager.remove_skipped_blocks: once `computed` tokens are computed, the
// next query attends to tokens from computed - window + 1 on, so blocks wholly before that
// token are freed (replaced by the null block in the block table).
std::int64_t Replica::trim_window(Sequence& s, std::int64_t computed) {
  if (!layout_.hybrid()) return 0;
  const std::int64_t first_useful = computed - layout_.sliding_window + 1;
  const std::int64_t first = first_useful > 0 ? first_useful / block_size_ : 0;
  const std::int64_t groups = layout_.sliding_groups;
  const std::int64_t held = static_cast<std::int64_t>(s.sw_blocks.size()) / groups;
  const std::int64_t drop = std::min(held, first - s.sw_first);
  if (drop > 0) {
    std::vector<std::int32_t> gone(s.sw_blocks.begin(), s.sw_blocks.begin() + drop * groups);
    s.sw_blocks.erase(s.sw_blocks.begin(), s.sw_blocks.begin() + drop * groups);
    kv_.release(gone);
  }
  if (s.sw_blocks.empty()) s.sw_first = std::max(s.sw_first, first);
  else s.sw_first += std::max<std::int64_t>(0, drop);
  return first;
}

std::int64_t Replica::sliding_need(const Sequence& s, std::int64_t first, std::int64_t total) const {
  if (!layout_.hybrid()) return 0;
  const std::int64_t groups = layout_.sliding_groups;
  const std::int64_t held_end =
      s.sw_first + static_cast<std::int64_t>(s.sw_blocks.size()) / groups;
  const std::int64_t end = (total + block_size_ - 1) / block_size_;
  return std::max<std::int64_t>(0, end - std::max(held_end, first)) * groups;
}

void Replica::release_all(Sequence& s) {
  kv_.release(s.blocks);
  if (!s.sw_blocks.empty()) kv_.release(s.sw_blocks);
  s.sw_first = 0;
}

void Replica::extend_hashes(Sequence& s, std::int64_t blocks) const {
  extend_block_hashes(s.req, block_size_, blocks, s.hashes);
}

void Replica::add_request(Request r, SimTime now) {
  std::int32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
    seqs_[static_cast<std::size_t>(slot)] = Sequence{};
  } else {
    slot = static_cast<std::int32_t>(seqs_.size());
    seqs_.emplace_back();
  }
  Sequence& s = seqs_[static_cast<std::size_t>(slot)];
  s.req = std::move(r);
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

std::int64_t Replica::cached_prefix_blocks(const Request& r) const {
  if (!kv_.prefix_caching()) return 0;
  const std::int64_t max_blocks = (r.prompt_tokens - 1) / block_size_;
  // Scratch reused across calls (the router asks for every arrival and every replica).
  thread_local std::vector<std::uint64_t> hashes;
  hashes.clear();
  extend_block_hashes(r, block_size_, max_blocks, hashes);
  return kv_.lookup(hashes.data(), max_blocks);
}

std::int64_t Replica::cached_prefix_blocks_keep(Request& r) const {
  if (!kv_.prefix_caching()) return 0;
  const std::int64_t max_blocks = (r.prompt_tokens - 1) / block_size_;
  if (r.hashed_block_size != block_size_) {
    r.block_hashes.clear();
    r.hashed_block_size = block_size_;
  }
  extend_block_hashes(r, block_size_, max_blocks, r.block_hashes);
  return kv_.lookup(r.block_hashes.data(), max_blocks);
}

bool Replica::grow(Sequence& s, std::int64_t total_tokens) {
  const std::int64_t need = (total_tokens + block_size_ - 1) / block_size_ -
                            static_cast<std::int64_t>(s.blocks.size());
  if (!layout_.hybrid()) {
    if (need <= 0) return true;
    return kv_.allocate(need, s.blocks);
  }
  const std::int64_t first = trim_window(s, s.computed);
  const std::int64_t sw = sliding_need(s, first, total_tokens);
  const std::int64_t full = std::max<std::int64_t>(0, need);
  if (full + sw > kv_.free_blocks()) return false;
  if (full > 0) (void)kv_.allocate(full, s.blocks);  // both fit: checked above
  if (sw > 0) {
    if (s.sw_blocks.empty()) s.sw_first = first;
    (void)kv_.allocate(sw, s.sw_blocks);
  }
  return true;
}

void Replica::preempt(std::int32_t slot) {
  Sequence& s = seq(slot);
  release_all(s);
  s.computed = 0;
  s.registered = 0;
  ++s.preemptions;
  ++stats_.preemptions;
  waiting_.push_front(slot);
}

std::int64_t Replica::lookup_hits(Sequence& s) {
  if (!kv_.prefix_caching() || s.computed != 0) return 0;
  const std::int64_t max_blocks = (s.tokens() - 1) / block_size_;
  extend_hashes(s, max_blocks);
  return kv_.lookup(s.hashes.data(), max_blocks);
}

std::int64_t Replica::ready_tokens(const Sequence& s, std::int64_t hit_blocks) const {
  const std::int64_t hits = hit_blocks * block_size_;
  // KV from another instance arrives once: a preempted request recomputes what it lost.
  const std::int64_t external = s.preemptions == 0 ? s.req.external_computed : 0;
  return std::max(hits, external);
}

bool Replica::admit(std::int32_t slot, std::int64_t hit_blocks, std::int64_t chunk) {
  Sequence& s = seq(slot);
  const std::int64_t cached = ready_tokens(s, hit_blocks);
  const std::int64_t total_blocks = (cached + chunk + block_size_ - 1) / block_size_;
  // Hit blocks sitting in the free queue stop being free once taken.
  const std::int64_t reclaimed = kv_.hits_in_free_queue(s.hashes.data(), hit_blocks);
  // Sliding groups: fresh blocks for the window before `cached` and the chunk (a prefix hit
  // spares their compute, but capsim does not share sliding blocks between sequences).
  std::int64_t first = 0, sw = 0;
  if (layout_.hybrid()) {
    const std::int64_t first_useful = cached - layout_.sliding_window + 1;
    first = first_useful > 0 ? first_useful / block_size_ : 0;
    sw = (total_blocks - first) * layout_.sliding_groups;
  }
  if (total_blocks - hit_blocks + sw > kv_.free_blocks() - reclaimed) return false;
  kv_.take_hits(s.hashes.data(), hit_blocks, s.blocks);
  s.registered = hit_blocks;
  const bool ok = kv_.allocate(total_blocks - hit_blocks, s.blocks);
  assert(ok);
  (void)ok;
  if (sw > 0) {
    s.sw_first = first;
    const bool sw_ok = kv_.allocate(sw, s.sw_blocks);
    assert(sw_ok);
    (void)sw_ok;
  }
  if (s.preemptions == 0 && s.first_scheduled < 0 && s.req.external_computed == 0) {
    s.prefix_hit_tokens = cached;
    stats_.prefix_hit_tokens += cached;
    stats_.prefix_lookup_tokens += s.req.prompt_tokens;
  }
  s.computed = cached;
  running_.push_back(slot);
  return true;
}

void Replica::plan_item(StepPlan& plan, std::int32_t slot, std::int64_t tokens) {
  Sequence& s = seq(slot);
  plan.items.push_back({slot, tokens});
  // Only a token whose KV will certainly be kept is published: not a speculative draft.
  std::int64_t publish = tokens;
  if (s.generated > 0 && s.pending() == 1 && tokens == 1) {
    plan.shape.add_decode(s.computed + 1);
  } else if (s.generated > 0 && s.pending() == 1 && spec_k_ > 0) {
    plan.shape.add_speculative_decode(s.computed + 1, tokens - 1);
    publish = 1;
  } else {
    plan.shape.add_prefill_chunk(s.computed, tokens, s.computed + tokens == s.tokens());
  }
  if (deployment_->lora && s.req.adapter >= 0) {
    plan.shape.lora_tokens += tokens;
    if (std::find(plan.adapters.begin(), plan.adapters.end(), s.req.adapter) == plan.adapters.end()) {
      plan.adapters.push_back(s.req.adapter);
      plan.shape.lora_adapters += 1;
    }
  }
  // vLLM publishes a block's hash when it is scheduled to become full, so a request admitted
  // behind this one can already hit it.
  if (kv_.prefix_caching()) register_full_blocks(s, s.computed + publish);
}

bool Replica::lora_admissible(const Sequence& s) const {
  if (!deployment_->lora || s.req.adapter < 0) return true;
  std::vector<std::int32_t> distinct;
  for (const std::int32_t slot : running_) {
    const std::int32_t a = seq(slot).req.adapter;
    if (a == s.req.adapter) return true;
    if (a >= 0 && std::find(distinct.begin(), distinct.end(), a) == distinct.end()) distinct.push_back(a);
  }
  return static_cast<int>(distinct.size()) < deployment_->lora->max_loras;
}

void Replica::load_adapters() {
  const LoraConfig& c = *deployment_->lora;
  for (const std::int32_t a : plan_.adapters) {
    const auto gpu = std::find(lora_gpu_.begin(), lora_gpu_.end(), a);
    if (gpu != lora_gpu_.end()) {
      lora_gpu_.erase(gpu);
      lora_gpu_.push_back(a);
    } else {
      // Evict the least recently used slot not needed by this step (the scheduler keeps a
      // step's adapters within max_loras, so one exists).
      if (static_cast<int>(lora_gpu_.size()) >= c.max_loras) {
        for (auto it = lora_gpu_.begin(); it != lora_gpu_.end(); ++it) {
          if (std::find(plan_.adapters.begin(), plan_.adapters.end(), *it) == plan_.adapters.end()) {
            lora_gpu_.erase(it);
            break;
          }
        }
      }
      lora_gpu_.push_back(a);
      plan_.shape.lora_loads += 1;
      ++stats_.lora_loads;
    }
    const auto host = std::find(lora_host_.begin(), lora_host_.end(), a);
    if (host != lora_host_.end()) {
      lora_host_.erase(host);
    } else {
      ++stats_.lora_host_misses;
      if (static_cast<int>(lora_host_.size()) >= c.cpu_slots()) lora_host_.erase(lora_host_.begin());
    }
    lora_host_.push_back(a);
  }
}

void Replica::register_full_blocks(Sequence& s, std::int64_t computed_after) {
  const std::int64_t full = std::min<std::int64_t>(computed_after / block_size_,
                                                   static_cast<std::int64_t>(s.blocks.size()));
  if (full <= s.registered) return;
  extend_hashes(s, full);
  for (std::int64_t b = s.registered; b < full; ++b) {
    kv_.register_block(s.blocks[static_cast<std::size_t>(b)], s.hashes[static_cast<std::size_t>(b)]);
  }
  s.registered = full;
}

SimTime Replica::begin_step(SimTime now) {
  assert(!stepping_);
  plan_.clear();
  // Back to back with the step that just ended, an asynchronous scheduler formed this step when
  // that one started; after an idle gap it forms it now. When the coming step would otherwise
  // be empty the engine waits for the step in flight and schedules afresh, so it sees `now`.
  const bool back_to_back = deployment_->engine.async_scheduling && last_step_end_ == now;
  visible_until_ = back_to_back ? step_start_ : now;
  policy_->schedule(*this, plan_);
  if (back_to_back && plan_.items.empty() && plan_.preempted == 0 && !waiting_.empty()) {
    visible_until_ = now;
    policy_->schedule(*this, plan_);
  }
  record_state(now);
  if (plan_.items.empty()) return 0;
  if (deployment_->lora) load_adapters();
  for (const ScheduledItem& it : plan_.items) {
    Sequence& s = seq(it.slot);
    if (s.first_scheduled < 0) s.first_scheduled = now;
  }
  stepping_ = true;
  step_start_ = now;
  return record_step();
}

void Replica::record_state(SimTime now) {
  stats_.running.add(now, static_cast<double>(running_.size()));
  stats_.waiting.add(now, static_cast<double>(waiting_.size()));
  stats_.kv_used_fraction.add(
      now, kv_.num_blocks() ? static_cast<double>(kv_.used_blocks()) / kv_.num_blocks() : 0.0);
  if (now >= stats_.timeline_next) sample_timeline(now);
}

SimTime Replica::record_step() {
  const StepBreakdown b = cost_->totals(plan_.shape);
  const SimTime dur = std::max<SimTime>(1, from_seconds(b.seconds));
  stats_.steps += 1;
  stats_.step_seconds.add(b.seconds);
  stats_.batch_tokens.add(static_cast<double>(plan_.shape.tokens()));
  stats_.batch_sequences.add(static_cast<double>(plan_.shape.sequences()));
  stats_.step_ms_distribution.add(b.seconds * 1e3);
  stats_.batch_sequences_distribution.add(static_cast<double>(plan_.shape.sequences()));
  stats_.prompt_tokens_computed += plan_.shape.prefill_tokens;
  stats_.busy_seconds += b.seconds;
  stats_.compute_s += b.compute_s;
  stats_.memory_s += b.memory_s;
  stats_.communication_s += b.communication_s;
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
  // The client receives this step's tokens after the return path, which walks every sequence
  // that emitted one (docs/cost-model.md#request-path).
  std::int64_t emitting = 0;
  for (const ScheduledItem& it : plan_.items) {
    const Sequence& s = seq(it.slot);
    if (s.computed + it.tokens >= s.tokens()) ++emitting;
  }
  const EngineProfile& e = deployment_->engine;
  const SimTime delivered =
      now + from_seconds(e.return_s + e.return_per_sequence_s * static_cast<double>(emitting));
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
    if (s.generated >= s.req.output_tokens) {
      release_all(s);
      obs.on_finish(s, delivered);
      free_slots_.push_back(it.slot);
      s.req.segments.clear();
      s.req.segments.shrink_to_fit();
      s.hashes.clear();
      s.hashes.shrink_to_fit();
      any_finished = true;
      s.computed = -1;  // marks the slot finished until it is reused
    }
  }
  if (any_finished) {
    running_.erase(std::remove_if(running_.begin(), running_.end(),
                                  [&](std::int32_t slot) { return seq(slot).computed < 0; }),
                   running_.end());
  }
}

Replica::AbortResult Replica::abort(std::uint64_t id, SimTime now) {
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

// The step in flight only decodes, and the policy would plan the same decodes again: every
// running sequence, nothing preempted, nothing admissible waiting (see repeats_pure_decode).
bool Replica::quiet_decode() const {
  // Speculative decodes emit a drawn number of tokens and LoRA steps may load adapters: neither
  // repeats a step in closed form.
  if (spec_k_ > 0 || deployment_->lora) return false;
  if (!policy_->repeats_pure_decode() || layout_.hybrid() || plan_.preempted != 0) return false;
  const auto n = static_cast<std::int64_t>(running_.size());
  if (n == 0 || static_cast<std::int64_t>(plan_.items.size()) != n) return false;
  if (n > limits().max_num_batched_tokens) return false;
  return waiting_.empty() || n >= limits().max_num_seqs;
}

SimTime Replica::fast_forward(SimTime end, SimTime horizon, ReplicaObserver& obs) {
  if (end >= horizon || !stepping_ || !quiet_decode()) return end;
  const std::size_t n = running_.size();
  const std::int64_t bs = block_size_;
  const SimTime previous = seq(running_[0]).last_token;
  // Steps whose end may be skipped: none may emit a sequence's last token.
  std::int64_t steps_left = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i = 0; i < n; ++i) {
    const ScheduledItem& it = plan_.items[i];
    if (it.slot != running_[i] || it.tokens != 1) return end;
    const Sequence& s = seq(it.slot);
    // A decode (not a prompt's last token), whose previous token came with everyone else's, and
    // whose blocks and published blocks are exactly those of computed + 1 tokens.
    if (s.generated < 1 || s.pending() != 1 || s.last_token != previous) return end;
    const std::int64_t c1 = s.computed + 1;
    if (static_cast<std::int64_t>(s.blocks.size()) != (c1 + bs - 1) / bs) return end;
    if (kv_.prefix_caching() && s.registered != c1 / bs) return end;
    steps_left = std::min(steps_left, s.req.output_tokens - s.generated - 1);
  }
  if (steps_left < 1) return end;

  // After m skipped step ends a sequence that had computed c0 tokens computes token c0 + m:
  // it needs a new block when (c0 + m) % B == 0 and fills one when (c0 + m + 1) % B == 0, so
  // its boundaries recur every B steps; bucket them by m mod B, in running order.
  if (boundaries_.size() < static_cast<std::size_t>(bs)) boundaries_.resize(static_cast<std::size_t>(bs));
  for (std::int64_t r = 0; r < bs; ++r) boundaries_[static_cast<std::size_t>(r)].clear();
  boundary_allocs_.assign(static_cast<std::size_t>(bs), 0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t c0 = seq(running_[i]).computed;
    const auto ra = static_cast<std::size_t>(((-c0) % bs + bs) % bs);
    const auto rp = static_cast<std::size_t>(((-c0 - 1) % bs + bs) % bs);
    const bool publish = kv_.prefix_caching();
    const auto pos = static_cast<std::int32_t>(i);
    if (ra == rp) {
      boundaries_[ra].push_back({pos, true, publish});
    } else {
      boundaries_[ra].push_back({pos, true, false});
      if (publish) boundaries_[rp].push_back({pos, false, true});
    }
    ++boundary_allocs_[ra];
  }
  // Buckets hold positions in running order only if each was filled in that order: it was.

  const EngineProfile& e = deployment_->engine;
  // end_step's return path with every running sequence emitting.
  const SimTime ret = from_seconds(e.return_s + e.return_per_sequence_s * static_cast<double>(n));
  ff_delivered_.clear();
  std::int64_t m = 0;
  SimTime cur = end;
  bool plain_begin = false;
  while (m < steps_left && cur < horizon) {
    // end_step(cur): each sequence computes its token and receives it after the return path.
    ff_delivered_.push_back(cur + ret);
    ++m;
    stepping_ = false;
    last_step_end_ = cur;
    // begin_step(cur): the same decodes, back to back with the step that just ended.
    const std::vector<Boundary>& due = boundaries_[static_cast<std::size_t>(m % bs)];
    if (boundary_allocs_[static_cast<std::size_t>(m % bs)] > kv_.free_blocks()) {
      plain_begin = true;  // a grow would fail: the policy preempts; let it
      break;
    }
    for (const Boundary& b : due) {
      Sequence& s = seq(running_[static_cast<std::size_t>(b.pos)]);
      const std::int64_t total = s.computed + m + 1;  // s.computed is still c0
      if (b.allocate) {
        const bool ok = grow(s, total);
        assert(ok);
        (void)ok;
      }
      if (b.publish) register_full_blocks(s, total);
    }
    visible_until_ = e.async_scheduling ? step_start_ : cur;
    plan_.shape.decode_context_tokens += static_cast<double>(n);
    record_state(cur);
    stepping_ = true;
    step_start_ = cur;
    cur += record_step();
    ++stats_.skipped_steps;
  }
  if (m > 0) {
    for (std::size_t i = 0; i < n; ++i) {
      Sequence& s = seq(running_[i]);
      s.computed += m;
      s.generated += m;
      s.last_token = ff_delivered_.back();
    }
    obs.on_decode_steps(*this, running_, previous, ff_delivered_);
  }
  if (!plain_begin) return cur;
  const SimTime dur = begin_step(cur);
  return dur > 0 ? cur + dur : -1;
}

void Replica::close_stats(SimTime end) {
  if (end >= stats_.timeline_next) sample_timeline(end);
  stats_.running.add(end, static_cast<double>(running_.size()));
  stats_.waiting.add(end, static_cast<double>(waiting_.size()));
  stats_.kv_used_fraction.add(
      end, kv_.num_blocks() ? static_cast<double>(kv_.used_blocks()) / kv_.num_blocks() : 0.0);
}

}  // namespace capsim
