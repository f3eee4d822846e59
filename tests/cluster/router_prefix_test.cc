// The prefix-aware router skips replicas that cannot win (sim/cluster/router.cc, may_hold_more):
// its choice must be exactly that of the rule it implements, asking every replica — the
// replica with the most leading prompt blocks cached, unless busier than twice the least loaded
// one's outstanding requests plus 8; ties to the least loaded, then the lowest index. Checked on
// random cache contents (prefixes, prefixes with gaps, blocks without their parents), loads,
// block sizes and replicas without prefix caching, against that rule computed from scratch.
#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <vector>

#include "sim/cluster/router.h"
#include "sim/engine/block_hash.h"
#include "tests/engine/test_support.h"

namespace {

using namespace capsim;
using test::request;

// Caches block `k` of the prompt (hash `h`) on `x`: allocated, published, released to the free
// queue (a freed block keeps its hash until reallocated).
void cache_block(Replica& x, std::uint64_t h) {
  std::vector<std::int32_t> t;
  REQUIRE(x.kv().allocate(1, t));
  x.kv().register_block(t[0], h);
  x.kv().release(t);
}

// The rule, every replica asked.
std::uint32_t reference(const Request& r, const std::vector<std::unique_ptr<Replica>>& rs) {
  std::uint32_t idle = 0;
  for (std::uint32_t i = 1; i < rs.size(); ++i) {
    if (rs[i]->routed_load() < rs[idle]->routed_load()) idle = i;
  }
  std::uint32_t best = idle;
  std::int64_t best_hit = rs[idle]->cached_prefix_blocks(r);
  for (std::uint32_t i = 0; i < rs.size(); ++i) {
    if (i == idle) continue;
    const std::int64_t hit = rs[i]->cached_prefix_blocks(r);
    if (hit > best_hit && rs[i]->routed_load() <= 2 * rs[idle]->routed_load() + 8) {
      best = i;
      best_hit = hit;
    }
  }
  return best;
}

}  // namespace

TEST_CASE("router: prefix-aware chooses as if it asked every replica", "[cluster][router][prefix]") {
  Deployment plain = test::deployment();
  Deployment wide = plain;
  wide.limits.block_size = 32;
  Deployment uncached = plain;
  uncached.limits.enable_prefix_caching = false;
  const auto cost = std::make_shared<test::FakeStepCost>();
  const auto router = make_router("prefix-aware");
  // System prompt 320 tokens, history 700, question 90: prompt 1110 tokens, 69 blocks of 16
  // looked up (floor(1109 / 16)), 34 of 32.
  const Request base = request(7, 0, 1110, 50, {{0xA, 320}, {0xB, 700}, {0xC, 90}, {0xD, 50}});
  std::mt19937_64 rng(12);
  int moved = 0, trials = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 4);
    std::vector<std::unique_ptr<Replica>> rs;
    for (int i = 0; i < n; ++i) {
      const std::uint64_t kind = rng() % 10;
      const Deployment& d = kind == 0 ? wide : kind == 1 ? uncached : plain;
      rs.push_back(std::make_unique<Replica>(static_cast<std::uint32_t>(i), d, cost, 512, make_policy("vllm-v1")));
      Replica& x = *rs.back();
      const std::int64_t bs = d.limits.block_size;
      const std::int64_t blocks = (base.prompt_tokens - 1) / bs;
      std::vector<std::uint64_t> h;
      extend_block_hashes(base, bs, blocks + 3, h);  // a few past the looked-up ones too
      // A leading run of random length (often the 20 system-prompt blocks, or all), then,
      // sometimes, blocks further on without their parents.
      const std::uint64_t shape = rng() % 4;
      const std::int64_t run = shape == 0   ? 20
                               : shape == 1 ? blocks
                                            : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(blocks + 3));
      for (std::int64_t k = 0; k < run; ++k) cache_block(x, h[static_cast<std::size_t>(k)]);
      if (rng() % 2) {
        for (int extra = 0; extra < 6; ++extra) cache_block(x, h[rng() % h.size()]);
      }
      const int load = static_cast<int>(rng() % 24);
      for (int l = 0; l < load; ++l) x.note_routed();
    }
    Request r = base;
    if (rng() % 3 == 0) {
      // Seeded by the session cache with some of the hashes (SessionHashCache::seed).
      r.hashed_block_size = 16;
      extend_block_hashes(r, 16, static_cast<std::int64_t>(rng() % 70), r.block_hashes);
    }
    const std::uint32_t want = reference(base, rs);
    const std::uint32_t got = router->route(r, rs);
    INFO("trial " << trial);
    REQUIRE(got == want);
    ++trials;
    std::uint32_t idle = 0;
    for (std::uint32_t i = 1; i < rs.size(); ++i) {
      if (rs[i]->routed_load() < rs[idle]->routed_load()) idle = i;
    }
    moved += got != idle;
  }
  CHECK(trials == 3000);
  // The prefix, not the load, decided a good share of the trials (the check is not vacuous).
  CHECK(moved > 300);
}
