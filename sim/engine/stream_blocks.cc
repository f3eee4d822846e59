#include "sim/engine/stream_blocks.h"

#include <algorithm>

#include "sim/engine/block_hash.h"

namespace capsim {

const StreamBlocks* StreamTable::find(std::uint64_t stream) const {
  const auto it = index_.find(stream);
  return it == index_.end() ? nullptr : &entries_[static_cast<std::size_t>(it->second)];
}

std::int32_t StreamTable::open(std::uint64_t stream, std::uint64_t& owners, const KvBlockManager& kv) {
  const auto it = index_.find(stream);
  if (it != index_.end()) return it->second;
  if (index_.size() >= 1024 && index_.size() >= 2 * swept_) sweep(kv);
  std::int32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = static_cast<std::int32_t>(entries_.size());
    entries_.emplace_back();
  }
  StreamBlocks& st = entries_[static_cast<std::size_t>(slot)];
  st.stream = stream;
  st.owner = ++owners;  // a fresh name: no block holds a tag of it
  st.published.clear();
  st.active = 0;
  index_.emplace(stream, slot);
  return slot;
}

// As far as the prefix cache can tell a forgotten stream never ran here (a later request of one
// opens it afresh, under a new owner).
void StreamTable::sweep(const KvBlockManager& kv) {
  for (auto it = index_.begin(); it != index_.end();) {
    StreamBlocks& st = entries_[static_cast<std::size_t>(it->second)];
    bool live = st.active > 0;
    for (std::size_t i = 0; !live && i < st.published.size(); ++i) {
      live = kv.holds(st.published[i], KvBlockManager::unique_tag(st.owner, static_cast<std::int64_t>(i)));
    }
    if (live) {
      ++it;
      continue;
    }
    st.published.clear();
    st.published.shrink_to_fit();
    free_.push_back(it->second);
    it = index_.erase(it);
  }
  swept_ = index_.size();
}

std::int64_t StreamTable::hits(const StreamBlocks& st, std::int64_t from, std::int64_t n, const KvBlockManager& kv) {
  const std::int64_t m = std::min<std::int64_t>(n, static_cast<std::int64_t>(st.published.size()));
  std::int64_t i = from;
  while (i < m && kv.holds(st.published[static_cast<std::size_t>(i)], KvBlockManager::unique_tag(st.owner, i))) ++i;
  return std::max<std::int64_t>(0, i - from);
}

std::int64_t StreamTable::lookup(const Request& r, const StreamBlocks* st, std::vector<std::uint64_t>& hashes,
                                 std::int64_t max_blocks, std::int64_t block_size, const KvBlockManager& kv) {
  const std::int64_t shared = std::min(max_blocks, std::max<std::int64_t>(0, r.private_from) / block_size);
  extend_block_hashes(r, block_size, shared, hashes);
  const std::int64_t hits_by_hash = kv.lookup(hashes.data(), shared);
  if (hits_by_hash < shared || st == nullptr) return hits_by_hash;
  return hits_by_hash + hits(*st, shared, max_blocks, kv);
}

void StreamTable::publish(Sequence& s, std::int64_t from, std::int64_t to, KvBlockManager& kv) {
  if (from >= to) return;
  StreamBlocks& st = at(s.stream_slot);
  std::vector<std::int32_t>& published = st.published;
  if (static_cast<std::int64_t>(published.size()) < to) published.resize(static_cast<std::size_t>(to), -1);
  for (std::int64_t b = from; b < to; ++b) {
    const auto i = static_cast<std::size_t>(b);
    const std::uint64_t tag = KvBlockManager::unique_tag(st.owner, b);
    if (kv.holds(published[i], tag)) continue;
    if (kv.publish_unique(s.blocks[i], tag)) published[i] = s.blocks[i];
  }
}

}  // namespace capsim
