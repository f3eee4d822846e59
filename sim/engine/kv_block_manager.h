// The paged KV cache of one replica, as vLLM V1 manages it (vllm-v1-notes.md sections 1.5, 4):
// fixed-size blocks, reference counts, prefix caching by block hash, and lazy LRU eviction —
// a freed block keeps its hash in the free queue until it is reallocated, so a later request
// (or the same one after preemption) can still hit it.
//
// Contract: free_blocks() counts every block with no reference, cached or not, as vLLM's
// get_num_free_blocks() does. Block ids are 0..num_blocks-1. Not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/flat_hash_map.h"
#include "sim/core/invariant.h"

namespace capsim {

class KvBlockManager {
 public:
  KvBlockManager(std::int64_t num_blocks, bool prefix_caching);
  // The bytes the block records, the free queue and (with prefix caching) the hash table take for
  // `num_blocks` once every block has been published: what a run's memory check
  // (RunLimit::kKvBookkeepingBytes) counts for a replica before building it.
  static double bookkeeping_bytes(std::int64_t num_blocks, bool prefix_caching);

  std::int64_t num_blocks() const { return static_cast<std::int64_t>(blocks_.size()); }
  std::int64_t free_blocks() const { return free_count_; }
  std::int64_t used_blocks() const { return num_blocks() - free_count_; }
  bool prefix_caching() const { return prefix_caching_; }

  // How many leading hashes are cached (stops at the first miss). Takes no references.
  std::int64_t lookup(const std::uint64_t* hashes, std::int64_t n) const;
  // Of those `hits` leading cached blocks, how many currently sit in the free queue (they stop
  // counting as free once a request takes them).
  std::int64_t hits_in_free_queue(const std::uint64_t* hashes, std::int64_t hits) const;
  // Takes a reference on the first `hits` cached blocks (REQUIRES: hits <= lookup()) and
  // appends their ids to `table`.
  void take_hits(const std::uint64_t* hashes, std::int64_t hits, std::vector<std::int32_t>& table);
  // Appends `n` fresh blocks to `table`, evicting the least recently freed cached blocks.
  // Returns false (and changes nothing) when fewer than n blocks are free.
  bool allocate(std::int64_t n, std::vector<std::int32_t>& table);
  // allocate(1, table), inline: the block a decode takes at each block boundary (most calls).
  bool allocate_one(std::vector<std::int32_t>& table) {
    if (free_count_ == 0) return false;
    const std::int32_t b = pop_free_head();
    CAPSIM_INVARIANT(b >= 0 && blocks_[b].ref == 0, "KV: allocating a block in use");
    if ((blocks_[b].hash | blocks_[b].tag) != 0) forget(b);
    blocks_[b].ref = 1;
    --free_count_;
    table.push_back(b);
    return true;
  }
  // Publishes a full block under `hash` so later lookups find it. A hash already published by
  // another block keeps its first block.
  void register_block(std::int32_t block, std::uint64_t hash);
  // Drops one reference from each block of `table` (in reverse, so a sequence's tail is evicted
  // before its head) and clears it.
  void release(std::vector<std::int32_t>& table);
  // release() that first publishes table[i] under unique_tag(owner, i) for from <= i < to (a
  // unique-content sequence's blocks, or a stream's, published when released:
  // Replica::release_all).
  void release_tagging(std::vector<std::int32_t>& table, std::uint64_t owner, std::int64_t from,
                       std::int64_t to);

  std::int64_t evictions() const { return evictions_; }

  // ---- Blocks of content unique to one sequence ----
  // A request without content segments has content no other request shares (request.h), so its
  // blocks' chained hashes can only ever match lookups by its own sequence, after a preemption.
  // Such blocks are not hashed nor put in the hash table: a published one carries a tag naming
  // its sequence (`owner`, a replica-local number >= 1) and its index in the sequence, and the
  // sequence remembers which block it published at each index. "Hash h is cached at block b"
  // becomes "b still carries the tag", which holds until b is reallocated (evicted), exactly
  // when the hash would leave the table. Lookups, free-queue order and evictions are those of
  // the hashed path (tests/engine/kv_block_manager_test.cc, tests/cluster/unique_content_test.cc).
  static std::uint64_t unique_tag(std::uint64_t owner, std::int64_t index) {
    return (owner << 32) | static_cast<std::uint64_t>(index);
  }
  // Whether `block` still holds what was published under `tag`.
  bool holds(std::int32_t block, std::uint64_t tag) const {
    return block >= 0 && blocks_[static_cast<std::size_t>(block)].tag == tag;
  }
  // register_block for a unique-content block: publishes `block` under `tag` unless it is
  // already published (the caller checks that no other block holds `tag`, as the hash table's
  // insert would). No-op without prefix caching. Returns whether `block` now holds `tag`.
  bool publish_unique(std::int32_t block, std::uint64_t tag) {
    const auto b = static_cast<std::size_t>(block);
    if (!prefix_caching_ || blocks_[b].hash != 0 || blocks_[b].tag != 0) return blocks_[b].tag == tag;
    blocks_[b].tag = tag;
    return true;
  }
  // lookup() for a unique-content sequence: how many leading entries of `blocks` (the blocks it
  // published, by index; -1 = none) still hold their tag, at most n.
  std::int64_t lookup_unique(const std::vector<std::int32_t>& blocks, std::uint64_t owner,
                             std::int64_t n) const;
  // hits_in_free_queue() and take_hits() for hits given as block ids.
  std::int64_t in_free_queue(const std::int32_t* blocks, std::int64_t n) const;
  void take_blocks(const std::int32_t* blocks, std::int64_t n, std::vector<std::int32_t>& table);

  // Every block is either referenced or in the free queue, and free_blocks() counts the latter
  // (O(blocks); for invariant checks).
  bool consistent() const;

 private:
  // The free queue is a ring of block ids in queue order, head (evicted first) to tail. A block
  // leaving it from the middle (a prefix hit: vLLM's touch) leaves a hole (-1) that allocation
  // skips, so every queue operation is O(1) and allocation reads ids in sequence instead of
  // chasing links from block to block. Live entries are at most num_blocks; when the ring fills
  // up with holes it is compacted in order (amortized O(1): the ring is at least twice that).
  void push_free_tail(std::int32_t b) {
    if (tail_ - head_ == ring_.size()) compact();
    const std::size_t at = tail_++ & ring_mask_;
    ring_[at] = b;
    blocks_[b].pos = static_cast<std::int32_t>(at);
    ++free_count_;
  }
  // The first live entry, taken off the ring (the caller counts it off free_count_).
  // REQUIRES: free_count_ > 0.
  std::int32_t pop_free_head() {
    std::int32_t b;
    do b = ring_[head_++ & ring_mask_]; while (b < 0);
    return b;
  }
  void compact();
  // Evicts what free block `b` holds (its hash or tag): reallocation loses the cached content.
  void forget(std::int32_t b) {
    if (blocks_[b].hash != 0) {
      cached_.erase_if(blocks_[b].hash, b);
      ++version_;
      blocks_[b].hash = 0;
    } else {
      blocks_[b].tag = 0;  // a unique-content block: its tag is lost the same way
    }
    ++evictions_;
  }
  void unlink_free(std::int32_t b) {
    ring_[static_cast<std::size_t>(blocks_[b].pos)] = -1;
    --free_count_;
  }
  void take(std::int32_t b, std::vector<std::int32_t>& table) {
    if (blocks_[b].ref == 0) unlink_free(b);  // vLLM's touch(): a hit leaves the eviction queue
    ++blocks_[b].ref;
    table.push_back(b);
  }

  // A block's state in one 32-byte record: a take, release or tag check reads and writes one
  // cache line, not one per field (block ids are scattered after a while, so separate arrays
  // cost a cache miss each). A block is in the free queue exactly when nobody references it
  // (ref 0).
  struct alignas(32) Block {
    std::uint64_t hash = 0;  // 0 = no hash
    std::uint64_t tag = 0;   // unique-content publication (unique_tag); 0 = none
    std::int32_t ref = 0;
    std::int32_t pos = -1;   // its slot in ring_ while it is in the free queue
  };
  bool prefix_caching_;
  std::vector<Block> blocks_;
  std::vector<std::int32_t> ring_;  // a power of two >= 2 x num_blocks slots; -1 = a hole
  std::size_t ring_mask_ = 0;
  std::uint64_t head_ = 0, tail_ = 0;  // ring positions (mod its size): [head_, tail_) is the queue
  std::int64_t free_count_ = 0;
  std::int64_t evictions_ = 0;
  FlatHashMap cached_;  // block hash -> block id
  // The last hash chain looked up, as far as it was probed: memo_hashes_ (its first memo_hits_
  // found at memo_blocks_, then at most one miss), valid while cached_ is unchanged (version_,
  // bumped by every insert and erase, equals memo_version_). Every request of a group starts
  // with the same system-prompt chain, and with stream blocks (replica.h) those are the only
  // hashed blocks, rarely inserted or evicted: lookups, hits_in_free_queue and take_hits then
  // compare hashes instead of probing the table. The answers are the table's.
  void probe(const std::uint64_t* hashes, std::int64_t n) const;
  std::uint64_t version_ = 0;
  mutable std::uint64_t memo_version_ = ~std::uint64_t{0};
  mutable std::vector<std::uint64_t> memo_hashes_;
  mutable std::vector<std::int32_t> memo_blocks_;
};

}  // namespace capsim
