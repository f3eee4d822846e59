// The CPU tier of KV blocks (--kv-offloading-size; sim/engine/cpu_kv_tier.h, vLLM's
// OffloadingConnector with the native CPU backend): the LRU manager's bookkeeping on its own,
// the tier's size from the memory plan, and one replica that stores a prompt, loses it from the
// GPU prefix cache, finds it in the CPU tier and waits for its load. Every number is worked by
// hand in the comments.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "sim/engine/cpu_kv_tier.h"
#include "sim/llm/memory_plan.h"
#include "tests/engine/test_support.h"

namespace {

using namespace capsim;
using namespace capsim::test;

TEST_CASE("CPU KV tier: pending stores are invisible, LRU eviction, refused stores", "[engine][offload]") {
  CpuKvTier t(3);
  const std::vector<std::uint64_t> ab = {0xA1, 0xB2}, cd = {0xC3, 0xD4}, ef = {0xE5, 0xF6};
  std::vector<std::int32_t> p1, p2, p3;
  REQUIRE(t.store(ab.data(), 2, p1));
  CHECK(p1.size() == 2);
  CHECK(t.used() == 2);
  CHECK(t.lookup(ab.data(), 2) == 0);  // pending: the store is in flight (ref_cnt -1)
  t.complete(p1);
  CHECK(p1.empty());
  CHECK(t.lookup(ab.data(), 2) == 2);
  // touch walks A, B in reverse: B then A to the MRU end, so B is now the least recently used.
  t.touch(ab.data(), 2);
  // C, D: 2 new blocks, 1 free slot -> evict 1 ready block, the LRU one: B.
  REQUIRE(t.store(cd.data(), 2, p2));
  CHECK(t.evictions() == 1);
  CHECK(t.lookup(ab.data(), 1) == 1);      // A kept
  CHECK(t.lookup(ab.data() + 1, 1) == 0);  // B gone
  CHECK(t.lookup(ab.data(), 2) == 1);      // the lookup stops at the first miss
  // E, F: 2 new, 0 free, 1 ready (A; C and D are pending) -> refused whole, nothing changes.
  CHECK_FALSE(t.store(ef.data(), 2, p3));
  CHECK(p3.empty());
  CHECK(t.refused_blocks() == 2);
  CHECK(t.used() == 3);
  CHECK(t.lookup(ab.data(), 1) == 1);
  // A block already present is not stored again (prepare_store filters it).
  const std::vector<std::uint64_t> ac = {0xA1, 0xC3};
  REQUIRE(t.store(ac.data(), 2, p3));
  CHECK(p3.empty());
  CHECK(t.stored_blocks() == 4);  // A, B, C, D
  t.complete(p2);
  CHECK(t.lookup(cd.data(), 2) == 2);
  CHECK(t.consistent());
}

TEST_CASE("CPU KV tier: slots are made as blocks are stored, in the order of a tier made up front",
          "[engine][offload]") {
  // A 1e5 GiB tier of Llama-3.1-8B (2 MiB blocks): 51,200,000 slots, none made before a store
  // (they were allocated up front: 4.2 GB).
  CpuKvTier big(51'200'000);
  CHECK(big.capacity() == 51'200'000);
  CHECK(big.slots_made() == 0);
  const std::vector<std::uint64_t> ab = {0xA1, 0xB2}, c = {0xC3}, de = {0xD4, 0xE5};
  std::vector<std::int32_t> p;
  REQUIRE(big.store(ab.data(), 2, p));
  CHECK(p == std::vector<std::int32_t>{0, 1});
  CHECK(big.slots_made() == 2);
  CHECK(big.consistent());
  // Full, a tier reuses evicted slots, the last freed first: storing D, E into a full tier of 3
  // (A, B, C ready, A least recent) evicts A (slot 0), then B (slot 1), and takes 1, then 0.
  CpuKvTier t(3);
  std::vector<std::int32_t> p1, p2, p3;
  REQUIRE(t.store(ab.data(), 2, p1));
  t.complete(p1);
  REQUIRE(t.store(c.data(), 1, p2));
  CHECK(p2 == std::vector<std::int32_t>{2});
  t.complete(p2);
  REQUIRE(t.store(de.data(), 2, p3));
  CHECK(p3 == std::vector<std::int32_t>{1, 0});
  CHECK(t.slots_made() == 3);
  CHECK(t.evictions() == 2);
  CHECK(t.consistent());
}

TEST_CASE("CPU KV tier: the bookkeeping bytes a tier takes when full", "[engine][offload][limits]") {
  // 51,200,000 slots x (8 B hash + 1 B state + 3 x 4 B links and free list) = 1,075,200,000 B;
  // the hash table kept at most a quarter full: 2^28 slots (>= 4 x 51.2e6) x 12 B = 3,221,225,472 B.
  CHECK(CpuKvTier::bookkeeping_bytes(51'200'000) == 1'075'200'000.0 + 3'221'225'472.0);
  // 4096 blocks (8 GiB): 86,016 B + 2^14 x 12 B = 282,624 B.
  CHECK(CpuKvTier::bookkeeping_bytes(4096) == 86'016.0 + 196'608.0);
}

TEST_CASE("CPU KV tier: blocks from the GiB as vLLM's CPUOffloadingSpec counts them", "[engine][offload]") {
  // cpu_bytes_to_use / (page_size_bytes x kv_cache_tensors x world_size), the block on all ranks.
  // Llama-2-7B, fp16 KV, TP1: 16 tokens x 32 layers x 32 KV heads x 128 x 2 (K, V) x 2 B
  //   = 8 MiB per block; 8 GiB / 8 MiB = 1024 blocks.
  Deployment d = deployment("llama-2-7b");
  d.limits.kv_offloading_size = 8;
  MemoryPlan p = plan_memory(d, 1);
  CHECK(p.kv_block_bytes == Approx(8.0 * 1048576));
  CHECK(p.cpu_kv_blocks == 1024);
  // Llama-3.1-8B at TP2: 16 x 32 layers x 4 KV heads per GPU x 128 x 2 x 2 B = 1 MiB per GPU,
  // 2 MiB on both ranks: 8 GiB -> 4096 blocks; 0.5 GiB -> 256.
  Deployment e = deployment("llama-3.1-8b", "h100-sxm", 2);
  e.limits.kv_offloading_size = 8;
  p = plan_memory(e, 1);
  CHECK(p.kv_block_bytes == Approx(1048576.0));
  CHECK(p.cpu_kv_blocks == 4096);
  e.limits.kv_offloading_size = 0.5;
  CHECK(plan_memory(e, 1).cpu_kv_blocks == 256);
  // Off: no tier, the GPU plan unchanged.
  e.limits.kv_offloading_size = 0;
  const MemoryPlan off = plan_memory(e, 1);
  CHECK(off.cpu_kv_blocks == 0);
  CHECK(off.kv_blocks == p.kv_blocks);
}

TEST_CASE("CPU KV tier: a connector turns vLLM's hybrid KV manager off (sliding windows count in full)",
          "[engine][offload]") {
  // gpt-oss-20b: 24 layers, 12 sliding (window 128). Hybrid: one pool block holds 12 layers'
  // KV and a sequence needs 1 full + 1 sliding block per 16 tokens within the window; with
  // --kv-offloading-size every layer is full attention: one block of 24 layers per 16 tokens.
  Deployment d = deployment("gpt-oss-20b");
  const MemoryPlan hybrid = plan_memory(d, 1);
  REQUIRE(hybrid.layout.hybrid());
  d.limits.kv_offloading_size = 8;
  const MemoryPlan full = plan_memory(d, 1);
  CHECK_FALSE(full.layout.hybrid());
  CHECK(full.layout.layers_per_group == 24);
  CHECK(full.kv_block_bytes == Approx(2 * hybrid.kv_block_bytes));
}

// Llama-3.1-8B on one H100 SXM: a block is 16 x 32 x 8 x 128 x 2 x 2 B = 2,097,152 B; the card's
// PCIe Gen5 x16 moves 16 x 3.938 GB/s = 63.008 GB/s per direction (card file pcie_generation 5,
// Card::pcie_bandwidth), so one block loads in 2,097,152 / 63.008e9 s = 33.284 us.
constexpr double kBlockLoadS = 2097152.0 / 63.008e9;

// Step times of a + b x tokens are sums of doubles rounded to whole nanoseconds.
bool near_ns(SimTime actual, SimTime expected, SimTime slack = 8) {
  return std::llabs(actual - expected) <= slack;
}

Request with_content(std::uint64_t id, SimTime at, std::int64_t prompt, std::int64_t output,
                     std::uint64_t content) {
  return request(id, at, prompt, output, {ContentSegment{content, prompt}});
}

TEST_CASE("CPU KV tier: GPU hits first, the rest loaded from the CPU tier while the request waits",
          "[engine][offload]") {
  // 11 GPU blocks, a 16-block CPU tier, steps of 10 ms + 0.1 ms per token, synchronous
  // scheduling (the test engine profile), prefix caching on.
  //   A (id 0, content 1): 64-token prompt = 4 full blocks, 2 output tokens. At 0: prefill 64
  //     (16.4 ms), then a decode that needs a 5th block (10.1 ms): done at 26.5 ms. Its 4 full
  //     blocks were stored to the CPU tier as computed and become ready when it finishes.
  //   B (id 1, content 2): 144-token prompt (9 blocks), 2 output tokens, arrives at 26.5 ms. The
  //     free queue is blocks 5..10 then A's, freed tail first: 4, 3, 2, 1, 0. B's prefill takes
  //     5..10, 4, 3, 2 (A's blocks 3 and 2 are evicted), its decode's 10th block takes 1 (A's
  //     second): only A's first block is left in the GPU prefix cache. B's 9 full blocks go to
  //     the CPU tier (13 of 16). Steps 26.5 -> 50.9 (prefill 144: 24.4 ms) -> 61.0 ms (decode).
  //   C (id 2, content 1 = A's prompt) arrives at 61.0 ms. GPU lookup over (64 - 1) / 16 = 3
  //     blocks: 1 hit. CPU lookup over the next floor(64 / 16) - 1 = 3 blocks: 3 ready. C takes
  //     its GPU hit and 3 fresh blocks and waits for the load: 3 x 33.284 us = 99.85 us; nothing
  //     else runs, so the engine polls without a forward pass and sees it done at 61.0999 ms.
  //     Then C is admitted with min(4 x 16, 64 - 1) = 63 tokens ready and computes 1 (10.1 ms):
  //     first token at 71.1999 ms, TTFT 10.1999 ms where recomputing 48 tokens would take 14.8.
  CpuTierConfig cpu;
  cpu.blocks = 16;
  cpu.load_seconds_per_block = kBlockLoadS;
  ReplicaHarness h(limits(4, 1000, true), 11, "vllm-v1", 0.010, 0.0001, std::nullopt, KvLayout{}, cpu);
  h.add(with_content(0, 0, 64, 2, 1));
  h.add(with_content(1, 26'500'000, 144, 2, 2));
  h.add(with_content(2, 61'000'000, 64, 2, 1));
  h.run();
  const auto& a = h.rec().get(0);
  const auto& b = h.rec().get(1);
  const auto& c = h.rec().get(2);
  CHECK(near_ns(a.finish, 26'500'000));
  CHECK(near_ns(b.first_token, 50'900'000));
  REQUIRE(near_ns(b.finish, 61'000'000));
  const SimTime load = from_seconds(3 * kBlockLoadS);
  CHECK(load == 99'852);
  CHECK(near_ns(c.first_scheduled, 61'000'000 + load));
  CHECK(near_ns(c.first_token, 61'000'000 + load + 10'100'000));
  CHECK(c.prefix_hit_tokens == 64);
  const ReplicaStats& st = h.replica().stats();
  CHECK(st.prefix_hit_tokens == 16);  // C's one GPU hit (A and B had none)
  CHECK(st.cpu_hit_tokens == 48);
  CHECK(st.cpu_loads == 1);
  CHECK(st.cpu_loaded_blocks == 3);
  CHECK(st.cpu_load_wait_s == Approx(to_seconds(load)).epsilon(1e-6));
  // Stored: A's 4, B's 9; C's blocks were there already: 13 of 16 used.
  REQUIRE(h.replica().cpu_tier() != nullptr);
  CHECK(h.replica().cpu_tier()->stored_blocks() == 13);
  CHECK(h.replica().cpu_tier()->used() == 13);
  CHECK(h.replica().cpu_tier()->consistent());
  CHECK(h.replica().kv().consistent());
  // The steps: A prefill, A decode, B prefill, B decode, C's 1-token chunk, C decode: the wait
  // for the load is not a step.
  CHECK(st.steps == 6);
}

TEST_CASE("CPU KV tier: with asynchronous scheduling a load seen at a step's end waits one more step",
          "[engine][offload]") {
  // As above with 10 GPU blocks (B's decode block then evicts A's first block too) and the
  // engine's asynchronous scheduling: a step is planned when the previous one starts, so it
  // cannot see that step's output (vllm-v1-notes.md section 5). A, B as above (the async
  // scheduler admits each arrival at once: nothing runs when it comes). At 61.0 ms C (content 1)
  // and L (id 9, 16-token prompt of its own, 8 output tokens) arrive:
  //   step N   61.0 -> 72.6 ms: C has 0 GPU hits and 4 CPU hits; its load (4 x 33.284 us)
  //            starts; L's prefill 16 (11.6 ms). The worker reports the load at the step's end.
  //   step N+1 72.6 -> 82.7: planned at 61.0, before that report: L decodes (10.1 ms).
  //   step N+2 82.7 -> 92.9: C's last token (63 of 64 loaded) + L's decode (10.2 ms).
  // C's first token at 92.9 ms (TTFT 31.9 ms); a synchronous engine admits it in step N+1
  // (first token at 82.8 ms).
  EngineProfile e = deployment().engine;
  e.async_scheduling = true;
  CpuTierConfig cpu;
  cpu.blocks = 16;
  cpu.load_seconds_per_block = kBlockLoadS;
  for (const bool async : {true, false}) {
    e.async_scheduling = async;
    ReplicaHarness h(limits(4, 1000, true), 10, "vllm-v1", 0.010, 0.0001, e, KvLayout{}, cpu);
    h.add(with_content(0, 0, 64, 2, 1));
    h.add(with_content(1, 26'500'000, 144, 2, 2));
    h.add(with_content(2, 61'000'000, 64, 2, 1));
    h.add(with_content(9, 61'000'000, 16, 8, 9));
    h.run();
    REQUIRE(near_ns(h.rec().get(1).finish, 61'000'000));
    const auto& c = h.rec().get(2);
    CHECK(near_ns(h.rec().get(9).first_token, 72'600'000));
    CHECK(near_ns(c.first_scheduled, async ? 82'700'000 : 72'600'000));
    CHECK(near_ns(c.first_token, async ? 92'900'000 : 82'800'000));
    const ReplicaStats& st = h.replica().stats();
    CHECK(st.prefix_hit_tokens == 0);
    CHECK(st.cpu_hit_tokens == 64);
    CHECK(st.cpu_loaded_blocks == 4);
    // The wait, from the step that started the load to the one that admits C: 2 or 1 steps.
    CHECK(st.cpu_load_wait_s == Approx(async ? 0.0217 : 0.0116).epsilon(1e-6));
  }
}

}  // namespace
