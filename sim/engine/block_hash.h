// Prefix-cache block identities (vLLM V1's chained block hashes) and a per-session memo of them.
//
// A block's hash is the hash of its parent block's hash and of the content pieces it covers
// (ContentSegment id, offset in the segment, length), so it depends only on the request's
// content up to the block's end. Replicas compute them lazily (Replica::lookup_hits,
// register_full_blocks); the prefix-aware router computes a prompt's once for every replica it
// asks (Replica::cached_prefix_blocks_keep).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "sim/workload/request.h"

namespace capsim {

// Appends the chained hashes of blocks hashes.size() .. blocks - 1 of `r` (`block_size` tokens a
// block). REQUIRES: `hashes` holds r's blocks 0 .. hashes.size() - 1 at this block size. Never
// returns 0 for a block (0 means "no hash" in the block manager).
void extend_block_hashes(const Request& r, std::int64_t block_size, std::int64_t blocks,
                         std::vector<std::uint64_t>& hashes);

// Tokens at the start of `a` and `b` that are the same content: the sum of their leading
// segments equal in content id and length. Every block of one that ends within this many tokens
// has the same chained hash in the other (the hash of a block reads only the segments up to the
// block's end). 0 when either has no segments (its content is unique to its request id).
std::int64_t common_content_tokens(const std::vector<ContentSegment>& a,
                                   const std::vector<ContentSegment>& b);

// A closed-loop session's next turn repeats everything the previous turn saw (its prompt and its
// answer) before its new question, so the previous turn's block hashes are the first hashes of
// the next one. This memo keeps, per user, the last finished request's content and hashes and
// hands a new request of that user the leading hashes that are provably the same (blocks ending
// within common_content_tokens, at the same block size): the hashes a replica then computes for
// the request are exactly those it would have computed from scratch (tests/engine/
// block_hash_test.cc), so no result changes. Not thread-safe; one per simulation.
class SessionHashCache {
 public:
  // At most this many hashes are kept over all users (8 bytes each): beyond it, finished
  // requests are not remembered (only speed is lost).
  static constexpr std::int64_t kMaxHashes = std::int64_t{1} << 22;

  // Remembers the hashes `hashes` (blocks 0.. of `r` at `block_size` tokens a block) of a
  // finished request of user r.user. Nothing for a request without a user or content segments.
  void remember(const Request& r, std::int64_t block_size, const std::vector<std::uint64_t>& hashes);

  // When `r` carries no block hashes yet: sets r.block_hashes to the leading hashes the user's
  // remembered request proves (at most the prompt's floor((prompt_tokens - 1) / block_size)
  // blocks, all a replica looks up) and r.hashed_block_size to their block size. Returns how
  // many it set (0: `r` unchanged).
  std::int64_t seed(Request& r) const;

  std::int64_t stored_hashes() const { return stored_; }

 private:
  struct Entry {
    std::vector<ContentSegment> segments;
    std::int64_t block_size = 0;
    std::vector<std::uint64_t> hashes;
  };
  std::unordered_map<std::uint32_t, Entry> users_;
  std::int64_t stored_ = 0;
};

}  // namespace capsim
