// Speculative decoding and multi-LoRA through the command line and scenario files: bad input is
// exit 2 naming the flag or field and what is accepted; a good run reports what it modelled.
#include <catch2/catch.hpp>

#include <string>

#include "tests/check/cli_run.h"

namespace {
using capsim_test::Run;
using capsim_test::Scratch;
using Catch::Matchers::Contains;
}  // namespace

TEST_CASE("speculative/lora cli: bad input is exit 2 with the flag and what is accepted", "[cli][speculative][lora]") {
  const std::string base = "simulate --requests 5 --rate 1 ";
  const auto bad = [&](const std::string& args, const std::string& want) {
    const Run r = capsim_test::run_capsim(base + args);
    INFO(args << "\n" << r.err);
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Contains(want));
  };
  bad("--speculative-config '{\"method\": \"medusa9\"}'", "unknown speculative method 'medusa9'; accepted: eagle3");
  bad("--speculative-config 'eagle3'", "--speculative-config: 'eagle3' is not JSON");
  bad("--speculative-config '{\"method\": \"eagle3\", \"num_speculative_tokens\": 40}'", "num_speculative_tokens: 40 is not a whole number in 1..16");
  bad("--speculative-config '{\"method\": \"ngram\"}'", "ngram has no published default acceptance");
  bad("--speculative-config '{\"method\": \"eagle3\"}' --spec-acceptance 0", "--spec-acceptance: '0' is not an acceptance in (0, 1]");
  bad("--speculative-config '{\"method\": \"draft_model\", \"model\": \"llama-3-8b-nope\"}' --spec-acceptance 0.7", "--speculative-config.model: ");
  bad("--speculative-config '{\"method\": \"draft_model\", \"model\": \"qwen2.5-7b\"}' --spec-acceptance 0.7",
      "a draft model must share the target's tokenizer");
  bad("--spec-acceptance 0.7", "--spec-acceptance: needs --speculative-config");
  bad("--speculative-config '{\"method\": \"eagle3\"}' --scheduler static", "modelled with the vllm-v1 scheduler only");
  bad("--max-loras 4", "--max-loras: needs --enable-lora");
  bad("--enable-lora true --max-lora-rank 24", "max_lora_rank: 24 is not one of vLLM's ranks");
  bad("--enable-lora true --max-loras 4 --max-cpu-loras 2", "max_cpu_loras: 2 is below max_loras 4");
  bad("--enable-lora true --lora-target-modules q_proj,qkv", "LoRA target module 'qkv' is unknown; accepted: q_proj");
  bad("--lora-adapters 10", "LoRA serving is off; add --enable-lora");
  bad("--enable-lora true --lora-adapters 10 --lora-distribution pareto", "--lora-distribution: 'pareto' is not a distribution; accepted: uniform, zipf:S");
}

TEST_CASE("speculative/lora cli: scenario file fields, errors name the file and field", "[cli][speculative][lora]") {
  Scratch dir("speclora");
  const std::string bad_spec = dir.write("bad_spec.yaml",
      "workload: {rate: 1, requests: 5}\nspeculative: {method: eagle3, acceptance: [0.9, 0.8]}\n");
  Run r = capsim_test::run_capsim("simulate " + bad_spec);
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Contains("2 values for 3 speculative tokens"));
  const std::string bad_key = dir.write("bad_key.yaml", "workload: {rate: 1, requests: 5}\nlora: {max_lora: 4}\n");
  r = capsim_test::run_capsim("simulate " + bad_key);
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Contains("bad_key.yaml: lora: unknown field 'max_lora'; accepted: enable_lora, max_loras"));
  const std::string good = dir.write("good.yaml",
      "model: llama-3.1-8b\nworkload: {concurrency: 4, requests: 40, input_tokens: 256, output_tokens: 64}\n"
      "speculative: {method: eagle3, num_speculative_tokens: 3, acceptance: 0.7}\n"
      "lora: {max_loras: 2, max_lora_rank: 16, adapters: 4, distribution: 'zipf:1.0'}\n");
  r = capsim_test::run_capsim("simulate " + good);
  INFO(r.err);
  CHECK(r.status == 0);
  // E[A] at 0.7, k 3: 1 + 0.7 + 0.49 + 0.343 = 2.533.
  CHECK_THAT(r.out, Contains("speculative decoding: eagle3, k 3:"));
  CHECK_THAT(r.out, Contains("(expected 2.53)"));
  CHECK_THAT(r.out, Contains("LoRA: 4 adapters of rank 16 (0.08 GiB each), max_loras 2"));
}
