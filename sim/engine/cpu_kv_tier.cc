#include "sim/engine/cpu_kv_tier.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <string>

#include "sim/core/error.h"
#include "sim/core/invariant.h"

namespace capsim {

namespace {
constexpr std::int8_t kFree = 0, kPending = 1, kReady = 2;
}  // namespace

CpuKvTier::CpuKvTier(std::int64_t capacity_blocks) : capacity_(capacity_blocks) {
  if (capacity_blocks < 0 || capacity_blocks > std::numeric_limits<std::int32_t>::max()) {
    throw Error("CPU KV tier: " + std::to_string(capacity_blocks) + " blocks; its slot ids hold at most " +
                std::to_string(std::numeric_limits<std::int32_t>::max()));
  }
}

double CpuKvTier::bookkeeping_bytes(std::int64_t capacity_blocks) {
  const double n = static_cast<double>(capacity_blocks);
  constexpr double kPerSlot = sizeof(std::uint64_t) + sizeof(std::int8_t) + 3 * sizeof(std::int32_t);
  return n * kPerSlot + FlatHashMap::bytes_reserved_for(2 * n);  // store() keeps slot_of_ reserved for 2 x used
}

std::int32_t CpuKvTier::take_slot() {
  if (!free_.empty()) {
    const std::int32_t b = free_.back();
    free_.pop_back();
    return b;
  }
  const std::size_t made = hash_.size();
  if (made == hash_.capacity()) {  // doubling, never past the capacity
    const auto room = static_cast<std::size_t>(
        std::min<std::int64_t>(capacity_, std::max<std::int64_t>(1024, 2 * static_cast<std::int64_t>(made))));
    hash_.reserve(room);
    state_.reserve(room);
    prev_.reserve(room);
    next_.reserve(room);
  }
  hash_.push_back(0);
  state_.push_back(kFree);
  prev_.push_back(-1);
  next_.push_back(-1);
  return static_cast<std::int32_t>(made);
}

void CpuKvTier::push_mru(std::int32_t b) {
  prev_[b] = tail_;
  next_[b] = -1;
  if (tail_ >= 0) next_[tail_] = b; else head_ = b;
  tail_ = b;
}

void CpuKvTier::unlink(std::int32_t b) {
  const std::int32_t p = prev_[b], n = next_[b];
  if (p >= 0) next_[p] = n; else head_ = n;
  if (n >= 0) prev_[n] = p; else tail_ = p;
  prev_[b] = next_[b] = -1;
}

std::int64_t CpuKvTier::lookup(const std::uint64_t* hashes, std::int64_t n) const {
  std::int64_t hits = 0;
  while (hits < n) {
    const std::int32_t b = slot_of_.find(hashes[hits]);
    if (b < 0 || state_[b] != kReady) break;
    ++hits;
  }
  return hits;
}

void CpuKvTier::touch(const std::uint64_t* hashes, std::int64_t n) {
  for (std::int64_t i = n - 1; i >= 0; --i) {
    const std::int32_t b = slot_of_.find(hashes[i]);
    if (b < 0 || state_[b] != kReady || b == tail_) continue;
    unlink(b);
    push_mru(b);
  }
}

bool CpuKvTier::store(const std::uint64_t* hashes, std::int64_t n, std::vector<std::int32_t>& pending) {
  // The blocks to store are chosen before evicting: a block of this request that is present and
  // gets evicted to make room is not stored again (prepare_store filters, then evicts).
  thread_local std::vector<std::uint64_t> to_store;
  to_store.clear();
  for (std::int64_t i = 0; i < n; ++i) {
    if (!slot_of_.contains(hashes[i])) to_store.push_back(hashes[i]);
  }
  const auto fresh = static_cast<std::int64_t>(to_store.size());
  if (fresh == 0) return true;
  const std::int64_t free = static_cast<std::int64_t>(free_.size()) + unmade();
  if (fresh > free + ready_count_) {
    refused_ += fresh;
    return false;
  }
  // At most a quarter full, as a table sized for the whole tier up front was.
  slot_of_.reserve(static_cast<std::size_t>(2 * std::min(used_ + fresh, capacity_)));
  for (std::int64_t k = fresh - free; k > 0; --k) {  // evict the least recently used ready blocks
    const std::int32_t b = head_;
    unlink(b);
    slot_of_.erase_if(hash_[b], b);
    hash_[b] = 0;
    state_[b] = kFree;
    free_.push_back(b);
    --ready_count_;
    --used_;
    ++evictions_;
  }
  for (const std::uint64_t h : to_store) {
    const std::int32_t b = take_slot();
    hash_[b] = h;
    state_[b] = kPending;
    slot_of_.insert(h, b);
    pending.push_back(b);
    ++used_;
    ++stored_;
  }
  return true;
}

void CpuKvTier::complete(std::vector<std::int32_t>& pending) {
  for (const std::int32_t b : pending) {
    CAPSIM_INVARIANT(state_[b] == kPending, "CPU KV tier: completing a store that is not pending");
    state_[b] = kReady;
    push_mru(b);
    ++ready_count_;
  }
  pending.clear();
}

bool CpuKvTier::consistent() const {
  std::int64_t pending = 0, ready = 0;
  for (std::size_t b = 0; b < hash_.size(); ++b) {
    if (state_[b] == kPending) ++pending;
    if (state_[b] == kReady) ++ready;
    if ((state_[b] == kFree) != (hash_[b] == 0)) return false;
    if (state_[b] != kFree && slot_of_.find(hash_[b]) != static_cast<std::int32_t>(b)) return false;
  }
  std::int64_t listed = 0;
  std::int32_t prev = -1;
  for (std::int32_t b = head_; b >= 0; prev = b, b = next_[b]) {
    if (state_[b] != kReady || prev_[b] != prev || ++listed > capacity()) return false;
  }
  return prev == tail_ && listed == ready && ready == ready_count_ && pending + ready == used_ &&
         static_cast<std::int64_t>(free_.size()) + used_ == static_cast<std::int64_t>(hash_.size()) &&
         static_cast<std::int64_t>(hash_.size()) <= capacity() &&
         static_cast<std::int64_t>(slot_of_.size()) == used_;
}

}  // namespace capsim
