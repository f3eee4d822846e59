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

inline constexpr int kBits = 11;  // 6 digits of a 64-bit pattern, 2048 buckets each
inline constexpr int kDigits = (64 + kBits - 1) / kBits;
inline constexpr std::size_t kBuckets = std::size_t{1} << kBits;
// The digit counts' size (48 KiB): what a `counts` room must hold for the sort to allocate
// nothing for them.
inline constexpr std::size_t kCountWords = static_cast<std::size_t>(kDigits) * kBuckets;

// Sorts `v` ascending by key(element) (a double meeting the contract), stably. `scratch` and
// `counts` are working space, left with unspecified contents (pass the same ones again to reuse
// their memory): the sort allocates only what they lack (`counts`: kCountWords). The counts
// live on the heap rather than the stack: the stack's pages under a deep 48 KiB frame are
// fresh 4 KiB faults in every process (~12 of them), the heap's are mostly in use already.
template <typename T, typename Key>
void sort_by_key(std::vector<T>& v, std::vector<T>& scratch, std::vector<std::uint32_t>& counts, Key key) {
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
  // All digits' counts in one pass; digit d's buckets are count[d * kBuckets, (d + 1) * kBuckets).
  counts.assign(kCountWords, 0);
  std::uint32_t* const count = counts.data();
  for (const T& x : v) {
    const std::uint64_t b = bits(x);
    for (int d = 0; d < kDigits; ++d) ++count[static_cast<std::size_t>(d) * kBuckets + ((b >> (d * kBits)) & kMask)];
  }
  scratch.resize(n);
  T* from = v.data();
  T* to = scratch.data();
  for (int d = 0; d < kDigits; ++d) {
    std::uint32_t* const c = count + static_cast<std::size_t>(d) * kBuckets;
    // Every key has the same digit here: the pass would copy the order unchanged.
    if (c[(bits(from[0]) >> (d * kBits)) & kMask] == n) continue;
    std::uint32_t offset = 0;
    for (std::size_t k = 0; k < kBuckets; ++k) {
      const std::uint32_t here = c[k];
      c[k] = offset;
      offset += here;
    }
    for (std::size_t i = 0; i < n; ++i) to[c[(bits(from[i]) >> (d * kBits)) & kMask]++] = from[i];
    std::swap(from, to);
  }
  if (from != v.data()) v.swap(scratch);
}

// The same with the counts' room allocated here.
template <typename T, typename Key>
void sort_by_key(std::vector<T>& v, std::vector<T>& scratch, Key key) {
  std::vector<std::uint32_t> counts;
  sort_by_key(v, scratch, counts, key);
}

}  // namespace capsim::radix
