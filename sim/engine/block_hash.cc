#include "sim/engine/block_hash.h"

#include <algorithm>

namespace capsim {
namespace {

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A block's identity is the hash chain of vLLM (hash of the parent block and this block's
// tokens); tokens are described by content segments, so the hash combines each segment piece
// (content id, offset in the segment, length) that the block covers. `seg`/`seg_start` are a
// cursor into r.segments: the first segment that may overlap `block` and where it starts. Every
// segment before it ends at or before the block's first token, so it would contribute nothing
// and never stop the walk; blocks hashed in increasing order move it forward only, so hashing a
// prompt of S segments and B blocks costs O(S + B) rather than O(S x B).
std::uint64_t chained_block_hash(const Request& r, std::int64_t block_size, std::uint64_t parent,
                                 std::int64_t block, std::size_t& seg, std::int64_t& seg_start) {
  const std::int64_t begin = block * block_size, end = begin + block_size;
  std::uint64_t h = mix64(parent ^ 0x51ed2701a3c4e5f7ULL);
  if (r.segments.empty()) {
    h = mix64(h ^ mix64(r.id * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(block)));
  } else {
    while (seg < r.segments.size() && seg_start + r.segments[seg].tokens <= begin) {
      seg_start += r.segments[seg].tokens;
      ++seg;
    }
    std::int64_t start = seg_start;
    for (std::size_t k = seg; k < r.segments.size(); ++k) {
      const ContentSegment& sg = r.segments[k];
      const std::int64_t s_end = start + sg.tokens;
      if (s_end > begin && start < end) {
        const std::int64_t from = std::max(begin, start) - start;
        const std::int64_t to = std::min(end, s_end) - start;
        h = mix64(h ^ mix64(sg.content));
        h = mix64(h ^ static_cast<std::uint64_t>(from) ^ (static_cast<std::uint64_t>(to) << 32));
      }
      if (s_end >= end) break;
      start = s_end;
    }
  }
  return h == 0 ? 1 : h;
}

}  // namespace

void extend_block_hashes(const Request& r, std::int64_t block_size, std::int64_t blocks,
                         std::vector<std::uint64_t>& hashes) {
  std::size_t seg = 0;
  std::int64_t seg_start = 0;
  while (static_cast<std::int64_t>(hashes.size()) < blocks) {
    const std::uint64_t parent = hashes.empty() ? 0 : hashes.back();
    hashes.push_back(chained_block_hash(r, block_size, parent,
                                        static_cast<std::int64_t>(hashes.size()), seg, seg_start));
  }
}

std::int64_t common_content_tokens(const std::vector<ContentSegment>& a,
                                   const std::vector<ContentSegment>& b) {
  std::int64_t tokens = 0;
  const std::size_t n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i].content != b[i].content || a[i].tokens != b[i].tokens) break;
    tokens += a[i].tokens;
  }
  return tokens;
}

void SessionHashCache::remember(const Request& r, std::int64_t block_size,
                                const std::vector<std::uint64_t>& hashes) {
  if (r.user == Request::kNoUser || r.segments.empty() || block_size <= 0) return;
  const auto it = users_.find(r.user);
  const std::int64_t old = it == users_.end() ? 0 : static_cast<std::int64_t>(it->second.hashes.size());
  const auto n = static_cast<std::int64_t>(hashes.size());
  if (n == 0 || stored_ - old + n > kMaxHashes) {
    if (it != users_.end()) {
      stored_ -= old;
      users_.erase(it);
    }
    return;
  }
  Entry& e = it == users_.end() ? users_[r.user] : it->second;
  e.segments.assign(r.segments.begin(), r.segments.end());  // reuses the entry's capacity
  e.block_size = block_size;
  e.hashes.assign(hashes.begin(), hashes.end());
  stored_ += n - old;
}

std::int64_t SessionHashCache::seed(Request& r) const {
  if (r.user == Request::kNoUser || r.segments.empty() || r.hashed_block_size != 0 ||
      !r.block_hashes.empty()) {
    return 0;
  }
  const auto it = users_.find(r.user);
  if (it == users_.end()) return 0;
  const Entry& e = it->second;
  const std::int64_t prompt_blocks = std::max<std::int64_t>(0, r.prompt_tokens - 1) / e.block_size;
  const std::int64_t proven = common_content_tokens(e.segments, r.segments) / e.block_size;
  const std::int64_t n =
      std::min({static_cast<std::int64_t>(e.hashes.size()), proven, prompt_blocks});
  if (n <= 0) return 0;
  r.block_hashes.assign(e.hashes.begin(), e.hashes.begin() + n);
  r.hashed_block_size = e.block_size;
  return n;
}

}  // namespace capsim
