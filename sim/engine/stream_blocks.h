// Stream blocks of one replica (Request::stream, under prefix caching without a CPU tier): the
// private blocks of a stream of requests (a chat session's turns) published under
// KvBlockManager::unique_tag(owner, i) instead of a content hash, so a later request of the
// stream finds them without hashing its whole history.
//
// Owns: one StreamBlocks entry per stream seen here, and the index from stream id to entry.
// Invariants: an entry's `published[i]` (-1: none) is valid only while the block still holds
// unique_tag(owner, i) (KvBlockManager::holds): eviction is detected lazily, never pushed here.
// An owner is never reused: a stream forgotten by sweep() and seen again gets a fresh one, so
// no stale tag can match. sweep() runs when the table has doubled since the last one, so
// memory follows the streams with cached blocks and sweeps cost O(1) per stream opened.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "sim/engine/kv_block_manager.h"
#include "sim/engine/sequence.h"
#include "sim/workload/request.h"

namespace capsim {

// A stream's published blocks in this replica: published[i] is the block published at index
// i (-1: none), valid while it holds unique_tag(owner, i). `active`: the stream's sequences in
// this replica.
struct StreamBlocks {
  std::uint64_t stream = 0, owner = 0;
  std::vector<std::int32_t> published;
  std::int64_t active = 0;
};

class StreamTable {
 public:
  const StreamBlocks* find(std::uint64_t stream) const;
  StreamBlocks& at(std::int32_t slot) { return entries_[static_cast<std::size_t>(slot)]; }
  const StreamBlocks& at(std::int32_t slot) const { return entries_[static_cast<std::size_t>(slot)]; }
  // The entry of `stream`, opened (under owner ++owners) when it is not here.
  std::int32_t open(std::uint64_t stream, std::uint64_t& owners, const KvBlockManager& kv);
  // Leading blocks [from, n) of `st` still published, counted from `from`.
  static std::int64_t hits(const StreamBlocks& st, std::int64_t from, std::int64_t n, const KvBlockManager& kv);
  // The prefix-cache lookup of a stream request (hashes: its leading shared hashes, extended):
  // its shared blocks by hash, then, when all of those hit, the stream's published blocks.
  static std::int64_t lookup(const Request& r, const StreamBlocks* st, std::vector<std::uint64_t>& hashes,
                             std::int64_t max_blocks, std::int64_t block_size, const KvBlockManager& kv);
  // Publishes s's stream blocks [from, to) whose index no live block holds (as the hash table's
  // insert keeps the first block of a hash).
  void publish(Sequence& s, std::int64_t from, std::int64_t to, KvBlockManager& kv);

 private:
  // Forgets the streams with no sequence here and no block still holding one of their tags.
  void sweep(const KvBlockManager& kv);

  std::unordered_map<std::uint64_t, std::int32_t> index_;  // Request::stream -> entries_
  std::vector<StreamBlocks> entries_;
  std::vector<std::int32_t> free_;
  std::size_t swept_ = 0;  // entries in use after the last sweep()
};

}  // namespace capsim
