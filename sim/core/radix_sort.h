// Sorting non-negative doubles by their bit patterns: a least-significant-digit radix sort.
//
// Why not std::sort or Boost's spreadsort: the end of every run sorts its per-request latencies
// (several lists of one value per request) and its pooled inter-token gaps (one run per engine
// step); those comparison and hybrid sorts spend most of their time on mispredicted branches
// (docs/scale.md, "Sorting"). A radix sort has none: a fixed number of passes, each counting and
// then scattering, and passes in which every key has the same digit are skipped.
//
// Contract: every key is a double with the sign bit clear and not NaN (+0, subnormals and +inf
// are fine). For those, the IEEE 754 bit pattern read as an unsigned integer orders exactly as
// the values do, and equal values have equal patterns, so the sorted sequence is the one any
// correct sort by `<` gives. The sort is stable. Callers check the contract (has_sortable_keys).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace capsim::radix {

// Whether `key(x)` of every element meets the contract above.
template <typename T, typename Key>
bool has_sortable_keys(const std::vector<T>& v, Key key) {
  for (const T& x : v) {
    const double k = key(x);
    if (std::isnan(k) || std::signbit(k)) return false;
  }
  return true;
}

// Sorts `v` ascending by key(element) (a double meeting the contract), stably. `scratch` is
// working space, left with unspecified contents (pass the same one again to reuse its memory).
template <typename T, typename Key>
void sort_by_key(std::vector<T>& v, std::vector<T>& scratch, Key key) {
  constexpr int kBits = 11;  // 6 digits of a 64-bit pattern, 2048 buckets each
  constexpr int kDigits = (64 + kBits - 1) / kBits;
  constexpr std::size_t kBuckets = std::size_t{1} << kBits;
  constexpr std::uint64_t kMask = kBuckets - 1;
  const std::size_t n = v.size();
  if (n < 2) return;
  // Short lists (clearing and summing the 6 x 2048 counts would cost more than the sort) and
  // lists past the 32-bit counts (64 GB of doubles) take the comparison sort: the same sequence.
  constexpr std::size_t kShort = 512;
  if (n < kShort || n > UINT32_MAX) {
    std::stable_sort(v.begin(), v.end(), [&key](const T& a, const T& b) { return key(a) < key(b); });
    return;
  }
  const auto bits = [&key](const T& x) { return std::bit_cast<std::uint64_t>(key(x)); };
  // All digits' counts in one pass. On the stack (48 KiB): the sort allocates nothing but what
  // `scratch` lacks, so a thread given enough scratch sorts without touching malloc.
  std::array<std::array<std::uint32_t, kBuckets>, kDigits> counts{};
  for (const T& x : v) {
    const std::uint64_t b = bits(x);
    for (int d = 0; d < kDigits; ++d) ++counts[static_cast<std::size_t>(d)][(b >> (d * kBits)) & kMask];
  }
  scratch.resize(n);
  T* from = v.data();
  T* to = scratch.data();
  for (int d = 0; d < kDigits; ++d) {
    auto& c = counts[static_cast<std::size_t>(d)];
    // Every key has the same digit here: the pass would copy the order unchanged.
    if (c[(bits(from[0]) >> (d * kBits)) & kMask] == n) continue;
    std::uint32_t offset = 0;
    for (std::uint32_t& k : c) {
      const std::uint32_t here = k;
      k = offset;
      offset += here;
    }
    for (std::size_t i = 0; i < n; ++i) to[c[(bits(from[i]) >> (d * kBits)) & kMask]++] = from[i];
    std::swap(from, to);
  }
  if (from != v.data()) v.swap(scratch);
}

}  // namespace capsim::radix
