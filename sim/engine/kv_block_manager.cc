#include "sim/engine/kv_block_manager.h"

#include <algorithm>
#include <cassert>

#include "sim/core/invariant.h"

namespace capsim {

KvBlockManager::KvBlockManager(std::int64_t num_blocks, bool prefix_caching)
    : prefix_caching_(prefix_caching),
      blocks_(static_cast<std::size_t>(num_blocks)),
      links_(static_cast<std::size_t>(num_blocks)),
      // At most one cached hash per block; room for twice that keeps the table at most a
      // quarter full, so the probe runs of the per-block insert/erase/lookup stay short
      // (a half-full table cost ~10% more instructions per simulated block).
      cached_(prefix_caching ? static_cast<std::size_t>(2 * num_blocks) : 16) {
  for (std::int32_t b = 0; b < static_cast<std::int32_t>(num_blocks); ++b) push_free_tail(b);
}

void KvBlockManager::push_free_tail(std::int32_t b) {
  const std::int32_t tail = tail_;
  links_[b].prev = tail;
  links_[b].next = -1;
  if (tail >= 0) links_[tail].next = b; else head_ = b;
  tail_ = b;
  ++free_count_;
}

void KvBlockManager::unlink_free(std::int32_t b) {
  assert(blocks_[b].ref == 0);
  const std::int32_t prev = links_[b].prev, next = links_[b].next;
  if (prev >= 0) links_[prev].next = next; else head_ = next;
  if (next >= 0) links_[next].prev = prev; else tail_ = prev;
  links_[b].prev = links_[b].next = -1;
  --free_count_;
}

std::int64_t KvBlockManager::lookup(const std::uint64_t* hashes, std::int64_t n) const {
  if (!prefix_caching_) return 0;
  std::int64_t hits = 0;
  while (hits < n && cached_.contains(hashes[hits])) ++hits;
  return hits;
}

std::int64_t KvBlockManager::hits_in_free_queue(const std::uint64_t* hashes,
                                                std::int64_t hits) const {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < hits; ++i) n += blocks_[cached_.find(hashes[i])].ref == 0;
  return n;
}

void KvBlockManager::take_hits(const std::uint64_t* hashes, std::int64_t hits,
                               std::vector<std::int32_t>& table) {
  for (std::int64_t i = 0; i < hits; ++i) {
    const std::int32_t b = cached_.find(hashes[i]);
    assert(b >= 0);
    take(b, table);
  }
}

std::int64_t KvBlockManager::lookup_unique(const std::vector<std::int32_t>& blocks,
                                           std::uint64_t owner, std::int64_t n) const {
  if (!prefix_caching_) return 0;
  const std::int64_t m = std::min<std::int64_t>(n, static_cast<std::int64_t>(blocks.size()));
  std::int64_t hits = 0;
  while (hits < m && holds(blocks[static_cast<std::size_t>(hits)], unique_tag(owner, hits))) ++hits;
  return hits;
}

std::int64_t KvBlockManager::in_free_queue(const std::int32_t* blocks, std::int64_t n) const {
  std::int64_t free = 0;
  for (std::int64_t i = 0; i < n; ++i) free += blocks_[blocks[i]].ref == 0;
  return free;
}

void KvBlockManager::take_blocks(const std::int32_t* blocks, std::int64_t n,
                                 std::vector<std::int32_t>& table) {
  for (std::int64_t i = 0; i < n; ++i) take(blocks[i], table);
}

bool KvBlockManager::allocate(std::int64_t n, std::vector<std::int32_t>& table) {
  if (n == 1) return allocate_one(table);
  if (n > free_count_) return false;
  if (n <= 0) return true;
  // The n blocks at the head of the free queue, in queue order, detached in one piece (their
  // links are left as they are: they mean nothing outside the queue), written in place.
  const std::size_t first = table.size();
  table.resize(first + static_cast<std::size_t>(n));
  std::int32_t* out = table.data() + first;
  std::int32_t b = head_;
  for (std::int64_t i = 0; i < n; ++i) {
    CAPSIM_INVARIANT(b >= 0 && blocks_[b].ref == 0, "KV: allocating a block in use");
    if ((blocks_[b].hash | blocks_[b].tag) != 0) forget(b);  // evict: the cached content is lost only now
    blocks_[b].ref = 1;
    out[i] = b;
    b = links_[b].next;
  }
  head_ = b;
  if (b >= 0) links_[b].prev = -1; else tail_ = -1;
  free_count_ -= n;
  return true;
}

void KvBlockManager::register_block(std::int32_t block, std::uint64_t hash) {
  if (!prefix_caching_ || blocks_[block].hash != 0 || blocks_[block].tag != 0) return;
  if (cached_.insert(hash, block)) blocks_[block].hash = hash;
}

void KvBlockManager::release(std::vector<std::int32_t>& table) {
  release_tagging(table, 0, 0, 0);
}

void KvBlockManager::release_tagging(std::vector<std::int32_t>& table, std::uint64_t owner,
                                     std::int64_t from, std::int64_t to) {
  // Cached or not, a freed block joins the tail: the head is evicted first. The freed blocks are
  // linked in a local chain and appended to the queue at the end (the same order as pushing each).
  // Tagging and releasing share the one walk: publishing a block reads and writes only that
  // block's hash and tag, never a reference count, so tagging table[i] just before releasing it
  // leaves every block as tagging them all first would (a table holds a block once).
  std::int32_t first = -1, last = -1;
  std::int64_t freed = 0;
  if (!prefix_caching_) to = from;  // publish_unique is a no-op without prefix caching
  for (std::int64_t i = static_cast<std::int64_t>(table.size()) - 1; i >= 0; --i) {
    const std::int32_t b = table[static_cast<std::size_t>(i)];
    Block& k = blocks_[static_cast<std::size_t>(b)];
    if (i < to && i >= from && (k.hash | k.tag) == 0) k.tag = unique_tag(owner, i);  // publish_unique
    assert(k.ref > 0);
    CAPSIM_INVARIANT(k.ref > 0, "KV: releasing a block nobody holds");
    if (--k.ref != 0) continue;
    links_[b].prev = last;
    if (last >= 0) links_[last].next = b; else first = b;
    last = b;
    ++freed;
  }
  table.clear();
  if (first < 0) return;
  links_[last].next = -1;
  const std::int32_t tail = tail_;
  links_[first].prev = tail;
  if (tail >= 0) links_[tail].next = first; else head_ = first;
  tail_ = last;
  free_count_ += freed;
}

}  // namespace capsim

namespace capsim {

bool KvBlockManager::consistent() const {
  std::int64_t unreferenced = 0;
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    if (blocks_[b].ref < 0) return false;
    unreferenced += blocks_[b].ref == 0;
  }
  // The free queue links exactly the unreferenced blocks, both ways.
  std::int64_t queued = 0;
  std::int32_t prev = -1;
  for (std::int32_t b = head_; b >= 0; prev = b, b = links_[b].next) {
    if (blocks_[b].ref != 0 || links_[b].prev != prev || ++queued > num_blocks()) return false;
  }
  return prev == tail_ && queued == unreferenced && unreferenced == free_count_;
}

}  // namespace capsim
