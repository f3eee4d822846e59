// The paged KV cache (sim/engine/kv_block_manager.h), block by block. Block ids start in the
// free queue in order 0, 1, 2, ...; allocation pops the head; release pushes a sequence's
// blocks onto the tail in reverse (vllm-v1-notes.md section 4), so every expected block id
// below follows from those two rules.
#include "sim/engine/kv_block_manager.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <vector>

namespace {

using capsim::KvBlockManager;
using Table = std::vector<std::int32_t>;

TEST_CASE("kv: 2 requests x 512 tokens take 64 blocks of 16", "[engine][kv]") {
  // 512 / 16 = 32 blocks per request; two requests: 64 of the 100 blocks.
  const std::int64_t block = 16, tokens = 512;
  const std::int64_t per_request = (tokens + block - 1) / block;
  REQUIRE(per_request == 32);
  KvBlockManager kv(100, false);
  Table a, b;
  REQUIRE(kv.allocate(per_request, a));
  REQUIRE(kv.allocate(per_request, b));
  CHECK(kv.used_blocks() == 64);
  CHECK(kv.free_blocks() == 100 - 64);
  CHECK(a.size() == 32);
  CHECK(b.size() == 32);
  // Blocks come from the head of the free queue in order: a = 0..31, b = 32..63.
  CHECK(a.front() == 0);
  CHECK(a.back() == 31);
  CHECK(b.front() == 32);
  CHECK(b.back() == 63);
}

TEST_CASE("kv: allocate fails and changes nothing when short", "[engine][kv]") {
  KvBlockManager kv(10, false);
  Table a;
  REQUIRE(kv.allocate(8, a));  // 2 left
  Table b = {77};              // an existing table must not be touched on failure
  CHECK_FALSE(kv.allocate(3, b));
  CHECK(b == Table{77});
  CHECK(kv.free_blocks() == 2);
  CHECK(kv.used_blocks() == 8);
  // Exactly what is free still succeeds: blocks 8 and 9 (the queue was not disturbed).
  CHECK(kv.allocate(2, b));
  CHECK(b == Table{77, 8, 9});
  CHECK(kv.free_blocks() == 0);
  Table c;
  CHECK_FALSE(kv.allocate(1, c));
  CHECK(c.empty());
  CHECK(kv.allocate(0, c));  // nothing asked, nothing to fail
}

TEST_CASE("kv: release returns the blocks and clears the table", "[engine][kv]") {
  KvBlockManager kv(10, false);
  Table a, b;
  REQUIRE(kv.allocate(4, a));  // 0 1 2 3
  REQUIRE(kv.allocate(6, b));  // 4..9
  CHECK(kv.free_blocks() == 0);
  kv.release(a);
  CHECK(a.empty());
  CHECK(kv.free_blocks() == 4);
  // Released in reverse: the free queue is now 3 2 1 0, so the next allocation gets 3 then 2.
  Table c;
  REQUIRE(kv.allocate(2, c));
  CHECK(c == Table{3, 2});
  kv.release(b);
  kv.release(c);
  CHECK(kv.free_blocks() == 10);
  CHECK(kv.used_blocks() == 0);
  CHECK(kv.evictions() == 0);  // nothing was ever cached
}

TEST_CASE("kv: without prefix caching nothing is registered or found", "[engine][kv]") {
  KvBlockManager kv(4, false);
  Table a;
  REQUIRE(kv.allocate(2, a));
  const std::uint64_t h[2] = {11, 22};
  kv.register_block(a[0], h[0]);
  kv.register_block(a[1], h[1]);
  CHECK(kv.lookup(h, 2) == 0);
}

TEST_CASE("kv: prefix lookup stops at the first miss", "[engine][kv][prefix]") {
  KvBlockManager kv(8, true);
  Table a;
  REQUIRE(kv.allocate(4, a));  // 0 1 2 3
  const std::uint64_t h[4] = {101, 102, 103, 104};
  kv.register_block(a[0], h[0]);
  kv.register_block(a[1], h[1]);
  kv.register_block(a[3], h[3]);  // block 2 (hash 103) is not published
  CHECK(kv.lookup(h, 4) == 2);    // 101, 102 hit; 103 misses; 104 is never reached
  CHECK(kv.lookup(h, 1) == 1);    // n caps the answer
  CHECK(kv.lookup(h + 3, 1) == 1);
  const std::uint64_t other[2] = {999, 101};
  CHECK(kv.lookup(other, 2) == 0);  // a miss first: nothing, even though 101 is cached
  // Referenced blocks are not in the free queue.
  CHECK(kv.hits_in_free_queue(h, 2) == 0);
}

TEST_CASE("kv: a hash already published keeps its first block", "[engine][kv][prefix]") {
  KvBlockManager kv(4, true);
  Table a, b;
  REQUIRE(kv.allocate(1, a));  // block 0
  REQUIRE(kv.allocate(1, b));  // block 1
  const std::uint64_t h = 555;
  kv.register_block(a[0], h);
  kv.register_block(b[0], h);  // same content computed twice: the first stays the cached one
  Table c;
  kv.take_hits(&h, 1, c);
  CHECK(c == Table{0});
}

TEST_CASE("kv: take_hits references cached blocks and touches them out of the free queue",
          "[engine][kv][prefix]") {
  KvBlockManager kv(8, true);
  Table a;
  REQUIRE(kv.allocate(4, a));  // 0 1 2 3; free queue 4 5 6 7
  const std::uint64_t h[4] = {1, 2, 3, 4};
  for (int i = 0; i < 4; ++i) kv.register_block(a[static_cast<std::size_t>(i)], h[i]);
  kv.release(a);  // free queue: 4 5 6 7 3 2 1 0, all 8 free, blocks 0-3 still cached
  // free_blocks counts cached-but-unreferenced blocks (vLLM get_num_free_blocks).
  CHECK(kv.free_blocks() == 8);
  CHECK(kv.used_blocks() == 0);
  CHECK(kv.lookup(h, 4) == 4);
  CHECK(kv.hits_in_free_queue(h, 4) == 4);
  CHECK(kv.hits_in_free_queue(h, 2) == 2);

  Table b;
  kv.take_hits(h, 2, b);  // blocks 0, 1 leave the free queue
  CHECK(b == Table{0, 1});
  CHECK(kv.free_blocks() == 6);
  CHECK(kv.hits_in_free_queue(h, 4) == 2);  // only 2 and 3 still sit in the queue

  // A second request sharing the same prefix takes another reference: no block changes queue.
  Table c;
  kv.take_hits(h, 2, c);
  CHECK(c == Table{0, 1});
  CHECK(kv.free_blocks() == 6);

  // Allocating all 6 free blocks takes the queue in order 4 5 6 7 3 2: blocks 3 and 2 were
  // cached, so their content is evicted now (2 evictions); touched blocks 0, 1 are untouched.
  Table d;
  REQUIRE(kv.allocate(6, d));
  CHECK(d == Table{4, 5, 6, 7, 3, 2});
  CHECK(kv.evictions() == 2);
  CHECK(kv.lookup(h, 4) == 2);  // 1, 2 still hit (held by b and c); 3 was evicted
  CHECK(kv.free_blocks() == 0);

  // Block 0 and 1 are shared by b and c: one release keeps them referenced.
  kv.release(b);
  CHECK(kv.free_blocks() == 0);
  kv.release(c);
  CHECK(kv.free_blocks() == 2);
}

TEST_CASE("kv: lazy LRU eviction — a freed sequence's tail goes first, content survives until "
          "reallocated",
          "[engine][kv][prefix]") {
  KvBlockManager kv(6, true);
  Table a, b;
  REQUIRE(kv.allocate(3, a));  // 0 1 2
  REQUIRE(kv.allocate(3, b));  // 3 4 5
  const std::uint64_t ha[3] = {10, 11, 12}, hb[3] = {20, 21, 22};
  for (int i = 0; i < 3; ++i) {
    kv.register_block(a[static_cast<std::size_t>(i)], ha[i]);
    kv.register_block(b[static_cast<std::size_t>(i)], hb[i]);
  }
  kv.release(a);  // queue: 2 1 0
  kv.release(b);  // queue: 2 1 0 5 4 3
  CHECK(kv.free_blocks() == 6);
  CHECK(kv.lookup(ha, 3) == 3);  // freed, yet all cached
  CHECK(kv.lookup(hb, 3) == 3);

  Table c;
  REQUIRE(kv.allocate(1, c));  // block 2 = a's tail
  CHECK(c == Table{2});
  CHECK(kv.evictions() == 1);
  CHECK(kv.lookup(ha, 3) == 2);  // a's head survives
  REQUIRE(kv.allocate(1, c));    // block 1
  CHECK(kv.lookup(ha, 3) == 1);
  CHECK(kv.lookup(hb, 3) == 3);  // b, freed later, is untouched so far
  REQUIRE(kv.allocate(2, c));    // block 0 (a's head), then 5 (b's tail)
  CHECK(c == Table{2, 1, 0, 5});
  CHECK(kv.lookup(ha, 3) == 0);
  CHECK(kv.lookup(hb, 3) == 2);
  CHECK(kv.evictions() == 4);

  // An evicted block can be registered anew under a new hash.
  const std::uint64_t fresh = 77;
  kv.register_block(5, fresh);
  CHECK(kv.lookup(&fresh, 1) == 1);
}

TEST_CASE("kv: a block freed back to the queue and hit again leaves the queue", "[engine][kv][prefix]") {
  // touch(): hitting a freed cached block must make it unevictable; allocation then skips it.
  KvBlockManager kv(3, true);
  Table a;
  REQUIRE(kv.allocate(3, a));  // 0 1 2
  const std::uint64_t h[1] = {9};
  kv.register_block(0, h[0]);
  kv.release(a);  // queue: 2 1 0
  Table hit;
  kv.take_hits(h, 1, hit);  // block 0 out of the queue; queue: 2 1
  Table fresh;
  REQUIRE(kv.allocate(2, fresh));
  CHECK(fresh == Table{2, 1});
  CHECK_FALSE(kv.allocate(1, fresh));  // block 0 is referenced, not free
  CHECK(kv.evictions() == 0);          // 2 and 1 had no hash
  CHECK(kv.lookup(h, 1) == 1);
}

}  // namespace

namespace {

// The free queue as a list, with the rules the manager documents: allocate pops the head,
// release appends a table's freed blocks from its last to its first, a taken block leaves the
// queue wherever it is. take_blocks unlinks runs of blocks in one piece; the queue must be the
// one of taking them one by one.
struct QueueModel {
  std::vector<std::int32_t> queue;  // head first
  std::vector<std::int32_t> ref;
  explicit QueueModel(std::int32_t n) : ref(static_cast<std::size_t>(n), 0) {
    for (std::int32_t b = 0; b < n; ++b) queue.push_back(b);
  }
  void allocate(std::int64_t n, Table& t) {
    for (std::int64_t i = 0; i < n; ++i) {
      t.push_back(queue.front());
      ref[static_cast<std::size_t>(queue.front())] = 1;
      queue.erase(queue.begin());
    }
  }
  void take(const Table& blocks, Table& t) {
    for (const std::int32_t b : blocks) {
      if (ref[static_cast<std::size_t>(b)]++ == 0) queue.erase(std::find(queue.begin(), queue.end(), b));
      t.push_back(b);
    }
  }
  void release(Table& t) {
    for (auto it = t.rbegin(); it != t.rend(); ++it) {
      if (--ref[static_cast<std::size_t>(*it)] == 0) queue.push_back(*it);
    }
    t.clear();
  }
};

// The manager's whole free queue, read from a copy (allocating everything pops it in order).
Table queue_of(const KvBlockManager& kv) {
  KvBlockManager copy = kv;
  Table t;
  REQUIRE(copy.allocate(copy.free_blocks(), t));
  return t;
}

}  // namespace

TEST_CASE("kv: take_blocks leaves the free queue of taking its blocks one by one", "[engine][kv]") {
  // Sequences allocate, release and take back what they released (whole, a prefix, with holes,
  // with blocks others still hold), as chat turns do; a fixed LCG picks the operations.
  const std::int32_t n = 400;
  KvBlockManager kv(n, true);
  QueueModel model(n);
  std::vector<Table> held, held_model;        // live tables
  std::vector<Table> released;                // tables as they were released (to take back)
  std::uint32_t lcg = 4242;
  const auto next = [&lcg](std::uint32_t m) {
    lcg = lcg * 1664525u + 1013904223u;
    return (lcg >> 8) % m;
  };
  std::int64_t runs_taken = 0;
  for (int step = 0; step < 3000; ++step) {
    const std::uint32_t op = next(3);
    if (op == 0 && kv.free_blocks() > 0) {
      const std::int64_t want = 1 + next(static_cast<std::uint32_t>(std::min<std::int64_t>(40, kv.free_blocks())));
      Table a, b;
      REQUIRE(kv.allocate(want, a));
      model.allocate(want, b);
      REQUIRE(a == b);
      held.push_back(a);
      held_model.push_back(b);
    } else if (op == 1 && !held.empty()) {
      const std::size_t k = next(static_cast<std::uint32_t>(held.size()));
      released.push_back(held[k]);
      kv.release(held[k]);
      model.release(held_model[k]);
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
      held_model.erase(held_model.begin() + static_cast<std::ptrdiff_t>(k));
    } else if (op == 2 && !released.empty()) {
      // Take back a released table's blocks, in order: a prefix, minus some, maybe a block of
      // another table in the middle; only blocks nobody reallocated since (still distinct).
      const Table& r = released[next(static_cast<std::uint32_t>(released.size()))];
      Table list;
      const std::size_t len = 1 + next(static_cast<std::uint32_t>(r.size()));
      for (std::size_t i = 0; i < len; ++i) {
        if (next(8) == 0) continue;
        list.push_back(r[i]);
        if (next(16) == 0) list.push_back(static_cast<std::int32_t>(next(n)));
      }
      std::sort(list.begin(), list.end());
      const bool distinct = std::adjacent_find(list.begin(), list.end()) == list.end();
      if (!distinct || list.empty()) continue;
      // Back in the released order (the sort was only to check distinctness).
      Table ordered;
      for (const std::int32_t b : r) {
        if (std::binary_search(list.begin(), list.end(), b)) ordered.push_back(b);
      }
      for (const std::int32_t b : list) {
        if (std::find(r.begin(), r.end(), b) == r.end()) ordered.insert(ordered.begin() + static_cast<std::ptrdiff_t>(next(static_cast<std::uint32_t>(ordered.size() + 1))), b);
      }
      Table a, b;
      kv.take_blocks(ordered.data(), static_cast<std::int64_t>(ordered.size()), a);
      model.take(ordered, b);
      REQUIRE(a == b);
      held.push_back(a);
      held_model.push_back(b);
      ++runs_taken;
    }
    REQUIRE(kv.consistent());
    REQUIRE(kv.free_blocks() == static_cast<std::int64_t>(model.queue.size()));
    if (step % 50 == 0) REQUIRE(queue_of(kv) == model.queue);
  }
  CHECK(runs_taken > 300);
  CHECK(queue_of(kv) == model.queue);
}

TEST_CASE("kv: blocks taken out of the middle of the free queue leave it in order, many times over",
          "[engine][kv]") {
  // The free queue is a ring of 2 x 8 = 16 slots for 8 blocks; a block taken back from the
  // middle leaves a hole there, so taking back and releasing the same 6 blocks again and again
  // fills the ring with holes and makes it compact itself, which must keep the queue's order.
  KvBlockManager kv(8, true);
  Table all;
  REQUIRE(kv.allocate(8, all));  // 0..7
  kv.release(all);                // queue: 7 6 5 4 3 2 1 0 (a table goes back in reverse)
  REQUIRE(queue_of(kv) == Table{7, 6, 5, 4, 3, 2, 1, 0});
  const Table middle = {5, 4, 3, 2, 1, 0};
  for (int round = 0; round < 20; ++round) {
    Table held;
    kv.take_blocks(middle.data(), static_cast<std::int64_t>(middle.size()), held);
    REQUIRE(held == middle);
    REQUIRE(kv.free_blocks() == 2);
    REQUIRE(queue_of(kv) == Table{7, 6});
    kv.release(held);  // back on the tail in reverse: 7 6 0 1 2 3 4 5
    REQUIRE(kv.consistent());
    REQUIRE(queue_of(kv) == Table{7, 6, 0, 1, 2, 3, 4, 5});
    // Taken again and released, reversed back: 7 6 5 4 3 2 1 0.
    Table again;
    const Table reversed = {0, 1, 2, 3, 4, 5};
    kv.take_blocks(reversed.data(), 6, again);
    kv.release(again);
    REQUIRE(kv.consistent());
    REQUIRE(queue_of(kv) == Table{7, 6, 5, 4, 3, 2, 1, 0});
  }
  // 20 rounds pushed 240 blocks through 16 slots: allocation still finds the head first.
  Table first;
  REQUIRE(kv.allocate(3, first));
  CHECK(first == Table{7, 6, 5});
  CHECK(kv.free_blocks() == 5);
}

TEST_CASE("kv: lookups, hits and takes by hash agree with the hash table as it changes",
          "[engine][kv][prefix]") {
  // KvBlockManager remembers the last chain it probed while its table is unchanged; every
  // answer must be the table's. A map mirrors the table: a block registered under a hash no
  // block holds gets it, and an allocation evicts the hash of each block it hands out.
  const std::int32_t n = 300;
  KvBlockManager kv(n, true);
  std::map<std::uint64_t, std::int32_t> table;
  std::vector<std::uint64_t> hash_of(static_cast<std::size_t>(n), 0);
  std::vector<Table> held;
  std::uint32_t lcg = 99;
  const auto next = [&lcg](std::uint32_t m) {
    lcg = lcg * 1664525u + 1013904223u;
    return (lcg >> 8) % m;
  };
  // Four chains of 24 hashes; chains 0-1 share their first 10 (a system prompt).
  std::vector<std::vector<std::uint64_t>> chains(4);
  for (std::uint64_t c = 0; c < 4; ++c) {
    for (std::uint64_t i = 0; i < 24; ++i) chains[c].push_back(c == 1 && i < 10 ? chains[0][i] : 1000 * (c + 1) + i + 1);
  }
  std::int64_t hits_seen = 0;
  for (int step = 0; step < 4000; ++step) {
    const std::uint32_t op = next(6);
    if (op == 0 && kv.free_blocks() > 0) {
      Table t;
      REQUIRE(kv.allocate(1 + next(static_cast<std::uint32_t>(std::min<std::int64_t>(12, kv.free_blocks()))), t));
      for (const std::int32_t b : t) {
        if (hash_of[static_cast<std::size_t>(b)] != 0) table.erase(hash_of[static_cast<std::size_t>(b)]);
        hash_of[static_cast<std::size_t>(b)] = 0;
      }
      held.push_back(t);
    } else if (op == 1 && !held.empty()) {
      const std::size_t k = next(static_cast<std::uint32_t>(held.size()));
      kv.release(held[k]);
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
    } else if (op == 2 && !held.empty()) {
      const Table& t = held[next(static_cast<std::uint32_t>(held.size()))];
      if (t.empty()) continue;
      const std::int32_t b = t[next(static_cast<std::uint32_t>(t.size()))];
      const std::uint64_t h = chains[next(4)][next(24)];
      kv.register_block(b, h);
      if (hash_of[static_cast<std::size_t>(b)] == 0 && table.count(h) == 0) {
        table[h] = b;
        hash_of[static_cast<std::size_t>(b)] = h;
      }
    } else {
      const std::vector<std::uint64_t>& c = chains[next(4)];
      const auto len = static_cast<std::int64_t>(1 + next(24));
      std::int64_t want = 0;
      Table blocks;
      while (want < len && table.count(c[static_cast<std::size_t>(want)])) {
        blocks.push_back(table[c[static_cast<std::size_t>(want)]]);
        ++want;
      }
      REQUIRE(kv.lookup(c.data(), len) == want);
      hits_seen += want;
      if (op == 4) REQUIRE(kv.hits_in_free_queue(c.data(), want) == kv.in_free_queue(blocks.data(), want));
      if (op == 5) {
        Table t;
        kv.take_hits(c.data(), want, t);
        REQUIRE(t == blocks);
        held.push_back(t);
      }
    }
    REQUIRE(kv.consistent());
  }
  CHECK(hits_seen > 1000);
}
