#include "sim/engine/replica.h"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <limits>

#include "sim/core/error.h"
#include "sim/engine/block_hash.h"

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

void Replica::release_all(Sequence& s, bool preempted) {
  if (cpu_) cpu_release(s);
  if (s.stream_slot >= 0) {
    // Publish the blocks deferred until now (past every index the stream had published: nothing
    // holds their tags, and they are fresh blocks, so each is published); a finished or aborted
    // sequence leaves its stream.
    StreamBlocks& st = streams_[static_cast<std::size_t>(s.stream_slot)];
    const std::int64_t n = std::min<std::int64_t>(s.registered, static_cast<std::int64_t>(s.blocks.size()));
    if (n > s.defer_from && static_cast<std::int64_t>(st.published.size()) <= s.defer_from) {
      st.published.resize(static_cast<std::size_t>(s.defer_from), -1);
      st.published.insert(st.published.end(), s.blocks.begin() + static_cast<std::ptrdiff_t>(s.defer_from),
                          s.blocks.begin() + static_cast<std::ptrdiff_t>(n));
      kv_.release_tagging(s.blocks, st.owner, s.defer_from, n);
    } else {
      publish_stream(s, s.defer_from, n);
      kv_.release(s.blocks);
    }
    if (!preempted) --st.active;
  } else if (tags_on_release(s) && s.registered > 0) {
    // Publish what this run published (nothing competes with it: Sequence::unique_owner); a
    // preempted sequence looks these blocks up when it is readmitted.
    const std::int64_t n = std::min<std::int64_t>(s.registered, static_cast<std::int64_t>(s.blocks.size()));
    if (preempted) s.unique_published.assign(s.blocks.begin(), s.blocks.begin() + static_cast<std::ptrdiff_t>(n));
    kv_.release_tagging(s.blocks, s.unique_owner, 0, n);
  } else {
    kv_.release(s.blocks);
  }
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
    s.stream_slot = open_stream(s.req.stream);
    ++streams_[static_cast<std::size_t>(s.stream_slot)].active;
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

// A request without content segments shares no block with any other request (request.h), and
// one being routed is in no replica yet: nothing to hash or look up.
std::int64_t Replica::cached_prefix_blocks(const Request& r) const {
  if (!kv_.prefix_caching() || r.segments.empty()) return 0;
  const std::int64_t max_blocks = (r.prompt_tokens - 1) / block_size_;
  // Scratch reused across calls (the router asks for every arrival and every replica).
  thread_local std::vector<std::uint64_t> hashes;
  hashes.clear();
  if (r.stream != 0) return stream_lookup(r, find_stream(r.stream), hashes, max_blocks);
  extend_block_hashes(r, block_size_, max_blocks, hashes);
  return kv_.lookup(hashes.data(), max_blocks);
}

std::int64_t Replica::cached_prefix_blocks_keep(Request& r) const {
  if (!kv_.prefix_caching() || r.segments.empty()) return 0;
  const std::int64_t max_blocks = (r.prompt_tokens - 1) / block_size_;
  if (r.hashed_block_size != block_size_) {
    r.block_hashes.clear();
    r.hashed_block_size = block_size_;
  }
  if (r.stream != 0) return stream_lookup(r, find_stream(r.stream), r.block_hashes, max_blocks);
  extend_block_hashes(r, block_size_, max_blocks, r.block_hashes);
  return kv_.lookup(r.block_hashes.data(), max_blocks);
}

bool Replica::may_cache_block(const Request& r, std::int64_t i) const {
  if (!kv_.prefix_caching()) return false;
  if (r.hashed_block_size == block_size_ && i < static_cast<std::int64_t>(r.block_hashes.size())) {
    return kv_.lookup(r.block_hashes.data() + i, 1) == 1;
  }
  if (r.stream != 0 && !r.segments.empty() && i >= std::max<std::int64_t>(0, r.private_from) / block_size_) {
    const StreamBlocks* st = find_stream(r.stream);
    return st != nullptr && stream_hits(*st, i, i + 1) == 1;
  }
  return true;
}

// ---- Stream blocks ----

const Replica::StreamBlocks* Replica::find_stream(std::uint64_t stream) const {
  const auto it = stream_index_.find(stream);
  return it == stream_index_.end() ? nullptr : &streams_[static_cast<std::size_t>(it->second)];
}

std::int32_t Replica::open_stream(std::uint64_t stream) {
  const auto it = stream_index_.find(stream);
  if (it != stream_index_.end()) return it->second;
  if (stream_index_.size() >= 1024 && stream_index_.size() >= 2 * streams_swept_) sweep_streams();
  std::int32_t slot;
  if (!free_streams_.empty()) {
    slot = free_streams_.back();
    free_streams_.pop_back();
  } else {
    slot = static_cast<std::int32_t>(streams_.size());
    streams_.emplace_back();
  }
  StreamBlocks& st = streams_[static_cast<std::size_t>(slot)];
  st.stream = stream;
  st.owner = ++unique_owners_;  // a fresh name: no block holds a tag of it
  st.published.clear();
  st.active = 0;
  stream_index_.emplace(stream, slot);
  return slot;
}

// Forgets the streams with no sequence here and no block still holding one of their tags: as
// far as the prefix cache can tell they never ran here (a later request of one opens it afresh,
// under a new owner). Run when the table has doubled since the last sweep, so memory follows
// the streams with cached blocks and the sweeps cost O(1) per stream opened.
void Replica::sweep_streams() {
  for (auto it = stream_index_.begin(); it != stream_index_.end();) {
    StreamBlocks& st = streams_[static_cast<std::size_t>(it->second)];
    bool live = st.active > 0;
    for (std::size_t i = 0; !live && i < st.published.size(); ++i) {
      live = kv_.holds(st.published[i], KvBlockManager::unique_tag(st.owner, static_cast<std::int64_t>(i)));
    }
    if (live) {
      ++it;
      continue;
    }
    st.published.clear();
    st.published.shrink_to_fit();
    free_streams_.push_back(it->second);
    it = stream_index_.erase(it);
  }
  streams_swept_ = stream_index_.size();
}

std::int64_t Replica::stream_hits(const StreamBlocks& st, std::int64_t from, std::int64_t n) const {
  const std::int64_t m = std::min<std::int64_t>(n, static_cast<std::int64_t>(st.published.size()));
  std::int64_t i = from;
  while (i < m && kv_.holds(st.published[static_cast<std::size_t>(i)], KvBlockManager::unique_tag(st.owner, i))) ++i;
  return std::max<std::int64_t>(0, i - from);
}

std::int64_t Replica::stream_lookup(const Request& r, const StreamBlocks* st,
                                    std::vector<std::uint64_t>& hashes, std::int64_t max_blocks) const {
  const std::int64_t shared =
      std::min(max_blocks, std::max<std::int64_t>(0, r.private_from) / block_size_);
  extend_block_hashes(r, block_size_, shared, hashes);
  const std::int64_t hits = kv_.lookup(hashes.data(), shared);
  if (hits < shared || st == nullptr) return hits;
  return hits + stream_hits(*st, shared, max_blocks);
}

void Replica::publish_stream(Sequence& s, std::int64_t from, std::int64_t to) {
  if (from >= to) return;
  StreamBlocks& st = streams_[static_cast<std::size_t>(s.stream_slot)];
  std::vector<std::int32_t>& published = st.published;
  if (static_cast<std::int64_t>(published.size()) < to) published.resize(static_cast<std::size_t>(to), -1);
  for (std::int64_t b = from; b < to; ++b) {
    const auto i = static_cast<std::size_t>(b);
    const std::uint64_t tag = KvBlockManager::unique_tag(st.owner, b);
    if (kv_.holds(published[i], tag)) continue;
    if (kv_.publish_unique(s.blocks[i], tag)) published[i] = s.blocks[i];
  }
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
  release_all(s, /*preempted=*/true);
  s.computed = 0;
  s.registered = 0;
  ++s.preemptions;
  ++stats_.preemptions;
  waiting_.push_front(slot);
}

std::int64_t Replica::lookup_hits(Sequence& s) {
  if (!kv_.prefix_caching() || s.computed != 0) return 0;
  const std::int64_t max_blocks = (s.tokens() - 1) / block_size_;
  if (s.unique_owner != 0) return kv_.lookup_unique(s.unique_published, s.unique_owner, max_blocks);
  if (s.stream_slot >= 0) {
    return stream_lookup(s.req, &streams_[static_cast<std::size_t>(s.stream_slot)], s.hashes, max_blocks);
  }
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
  // A stream's hits: its shared blocks by hash, then its published blocks.
  const std::int64_t hashed_hits = s.stream_slot >= 0 ? std::min(hit_blocks, s.shared_blocks) : hit_blocks;
  // Formed only when the stream has hits past its shared blocks: its table is then at least
  // hit_blocks long (an empty table's data() may be null, and null + offset is undefined).
  const std::int32_t* stream_hit =
      hit_blocks > hashed_hits ? streams_[static_cast<std::size_t>(s.stream_slot)].published.data() + hashed_hits
                               : nullptr;
  const std::int64_t reclaimed =
      s.unique_owner != 0
          ? kv_.in_free_queue(s.unique_published.data(), hit_blocks)
          : kv_.hits_in_free_queue(s.hashes.data(), hashed_hits) +
                (hit_blocks > hashed_hits ? kv_.in_free_queue(stream_hit, hit_blocks - hashed_hits) : 0);
  // Sliding groups: fresh blocks for the window before `cached` and the chunk (a prefix hit
  // spares their compute, but capsim does not share sliding blocks between sequences).
  std::int64_t first = 0, sw = 0;
  if (layout_.hybrid()) {
    const std::int64_t first_useful = cached - layout_.sliding_window + 1;
    first = first_useful > 0 ? first_useful / block_size_ : 0;
    sw = (total_blocks - first) * layout_.sliding_groups;
  }
  if (total_blocks - hit_blocks + sw > kv_.free_blocks() - reclaimed) return false;
  // The whole sequence's table at once (it grows to this unless preempted or finished early).
  s.blocks.reserve(static_cast<std::size_t>((s.req.prompt_tokens + s.req.output_tokens + block_size_ - 1) / block_size_));
  if (s.unique_owner != 0) {
    kv_.take_blocks(s.unique_published.data(), hit_blocks, s.blocks);
  } else {
    kv_.take_hits(s.hashes.data(), hashed_hits, s.blocks);
    if (hit_blocks > hashed_hits) kv_.take_blocks(stream_hit, hit_blocks - hashed_hits, s.blocks);
  }
  s.registered = hit_blocks;
  if (s.stream_slot >= 0) {
    s.defer_from = std::max(s.shared_blocks, static_cast<std::int64_t>(
                                                 streams_[static_cast<std::size_t>(s.stream_slot)].published.size()));
  }
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
  s.admitted = admissions_++;
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
  if (s.unique_owner != 0) {
    if (!tags_on_release(s)) {
      // After a preemption: the block an earlier run published at index b, if it is still
      // cached, stays the one lookups find (as a hash already in the table keeps its block).
      std::vector<std::int32_t>& published = s.unique_published;
      for (std::int64_t b = s.registered; b < full; ++b) {
        const auto i = static_cast<std::size_t>(b);
        const std::uint64_t tag = KvBlockManager::unique_tag(s.unique_owner, b);
        if (i < published.size() && kv_.holds(published[i], tag)) continue;
        kv_.publish_unique(s.blocks[i], tag);
        if (!kv_.holds(s.blocks[i], tag)) continue;
        if (published.size() <= i) published.resize(i + 1, -1);
        published[i] = s.blocks[i];
      }
    }
    s.registered = full;
    return;
  }
  if (s.stream_slot >= 0) {
    // Shared blocks by hash; stream blocks before defer_from now, the rest when released.
    const std::int64_t hashed = std::min(full, s.shared_blocks);
    if (s.registered < hashed) {
      extend_hashes(s, hashed);
      for (std::int64_t b = s.registered; b < hashed; ++b) {
        kv_.register_block(s.blocks[static_cast<std::size_t>(b)], s.hashes[static_cast<std::size_t>(b)]);
      }
    }
    publish_stream(s, std::max(s.registered, s.shared_blocks), std::min(full, s.defer_from));
    s.registered = full;
    return;
  }
  extend_hashes(s, full);
  for (std::int64_t b = s.registered; b < full; ++b) {
    kv_.register_block(s.blocks[static_cast<std::size_t>(b)], s.hashes[static_cast<std::size_t>(b)]);
  }
  s.registered = full;
  if (cpu_) cpu_store(s, full);
}

// ---- CPU KV tier ----

// The connector's _get_reqs_to_store: each step, the request's full blocks from the next one not
// yet offloaded. A refused store (the tier full of blocks still being stored) is retried with the
// same blocks at the request's next step. The copy runs on its own CUDA stream after the step's
// compute (cpu_gpu.py transfer_async waits for the compute stream), deferred a step so it never
// delays one (offloading_connector.py _submit_deferred_stores): no cost in the step.
void Replica::cpu_store(Sequence& s, std::int64_t full) {
  CpuSeq& c = cpu_seq_[static_cast<std::size_t>(&s - seqs_.data())];
  if (full <= c.stored) return;
  if (cpu_->store(s.hashes.data() + c.stored, full - c.stored, c.pending)) c.stored = full;
}

// update_connector_output: the request's stores complete (its finished_sending, or build_connector_meta
// for a preempted request); the manager's last touch of its blocks made them the most recent.
void Replica::cpu_release(Sequence& s) {
  const auto slot = static_cast<std::size_t>(&s - seqs_.data());
  CpuSeq& c = cpu_seq_[slot];
  if (c.loading > 0) {  // aborted while loading: the load is dropped
    c.loading = 0;
    c.ready_at = -1;
    loads_in_flight_.erase(std::remove(loads_in_flight_.begin(), loads_in_flight_.end(),
                                       static_cast<std::int32_t>(slot)),
                           loads_in_flight_.end());
  }
  if (c.pending.empty()) return;
  cpu_->complete(c.pending);
  cpu_->touch(s.hashes.data(), std::min<std::int64_t>(c.stored, static_cast<std::int64_t>(s.hashes.size())));
}

std::int64_t Replica::cpu_lookup(Sequence& s, std::int64_t gpu_hits) {
  // get_num_new_matched_tokens: num_blocks = num_tokens // block_size, all touched; nothing
  // when less than a block lies beyond the GPU hits.
  const std::int64_t blocks = s.tokens() / block_size_;
  if (blocks - gpu_hits < 1) return 0;
  extend_hashes(s, blocks);
  cpu_->touch(s.hashes.data(), blocks);
  return cpu_->lookup(s.hashes.data() + gpu_hits, blocks - gpu_hits);
}

bool Replica::start_cpu_load(std::int32_t slot, std::int64_t gpu_hits, std::int64_t cpu_blocks) {
  Sequence& s = seq(slot);
  // allocate_slots with num_external_computed_tokens: the GPU hits are taken and fresh blocks
  // hold what is loaded (their hashes are cached only once it has arrived: delay_cache_blocks).
  const std::int64_t reclaimed = kv_.hits_in_free_queue(s.hashes.data(), gpu_hits);
  if (cpu_blocks > kv_.free_blocks() - reclaimed) return false;
  s.blocks.reserve(static_cast<std::size_t>((s.req.prompt_tokens + s.req.output_tokens + block_size_ - 1) / block_size_));
  kv_.take_hits(s.hashes.data(), gpu_hits, s.blocks);
  s.registered = gpu_hits;
  const bool ok = kv_.allocate(cpu_blocks, s.blocks);
  assert(ok);
  (void)ok;
  if (s.preemptions == 0 && s.first_scheduled < 0) {
    s.prefix_hit_tokens = (gpu_hits + cpu_blocks) * block_size_;
    stats_.prefix_hit_tokens += gpu_hits * block_size_;
    stats_.cpu_hit_tokens += cpu_blocks * block_size_;
    stats_.prefix_lookup_tokens += s.req.prompt_tokens;
  }
  // The worker starts the load with this step (start_load_kv), behind any load still running
  // (each transfer waits for the previous one), at the host-to-device rate of each GPU's link.
  CpuSeq& c = cpu_seq_[static_cast<std::size_t>(slot)];
  c.loading = cpu_blocks;
  c.load_start = std::max(sched_now_, h2d_free_);
  c.load_done = c.load_start + from_seconds(cpu_load_block_s_ * static_cast<double>(cpu_blocks));
  c.ready_at = -1;
  h2d_free_ = c.load_done;
  c.stored = gpu_hits + cpu_blocks;  // _next_stored_block_idx: the loaded blocks are there
  loads_in_flight_.push_back(slot);
  stats_.cpu_loads += 1;
  stats_.cpu_loaded_blocks += cpu_blocks;
  return true;
}

std::int64_t Replica::loaded_tokens(std::int32_t slot) const {
  const Sequence& s = seq(slot);
  return std::min<std::int64_t>(static_cast<std::int64_t>(s.blocks.size()) * block_size_, s.tokens() - 1);
}

bool Replica::admit_loaded(std::int32_t slot, std::int64_t chunk) {
  Sequence& s = seq(slot);
  const std::int64_t computed = loaded_tokens(slot);
  if (!grow(s, computed + chunk)) return false;
  CpuSeq& c = cpu_seq_[static_cast<std::size_t>(slot)];
  stats_.cpu_load_wait_s += to_seconds(sched_now_ - c.load_start);
  c.loading = 0;
  c.ready_at = -1;
  s.computed = computed;
  // _update_waiting_for_remote_kv: the loaded blocks are cached now (cache_blocks).
  register_full_blocks(s, computed);
  s.admitted = admissions_++;
  running_.push_back(slot);
  return true;
}

SimTime Replica::begin_step(SimTime now) {
  assert(!stepping_);
  plan_.clear();
  // Back to back with the step that just ended, an asynchronous scheduler formed this step when
  // that one started; after an idle gap it forms it now. When the coming step would otherwise
  // be empty the engine waits for the step in flight and schedules afresh, so it sees `now`.
  const bool back_to_back = deployment_->engine.async_scheduling && last_step_end_ == now;
  visible_until_ = back_to_back ? step_start_ : now;
  sched_now_ = now;
  schedule_step();
  if (back_to_back && plan_.items.empty() && cohort_planned_ == 0 && plan_.preempted == 0 &&
      !waiting_.empty()) {
    visible_until_ = now;
    schedule_step();
  }
  record_state(now);
  if (plan_.items.empty() && cohort_planned_ == 0) {
    if (loads_in_flight_.empty()) return 0;
    // Only loads from the CPU tier are under way: vLLM's engine keeps stepping without a
    // forward pass (gpu_model_runner kv_connector_no_forward), polling for finished transfers,
    // so it sees the first one finish when it does. No step is counted.
    SimTime done = std::numeric_limits<SimTime>::max();
    for (const std::int32_t slot : loads_in_flight_) done = std::min(done, cpu_seq_[static_cast<std::size_t>(slot)].load_done);
    stepping_ = true;
    step_start_ = now;
    return std::max<SimTime>(1, done - now);
  }
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
  std::int64_t emitting = cohort_planned_;
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
  if (cohort_planned_ > 0) {
    // The cohort comes first in plan order (it is the whole running set when the step began):
    // each member computes its token and receives it at `delivered`; those whose last token it
    // is leave in running order.
    const SimTime previous = cohort_last_;
    ++cohort_d_;
    if (++cohort_phase_ == static_cast<std::size_t>(block_size_)) cohort_phase_ = 0;
    cohort_last_ = delivered;
    obs.on_decode_step(cohort_counted_, previous, delivered);
    while (!finishes_.empty() && finishes_.front().d == cohort_d_ - 1) {
      const std::int32_t slot = finishes_.front().slot;
      std::pop_heap(finishes_.begin(), finishes_.end(), std::greater<>{});
      finishes_.pop_back();
      Sequence& s = seq(slot);
      leave_cohort(s, obs);
      finish(slot, s);
    }
    cohort_planned_ = 0;
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

// ---- Implicit decode ----

void Replica::set_implicit_decode(bool on) {
  assert(!stepping_);
  // Speculative decodes emit a drawn number of tokens, LoRA steps may load adapters and sliding
  // windows free blocks as sequences advance: their steps are only run one sequence at a time.
  on = on && policy_->decodes_then_admits() && spec_k_ == 0 && !deployment_->lora &&
       !layout_.hybrid() && !cpu_;
  if (!on) materialize_cohort();
  implicit_ = on;
  if (on && boundaries_.size() != static_cast<std::size_t>(block_size_)) {
    boundaries_.assign(static_cast<std::size_t>(block_size_), {});
    boundary_allocs_.assign(static_cast<std::size_t>(block_size_), 0);
  }
}

// The policy's running walk, done in bulk for the cohort, is exact when the members (a prefix of
// running_, each decoding one token: the walk gives it min(1, budget)) all fit the budget (the
// walk stops at none), and every block the step's walk needs is free: the boundaries' blocks and
// those of the running sequences after the members, which the walk then gives min(pending,
// budget left) tokens each in running order (no grow() fails, so nothing is preempted: the walk
// grows and publishes in running order, as schedule_step does).
bool Replica::cohort_step_possible() const {
  if (cohort_n_ > limits().max_num_batched_tokens) return false;
  std::int64_t need = boundary_allocs_[cohort_phase_];
  std::int64_t budget = limits().max_num_batched_tokens - cohort_n_;
  for (std::size_t i = static_cast<std::size_t>(cohort_n_); i < running_.size() && budget > 0; ++i) {
    const Sequence& s = seq(running_[i]);
    const std::int64_t tokens = std::min(s.pending(), budget);  // no lookahead: implicit decode has no speculation
    need += std::max<std::int64_t>(0, (s.computed + tokens + block_size_ - 1) / block_size_ -
                                          static_cast<std::int64_t>(s.blocks.size()));
    budget -= tokens;
  }
  return need <= kv_.free_blocks();
}

void Replica::schedule_step() {
  cohort_planned_ = 0;
  // Without members the policy's own walk is the same work (and handles preemption).
  if (!implicit_ || cohort_n_ == 0) {
    policy_->schedule(*this, plan_);
    return;
  }
  if (!cohort_step_possible()) {
    materialize_cohort();
    policy_->schedule(*this, plan_);
    return;
  }
  std::int64_t budget = limits().max_num_batched_tokens;
  const std::int64_t n = cohort_n_;
  // Each member that had computed c tokens grows to c + 1 (a new block on a boundary) and
  // publishes the block that token fills, in running order.
  for (const Boundary& b : boundaries_[cohort_phase_]) {
    Sequence& s = seq(b.slot);
    const std::int64_t total = s.computed + (cohort_d_ - s.cohort_base) + 1;
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
  plan_.shape.decode_context_tokens += static_cast<double>(cohort_ctx_ + n * (cohort_d_ + 1));
  plan_.shape.logit_sequences += n;
  budget -= n;
  cohort_planned_ = n;
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
  s.cohort_base = cohort_d_;
  ++cohort_n_;
  if (obs.counts(s)) ++cohort_counted_;
  cohort_ctx_ += s.computed - s.cohort_base;
  // Joins come in running order (admission order), so appending keeps each bucket sorted.
  const std::size_t ra = residue(s.cohort_base - s.computed, block_size_);
  const std::size_t rp = residue(s.cohort_base - s.computed - 1, block_size_);
  const bool publish = publishes_in_cohort(s);
  s.cohort_publishes = publish;
  assert(boundaries_[ra].empty() || boundaries_[ra].back().admitted < s.admitted);
  if (ra == rp) {
    boundaries_[ra].push_back({s.admitted, slot, true, publish});
  } else {
    boundaries_[ra].push_back({s.admitted, slot, true, false});
    if (publish) boundaries_[rp].push_back({s.admitted, slot, false, true});
  }
  ++boundary_allocs_[ra];
  // The step at D emits token generated + (D - base) + 1: the last when that is output_tokens.
  finishes_.push_back({s.cohort_base + s.req.output_tokens - s.generated - 1, s.admitted, slot});
  std::push_heap(finishes_.begin(), finishes_.end(), std::greater<>{});
}

void Replica::leave_cohort(Sequence& s, ReplicaObserver& obs) {
  const std::int32_t slot = static_cast<std::int32_t>(&s - seqs_.data());
  const std::size_t ra = residue(s.cohort_base - s.computed, block_size_);
  const std::size_t rp = residue(s.cohort_base - s.computed - 1, block_size_);
  const auto drop = [&](std::size_t r) {
    std::vector<Boundary>& v = boundaries_[r];
    v.erase(std::find_if(v.begin(), v.end(), [slot](const Boundary& b) { return b.slot == slot; }));
  };
  drop(ra);
  if (rp != ra && s.cohort_publishes) drop(rp);
  --boundary_allocs_[ra];
  --cohort_n_;
  if (obs.counts(s)) --cohort_counted_;
  cohort_ctx_ -= s.computed - s.cohort_base;
  settle_cohort_member(s);
}

void Replica::settle_cohort_member(Sequence& s) const {
  const std::int64_t steps = cohort_d_ - s.cohort_base;
  s.computed += steps;
  s.generated += steps;
  s.last_token = cohort_last_;
  s.cohort_base = -1;
  catch_up_registered(s);
}

void Replica::materialize_cohort() {
  if (cohort_n_ == 0) return;
  for (const std::int32_t slot : running_) {
    Sequence& s = seq(slot);
    if (s.cohort_base < 0) continue;
    settle_cohort_member(s);
  }
  for (std::vector<Boundary>& v : boundaries_) v.clear();
  std::fill(boundary_allocs_.begin(), boundary_allocs_.end(), 0);
  finishes_.clear();
  cohort_n_ = cohort_counted_ = cohort_ctx_ = 0;
}

// After a step: the running sequences that are not members (this step's admissions, a prefill
// finishing its last chunk, or all of them after a step run one by one) join, in running order up
// to the first that cannot (members stay a prefix of running_): one can when it decodes next (one
// pending token, not finished), received its latest token with the members, and holds exactly
// the blocks (and published blocks) of its computed tokens, as a member does between steps.
void Replica::try_join(ReplicaObserver& obs) {
  const auto first = static_cast<std::size_t>(cohort_n_);  // members are a prefix of running_
  if (first >= running_.size()) return;
  const SimTime last = cohort_n_ > 0 ? cohort_last_ : seq(running_[first]).last_token;
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
  cohort_last_ = last;
  for (std::size_t i = first; i < end; ++i) join_cohort(running_[i], obs);
}

SimTime Replica::fast_forward(SimTime end, SimTime horizon, ReplicaObserver& obs) {
  SimTime cur = end;
  // The step in flight ends at `cur` before anything else happens: when it only decodes the
  // cohort and nobody finishes in it, its end reports tokens only (no completion, so no new
  // event), and the event loop would begin the next step at once.
  while (cur < horizon && stepping_ && cohort_planned_ > 0 && plan_.items.empty() &&
         (finishes_.empty() || finishes_.front().d != cohort_d_)) {
    end_step(cur, obs);
    const SimTime dur = begin_step(cur);
    if (dur == 0) return -1;
    ++stats_.skipped_steps;
    cur += dur;
  }
  return cur;
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
