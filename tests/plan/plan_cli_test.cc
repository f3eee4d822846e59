// `capsim plan` and `capsim capacity` end to end: the answers a planner can work out by hand.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/check/cli_run.h"

namespace {

using capsim_test::has;
using capsim_test::run_capsim;

// A light open-loop load on Llama-3.1-8B: 512-token prompts, 128-token answers.
const std::string kLight =
    "--model llama-3.1-8b --duration 2min --input-tokens 512 --output-tokens 128 -q";

nlohmann::json plan_json(const std::string& args) {
  const auto r = run_capsim("plan " + args + " --json -");
  INFO(r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("plan: a load one replica can serve gives one replica", "[plan][cli]") {
  // 2 requests/s x 128 output tokens = 256 tokens/s. One L40S decodes a batch-1 step of
  // Llama-3.1-8B in about 16 GB / (864 GB/s x 0.78) = 24 ms: ~40 tokens/s per sequence, and with
  // a few sequences in flight far more than 256 tokens/s. So one replica, costing 1 x the
  // price file's per-GPU rate.
  // --kv-cache auto: only the card's 16-bit KV cache (without it plan also tries fp8 KV).
  const auto j = plan_json(kLight + " --rate 2 --slo 'ttft_p95<=1s' --cards l40s --tp 1 --kv-cache auto");
  REQUIRE(j["options"].size() == 1);
  CHECK(j["options"][0]["card"] == "l40s");
  CHECK(j["options"][0]["replicas"] == 1);
  CHECK(j["options"][0]["total_cards"] == 1);
}

TEST_CASE("plan: twice the load a replica holds needs the replicas the capacity curve predicts",
          "[plan][capacity][cli]") {
  // capacity finds C, the most requests/s one L40S serves within TTFT p95 <= 1 s. A load of
  // 1.8 C is more than one replica holds and less than two: plan must answer 2 = ceil(1.8).
  const auto cap = run_capsim("capacity " + kLight + " --card l40s --rate 2 --slo 'ttft_p95<=1s' --json -");
  INFO(cap.err);
  REQUIRE(cap.status == 0);
  const double c = nlohmann::json::parse(cap.out)["capacity"].get<double>();
  REQUIRE(c > 1);
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.3f", 1.8 * c);
  const auto j = plan_json(kLight + " --rate " + rate + " --slo 'ttft_p95<=1s' --cards l40s --tp 1 --kv-cache auto");
  REQUIRE(j["options"].size() == 1);
  CHECK(j["options"][0]["replicas"] == 2);
}

TEST_CASE("plan: a model that fits nowhere says so, with each candidate's reason", "[plan][cli]") {
  // Llama-3.1-70B in fp16 is 141 GB of weights: no 24 GB (RTX 4090) or 16 GB (T4) card holds it.
  const auto r = run_capsim("plan --model llama-3.1-70b --rate 1 --duration 1min -q --slo 'ttft_p95<=1s' "
                            "--cards rtx-4090,t4 --tp 1 --weights fp16");
  CHECK(r.status == 1);
  CHECK(has(r.out, "fits on no candidate: none fits in memory"));
  CHECK(has(r.out, "rtx-4090 fp16/kv bf16: does not fit: weights (131.42 GiB)"));
  CHECK(has(r.out, "t4 fp16: does not fit: weights (131.42 GiB)"));
}

TEST_CASE("plan: prices change the ranking as computed by hand", "[plan][cli]") {
  // At 2 requests/s both an L40S and an H100 SXM need one replica (see the first case; the H100
  // is faster still). Ranked by $/hour: with the price file the cheaper card per hour comes
  // first; pricing the H100 at $0.10/hour, below any L40S price, must put it first, at exactly
  // 1 replica x $0.10.
  const std::string args = kLight + " --rate 2 --slo 'ttft_p95<=1s' --cards l40s,h100-sxm --tp 1 --kv-cache auto";
  const auto base = plan_json(args);
  REQUIRE(base["options"].size() == 2);
  const double l40s = base["options"][0]["card"] == "l40s" ? base["options"][0]["usd_per_hour"].get<double>()
                                                           : base["options"][1]["usd_per_hour"].get<double>();
  const auto cheap = plan_json(args + " --price h100-sxm=0.10");
  REQUIRE(cheap["options"].size() == 2);
  CHECK(cheap["options"][0]["card"] == "h100-sxm");
  CHECK(cheap["options"][0]["usd_per_hour"].get<double>() == Approx(0.10));
  CHECK(cheap["options"][1]["usd_per_hour"].get<double>() == Approx(l40s));
  // And an L40S priced above the H100's $0.10 stays second.
  CHECK(l40s > 0.10);
}

TEST_CASE("plan: an option verified beyond --top is named in the text, not dropped", "[plan][cli]") {
  // Verification confirms options a round (up to 4) at a time, so with --top 1 both one-replica
  // options of the case above are verified: the table shows the cheaper, and the text must still
  // account for the other (it is the JSON's options[1]), with its replicas, router and $/hour.
  const std::string args = kLight + " --rate 2 --slo 'ttft_p95<=1s' --cards l40s,h100-sxm --tp 1 --kv-cache auto --top 1";
  const auto j = plan_json(args);
  REQUIRE(j["options"].size() == 2);
  const auto r = run_capsim("plan " + args);
  INFO(r.out);
  REQUIRE(r.status == 0);
  const auto& second = j["options"][1];
  const std::string label = second["card"].get<std::string>() + " bf16";
  char price[32];
  std::snprintf(price, sizeof price, "$%.2f/hour", second["usd_per_hour"].get<double>());
  CHECK(has(r.out, "Also verified, ranked below the top 1: " + label + " (1 x " +
                       second["router"].get<std::string>() + ", " + price + ")."));
  // The first option is the table's only row and appears nowhere else.
  const std::string first = j["options"][0]["card"].get<std::string>() + " bf16";
  CHECK(has(r.out, " 1  " + first + " "));
  CHECK_FALSE(has(r.out, " 2  " + label));
  CHECK_FALSE(has(r.out, "rejected:"));
}

TEST_CASE("plan: bad input is refused with the flag and what is accepted", "[plan][cli]") {
  const std::string args = kLight + " --rate 2 --cards l40s";
  {
    // int4 is a weight precision, not a KV-cache one: bad input (2), not "fits on no candidate".
    const auto r = run_capsim("plan " + args + " --slo 'ttft_p95<=1s' --kv-cache int4");
    CHECK(r.status == 2);
    CHECK(has(r.err, "capsim: error: --kv-cache: int4 is not a KV-cache precision capsim models; accepted: auto, "
                     "fp32, bf16, fp16, fp8\n"));
  }
  {
    const auto r = run_capsim("plan " + args + " --slo 'ttft_p95<=1s' --tp 3,5");
    CHECK(r.status == 2);
    CHECK(has(r.err, "--tp: 3,5 divides none of the 32 attention heads of"));
  }
  {
    const auto r = run_capsim("plan " + args + " --slo 'ttft_p95=1s'");
    CHECK(r.status == 2);
    CHECK(r.err ==
          "capsim: error: --slo: 'ttft_p95=1s' cannot be parsed; accepted: METRIC_STAT<=TIME with METRIC "
          "ttft, tpot, itl, e2el and STAT mean, p50 (median), p90, p95, p99, spaces allowed (e.g. "
          "ttft_p95<=1s, 'tpot p99 <= 100 ms', 'ttft_p95 <= 1 sec')\n");
  }
  {
    const auto r = run_capsim("plan " + kLight + " --rate 2 --slo 'ttft_p95<=1s' --cards h100-sxx");
    CHECK(r.status == 2);
    CHECK(has(r.err, "capsim: error: --cards: unknown card 'h100-sxx'; did you mean: h100-sxm?; accepted: a10,"));
  }
  {
    const auto r = run_capsim("plan " + args + " --slo 'ttft_p95<=1s' --price h100-sxm=0");
    CHECK(r.status == 2);
    CHECK(has(r.err, "capsim: error: --price: h100-sxm=0: a price must be in (0, 1000] US dollars per card-hour; accepted form: --price CARD=USD_PER_HOUR"));
  }
  {
    // 23 hourly values instead of 24.
    std::string profile = "1";
    for (int i = 1; i < 23; ++i) profile += ",1";
    const auto r = run_capsim("plan " + args + " --slo 'ttft_p95<=1s' --load-profile " + profile);
    CHECK(r.status == 2);
    CHECK(r.err == "capsim: error: --load-profile: 23 values; expected 24 (one per hour, users or requests/s)\n");
  }
  {
    const auto r = run_capsim("plan " + args);
    CHECK(r.status == 2);
    CHECK(has(r.err, "--slo: plan needs at least one SLO"));
  }
}

TEST_CASE("capacity: the title names the decode pool and KV link of a disaggregated deployment", "[capacity][cli][pd]") {
  // Before, the title named only the main deployment (a P/D deployment's prefill pool), so
  // "1 x h100-sxm" described a two-GPU deployment.
  const auto r = run_capsim("capacity " + kLight + " --prefill-pool '1x h100-sxm' --decode-pool '1x l40s' "
                            "--kv-link ib-ndr-400 --rate 1 --slo 'ttft_p95<=2s'");
  INFO(r.err);
  CHECK(r.status == 0);
  CHECK(has(r.out, "capsim capacity: llama-3.1-8b on prefill 1 x h100-sxm, decode 1 x l40s over ib-ndr-400 (bf16)"));
}

TEST_CASE("plan: a verification that stops early ends its progress line saying why", "[plan][cli]") {
  // Nine cards with --top 2: 6 options pass the load-share search, the first round verifies 4
  // of them and the other 2's estimates already cost more than the 2 cheapest verified, so
  // verification stops before the last option. The progress (stderr, not a terminal: whole
  // lines) must end saying so, not with an unfinished "verifying 4/6".
  const std::string args =
      "--model llama-3.1-8b --duration 2min --input-tokens 512 --output-tokens 128 --rate 8 "
      "--slo 'ttft_p95<=1s' --cards l4,l40s,a10,rtx-4090,a100-80gb-pcie,h100-sxm,t4,a10g,rtx-3090 --tp 1,2 --top 2";
  const auto j = plan_json(args + " -q");
  // Verified: those listed and those verification rejected as a whole cluster.
  std::size_t verified = j["options"].size(), not_verified = 0;
  for (const auto& x : j["rejected"]) {
    const std::string why = x["reason"];
    if (why.rfind("not verified", 0) == 0) ++not_verified;
    if (why.rfind("misses the SLOs as a whole cluster", 0) == 0) ++verified;
  }
  REQUIRE(not_verified > 0);
  const auto r = run_capsim("plan " + args);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string total = std::to_string(verified + not_verified);
  const std::string last = "capsim plan: verified the cheapest " + std::to_string(verified) + " of " + total +
                           " options; the other " + std::to_string(not_verified) +
                           " already cost more than the options that passed\n";
  REQUIRE(r.err.size() >= last.size());
  CHECK(r.err.substr(r.err.size() - last.size()) == last);
  CHECK_FALSE(has(r.err, "verifying [##############################] " + total + "/" + total));
}

TEST_CASE("plan --replications: the footer names the over-seeds interval the decision used", "[plan][cli]") {
  // With --replications 3 each SLO is decided by a t interval over the 3 seeds' steady-state
  // estimates (decide_slo_replicated), not one run's batch means: the footer must say which.
  const std::string args = kLight + " --rate 2 --slo 'ttft_p95<=1s' --cards l40s --tp 1 --kv-cache auto --top 1";
  const auto three = run_capsim("plan " + args + " --replications 3");
  INFO(three.out);
  REQUIRE(three.status == 0);
  CHECK(has(three.out, "Each option meets every SLO with its 95% interval over 3 seeds (a t interval of the seeds' "
                       "steady-state estimates, each after MSER-5 warm-up detection) inside the bound; TTFT p95 is "
                       "the seeds' mean estimate"));
  CHECK_FALSE(has(three.out, "batch means"));
  const auto one = run_capsim("plan " + args);
  REQUIRE(one.status == 0);
  CHECK(has(one.out, "Each option meets every SLO with its 95% interval (batch means after MSER-5 warm-up detection)"));
}
