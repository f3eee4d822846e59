// The replica's paged KV cache as the policies use it: prefix-cache lookup (for routing and at
// admission), admission taking the hits and fresh blocks, growth (full-attention and sliding
// blocks: engine/sliding_window.h), publishing full blocks as a step is scheduled to fill them,
// preemption by recompute and release.
//
// Owns no state of its own: the block manager (engine/kv_block_manager.h) holds the blocks and
// the hash table; each Sequence holds its block table. Three ways a block is published, fixed
// when the sequence is added: by content hash (requests with segments, or any request with a
// CPU tier, which keys blocks by hash), by a unique tag of the sequence (content nobody else can
// hit: Sequence::unique_owner), or by a stream's tag (engine/stream_blocks.h). Invariant kept
// here: Sequence::registered <= blocks.size(), and the blocks below it are published (or, for
// tags_on_release and deferred stream blocks, are published when released).
#include "sim/engine/replica.h"

#include <algorithm>
#include <cassert>

#include "sim/engine/block_hash.h"

namespace capsim {

void Replica::release_all(Sequence& s, bool preempted) {
  if (cpu_) cpu_release(s);
  if (s.stream_slot >= 0) {
    // Publish the blocks deferred until now (past every index the stream had published: nothing
    // holds their tags, and they are fresh blocks, so each is published); a finished or aborted
    // sequence leaves its stream.
    StreamBlocks& st = streams_.at(s.stream_slot);
    const std::int64_t n = std::min<std::int64_t>(s.registered, static_cast<std::int64_t>(s.blocks.size()));
    if (n > s.defer_from && static_cast<std::int64_t>(st.published.size()) <= s.defer_from) {
      st.published.resize(static_cast<std::size_t>(s.defer_from), -1);
      st.published.insert(st.published.end(), s.blocks.begin() + static_cast<std::ptrdiff_t>(s.defer_from),
                          s.blocks.begin() + static_cast<std::ptrdiff_t>(n));
      kv_.release_tagging(s.blocks, st.owner, s.defer_from, n);
    } else {
      streams_.publish(s, s.defer_from, n, kv_);
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

// A request without content segments shares no block with any other request (request.h), and
// one being routed is in no replica yet: nothing to hash or look up.
std::int64_t Replica::cached_prefix_blocks(const Request& r) const {
  if (!kv_.prefix_caching() || r.segments.empty()) return 0;
  const std::int64_t max_blocks = (r.prompt_tokens - 1) / block_size_;
  // Scratch reused across calls (the router asks for every arrival and every replica).
  thread_local std::vector<std::uint64_t> hashes;
  hashes.clear();
  if (r.stream != 0) return StreamTable::lookup(r, streams_.find(r.stream), hashes, max_blocks, block_size_, kv_);
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
  if (r.stream != 0) return StreamTable::lookup(r, streams_.find(r.stream), r.block_hashes, max_blocks, block_size_, kv_);
  extend_block_hashes(r, block_size_, max_blocks, r.block_hashes);
  return kv_.lookup(r.block_hashes.data(), max_blocks);
}

bool Replica::may_cache_block(const Request& r, std::int64_t i) const {
  if (!kv_.prefix_caching()) return false;
  if (r.hashed_block_size == block_size_ && i < static_cast<std::int64_t>(r.block_hashes.size())) {
    return kv_.lookup(r.block_hashes.data() + i, 1) == 1;
  }
  if (r.stream != 0 && !r.segments.empty() && i >= std::max<std::int64_t>(0, r.private_from) / block_size_) {
    const StreamBlocks* st = streams_.find(r.stream);
    return st != nullptr && StreamTable::hits(*st, i, i + 1, kv_) == 1;
  }
  return true;
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
    return StreamTable::lookup(s.req, &streams_.at(s.stream_slot), s.hashes, max_blocks, block_size_, kv_);
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
      hit_blocks > hashed_hits ? streams_.at(s.stream_slot).published.data() + hashed_hits
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
    first = window_first_block(layout_, block_size_, cached);
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
                                                 streams_.at(s.stream_slot).published.size()));
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
    streams_.publish(s, std::max(s.registered, s.shared_blocks), std::min(full, s.defer_from), kv_);
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

}  // namespace capsim
