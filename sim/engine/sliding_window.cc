#include "sim/engine/sliding_window.h"

#include <algorithm>
#include <vector>

namespace capsim {

std::int64_t window_first_block(const KvLayout& layout, std::int64_t block_size, std::int64_t computed) {
  const std::int64_t first_useful = computed - layout.sliding_window + 1;
  return first_useful > 0 ? first_useful / block_size : 0;
}

// Blocks wholly before the first useful token are replaced by the null block in vLLM's block
// table, so they return to the free queue here.
std::int64_t trim_window(const KvLayout& layout, std::int64_t block_size, KvBlockManager& kv, Sequence& s,
                         std::int64_t computed) {
  if (!layout.hybrid()) return 0;
  const std::int64_t first = window_first_block(layout, block_size, computed);
  const std::int64_t groups = layout.sliding_groups;
  const std::int64_t held = static_cast<std::int64_t>(s.sw_blocks.size()) / groups;
  const std::int64_t drop = std::min(held, first - s.sw_first);
  if (drop > 0) {
    std::vector<std::int32_t> gone(s.sw_blocks.begin(), s.sw_blocks.begin() + drop * groups);
    s.sw_blocks.erase(s.sw_blocks.begin(), s.sw_blocks.begin() + drop * groups);
    kv.release(gone);
  }
  if (s.sw_blocks.empty()) s.sw_first = std::max(s.sw_first, first);
  else s.sw_first += std::max<std::int64_t>(0, drop);
  return first;
}

std::int64_t sliding_need(const KvLayout& layout, std::int64_t block_size, const Sequence& s,
                          std::int64_t first, std::int64_t total) {
  if (!layout.hybrid()) return 0;
  const std::int64_t groups = layout.sliding_groups;
  const std::int64_t held_end = s.sw_first + static_cast<std::int64_t>(s.sw_blocks.size()) / groups;
  const std::int64_t end = (total + block_size - 1) / block_size;
  return std::max<std::int64_t>(0, end - std::max(held_end, first)) * groups;
}

}  // namespace capsim
