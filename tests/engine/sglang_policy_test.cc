// SGLang's scheduler (sim/engine/policy_sglang.cc) and its engine profile
// (calibration/engines/sglang.yaml), worked by hand on a fake step cost (10 ms a step) with
// one-token KV pages (SGLang's page_size 1), so the pool's free tokens are its free blocks.
#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "tests/check/cli_run.h"
#include "tests/engine/test_support.h"

namespace {

using namespace capsim;
using namespace capsim::test;

SchedulerLimits one_token_pages(int max_num_batched_tokens) {
  SchedulerLimits l = limits(8, max_num_batched_tokens, false);
  l.block_size = 1;
  return l;
}

TEST_CASE("sglang: admission reserves 0.7 of every running request's remaining output",
          "[engine][sglang]") {
  // A pool of 2000 tokens. A, B and C (prompt 100, max_new_tokens 256) arrive at 0: step 1 is a
  // prefill batch of all three (each 100 + 256 below what is left: 2000, 1644, 1288). They hold
  // 300 tokens and have 1 output token each. D (prompt P, 256) arrives at 5 ms and is looked at
  // in step 2: free 1700, reserved 3 x 0.7 x (256 - 1) = 535.5, so D is admitted iff
  // P + 256 < 1700 - 535.5 = 1164.5, i.e. P <= 908. Admitted, step 2 is D's prefill alone (the
  // running requests do not decode in it); refused, step 2 decodes A, B and C.
  const auto step2 = [](std::int64_t prompt) {
    ReplicaHarness h(one_token_pages(8192), 2000, "sglang");
    for (std::uint64_t id = 0; id < 3; ++id) h.add(request(id, 0, 100, 256));
    h.add(request(3, 5 * kMs, prompt, 256));
    REQUIRE(h.step());
    REQUIRE(h.step());
    return h.cost().shapes().at(1);
  };
  const BatchShape first = step2(100);
  const BatchShape admitted = step2(908);
  CHECK(admitted.prefill_tokens == 908);
  CHECK(admitted.decode_sequences == 0);
  const BatchShape refused = step2(909);
  CHECK(refused.prefill_tokens == 0);
  CHECK(refused.decode_sequences == 3);
  CHECK(first.prefill_tokens == 100);

  // The same test as a function: 908 + 256 < 1164.5, 909 + 256 is not.
  CHECK(SglangPolicy::admits(1700, 535.5, 908, 256, 4096));
  CHECK_FALSE(SglangPolicy::admits(1700, 535.5, 909, 256, 4096));
  // max_new_tokens above the clip counts 4096: 100 + 4096 < 4200 is false, 4197 + ... true.
  CHECK_FALSE(SglangPolicy::admits(4200, 0, 104, 100000, 4096));
  CHECK(SglangPolicy::admits(4200, 0, 103, 100000, 4096));
}

TEST_CASE("sglang: a long prompt is cut at chunked_prefill_size and decodes wait for prefills",
          "[engine][sglang]") {
  // Chunk 512, pool 10000. A (prompt 100, 4 out) at 0; B (prompt 1200, 2 out) at 5 ms.
  //   step 1: A's prefill (100)                      -> A token 1
  //   step 2: B 512 (prefill only: A does not decode)
  //   step 3: B 512        step 4: B 176 -> B token 1
  //   step 5: A and B decode
  ReplicaHarness h(one_token_pages(512), 10000, "sglang");
  h.add(request(0, 0, 100, 4));
  h.add(request(1, 5 * kMs, 1200, 2));
  for (int i = 0; i < 5; ++i) REQUIRE(h.step());
  const auto& s = h.cost().shapes();
  CHECK(s[0].prefill_tokens == 100);
  CHECK(s[1].prefill_tokens == 512);
  CHECK(s[1].decode_sequences == 0);
  CHECK(s[2].prefill_tokens == 512);
  CHECK(s[3].prefill_tokens == 176);
  CHECK(s[3].logit_sequences == 1);
  CHECK(s[4].prefill_tokens == 0);
  CHECK(s[4].decode_sequences == 2);
  // B's first token at the end of step 4 (40 ms); A's second only at the end of step 5 (50 ms):
  // it waited through B's three prefill steps.
  CHECK(h.rec().tokens.at(1).front() == 40 * kMs);
  CHECK(h.rec().tokens.at(0).at(1) == 50 * kMs);
}

TEST_CASE("sglang: a decode step that does not fit retracts the request with the least output",
          "[engine][sglang]") {
  // Pool 122 tokens. A and B (prompt 10, 60 out) at 0. Step 1 admits A (10 + 60 < 122) but not
  // B (70 < 122 - 70 fails). Step 2: free 112, A reserves 0.7 x 59 = 41.3, and 70 < 70.7 admits
  // B. Then both decode, 2 tokens a step: after 51 decode steps free is 102 - 102 = 0 and the
  // 52nd cannot run. Both have 52 output tokens and 10-token prompts, so the later one in the
  // batch, B, is retracted (queued at the back, recomputed later); A goes on alone and finishes.
  ReplicaHarness h(one_token_pages(8192), 122, "sglang");
  h.add(request(0, 0, 10, 60));
  h.add(request(1, 0, 10, 60));
  REQUIRE(h.step());
  CHECK(h.running_ids() == std::vector<std::uint64_t>{0});
  REQUIRE(h.step());
  CHECK(h.running_ids() == std::vector<std::uint64_t>{0, 1});
  for (int i = 0; i < 51; ++i) REQUIRE(h.step());
  CHECK(h.running_ids() == std::vector<std::uint64_t>{0, 1});
  REQUIRE(h.step());  // the 52nd decode step: B retracted, A decodes alone
  CHECK(h.running_ids() == std::vector<std::uint64_t>{0});
  CHECK(h.waiting_ids() == std::vector<std::uint64_t>{1});
  CHECK(h.cost().shapes().back().decode_sequences == 1);
  h.run();
  CHECK(h.rec().get(0).preemptions == 0);
  CHECK(h.rec().get(1).preemptions == 1);
  CHECK(h.rec().get(1).generated == 60);
}

TEST_CASE("sglang: the engine profile runs SGLang's scheduler with its defaults for the card",
          "[engine][sglang]") {
  const EngineProfile& e = engine_catalogue().find("sglang");
  CHECK(e.scheduler_policy == "sglang");
  CHECK(e.init_new_token_ratio == 0.7);
  CHECK(e.min_new_token_ratio_factor == 0.14);
  CHECK(e.new_token_ratio_decay_steps == 600);
  CHECK(e.block_size == 1);
  // chunked_prefill_size by the card's memory: an 80 GB H100 (79.6 GiB) takes 8192, a 40 GB
  // A100 4096, a 24 GB card 2048, an H200 (141 GB) 8192, a B200 (180+ GB) 16384.
  const SchedulerLimits h100 = default_limits(card_catalogue().find("h100-sxm"), e);
  CHECK(h100.max_num_batched_tokens == 8192);
  CHECK(h100.max_num_seqs == 2048);
  CHECK(h100.block_size == 1);
  CHECK(h100.gpu_memory_utilization == 0.835);
  CHECK(sglang_chunked_prefill_size(40.0 * 1073741824.0) == 4096);
  CHECK(sglang_chunked_prefill_size(24.0 * 1073741824.0) == 2048);
  CHECK(sglang_chunked_prefill_size(141e9) == 8192);
  CHECK(sglang_chunked_prefill_size(180.0 * 1073741824.0) == 16384);
  // vLLM's profile keeps its scheduler and vLLM's card defaults.
  const SchedulerLimits vllm = default_limits(card_catalogue().find("h100-sxm"), engine_catalogue().find("vllm"));
  CHECK(engine_catalogue().find("vllm").scheduler_policy == "vllm-v1");
  CHECK(vllm.max_num_batched_tokens == 8192);
  CHECK(vllm.max_num_seqs == 1024);
}

TEST_CASE("sglang: capsim simulate --engine sglang runs SGLang's scheduler, and --scheduler overrides it",
          "[engine][sglang][cli]") {
  using capsim_test::has;
  using capsim_test::run_capsim;
  const std::string base = "simulate --model llama-3.1-8b --card h100-sxm --rate 4 --requests 40 -q --json -";
  const auto sg = run_capsim(base + " --engine sglang");
  REQUIRE(sg.status == 0);
  const auto sg_json = nlohmann::json::parse(sg.out);
  CHECK(sg_json.at("scheduler") == "sglang");
  CHECK(sg_json.at("completed") == 40);
  const auto over = run_capsim(base + " --engine sglang --scheduler vllm-v1");
  REQUIRE(over.status == 0);
  CHECK(nlohmann::json::parse(over.out).at("scheduler") == "vllm-v1");
  const auto plain = run_capsim(base);
  REQUIRE(plain.status == 0);
  CHECK(nlohmann::json::parse(plain.out).at("scheduler") == "vllm-v1");
  const auto listed = run_capsim("list engines");
  CHECK(listed.status == 0);
  CHECK(has(listed.out, "sglang"));
}

TEST_CASE("sglang: a bad scheduler section names the engine file and field", "[engine][sglang][cli]") {
  using capsim_test::has;
  using capsim_test::read_all;
  using capsim_test::run_capsim;
  capsim_test::Scratch tmp("sglang-engine");
  const std::string shipped = read_all(std::string(CAPSIM_DATA_DIR) + "/calibration/engines/sglang.yaml");
  const auto write = [&](const std::string& name, const std::string& from, const std::string& to) {
    std::string text = shipped;
    text.replace(text.find(from), from.size(), to);
    const std::string path = tmp.file(name);
    std::ofstream(path) << text;
    return path;
  };
  const std::string unknown = write("unknown.yaml", "policy: sglang", "policy: sglang-fast");
  const auto a = run_capsim("simulate --model llama-3.1-8b --card h100-sxm --rate 1 --requests 5 -q --engine " + unknown);
  CHECK(a.status == 2);
  CHECK(has(a.err, "unknown.yaml: scheduler.policy"));
  CHECK(has(a.err, "sglang-fast"));
  CHECK(has(a.err, "vllm-v1"));  // the accepted names
  const std::string ratio = write("ratio.yaml", "init_new_token_ratio: {value: 0.7", "init_new_token_ratio: {value: 1.5");
  const auto b = run_capsim("simulate --model llama-3.1-8b --card h100-sxm --rate 1 --requests 5 -q --engine " + ratio);
  CHECK(b.status == 2);
  CHECK(has(b.err, "scheduler.init_new_token_ratio"));
  CHECK(has(b.err, "outside the accepted range"));
}

}  // namespace
