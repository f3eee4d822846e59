// Chained block hashes and the per-session memo of them (sim/engine/block_hash.h): whatever the
// memo hands a request must be exactly the hashes computed from scratch, and it must hand over
// nothing it cannot prove (a new session, another user, another block size's count).
#include "sim/engine/block_hash.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

namespace {

using capsim::common_content_tokens;
using capsim::ContentSegment;
using capsim::extend_block_hashes;
using capsim::Request;
using capsim::SessionHashCache;
using Hashes = std::vector<std::uint64_t>;

Hashes from_scratch(const Request& r, std::int64_t block_size, std::int64_t blocks) {
  Hashes h;
  extend_block_hashes(r, block_size, blocks, h);
  return h;
}

// A closed-loop turn as the workload builds it: history, then the question and the answer.
Request turn(std::uint64_t id, std::uint32_t user, std::vector<ContentSegment> history,
             std::int64_t question, std::int64_t answer) {
  Request r;
  r.id = id;
  r.user = user;
  r.segments = std::move(history);
  std::int64_t prompt = 0;
  for (const ContentSegment& s : r.segments) prompt += s.tokens;
  r.segments.push_back({1000 + id * 2, question});
  r.segments.push_back({1000 + id * 2 + 1, answer});
  r.prompt_tokens = prompt + question;
  r.output_tokens = answer;
  return r;
}

const ContentSegment kSystem{7, 300};

TEST_CASE("block hash: extending in steps equals hashing at once", "[engine][hash]") {
  const Request r = turn(1, 0, {kSystem}, 150, 250);
  const Hashes all = from_scratch(r, 16, 43);  // 700 tokens: 43 full blocks of 16
  Hashes parts;
  for (std::int64_t b : {1, 5, 18, 19, 30, 43}) extend_block_hashes(r, 16, b, parts);
  CHECK(parts == all);
  for (std::uint64_t h : all) CHECK(h != 0);
  // Chained: the same content after another first block hashes differently from block 0 on.
  Request other = r;
  other.segments[0].content = 8;
  const Hashes o = from_scratch(other, 16, 43);
  for (std::size_t b = 0; b < all.size(); ++b) CHECK(o[b] != all[b]);
}

TEST_CASE("block hash: common content is the leading equal segments", "[engine][hash]") {
  const std::vector<ContentSegment> a = {{7, 100}, {8, 50}};
  CHECK(common_content_tokens(a, a) == 150);
  CHECK(common_content_tokens(a, {{7, 100}, {8, 60}}) == 100);              // length differs
  CHECK(common_content_tokens(a, {{7, 100}, {9, 50}}) == 100);              // content differs
  CHECK(common_content_tokens(a, {{7, 100}, {8, 50}, {9, 10}}) == 150);     // b goes on
  CHECK(common_content_tokens(a, {{6, 100}, {8, 50}}) == 0);
  CHECK(common_content_tokens(a, {}) == 0);
}

TEST_CASE("session hash cache: the next turn gets the previous turn's hashes, exactly",
          "[engine][hash]") {
  const std::int64_t bs = 16;
  // Turn 1: system 300 + question 150 = prompt 450, answer 250: 700 tokens, 43 full blocks.
  const Request t1 = turn(1, 5, {kSystem}, 150, 250);
  SessionHashCache cache;
  cache.remember(t1, bs, from_scratch(t1, bs, 43));
  CHECK(cache.stored_hashes() == 43);

  // Turn 2 repeats all 700 tokens, then question 100: prompt 800, looked up over
  // floor(799 / 16) = 49 blocks. Provable: floor(700 / 16) = 43 blocks (the 44th ends at 704,
  // past the common 700 tokens).
  Request t2 = turn(2, 5, t1.segments, 100, 200);
  REQUIRE(t2.prompt_tokens == 800);
  CHECK(cache.seed(t2) == 43);
  CHECK(t2.hashed_block_size == bs);
  const Hashes scratch2 = from_scratch(t2, bs, 49);
  CHECK(t2.block_hashes == Hashes(scratch2.begin(), scratch2.begin() + 43));
  // What a replica then computes from the seeded hashes is the from-scratch chain.
  extend_block_hashes(t2, bs, 49, t2.block_hashes);
  CHECK(t2.block_hashes == scratch2);
  // A request that already carries hashes is left alone.
  CHECK(cache.seed(t2) == 0);
  CHECK(t2.block_hashes == scratch2);

  // A new session of the same user shares only the 300-token system prompt: floor(300 / 16) =
  // 18 blocks (block 18 covers tokens 288..303, partly the new question).
  Request t3 = turn(3, 5, {kSystem}, 100, 50);
  CHECK(cache.seed(t3) == 18);
  CHECK(t3.block_hashes == from_scratch(t3, bs, 18));
  Hashes h3 = t3.block_hashes;
  extend_block_hashes(t3, bs, 24, h3);  // floor(399 / 16) = 24
  CHECK(h3 == from_scratch(t3, bs, 24));

  // At most the prompt's looked-up blocks: a 10-token follow-up question of turn 1 gives a
  // prompt of 710, floor(709 / 16) = 44 blocks, of which 43 are proven.
  Request short_q = turn(4, 5, t1.segments, 10, 5);
  CHECK(cache.seed(short_q) == 43);
  // A prompt of exactly 700 + 1 tokens looks up floor(700 / 16) = 43 blocks.
  Request one = turn(5, 5, t1.segments, 1, 5);
  CHECK(cache.seed(one) == 43);
}

TEST_CASE("session hash cache: nothing it cannot prove", "[engine][hash]") {
  const std::int64_t bs = 16;
  const Request t1 = turn(1, 5, {kSystem}, 150, 250);
  SessionHashCache cache;
  cache.remember(t1, bs, from_scratch(t1, bs, 43));

  Request other_user = turn(2, 6, t1.segments, 100, 200);
  CHECK(cache.seed(other_user) == 0);
  CHECK(other_user.block_hashes.empty());
  CHECK(other_user.hashed_block_size == 0);

  Request other_system = turn(3, 5, {{8, 300}}, 100, 200);  // another system prompt
  CHECK(cache.seed(other_system) == 0);

  Request no_content;  // segments empty: hashed by request id, never shared
  no_content.user = 5;
  no_content.prompt_tokens = 800;
  CHECK(cache.seed(no_content) == 0);

  Request no_user = turn(4, Request::kNoUser, t1.segments, 100, 200);
  CHECK(cache.seed(no_user) == 0);
  cache.remember(no_user, bs, from_scratch(no_user, bs, 49));
  CHECK(cache.stored_hashes() == 43);

  // Remembering the user's next request replaces the entry (43 -> 34 stored hashes); hashes
  // computed at 32 tokens a block are handed over at 32: the 1100 common tokens prove
  // floor(1100 / 32) = 34 blocks, the prompt of 1200 looks up floor(1199 / 32) = 37.
  const Request t2 = turn(5, 5, t1.segments, 100, 300);
  REQUIRE(t2.prompt_tokens == 800);
  cache.remember(t2, 32, from_scratch(t2, 32, 34));
  CHECK(cache.stored_hashes() == 34);
  Request t3 = turn(6, 5, t2.segments, 100, 20);
  REQUIRE(t3.prompt_tokens == 1200);
  CHECK(cache.seed(t3) == 34);
  CHECK(t3.hashed_block_size == 32);
  CHECK(t3.block_hashes == from_scratch(t3, 32, 34));
}

}  // namespace
