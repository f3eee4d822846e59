// sim/core/radix_sort.h: the bit-pattern radix sort gives std::sort's sequence for every
// non-negative, non-NaN key, skips the digits all keys share, and keeps equal keys in order.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "sim/core/radix_sort.h"

namespace radix = capsim::radix;

namespace {

std::vector<double> radix_sorted(std::vector<double> v) {
  std::vector<double> scratch;
  radix::sort_by_key(v, scratch, [](double x) { return x; });
  return v;
}

std::vector<double> std_sorted(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST_CASE("radix sort: the sequence std::sort gives, over the whole non-negative range", "[core][radix]") {
  const double inf = std::numeric_limits<double>::infinity();
  const double tiny = std::numeric_limits<double>::denorm_min();
  // Keys that differ only in the lowest digit (bits 0-10), only in the highest (sign and top
  // exponent bits 55-63), zeros, subnormals, infinity and repeats.
  const std::vector<double> keys = {1.0, std::nextafter(1.0, 2.0), 0.0, inf, tiny, 2 * tiny, 1e300, 1e-300,
                                    std::numeric_limits<double>::max(), 0.0, 1.0, 3.5, 0.125, 7e-3, tiny};
  CHECK(radix_sorted(keys) == std_sorted(keys));  // 15 keys: below 512, the comparison sort
  // The same keys 60 times over in a scrambled order (900 > 512): the radix passes.
  std::vector<double> v;
  for (int i = 0; i < 60; ++i) {
    for (std::size_t k = 0; k < keys.size(); ++k) v.push_back(keys[(k * 7 + static_cast<std::size_t>(i)) % keys.size()]);
  }
  CHECK(radix_sorted(v) == std_sorted(v));
  // A large random list spread over many exponents, and one in a narrow range (a run's
  // latencies: the top digits are shared and skipped).
  std::mt19937_64 rng(11);
  std::vector<double> wide(20000), narrow(20000);
  std::uniform_real_distribution<double> exponent(-300, 300), ms(0.020, 0.030);
  for (double& x : wide) x = std::pow(10.0, exponent(rng));
  for (double& x : narrow) x = ms(rng);
  CHECK(radix_sorted(wide) == std_sorted(wide));
  CHECK(radix_sorted(narrow) == std_sorted(narrow));
  // Lists of 0, 1 and 2 elements, and all equal.
  CHECK(radix_sorted({}).empty());
  CHECK(radix_sorted({2.0}) == std::vector<double>{2.0});
  CHECK(radix_sorted({2.0, 1.0}) == std::vector<double>{1.0, 2.0});
  CHECK(radix_sorted(std::vector<double>(1000, 0.5)) == std::vector<double>(1000, 0.5));  // every pass skipped
}

TEST_CASE("radix sort: stable, by key only, for records", "[core][radix]") {
  // (value, insertion index): equal values keep their insertion order (a stable sort's order).
  std::vector<std::pair<double, std::int64_t>> runs;
  for (std::int64_t i = 0; i < 3000; ++i) runs.emplace_back(0.001 * static_cast<double>((i * 7919) % 37), i);
  auto expected = runs;
  std::stable_sort(expected.begin(), expected.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<double, std::int64_t>> scratch;
  radix::sort_by_key(runs, scratch, [](const auto& r) { return r.first; });
  CHECK(runs == expected);
}

TEST_CASE("radix sort: which keys it accepts", "[core][radix]") {
  const auto id = [](double x) { return x; };
  CHECK(radix::has_sortable_keys(std::vector<double>{0.0, 1.0, std::numeric_limits<double>::infinity()}, id));
  CHECK_FALSE(radix::has_sortable_keys(std::vector<double>{1.0, -0.0}, id));
  CHECK_FALSE(radix::has_sortable_keys(std::vector<double>{1.0, -2.0}, id));
  CHECK_FALSE(radix::has_sortable_keys(std::vector<double>{std::nan("")}, id));
}

TEST_CASE("radix sort: given rooms big enough, it allocates nothing", "[core][radix]") {
  // What lets the end-of-run ITL summary run on a thread without malloc (sim/cluster): the
  // scratch and the digit counts (6 digits x 2,048 buckets) come from rooms reserved beforehand.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> v(2000), scratch;
  for (double& x : v) x = u(rng);
  std::vector<std::uint32_t> counts;
  scratch.reserve(v.size());
  counts.reserve(radix::kCountWords);
  CHECK(radix::kCountWords == 6 * 2048);
  const double* scratch_at = scratch.data();
  const std::uint32_t* counts_at = counts.data();
  const std::vector<double> expected = std_sorted(v);
  radix::sort_by_key(v, scratch, counts, [](double x) { return x; });
  CHECK(v == expected);
  // The two buffers were used in place or swapped with each other, never reallocated.
  CHECK((v.data() == scratch_at || scratch.data() == scratch_at));
  CHECK(counts.data() == counts_at);
  CHECK(counts.size() == radix::kCountWords);
}
