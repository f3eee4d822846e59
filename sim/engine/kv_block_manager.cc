#include "sim/engine/kv_block_manager.h"

#include <algorithm>
#include <bit>
#include <cassert>

#include "sim/core/invariant.h"

namespace capsim {

KvBlockManager::KvBlockManager(std::int64_t num_blocks, bool prefix_caching)
    : prefix_caching_(prefix_caching),
      blocks_(static_cast<std::size_t>(num_blocks)),
      ring_(std::bit_ceil(std::max<std::size_t>(2 * static_cast<std::size_t>(num_blocks), 2)), -1),
      ring_mask_(ring_.size() - 1),
      // Sized at the first publication (register_block): requests of unique content never
      // publish a hash, and a table for every block is hundreds of KiB to clear for nothing.
      cached_(16) {
  for (std::int32_t b = 0; b < static_cast<std::int32_t>(num_blocks); ++b) push_free_tail(b);
}

double KvBlockManager::bookkeeping_bytes(std::int64_t num_blocks, bool prefix_caching) {
  const double n = static_cast<double>(num_blocks);
  double ring = 2;
  while (ring < 2 * n) ring *= 2;  // as ring_: bit_ceil(max(2n, 2))
  // cached_ starts at 16 keys and is reserved for 2n at the first publication (register_block).
  return n * static_cast<double>(sizeof(Block)) + ring * static_cast<double>(sizeof(std::int32_t)) +
         FlatHashMap::bytes_reserved_for(prefix_caching ? 2 * n : 16);
}

void KvBlockManager::compact() {
  // In order, towards the head: the write position never passes the read position.
  std::uint64_t w = head_;
  for (std::uint64_t r = head_; r != tail_; ++r) {
    const std::int32_t b = ring_[r & ring_mask_];
    if (b < 0) continue;
    const std::size_t at = w++ & ring_mask_;
    ring_[at] = b;
    blocks_[b].pos = static_cast<std::int32_t>(at);
  }
  for (std::uint64_t r = w; r != tail_; ++r) ring_[r & ring_mask_] = -1;
  tail_ = w;
}

// Makes the memo cover hashes[0, n): keeps its part that agrees with them, then probes the
// table from there until n hashes are probed or one is missing.
void KvBlockManager::probe(const std::uint64_t* hashes, std::int64_t n) const {
  if (memo_version_ != version_) {
    memo_hashes_.clear();
    memo_blocks_.clear();
    memo_version_ = version_;
  }
  const auto m = static_cast<std::int64_t>(memo_hashes_.size());
  std::int64_t k = 0;
  while (k < n && k < m && memo_hashes_[static_cast<std::size_t>(k)] == hashes[k]) ++k;
  if (k < m && k < n) {  // the chains differ at k: forget the memo's rest
    memo_hashes_.resize(static_cast<std::size_t>(k));
    if (static_cast<std::int64_t>(memo_blocks_.size()) > k) memo_blocks_.resize(static_cast<std::size_t>(k));
  }
  // Probed through a miss: nothing past it counts.
  if (memo_blocks_.size() < memo_hashes_.size()) return;
  for (std::int64_t i = static_cast<std::int64_t>(memo_hashes_.size()); i < n; ++i) {
    const std::int32_t b = cached_.find(hashes[i]);
    memo_hashes_.push_back(hashes[i]);
    if (b < 0) return;
    memo_blocks_.push_back(b);
  }
}

std::int64_t KvBlockManager::lookup(const std::uint64_t* hashes, std::int64_t n) const {
  if (!prefix_caching_ || n <= 0) return 0;
  probe(hashes, n);
  return std::min<std::int64_t>(n, static_cast<std::int64_t>(memo_blocks_.size()));
}

std::int64_t KvBlockManager::hits_in_free_queue(const std::uint64_t* hashes,
                                                std::int64_t hits) const {
  if (hits <= 0) return 0;
  probe(hashes, hits);
  assert(static_cast<std::int64_t>(memo_blocks_.size()) >= hits);
  return in_free_queue(memo_blocks_.data(), hits);
}

void KvBlockManager::take_hits(const std::uint64_t* hashes, std::int64_t hits,
                               std::vector<std::int32_t>& table) {
  if (hits <= 0) return;
  probe(hashes, hits);
  assert(static_cast<std::int64_t>(memo_blocks_.size()) >= hits);
  for (std::int64_t i = 0; i < hits; ++i) take(memo_blocks_[static_cast<std::size_t>(i)], table);
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
  if (n <= 0) return;
  table.reserve(table.size() + static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) take(blocks[i], table);
}

bool KvBlockManager::allocate(std::int64_t n, std::vector<std::int32_t>& table) {
  if (n == 1) return allocate_one(table);
  if (n > free_count_) return false;
  if (n <= 0) return true;
  // The n blocks at the head of the free queue, in queue order, written in place.
  const std::size_t first = table.size();
  table.resize(first + static_cast<std::size_t>(n));
  std::int32_t* out = table.data() + first;
  // Locals: the stores to blocks_ (int32 fields) could alias the ring's ids for the compiler.
  const std::int32_t* const ring = ring_.data();
  const std::size_t mask = ring_mask_;
  std::uint64_t head = head_;
  for (std::int64_t i = 0; i < n; ++i) {
    std::int32_t b;
    do b = ring[head++ & mask]; while (b < 0);
    Block& blk = blocks_[static_cast<std::size_t>(b)];
    CAPSIM_INVARIANT(blk.ref == 0, "KV: allocating a block in use");
    if ((blk.hash | blk.tag) != 0) forget(b);  // evict: the cached content is lost only now
    blk.ref = 1;
    out[i] = b;
  }
  head_ = head;
  free_count_ -= n;
  return true;
}

void KvBlockManager::register_block(std::int32_t block, std::uint64_t hash) {
  if (!prefix_caching_ || blocks_[block].hash != 0 || blocks_[block].tag != 0) return;
  // At most one cached hash per block; room for twice that keeps the table at most a quarter
  // full, so the probe runs of the per-block insert/erase/lookup stay short (a half-full table
  // cost ~10% more instructions per simulated block).
  if (cached_.size() == 0) cached_.reserve(2 * blocks_.size());
  if (cached_.insert(hash, block)) {
    blocks_[block].hash = hash;
    ++version_;
  }
}

void KvBlockManager::release(std::vector<std::int32_t>& table) {
  release_tagging(table, 0, 0, 0);
}

void KvBlockManager::release_tagging(std::vector<std::int32_t>& table, std::uint64_t owner,
                                     std::int64_t from, std::int64_t to) {
  // Cached or not, a freed block joins the tail: the head is evicted first. Blocks [from, to)
  // are tagged in the same pass (a tag touches its own block only).
  const std::int64_t n = static_cast<std::int64_t>(table.size());
  // Room for the whole table first (the ring holds at most num_blocks live entries, and the
  // table's blocks are not among them), so the pushes below need no check.
  if (tail_ - head_ + static_cast<std::uint64_t>(n) > ring_.size()) compact();
  std::int32_t* const ring = ring_.data();
  const std::size_t mask = ring_mask_;
  std::uint64_t tail = tail_;
  const std::uint64_t tail_before = tail;
  const auto drop = [&](std::int32_t b) {
    Block& blk = blocks_[static_cast<std::size_t>(b)];
    assert(blk.ref > 0);
    CAPSIM_INVARIANT(blk.ref > 0, "KV: releasing a block nobody holds");
    if (--blk.ref != 0) return;
    const std::size_t at = tail++ & mask;
    ring[at] = b;
    blk.pos = static_cast<std::int32_t>(at);
  };
  const std::int64_t hi = std::clamp<std::int64_t>(to, 0, n), lo = std::clamp<std::int64_t>(from, 0, hi);
  for (std::int64_t i = n - 1; i >= hi; --i) drop(table[static_cast<std::size_t>(i)]);
  for (std::int64_t i = hi - 1; i >= lo; --i) {
    const std::int32_t b = table[static_cast<std::size_t>(i)];
    (void)publish_unique(b, unique_tag(owner, i));
    drop(b);
  }
  for (std::int64_t i = lo - 1; i >= 0; --i) drop(table[static_cast<std::size_t>(i)]);
  tail_ = tail;
  free_count_ += static_cast<std::int64_t>(tail - tail_before);
  table.clear();
}

}  // namespace capsim

namespace capsim {

bool KvBlockManager::consistent() const {
  std::int64_t unreferenced = 0;
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    if (blocks_[b].ref < 0) return false;
    unreferenced += blocks_[b].ref == 0;
  }
  // The ring lists exactly the unreferenced blocks, each once (its own slot is the one it
  // records), between head and tail; outside that span it holds nothing.
  if (tail_ - head_ > ring_.size()) return false;
  std::int64_t queued = 0;
  for (std::uint64_t r = head_; r != tail_; ++r) {
    const std::int32_t b = ring_[r & ring_mask_];
    if (b < 0) continue;
    if (static_cast<std::size_t>(b) >= blocks_.size() || blocks_[b].ref != 0 ||
        blocks_[b].pos != static_cast<std::int32_t>(r & ring_mask_)) {
      return false;
    }
    ++queued;
  }
  return queued == unreferenced && unreferenced == free_count_;
}

}  // namespace capsim
