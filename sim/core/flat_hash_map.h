// An open-addressing hash map from non-zero 64-bit keys to 32-bit values: linear probing,
// backward-shift deletion, no per-entry allocation. The prefix cache does a lookup, insert or
// erase for almost every KV block it touches; std::unordered_map's node allocations dominated
// the simulator's profile, and Debian 12's Boost (1.74) predates boost::unordered_flat_map.
//
// Contract: key 0 is reserved (it marks empty slots). Keys are expected to be well mixed
// (they are hash-chain values); the slot is taken from the key's high bits after a multiply.
#pragma once

#include <cstdint>
#include <vector>

namespace capsim {

class FlatHashMap {
 public:
  explicit FlatHashMap(std::size_t expected = 16) { rehash(expected * 2); }

  // The value for `key`, or -1.
  std::int32_t find(std::uint64_t key) const {
    for (std::size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return values_[i];
      if (keys_[i] == 0) return -1;
    }
  }
  bool contains(std::uint64_t key) const { return find(key) >= 0; }

  // Inserts unless present; returns false (and keeps the old value) when the key exists.
  bool insert(std::uint64_t key, std::int32_t value) {
    if ((size_ + 1) * 4 > keys_.size() * 3) rehash(keys_.size() * 2);
    for (std::size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return false;
      if (keys_[i] == 0) {
        keys_[i] = key;
        values_[i] = value;
        ++size_;
        return true;
      }
    }
  }

  // Removes `key` if present. Later entries of its probe run shift back, so no tombstones.
  void erase(std::uint64_t key) {
    const std::size_t i = position(key);
    if (keys_[i] != 0) erase_at(i);
  }
  // Removes `key` if it maps to `value` (one probe walk where find() then erase() take two).
  void erase_if(std::uint64_t key, std::int32_t value) {
    const std::size_t i = position(key);
    if (keys_[i] != 0 && values_[i] == value) erase_at(i);
  }

  std::size_t size() const { return size_; }
  // Room for `expected` keys at the table's usual load (at most half full), rehashing what is
  // there; never shrinks.
  void reserve(std::size_t expected) {
    if (expected * 2 > keys_.size()) rehash(expected * 2);
  }
  // The bytes of the table's arrays after reserve(expected) (or constructing it for `expected`),
  // for a memory estimate made before building one.
  static double bytes_reserved_for(double expected) {
    double slots = 16;
    while (slots < expected * 2) slots *= 2;
    return slots * static_cast<double>(sizeof(std::uint64_t) + sizeof(std::int32_t));
  }

 private:
  // Where `key` is, or the empty slot ending its probe run.
  std::size_t position(std::uint64_t key) const {
    std::size_t i = slot(key);
    while (keys_[i] != key && keys_[i] != 0) i = (i + 1) & mask_;
    return i;
  }
  void erase_at(std::size_t i) {
    std::size_t hole = i;
    for (std::size_t j = (hole + 1) & mask_; keys_[j] != 0; j = (j + 1) & mask_) {
      const std::size_t home = slot(keys_[j]);
      // Move j into the hole if its home is not within (hole, j] cyclically.
      const bool between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (!between) {
        keys_[hole] = keys_[j];
        values_[hole] = values_[j];
        hole = j;
      }
    }
    keys_[hole] = 0;
    --size_;
  }

  std::size_t slot(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ULL) >> shift_);
  }
  void rehash(std::size_t want) {
    std::size_t cap = 16;
    int bits = 4;
    while (cap < want) {
      cap <<= 1;
      ++bits;
    }
    std::vector<std::uint64_t> old_keys = std::move(keys_);
    std::vector<std::int32_t> old_values = std::move(values_);
    keys_.assign(cap, 0);
    values_.assign(cap, -1);
    mask_ = cap - 1;
    shift_ = 64 - bits;
    size_ = 0;
    for (std::size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] != 0) insert(old_keys[i], old_values[i]);
    }
  }

  std::vector<std::uint64_t> keys_;
  std::vector<std::int32_t> values_;
  std::size_t mask_ = 0;
  int shift_ = 60;
  std::size_t size_ = 0;
};

}  // namespace capsim
