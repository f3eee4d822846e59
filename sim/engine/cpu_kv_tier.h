// The CPU tier of KV blocks behind one replica's GPU prefix cache: vLLM's OffloadingConnector
// with the native CPU backend (--kv-offloading-size, v0.15; read in inference-sim/vllm@f6ec81c76,
// the fork the development runs used, = vllm-project/vllm main of 2026-01-23 plus tracing):
//   vllm/v1/kv_offload/cpu.py         CPUOffloadingSpec: the number of CPU blocks
//   vllm/v1/kv_offload/lru_manager.py LRUOffloadingManager: what is kept and evicted
//   vllm/distributed/kv_transfer/kv_connector/v1/offloading_connector.py: when blocks are
//     stored (every full block a scheduled request computes, prompt and output) and looked up
//     (after the GPU prefix cache, for the blocks beyond its hits).
// This class is the LRUOffloadingManager's bookkeeping; Replica drives it (stores, lookups, the
// asynchronous load and the request's wait for it; docs/cost-model.md#cpu-kv-offloading).
//
// Contract, as the LRU manager's: a block is keyed by its prefix-cache hash (no data is kept).
// A stored block is first pending (its store is in flight: vLLM's ref_cnt -1), neither found by
// lookups nor evictable, and becomes ready when its request finishes or is preempted (complete_store
// runs when the request reports finished_sending). Storing n new blocks evicts the least recently
// used ready blocks; when fewer are evictable the store is refused whole and changes nothing
// (prepare_store returns None; the connector retries with the request's next blocks). Not
// thread-safe.
//
// Memory: slots are made as blocks are stored, so a tier of 1e5 GiB costs nothing until it is
// used (it grows to bookkeeping_bytes(capacity) when full). A slot freed by eviction is reused
// before a new one is made, the most recently freed first: the slot order, and so every result,
// is that of a tier whose slots were all made up front.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/flat_hash_map.h"

namespace capsim {

class CpuKvTier {
 public:
  // Throws capsim::Error when `capacity_blocks` is past the 32-bit slot ids.
  explicit CpuKvTier(std::int64_t capacity_blocks);
  // The bytes the slots and the hash table take with every one of `capacity_blocks` in use: what
  // a run's memory check (RunLimit::kKvBookkeepingBytes) counts for a replica's tier up front.
  static double bookkeeping_bytes(std::int64_t capacity_blocks);

  std::int64_t capacity() const { return capacity_; }
  std::int64_t slots_made() const { return static_cast<std::int64_t>(hash_.size()); }  // <= capacity()
  std::int64_t used() const { return used_; }   // pending + ready
  std::int64_t ready() const { return ready_count_; }

  // How many leading `hashes` are ready (stops at the first miss or pending block).
  std::int64_t lookup(const std::uint64_t* hashes, std::int64_t n) const;
  // Makes the present ready blocks among `hashes` the most recently used, hashes[0] last (the
  // manager's touch walks them in reverse, so a sequence's tail is evicted before its head).
  void touch(const std::uint64_t* hashes, std::int64_t n);
  // prepare_store: the blocks of `hashes` not present become pending, their slots appended to
  // `pending` (the storing request's list). False, and nothing changes, when they do not fit
  // even after evicting every ready block.
  bool store(const std::uint64_t* hashes, std::int64_t n, std::vector<std::int32_t>& pending);
  // complete_store: the request's pending blocks become ready (most recently used) and
  // `pending` is cleared.
  void complete(std::vector<std::int32_t>& pending);

  std::int64_t stored_blocks() const { return stored_; }
  std::int64_t evictions() const { return evictions_; }
  std::int64_t refused_blocks() const { return refused_; }
  // Every slot is free, pending or in the LRU list, and the counts agree (O(capacity); tests).
  bool consistent() const;

 private:
  void push_mru(std::int32_t b);
  void unlink(std::int32_t b);
  // A free slot: the most recently freed one, else a new one. REQUIRES: a slot is free.
  std::int32_t take_slot();
  // Slots not made yet (all free).
  std::int64_t unmade() const { return capacity_ - static_cast<std::int64_t>(hash_.size()); }

  std::int64_t capacity_;
  std::vector<std::uint64_t> hash_;  // per slot made so far; 0 = free slot
  std::vector<std::int8_t> state_;   // 0 free, 1 pending, 2 ready
  std::vector<std::int32_t> prev_, next_;  // LRU list of ready blocks, head = least recent
  std::vector<std::int32_t> free_;   // freed slots (made, then evicted), the last freed at the back
  std::int32_t head_ = -1, tail_ = -1;
  std::int64_t used_ = 0, ready_count_ = 0;
  std::int64_t stored_ = 0, evictions_ = 0, refused_ = 0;
  FlatHashMap slot_of_;  // hash -> slot
};

}  // namespace capsim
