// Sorting doubles by their bits (LSD radix sort), for the end-of-run statistics: a run's
// per-request latencies and per-step samples are sorted once each, and a comparison sort of
// 10^5-10^6 random doubles spends most of its time on mispredicted branches.
//
// Contract: radix_sort_by_double(v, key) sorts v ascending by key(element) and returns true, or
// returns false and leaves v as it was when a key is NaN (no order). Elements with equal keys
// keep their relative order (LSD radix is stable), and -0.0 comes before +0.0 (by their bits).
// With `zero_sign_free` it also declines when a key is -0.0: a comparison sort
// (std::sort(..., key(a) < key(b))) sees -0.0 and +0.0 as equal and may put either first, so only
// without -0.0 is the sorted sequence of keys exactly the one std::sort gives.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace capsim {

// A double's bits mapped so that unsigned order is numeric order (for non-NaN values).
inline std::uint64_t ordered_bits(double x) {
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return (u & 0x8000000000000000ULL) ? ~u : (u | 0x8000000000000000ULL);
}

// Below this many elements a comparison sort is cheaper than the radix sort's six 2048-entry
// histograms.
inline constexpr std::size_t kRadixSortMinSize = 256;

template <typename T, typename Key>
bool radix_sort_by_double(std::vector<T>& v, Key key, bool zero_sign_free) {
  // 11-bit digits: six passes over the 64 bits, with counts that stay in L1.
  constexpr int kBits = 11, kDigits = 6;
  constexpr std::uint64_t kMask = (1u << kBits) - 1;
  const std::size_t n = v.size();
  if (n < 2) return true;
  if (n > 0xFFFFFFFFu) return false;  // counts are 32-bit
  // One pass: reject NaN (and -0.0 when asked), and count every digit of every key.
  std::vector<std::uint32_t> count(static_cast<std::size_t>(kDigits) << kBits, 0);
  for (const T& e : v) {
    const double x = key(e);
    if (std::isnan(x) || (zero_sign_free && x == 0 && std::signbit(x))) return false;
    const std::uint64_t k = ordered_bits(x);
    for (int d = 0; d < kDigits; ++d) {
      ++count[(static_cast<std::size_t>(d) << kBits) + ((k >> (kBits * d)) & kMask)];
    }
  }
  std::vector<T> buffer(n);
  std::vector<T>* from = &v;
  std::vector<T>* to = &buffer;
  for (int d = 0; d < kDigits; ++d) {
    std::uint32_t* c = count.data() + (static_cast<std::size_t>(d) << kBits);
    const int shift = kBits * d;
    // A digit every key shares changes nothing: skip its pass.
    if (c[(ordered_bits(key((*from)[0])) >> shift) & kMask] == n) continue;
    std::uint32_t sum = 0;
    for (std::size_t i = 0; i <= kMask; ++i) {
      const std::uint32_t here = c[i];
      c[i] = sum;
      sum += here;
    }
    T* out = to->data();
    for (const T& e : *from) out[c[(ordered_bits(key(e)) >> shift) & kMask]++] = e;
    std::swap(from, to);
  }
  if (from != &v) v.swap(*from);
  return true;
}

}  // namespace capsim
