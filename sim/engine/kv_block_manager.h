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

namespace capsim {

class KvBlockManager {
 public:
  KvBlockManager(std::int64_t num_blocks, bool prefix_caching);

  std::int64_t num_blocks() const { return static_cast<std::int64_t>(ref_.size()); }
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
  // Publishes a full block under `hash` so later lookups find it. A hash already published by
  // another block keeps its first block.
  void register_block(std::int32_t block, std::uint64_t hash);
  // Drops one reference from each block of `table` (in reverse, so a sequence's tail is evicted
  // before its head) and clears it.
  void release(std::vector<std::int32_t>& table);

  std::int64_t evictions() const { return evictions_; }

  // Every block is either referenced or in the free queue, and free_blocks() counts the latter
  // (O(blocks); for invariant checks).
  bool consistent() const;

 private:
  void push_free_tail(std::int32_t b);
  void unlink_free(std::int32_t b);

  bool prefix_caching_;
  std::vector<std::int32_t> ref_;
  std::vector<std::uint64_t> hash_;  // 0 = no hash
  std::vector<std::int32_t> prev_, next_;  // free queue links; -1 = none
  std::vector<char> in_free_;
  std::int32_t head_ = -1, tail_ = -1;
  std::int64_t free_count_ = 0;
  std::int64_t evictions_ = 0;
  FlatHashMap cached_;  // block hash -> block id
};

}  // namespace capsim
