// One inference request as the engine sees it.
//
// Token content matters only for prefix caching: a request's tokens are described by segments of
// identical content (a system prompt shared by a group, a chat's history, a Mooncake hash block,
// the answer it will generate). Two requests whose first k full blocks consist of the same
// segments at the same offsets share those k KV blocks.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "sim/core/time.h"

namespace capsim {

struct ContentSegment {
  std::uint64_t content;  // identity of this run of tokens; equal ids = equal tokens
  std::int64_t tokens;
};

struct Request {
  std::uint64_t id = 0;
  SimTime arrival = 0;
  std::int64_t prompt_tokens = 0;
  std::int64_t output_tokens = 0;
  // Covers the prompt and then the output, in order. Empty = content unique to this request.
  std::vector<ContentSegment> segments;
  // Content private to a stream (a closed-loop chat session), a shortcut for prefix caching:
  // with `stream` != 0, the tokens from `private_from` on are content no request of another
  // stream has, every request of the stream has the same first `private_from` tokens, and a
  // request of the stream is sent only after its earlier ones finished and starts with their
  // whole content (prompt and output: a session's next turn repeats the history). Then block i's
  // chained hash, for a block ending after private_from, is the same in every request of the
  // stream and in no other, so the engine names it (stream, i) instead of hashing it
  // (Replica: stream blocks). 0 = nothing declared: every block is hashed from `segments`.
  std::uint64_t stream = 0;
  std::int64_t private_from = 0;
  std::uint32_t user = kNoUser;  // closed-loop user that sent it
  std::uint32_t turn = 0;        // turn within the user's session (0 = first)
  // Multi-LoRA serving: the adapter the request names (0..N-1), -1 = the base model.
  std::int32_t adapter = -1;
  // A cache, not content: the chained KV-block hashes of the prompt's first blocks at
  // `hashed_block_size` tokens a block, filled by the prefix-aware router
  // (Replica::cached_prefix_blocks_keep) so that the other replicas it asks, and the engine
  // that admits the request, do not hash the prompt again. Empty: not computed.
  std::vector<std::uint64_t> block_hashes;
  std::int64_t hashed_block_size = 0;
  // Leading prompt tokens whose KV another instance computed and sent (a disaggregated decode
  // pool's request: cluster/disaggregation.h). The replica allocates their blocks at admission
  // and computes only the rest. 0 for every request a workload generates.
  std::int64_t external_computed = 0;

  static constexpr std::uint32_t kNoUser = std::numeric_limits<std::uint32_t>::max();
};

}  // namespace capsim
