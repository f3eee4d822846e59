// One replica and its scheduler policies (sim/engine/replica.h, policy_*.cc) on a fake step cost
// whose every step takes a known time, stepped by hand (tests/engine/test_support.h). Each
// expectation is traced step by step in the comments from the rules in the policy files and
// vllm-v1-notes.md section 1: running requests first in admission order, one token budget,
// preemption of the most recently admitted (recompute, to the front of waiting), FCFS
// admission only in steps that preempted nothing, stopping at the first request that does not
// fit. Blocks are 16 tokens; the free queue starts 0, 1, 2, ...
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "tests/engine/test_support.h"

namespace {

using namespace capsim;
using namespace capsim::test;
using Ids = std::vector<std::uint64_t>;

// Step times of a + b x tokens are sums of doubles rounded to whole nanoseconds; allow 1 ns of
// rounding per step.
bool near_ns(SimTime actual, SimTime expected, SimTime slack = 4) {
  return std::llabs(actual - expected) <= slack;
}

TEST_CASE("replica: admission is first come, first served", "[engine][replica]") {
  // max_num_seqs 1: one request at a time, each taking a prefill step (token 1) and a decode
  // step (token 2, done): 20 ms each at 10 ms per step. Ids are given in reverse of arrival
  // order (3 arrives first) to show that the order is arrival, not id.
  ReplicaHarness h(limits(1, 1000, false), 100);
  h.add(request(3, 0 * kMs, 100, 2));
  h.add(request(2, 1 * kMs, 100, 2));
  h.add(request(1, 2 * kMs, 100, 2));
  h.add(request(0, 3 * kMs, 100, 2));
  CHECK(h.run() == 8);  // 4 requests x 2 steps
  const auto& f = h.rec().finished;
  REQUIRE(f.size() == 4);
  CHECK(Ids{f[0].id, f[1].id, f[2].id, f[3].id} == Ids{3, 2, 1, 0});
  // The k-th to arrive is scheduled at 20k ms and done at 20k + 20 ms.
  for (std::size_t k = 0; k < 4; ++k) {
    CHECK(f[k].first_scheduled == static_cast<SimTime>(20 * k) * kMs);
    CHECK(f[k].finish == static_cast<SimTime>(20 * k + 20) * kMs);
    CHECK(f[k].generated == 2);
  }
}

TEST_CASE("replica: one token budget — 800 + 200 chunk, then the rest with a decode",
          "[engine][replica]") {
  // max_num_batched_tokens 1000; A and B (800-token prompts, 3 output tokens) at t = 0.
  // Step cost 5 ms + 0.01 ms per token.
  //   step 1: A 800 + B 200 (chunk)  = 1000 tokens, 15 ms      -> ends 15 ms: A token 1
  //   step 2: A decode 1 + B 600     =  601 tokens, 11.01 ms   -> ends 26.01: A 2, B 1 (B's TTFT)
  //   step 3: A decode + B decode    =    2 tokens, 5.02 ms    -> ends 31.03: A 3 (done), B 2
  //   step 4: B decode               =    1 token,  5.01 ms    -> ends 36.04: B 3 (done)
  ReplicaHarness h(limits(8, 1000, false), 1000, "vllm-v1", 0.005, 0.00001);
  h.add(request(0, 0, 800, 3));
  h.add(request(1, 0, 800, 3));
  CHECK(h.run() == 4);
  const auto& shapes = h.cost().shapes();
  REQUIRE(shapes.size() == 4);
  CHECK(shapes[0].prefill_tokens == 1000);
  CHECK(shapes[0].prefill_sequences == 2);
  CHECK(shapes[0].logit_sequences == 1);  // only A finishes its prompt
  CHECK(shapes[0].decode_sequences == 0);
  CHECK(shapes[1].prefill_tokens == 600);
  CHECK(shapes[1].decode_sequences == 1);
  CHECK(shapes[1].tokens() == 601);
  CHECK(shapes[1].prefill_kv_tokens == Approx(800.0));  // B's chunk: 200 cached + 600 new
  // Decode: one token per running request; contexts A 802, B 801 (incl. the new token).
  CHECK(shapes[2].decode_sequences == 2);
  CHECK(shapes[2].prefill_tokens == 0);
  CHECK(shapes[2].decode_context_tokens == Approx(1603.0));
  CHECK(shapes[3].decode_sequences == 1);
  CHECK(shapes[3].tokens() == 1);

  const auto& A = h.rec().get(0);
  const auto& B = h.rec().get(1);
  CHECK(near_ns(A.first_token, 15 * kMs));
  CHECK(near_ns(B.first_token, 26'010'000));  // end of the step that ran B's last chunk
  CHECK(near_ns(A.finish, 31'030'000));
  CHECK(near_ns(B.finish, 36'040'000));
  CHECK(A.generated == 3);
  CHECK(B.generated == 3);
  CHECK(h.rec().tokens.at(1).size() == 3);
  CHECK(h.replica().stats().prompt_tokens_computed == 1600);  // no prompt token twice
}

TEST_CASE("replica: a long prompt is chunked by the budget, TTFT is the end of the last chunk",
          "[engine][replica]") {
  // 2500 tokens, budget 1000: chunks 1000, 1000, 500 in steps 1-3 (10 ms each): the first
  // token comes at 30 ms; output 2 -> one decode step more, done at 40 ms.
  ReplicaHarness h(limits(8, 1000, false), 1000);
  h.add(request(7, 0, 2500, 2));
  CHECK(h.run() == 4);
  const auto& s = h.cost().shapes();
  CHECK(s[0].prefill_tokens == 1000);
  CHECK(s[1].prefill_tokens == 1000);
  CHECK(s[2].prefill_tokens == 500);
  CHECK(s[0].logit_sequences == 0);
  CHECK(s[1].logit_sequences == 0);
  CHECK(s[2].logit_sequences == 1);
  CHECK(s[3].decode_sequences == 1);
  CHECK(h.rec().get(7).first_token == 30 * kMs);
  CHECK(h.rec().get(7).finish == 40 * kMs);
  CHECK(h.rec().tokens.at(7) == std::vector<SimTime>{30 * kMs, 40 * kMs});
}

TEST_CASE("replica: max_num_seqs caps the running set", "[engine][replica]") {
  // max_num_seqs 2, four 32-token prompts with 5 output tokens at t = 0: 0 and 1 run steps 1-5
  // (prefill, then 4 decodes; done at 50 ms), 2 and 3 are admitted at 50 ms, done at 100 ms.
  ReplicaHarness h(limits(2, 1000, false), 100);
  for (std::uint64_t i = 0; i < 4; ++i) h.add(request(i, 0, 32, 5));
  int steps = 0;
  for (SimTime d; (d = h.begin()) > 0; h.end(d)) {
    ++steps;
    CHECK(h.replica().running().size() <= 2);
    // Every running request gets exactly one token's work (a prefill or a decode).
    CHECK(h.cost().shapes().back().sequences() == 2);
  }
  CHECK(steps == 10);
  for (std::uint64_t i = 0; i < 4; ++i) {
    const auto& f = h.rec().get(i);
    CHECK(f.generated == 5);
    CHECK(f.first_scheduled == (i < 2 ? 0 : 50 * kMs));
    CHECK(f.finish == (i < 2 ? 50 * kMs : 100 * kMs));
  }
  CHECK(h.replica().stats().batch_sequences.max() == 2);
}

// The preemption trace shared by the two sections below. KV pool: 4 blocks. A (id 0) and B
// (id 1): 32-token prompts (2 blocks each), 2 output tokens; C (id 2): a 16-token prompt, 1
// output token, arriving at 5 ms.
//   step 1 (0-10 ms): A -> blocks 0 1, B -> 2 3 (pool full). Both get token 1 (33 tokens).
//   step 2 (10 ms): A needs a 3rd block for token 33; none free -> preempt the most recently
//     admitted running request, B (not A, whose growth failed): B's blocks are freed in
//     reverse (queue 3 2), B goes to the FRONT of waiting (ahead of C). A takes block 3.
//     Nothing is admitted in a step that preempted, although C would fit in block 2.
//     A decodes its 2nd token and finishes at 20 ms (frees 0 1 3; queue 2 3 1 0).
//   step 3 (20 ms): B is re-admitted first, then C; both finish at 30 ms.
TEST_CASE("replica: preemption by recompute (vLLM V1)", "[engine][replica][preemption]") {
  SECTION("with prefix caching, B's own head block hits on resume") {
    // Step 2 gave A block 3 = B's tail, evicting its hash; B's head (block 2) is still cached.
    // B's lookup: (33 - 1) / 16 = 2 blocks wanted, block 0 hits, block 1 misses -> 1 hit, so it
    // recomputes 33 - 16 = 17 tokens. C: 16 tokens -> (16 - 1) / 16 = 0 blocks to look up.
    // Prompt tokens computed: 32 + 32 (step 1) + 17 + 16 (step 3) = 97.
    ReplicaHarness h(limits(8, 1000, true), 4);
    h.add(request(0, 0, 32, 2));
    h.add(request(1, 0, 32, 2));
    h.add(request(2, 5 * kMs, 16, 1));
    REQUIRE(h.step());  // step 1
    CHECK(h.replica().kv().free_blocks() == 0);
    const SimTime d = h.begin();  // step 2
    REQUIRE(d > 0);
    CHECK(h.running_ids() == Ids{0});
    CHECK(h.waiting_ids() == Ids{1, 2});  // B in front of C
    CHECK(h.replica().stats().preemptions == 1);
    CHECK(h.cost().shapes().back().sequences() == 1);  // A's decode only: C not admitted
    h.end(d);
    CHECK(h.run() == 1);  // step 3 runs B and C together
    const auto& s = h.cost().shapes();
    REQUIRE(s.size() == 3);
    CHECK(s[2].prefill_tokens == 17 + 16);
    CHECK(s[2].prefill_sequences == 2);
    CHECK(h.replica().stats().prompt_tokens_computed == 97);
    CHECK(h.replica().kv().evictions() == 3);  // block 3 in step 2; blocks 1 and 0 in step 3

    const auto& A = h.rec().get(0);
    const auto& B = h.rec().get(1);
    const auto& C = h.rec().get(2);
    CHECK(A.finish == 20 * kMs);
    CHECK(A.preemptions == 0);
    CHECK(B.preemptions == 1);
    CHECK(B.generated == 2);  // its full output, after the recompute
    CHECK(B.first_token == 10 * kMs);  // the token streamed before the preemption stands
    CHECK(B.finish == 30 * kMs);
    CHECK(C.first_scheduled == 20 * kMs);
    CHECK(C.finish == 30 * kMs);
    CHECK(h.rec().tokens.at(1).size() == 2);
  }
  SECTION("without prefix caching, B recomputes prompt + its generated token") {
    // B recomputes 32 + 1 = 33 tokens: 32 + 32 + 33 + 16 = 113 prompt tokens computed.
    ReplicaHarness h(limits(8, 1000, false), 4);
    h.add(request(0, 0, 32, 2));
    h.add(request(1, 0, 32, 2));
    h.add(request(2, 5 * kMs, 16, 1));
    CHECK(h.run() == 3);
    const auto& s = h.cost().shapes();
    CHECK(s[1].sequences() == 1);
    CHECK(s[2].prefill_tokens == 33 + 16);
    CHECK(h.replica().stats().prompt_tokens_computed == 113);
    CHECK(h.replica().stats().preemptions == 1);
    CHECK(h.replica().kv().evictions() == 0);
    CHECK(h.rec().get(1).preemptions == 1);
    CHECK(h.rec().get(1).generated == 2);
    CHECK(h.rec().get(1).finish == 30 * kMs);
    CHECK(h.rec().get(2).first_scheduled == 20 * kMs);
  }
}

TEST_CASE("replica: head-of-line blocking — waiting requests never preempt", "[engine][replica]") {
  // KV pool 6 blocks. R (id 0): 48-token prompt (3 blocks), 4 output tokens (4th block at token
  // 49). W (id 1, 5 ms): 64 tokens = 4 blocks. W2 (id 2, 6 ms): 16 tokens = 1 block.
  //   step 1: R prefill (3 blocks, 3 free).
  //   steps 2-4 (10-40 ms): R grows to 4 blocks (2 free). W needs 4 -> does not fit; admission
  //     stops there, so W2, which would fit in 1 block, waits behind it; R is never preempted.
  //   R finishes at 40 ms, freeing all 6; step 5 (40 ms) admits W and W2; both done at 50 ms.
  ReplicaHarness h(limits(8, 1000, false), 6);
  h.add(request(0, 0, 48, 4));
  h.add(request(1, 5 * kMs, 64, 1));
  h.add(request(2, 6 * kMs, 16, 1));
  REQUIRE(h.step());
  const SimTime d = h.begin();
  CHECK(h.running_ids() == Ids{0});
  CHECK(h.waiting_ids() == Ids{1, 2});
  CHECK(h.replica().kv().free_blocks() == 2);  // room for W2, not for W
  h.end(d);
  CHECK(h.run() == 3);
  CHECK(h.replica().stats().preemptions == 0);
  CHECK(h.rec().get(0).finish == 40 * kMs);
  CHECK(h.rec().get(1).first_scheduled == 40 * kMs);
  CHECK(h.rec().get(2).first_scheduled == 40 * kMs);
  CHECK(h.rec().get(1).finish == 50 * kMs);
  CHECK(h.rec().get(2).finish == 50 * kMs);
  CHECK(h.cost().shapes()[4].prefill_tokens == 64 + 16);
}

// Content segments for the prefix-cache tests: a 320-token system prompt S shared by all.
constexpr std::uint64_t kSystem = 0xABC0;
std::vector<ContentSegment> with_system(std::uint64_t id, std::int64_t question, std::int64_t answer) {
  std::vector<ContentSegment> s = {{kSystem, 320}};
  if (question > 0) s.push_back({0x1000 + 2 * id, question});
  s.push_back({0x1001 + 2 * id, answer});
  return s;
}

TEST_CASE("replica: prefix cache — a shared 320-token system prompt is computed once",
          "[engine][replica][prefix]") {
  // A (id 0, t 0): S + 100 = 420 tokens. B (id 1, 5 ms): S + 50 = 370. C (id 2, 5 ms): S alone,
  // 320 tokens. All output 2. Prefix caching on, plenty of blocks.
  //   B: lookup of floor((370 - 1) / 16) = 23 blocks stops after the 320 / 16 = 20 blocks of S
  //      (block 20 mixes in B's own question) -> 320 cached, 50 computed.
  //   C: floor((320 - 1) / 16) = 19 blocks (vLLM always recomputes the last token) -> 304
  //      cached, 16 computed.
  //   step 1: A 420. step 2 (10 ms): A decode + B 50 + C 16.
  ReplicaHarness h(limits(8, 8192, true), 1000);
  h.add(request(0, 0, 420, 2, with_system(0, 100, 2)));
  h.add(request(1, 5 * kMs, 370, 2, with_system(1, 50, 2)));
  h.add(request(2, 5 * kMs, 320, 2, with_system(2, 0, 2)));
  CHECK(h.run() == 3);
  const auto& s = h.cost().shapes();
  CHECK(s[0].prefill_tokens == 420);
  CHECK(s[1].prefill_tokens == 50 + 16);
  CHECK(s[1].decode_sequences == 1);
  // Attention of the chunks still covers the cached context: KV read 370 + 320.
  CHECK(s[1].prefill_kv_tokens == Approx(370.0 + 320.0));
  CHECK(h.rec().get(0).prefix_hit_tokens == 0);
  CHECK(h.rec().get(1).prefix_hit_tokens == 320);
  CHECK(h.rec().get(2).prefix_hit_tokens == 304);
  const ReplicaStats& st = h.replica().stats();
  CHECK(st.prefix_hit_tokens == 320 + 304);
  CHECK(st.prefix_lookup_tokens == 420 + 370 + 320);
  CHECK(st.prompt_tokens_computed == 420 + 66);
  for (std::uint64_t i = 0; i < 3; ++i) CHECK(h.rec().get(i).generated == 2);
  // What a router sees afterwards: S's 20 blocks (capped at floor((370-1)/16) = 23 -> 20).
  CHECK(h.replica().cached_prefix_blocks(request(9, 0, 370, 1, with_system(9, 50, 1))) == 20);
  // The router's variant gives the same answer and keeps the 23 prompt hashes in the request
  // (recomputed only for another block size); asked again, it reuses them.
  Request q = request(9, 0, 370, 1, with_system(9, 50, 1));
  CHECK(h.replica().cached_prefix_blocks_keep(q) == 20);
  CHECK(q.block_hashes.size() == 23);
  CHECK(q.hashed_block_size == 16);
  const std::vector<std::uint64_t> kept = q.block_hashes;
  q.hashed_block_size = 32;  // as if hashed by a replica with 32-token blocks: not reused
  CHECK(h.replica().cached_prefix_blocks_keep(q) == 20);
  CHECK(q.block_hashes == kept);
}

TEST_CASE("replica: prefix blocks are published at scheduling time", "[engine][replica][prefix]") {
  // A and B arrive together. A's 26 full blocks are registered when A is planned, so B,
  // admitted behind A in the same step, already hits S's 20 blocks: step 1 = 420 + 50 tokens.
  ReplicaHarness h(limits(8, 8192, true), 1000);
  h.add(request(0, 0, 420, 1, with_system(0, 100, 1)));
  h.add(request(1, 0, 370, 1, with_system(1, 50, 1)));
  CHECK(h.run() == 1);
  CHECK(h.cost().shapes()[0].prefill_tokens == 470);
  CHECK(h.rec().get(1).prefix_hit_tokens == 320);
}

TEST_CASE("replica: without segments, no two requests share blocks", "[engine][replica][prefix]") {
  // Empty segments mean content unique to the request: equal lengths must not hit.
  ReplicaHarness h(limits(8, 8192, true), 1000);
  h.add(request(0, 0, 320, 1));
  h.add(request(1, 5 * kMs, 320, 1));
  CHECK(h.run() == 2);
  CHECK(h.cost().shapes()[1].prefill_tokens == 320);
  CHECK(h.replica().stats().prefix_hit_tokens == 0);
}

TEST_CASE("replica: static batching starts a batch together and admits nothing until it ends",
          "[engine][replica][policy]") {
  // max_num_seqs 2. A (id 0) out 2, B (id 1) out 4, C (id 2) out 1; 32-token prompts, t = 0.
  //   step 1: A and B, reserving prompt + output: ceil(34/16) + ceil(36/16) = 3 + 3 = 6 blocks.
  //   step 2: both decode; A done at 20 ms. Steps 3-4: B alone (C waits though a seat is free);
  //   B done at 40 ms. Step 5 (40 ms): C, done at 50 ms.
  ReplicaHarness h(limits(2, 8192, false), 100, "static");
  h.add(request(0, 0, 32, 2));
  h.add(request(1, 0, 32, 4));
  h.add(request(2, 0, 32, 1));
  const SimTime d = h.begin();
  CHECK(h.replica().kv().used_blocks() == 6);
  CHECK(h.cost().shapes()[0].prefill_tokens == 64);
  h.end(d);
  CHECK(h.run() == 4);
  CHECK(h.rec().get(0).finish == 20 * kMs);
  CHECK(h.rec().get(1).finish == 40 * kMs);
  CHECK(h.rec().get(2).first_scheduled == 40 * kMs);
  CHECK(h.rec().get(2).finish == 50 * kMs);
  const auto& s = h.cost().shapes();
  CHECK(s[2].decode_sequences == 1);  // B alone
  CHECK(s[3].decode_sequences == 1);
  for (std::uint64_t i = 0; i < 3; ++i) CHECK(h.rec().get(i).generated == h.rec().get(i).requested_output);
}

TEST_CASE("replica: vllm-v1 lets a request join a running batch (contrast with static)",
          "[engine][replica][policy]") {
  // Same requests as above under vllm-v1: C joins at step 3 (20 ms), when A has left and a
  // seat is free, and is done at 30 ms.
  ReplicaHarness h(limits(2, 8192, false), 100, "vllm-v1");
  h.add(request(0, 0, 32, 2));
  h.add(request(1, 0, 32, 4));
  h.add(request(2, 0, 32, 1));
  CHECK(h.run() == 4);
  CHECK(h.rec().get(2).first_scheduled == 20 * kMs);
  CHECK(h.rec().get(2).finish == 30 * kMs);
  CHECK(h.rec().get(1).finish == 40 * kMs);
}

TEST_CASE("replica: prefill-first runs waiting prompts in prefill-only steps",
          "[engine][replica][policy]") {
  SECTION("a new prompt stalls the running decodes for a step") {
    // A (id 0): 32 tokens, out 3, t 0. B (id 1): 32 tokens, out 1, arrives at 5 ms.
    //   step 1: A's prompt -> token 1 at 10 ms. step 2: B's prompt only (A waits) -> B done 20.
    //   steps 3, 4: A decodes -> tokens at 30 and 40 ms.
    ReplicaHarness h(limits(8, 50, false), 100, "prefill-first");
    h.add(request(0, 0, 32, 3));
    h.add(request(1, 5 * kMs, 32, 1));
    CHECK(h.run() == 4);
    const auto& s = h.cost().shapes();
    CHECK(s[1].prefill_tokens == 32);
    CHECK(s[1].decode_sequences == 0);
    CHECK(h.rec().tokens.at(0) == std::vector<SimTime>{10 * kMs, 30 * kMs, 40 * kMs});
    CHECK(h.rec().get(1).finish == 20 * kMs);
  }
  SECTION("whole prompts within the budget; a prompt over the budget runs alone") {
    // Budget 50. C, D: 32 tokens; E: 100 tokens; all out 2, t 0 (ids 0, 1, 2).
    //   step 1: C (32; D's 32 > 18 left). step 2: D (E's 100 > 18 left). step 3: E alone,
    //   100 > 50 but nothing else is planned. step 4: decode all three -> done at 40 ms.
    ReplicaHarness h(limits(8, 50, false), 100, "prefill-first");
    h.add(request(0, 0, 32, 2));
    h.add(request(1, 0, 32, 2));
    h.add(request(2, 0, 100, 2));
    CHECK(h.run() == 4);
    const auto& s = h.cost().shapes();
    CHECK(s[0].prefill_tokens == 32);
    CHECK(s[1].prefill_tokens == 32);
    CHECK(s[2].prefill_tokens == 100);
    CHECK(s[2].prefill_sequences == 1);
    CHECK(s[3].decode_sequences == 3);
    CHECK(s[3].prefill_tokens == 0);
    for (std::uint64_t i = 0; i < 3; ++i) CHECK(h.rec().get(i).finish == 40 * kMs);
  }
}

TEST_CASE("replica: unknown policy names are refused with the accepted ones", "[engine][policy]") {
  CHECK_THROWS_WITH(make_policy("fifo"), Catch::Contains("accepted: vllm-v1, prefill-first, sglang, static"));
}

}  // namespace

// A sliding-window layout (memory_plan.h KvLayout), as vLLM's hybrid KV-cache manager runs it:
// one full-attention group and one sliding group, window 64 tokens, blocks of 16. Every block of
// tokens takes one full block; the sliding group holds only the blocks the window still reaches
// (SlidingWindowManager.remove_skipped_blocks frees blocks wholly before token
// computed - 64 + 1).
TEST_CASE("replica: sliding-window layers hold only their window's blocks",
          "[engine][replica][sliding]") {
  KvLayout l;
  l.block_size = 16;
  l.layers_per_group = 1;
  l.full_groups = 1;
  l.sliding_groups = 1;
  l.sliding_window = 64;
  l.sliding_peak_blocks = (64 - 1 + 1000 + 15) / 16 + 1;  // 68
  // One request: 160-token prompt, 40 output tokens; budget 1000, so the prompt runs whole.
  ReplicaHarness h(limits(4, 1000, false), 100, "vllm-v1", 0.010, 0.0, std::nullopt, l);
  h.add(request(0, 0, 160, 40));
  //   step 1 (prefill, computed 0 -> 160): full 160/16 = 10 blocks; sliding: nothing is before
  //     the window yet (0 - 64 + 1 < 0), so blocks 0..9 as well: 20 blocks in use.
  REQUIRE(h.step());
  CHECK(h.replica().kv().used_blocks() == 20);
  //   step 2 (decode token 161, computed 160): the window reaches back to token 160 - 63 = 97,
  //     in block 97 / 16 = 6, so sliding blocks 0..5 are freed (4 held: 6..9); 161 tokens need
  //     11 blocks: one more full and one more sliding block. 11 + 5 = 16 in use.
  REQUIRE(h.step());
  CHECK(h.replica().kv().used_blocks() == 16);
  // From then on the sliding group holds at most ceil(63 / 16) + 1 = 5 blocks. At the last
  // decode step (computed 198, 199 tokens): full ceil(199/16) = 13; sliding from block
  // (198 - 63) / 16 = 8 to 12: 5 blocks. 18 in use.
  while (h.rec().finished.empty()) {
    CHECK(h.replica().kv().used_blocks() <= 13 + 5);
    REQUIRE(h.step());
  }
  CHECK(h.rec().finished.size() == 1);
  CHECK(h.rec().get(0).generated == 40);
  CHECK(h.replica().kv().used_blocks() == 0);  // everything released at the end
}

TEST_CASE("replica: a sliding-window prefill waits for blocks like any other",
          "[engine][replica][sliding]") {
  // Pool of 24 blocks, same layout. Two 160-token prompts need 20 blocks each at prefill (10
  // full + 10 sliding): only one is admitted; the second waits until the first finishes.
  KvLayout l;
  l.block_size = 16;
  l.layers_per_group = 1;
  l.full_groups = 1;
  l.sliding_groups = 1;
  l.sliding_window = 64;
  l.sliding_peak_blocks = 68;
  ReplicaHarness h(limits(4, 1000, false), 24, "vllm-v1", 0.010, 0.0, std::nullopt, l);
  h.add(request(0, 0, 160, 4));
  h.add(request(1, 0, 160, 4));
  REQUIRE(h.step());
  CHECK(h.running_ids() == Ids{0});
  CHECK(h.waiting_ids() == Ids{1});
  h.run();
  REQUIRE(h.rec().finished.size() == 2);
  CHECK(h.rec().finished[0].id == 0);
  CHECK(h.rec().finished[1].id == 1);
  CHECK(h.replica().kv().used_blocks() == 0);
}
