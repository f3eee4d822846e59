// Disaggregated serving from the command line: the pool flags, the scenario section, and bad
// input (exit 2, a message naming the flag or file: field and what is accepted).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/check/cli_run.h"

using capsim_test::has;
using capsim_test::run_capsim;

TEST_CASE("pd cli: pools on the command line run, and --json carries the handoff", "[pd]") {
  const auto r = run_capsim(
      "simulate --model llama-3.1-8b --prefill-pool '1x h100-sxm' --decode-pool '1x h100-sxm' "
      "--kv-link ib-ndr-400 --rate 1 --requests 1 --input-tokens 2000 --output-tokens 10 -q --json -");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& d = j["capsim"]["disaggregation"];
  CHECK(d["prefill_replicas"] == 1);
  CHECK(d["kv_link"] == "ib-ndr-400");
  CHECK(d["decode_pool"]["card"] == "h100-sxm");
  // 2000 tokens x 131072 B = 262,144,000 B; over 50 GB/s x 0.8 (kLinkEfficiency) = 40 GB/s,
  // + 50 us: 6.5536 + 0.05 = 6.6036 ms.
  CHECK(d["kv_bytes_mean"].get<double>() == Approx(262'144'000.0));
  CHECK(d["kv_transfer_ms"]["p50"].get<double>() == Approx(6.6036).epsilon(1e-5));
}

TEST_CASE("pd cli: a scenario file's disaggregation section", "[pd]") {
  capsim_test::Scratch tmp("pd");
  const std::string y = tmp.write("pd.yaml",
                                  "model: llama-3.1-8b\n"
                                  "disaggregation:\n"
                                  "  prefill: {card: h100-sxm, tp: 1, replicas: 2}\n"
                                  "  decode: {card: h100-sxm, tp: 2, replicas: 1}\n"
                                  "  kv_link: nvlink-h100\n"
                                  "workload: {rate: 2, requests: 20, input_tokens: 1000, output_tokens: 50}\n");
  const auto r = run_capsim("simulate '" + y + "' -q");
  REQUIRE(r.status == 0);
  CHECK(has(r.out, "2 x h100-sxm"));
  CHECK(has(r.out, "decode pool 1 x h100-sxm tp2"));
  CHECK(has(r.out, "KV over nvlink-h100"));
  const std::string bad = tmp.write("bad.yaml", "model: llama-3.1-8b\ndisaggregation:\n  prefill: {card: h100-sxm}\n"
                                                "  decode: {card: h100-sxm}\n");
  const auto b = run_capsim("simulate '" + bad + "' -q");
  CHECK(b.status == 2);
  CHECK(has(b.err, bad + ": disaggregation.kv_link: missing (required)"));
}

TEST_CASE("pd cli: bad pools and links exit 2 naming the flag", "[pd]") {
  const std::string base = "simulate --model llama-3.1-8b --rate 1 --requests 5 -q ";
  auto r = run_capsim(base + "--prefill-pool '1x h100-sxm + 1x a100-80gb-sxm' --decode-pool '1x h100-sxm' --kv-link ib-ndr-400");
  CHECK(r.status == 2);
  CHECK(has(r.err, "--prefill-pool: '1x h100-sxm + 1x a100-80gb-sxm': one card type per pool"));
  r = run_capsim(base + "--prefill-pool '1x h100-sxm' --decode-pool '1x h100-sxm' --kv-link infiniband");
  CHECK(r.status == 2);
  CHECK(has(r.err, "--kv-link: unknown KV link 'infiniband'"));
  CHECK(has(r.err, "accepted: nvlink-h100, nvlink-b200, ib-ndr-400"));
  r = run_capsim(base + "--decode-pool '1x h100-sxm' --kv-link ib-ndr-400 --scheduler static");
  CHECK(r.status == 2);
  CHECK(has(r.err, "--scheduler: static batching cannot join a decode pool's batch"));
  r = run_capsim("compare --model llama-3.1-8b --rate 1 --requests 5 -q -d '1x h100-sxm' --decode-pool '1x h100-sxm' --kv-link ib-ndr-400");
  CHECK(r.status == 2);
  CHECK(has(r.err, "--serving: compare runs aggregated deployments"));
}

TEST_CASE("pd cli: plan --pd-search --report is refused, not silently left unwritten", "[pd]") {
  // On 64e18c4 the search ran and exited 0 without writing the page it was asked for.
  const auto r = run_capsim("plan --pd-search --model llama-3.1-8b --rate 1 --requests 5 --report /tmp/capsim-pd-report.html -q");
  CHECK(r.status == 2);
  CHECK(has(r.err, "--report: not available with --pd-search"));
}

// Issue #33 item 7: --dp / --enable-expert-parallel / --pp beside pools used to ride along into
// both pools ('1x h200 tp8' pools with --dp 8 --enable-expert-parallel ran 8 + 8 DP ranks of
// 8 GPUs, 128 GPUs, while the report said 1 x h200 tp8 per pool). Pools have no DP, EP or PP.
TEST_CASE("pd cli: data, expert and pipeline parallelism beside pools exit 2 naming both flags", "[pd]") {
  const std::string pools = "--prefill-pool '1x h200 tp8' --decode-pool '1x h200 tp8' --kv-link ib-ndr-400 "
                            "--rate 1 --requests 5 -q ";
  auto r = run_capsim("simulate --model deepseek-v3 " + pools + "--dp 8 --enable-expert-parallel");
  CHECK(r.status == 2);
  CHECK(has(r.err, "--dp: not modelled beside disaggregated pools (--prefill-pool, --decode-pool, a disaggregation: "
                   "section): a pool has a card, TP, replicas and a precision only"));
  CHECK(has(r.err, "A dense model's DP ranks are replicas: for '1x h200 tp1' with --dp 8 give --prefill-pool '8x h200'"));
  CHECK(r.out.empty());
  r = run_capsim("simulate --model deepseek-v3 " + pools + "--enable-expert-parallel");
  CHECK(r.status == 2);
  CHECK(has(r.err, "--enable-expert-parallel: not modelled beside disaggregated pools"));
  r = run_capsim("simulate --model llama-3.1-8b " + pools + "--pp 2");
  CHECK(r.status == 2);
  CHECK(has(r.err, "--pp: not modelled beside disaggregated pools"));
  // Only the decode pool given: the prefill pool is --card/--tp, and --dp still may not ride along.
  r = run_capsim("simulate --model llama-3.1-8b --decode-pool '1x h100-sxm' --kv-link ib-ndr-400 --dp 2 "
                 "--rate 1 --requests 5 -q");
  CHECK(r.status == 2);
  CHECK(has(r.err, "--dp: not modelled beside disaggregated pools"));
  capsim_test::Scratch tmp("pd-dp");
  const std::string y = tmp.write("pd.yaml",
                                  "model: qwen3-30b-a3b\n"
                                  "deployment: {card: h100-sxm, tp: 2, dp: 2, enable_expert_parallel: true}\n"
                                  "disaggregation:\n"
                                  "  prefill: {card: h100-sxm, tp: 2}\n"
                                  "  decode: {card: h100-sxm, tp: 2}\n"
                                  "  kv_link: nvlink-h100\n"
                                  "workload: {rate: 1, requests: 5}\n");
  r = run_capsim("simulate '" + y + "' -q");
  CHECK(r.status == 2);
  CHECK(has(r.err, y + ": deployment.dp: not modelled beside disaggregated pools"));
  const std::string ep = tmp.write("ep.yaml",
                                   "model: qwen3-30b-a3b\n"
                                   "deployment: {card: h100-sxm, enable_expert_parallel: true}\n"
                                   "disaggregation:\n"
                                   "  prefill: {card: h100-sxm, tp: 2}\n"
                                   "  decode: {card: h100-sxm, tp: 2}\n"
                                   "  kv_link: nvlink-h100\n"
                                   "workload: {rate: 1, requests: 5}\n");
  r = run_capsim("simulate '" + ep + "' -q");
  CHECK(r.status == 2);
  CHECK(has(r.err, ep + ": deployment.enable_expert_parallel: not modelled beside disaggregated pools"));
}
