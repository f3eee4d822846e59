// Sliding-window KV layouts (hybrid models such as Gemma 2, gpt-oss: KvLayout::hybrid()), as
// vLLM's SlidingWindowManager keeps them: each sequence holds, per block of tokens,
// layout.sliding_groups blocks of the sliding groups, but only for the logical blocks that
// still hold tokens inside the window (Sequence::sw_blocks from logical block sw_first on).
//
// Contract: sliding blocks are never hashed nor shared between sequences (a prefix hit spares
// their compute, not their blocks). Under a full-attention layout every function is a no-op
// returning 0.
#pragma once

#include <cstdint>

#include "sim/engine/kv_block_manager.h"
#include "sim/engine/sequence.h"
#include "sim/llm/memory_plan.h"

namespace capsim {

// The first logical block still in the window once `computed` tokens are computed: the next
// query attends to tokens from computed - window + 1 on.
std::int64_t window_first_block(const KvLayout& layout, std::int64_t block_size, std::int64_t computed);

// Frees the sliding blocks of `s` wholly before the window once it has computed `computed`
// tokens (vLLM's remove_skipped_blocks); returns window_first_block.
std::int64_t trim_window(const KvLayout& layout, std::int64_t block_size, KvBlockManager& kv, Sequence& s,
                         std::int64_t computed);

// The sliding blocks `s` must allocate to hold `total` tokens, the window starting at logical
// block `first`.
std::int64_t sliding_need(const KvLayout& layout, std::int64_t block_size, const Sequence& s,
                          std::int64_t first, std::int64_t total);

}  // namespace capsim
