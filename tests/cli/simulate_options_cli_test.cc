// `capsim simulate`'s engine and run options as a user gives them (the built binary): max_model_len,
// async scheduling, request timeouts, replications, the CPU KV tier, rate stages, burstiness,
// seeds and strict YAML. Exit status 0 = ran, 2 = bad input naming the flag or file:field.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "tests/cli/simulate_cli.h"

namespace fs = std::filesystem;
using namespace capsim_test::simulate_cli;

TEST_CASE("simulate cli: engine.max_model_len in a scenario rejects longer requests",
          "[cli][simulate][scenario]") {
  ScratchDir tmp;
  // Every request is 3000 + 32 = 3032 tokens, over max_model_len 2048: all 20 fail.
  const std::string yaml = tmp.write("mml.yaml",
                                     "name: mml\n"
                                     "model: llama-3.1-8b\n"
                                     "deployment: {card: h100-sxm}\n"
                                     "engine: {max_model_len: 2048}\n"
                                     "workload: {rate: 4, requests: 20, prompt_tokens: 3000, output_tokens: 32}\n"
                                     "seed: 3\n");
  const std::string json = tmp.file("m.json");
  const Run r = simulate("-q '" + yaml + "' --json '" + json + "'");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(read_all(json));
  CHECK(j.at("completed") == 0);
  CHECK(j.at("failed") == 20);
  // The flag overrides the file: 4096 serves all 20.
  const Run r2 = simulate("-q '" + yaml + "' --max-model-len 4096 --json '" + json + "'");
  REQUIRE(r2.status == 0);
  const auto j2 = nlohmann::json::parse(read_all(json));
  CHECK(j2.at("completed") == 20);
  CHECK(j2.at("failed") == 0);
}

TEST_CASE("simulate cli: a bad engine.max_model_len exits 2 naming the field", "[cli][simulate][errors]") {
  ScratchDir tmp;
  const std::string y = tmp.write("bad.yaml",
                                  "name: x\nmodel: llama-3.1-8b\nengine: {max_model_len: 0}\n"
                                  "workload: {rate: 4, requests: 5}\n");
  check_refused(simulate("-q '" + y + "'"),
                "engine.max_model_len: '0' is not a whole number in 1..100000000\n");
  const std::string y2 = tmp.write("big.yaml",
                                   "name: x\nmodel: llama-3.1-8b\nengine: {max_model_len: 131073}\n"
                                   "workload: {rate: 4, requests: 5}\n");
  // The check is the deployment's (it speaks of --max-model-len); the value came from the file,
  // so the message names the file and the field instead.
  check_refused(simulate("-q '" + y2 + "'"),
                "big.yaml: engine.max_model_len: 131073 exceeds llama-3.1-8b's context of 131072 tokens");
  check_refused(simulate("-q '" + y2 + "' --max-model-len 131074"),
                "capsim: error: --max-model-len: 131074 exceeds llama-3.1-8b's context of 131072 tokens");
}

TEST_CASE("simulate cli: --async-scheduling false removes the step of lag, not the front end",
          "[cli][simulate][request-path]") {
  // The same run with vLLM's default (async scheduling on) and with it off. Turning it off
  // leaves the front end untouched (it does not depend on scheduling: 8.92 us per prompt token
  // in calibration/engines/vllm.yaml) and shortens the wait for the first step: at 20 req/s
  // requests mostly arrive while others decode, so with async scheduling each waits about one
  // step more (the step already formed).
  const Run on = simulate(std::string(kSmall) + " --json -");
  const Run off = simulate(std::string(kSmall) + " --async-scheduling false --json -");
  REQUIRE(on.status == 0);
  REQUIRE(off.status == 0);
  const auto a = nlohmann::json::parse(on.out), b = nlohmann::json::parse(off.out);
  CHECK(a.at("mean_frontend_ms").get<double>() == Approx(b.at("mean_frontend_ms").get<double>()));
  CHECK(a.at("mean_frontend_ms").get<double>() > 0);
  const double step_ms = b.at("capsim").at("mean_step_ms").get<double>();
  CHECK(a.at("mean_queue_ms").get<double>() > b.at("mean_queue_ms").get<double>() + 0.5 * step_ms);
  // TTFT = front end + queue + prefill + return, per request and so in the means.
  for (const auto* j : {&a, &b}) {
    const double parts = j->at("mean_frontend_ms").get<double>() + j->at("mean_queue_ms").get<double>() +
                         j->at("mean_prefill_ms").get<double>() +
                         j->at("mean_first_token_return_ms").get<double>();
    CHECK(j->at("mean_ttft_ms").get<double>() == Approx(parts).epsilon(1e-9));
  }
  const Run bad = simulate(std::string(kSmall) + " --async-scheduling maybe");
  CHECK(bad.status == 2);
}

TEST_CASE("simulate cli: --request-timeout under overload: failed requests, latencies of the answered, SLO FAIL",
          "[cli][simulate][timeout]") {
  // Llama-3.1-8B on one L4 at 4 req/s of 2000-token prompts and 100-token answers: far beyond
  // what it serves, so the queue grows for the whole minute of arrivals. Clients give up after
  // 20 s: no answered request took longer, and the ones that waited longer are counted failed.
  const std::string base =
      "-q --model llama-3.1-8b --card l4 --rate 4 --arrival constant --duration 1min "
      "--input-tokens 2000 --output-tokens 100 --slo 'e2el_p90<=10s' --json -";
  const Run plain = simulate(base);
  const Run timed = simulate(base + " --request-timeout 20s");
  REQUIRE(plain.status == 0);
  REQUIRE(timed.status == 0);
  const auto p = nlohmann::json::parse(plain.out), t = nlohmann::json::parse(timed.out);
  CHECK(p.at("failed").get<int>() == 0);
  CHECK(p.at("p99_e2el_ms").get<double>() > 20000);  // without the timeout some wait longer
  const int failed = t.at("failed").get<int>();
  CHECK(failed > 0);
  CHECK(t.at("capsim").at("timed_out").get<int>() == failed);
  CHECK(t.at("capsim").at("request_timeout_s").get<double>() == 20.0);
  CHECK(t.at("completed").get<int>() + failed == t.at("capsim").at("arrived").get<int>());
  CHECK(t.at("p99_e2el_ms").get<double>() <= 20000);
  CHECK(t.at("capsim").at("slos").at(0).at("decision").get<std::string>() == "FAIL");
  const Run text = simulate("-q --model llama-3.1-8b --card l4 --rate 4 --arrival constant --duration 1min "
                            "--input-tokens 2000 --output-tokens 100 --request-timeout 20s --slo 'ttft_p95<=1s'");
  CHECK(has(text.out, "timed out (the client gave up after 20.00 s; not in the latencies)"));
  CHECK(has(text.out, "measured requests timed out (the client gave up)"));  // the SLO's reason
  // Bad values exit 2 naming the flag.
  const Run zero = simulate(std::string(kSmall) + " --request-timeout 0s");
  CHECK(zero.status == 2);
  CHECK(has(zero.err, "--request-timeout: must be > 0"));
  const Run neg = simulate(std::string(kSmall) + " --request-timeout -5s");
  CHECK(neg.status == 2);
  CHECK(has(neg.err, "--request-timeout"));
  const Run pd = simulate(std::string(kSmall) + " --request-timeout 30s --prefill-pool '1x h100-sxm' "
                          "--decode-pool '1x h100-sxm' --kv-link nvlink-h100");
  CHECK(pd.status == 2);
  CHECK(has(pd.err, "--request-timeout: not modelled with serving pd-disaggregated"));
}

TEST_CASE("simulate cli: --replications N decides the SLOs over N seeds, each the run --seed would give",
          "[cli][simulate][replications]") {
  // 600 requests at 20 req/s on one H100: enough for the steady-state analysis (>= 200) of each
  // seed. The over-seeds interval must be worked from the three single runs by hand: mean +/-
  // t(2, 0.975) x sd / sqrt(3), t(2, 0.975) = 4.302652729911275.
  const std::string base =
      "-q --model llama-3.1-8b --card h100-sxm --rate 20 --requests 600 "
      "--input-tokens lognormal:300:2000 --output-tokens uniform:10:200 "
      "--slo 'ttft_p95<=60ms' --slo 'tpot_p95<=1s'";
  const Run rep = simulate(base + " --seed 7 --replications 3 --json -");
  REQUIRE(rep.status == 0);
  const auto j = nlohmann::json::parse(rep.out);
  std::vector<nlohmann::json> single;
  for (int seed : {7, 8, 9}) {
    const Run one = simulate(base + " --seed " + std::to_string(seed) + " --json -");
    REQUIRE(one.status == 0);
    single.push_back(nlohmann::json::parse(one.out));
    CHECK_FALSE(single.back().at("capsim").contains("over_seeds"));  // only with --replications
  }
  // The report of the replicated run is seed 7's, byte for byte apart from the added block.
  auto first = j;
  first["capsim"].erase("over_seeds");
  CHECK(first == single[0]);
  const auto& o = j.at("capsim").at("over_seeds");
  CHECK(o.at("seeds") == nlohmann::json::array({7, 8, 9}));
  const auto& stats = o.at("statistics");
  REQUIRE(stats.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& s = stats.at(i);
    INFO(s.dump());
    CHECK(s.at("statistic") == single[0].at("capsim").at("slos").at(i).at("slo"));
    double x[3], mean = 0;
    for (int k = 0; k < 3; ++k) {
      x[k] = single[static_cast<std::size_t>(k)].at("capsim").at("slos").at(i).at("estimate_ms").get<double>();
      CHECK(s.at("per_seed_ms").at(static_cast<std::size_t>(k)).get<double>() == x[k]);
      mean += x[k] / 3;
    }
    double var = 0;
    for (double v : x) var += (v - mean) * (v - mean) / 2;
    const double half = 4.302652729911275 * std::sqrt(var / 3);
    CHECK(s.at("mean_ms").get<double>() == Approx(mean).epsilon(1e-12));
    CHECK(s.at("high_ms").get<double>() == Approx(mean + half).epsilon(1e-9));
    CHECK(s.at("low_ms").get<double>() == Approx(std::max(0.0, mean - half)).epsilon(1e-9).margin(1e-9));
    // The verdict follows the interval against the bound.
    const double bound = s.at("bound_ms").get<double>();
    const std::string d = s.at("decision");
    if (mean - half > bound) CHECK(d == "FAIL");
    else if (mean + half > bound) CHECK(d == "INCONCLUSIVE");
    else CHECK((d == "PASS" || d == "INCONCLUSIVE"));  // INCONCLUSIVE only when a seed did not settle
  }
  // A 1 s TPOT bound is far above any seed's 10-20 ms: PASS over the seeds.
  CHECK(stats.at(1).at("decision") == "PASS");
  // The text report adds the table after seed 7's report.
  const Run text = simulate(base + " --seed 7 --replications 3");
  REQUIRE(text.status == 0);
  CHECK(has(text.out, "over 3 seeds (7-9; the run above is seed 7)"));
  CHECK(has(text.out, "mean (95% interval)"));
  // Without SLOs the p95 of TTFT, TPOT and E2E are compared, with no verdict.
  const Run plain = simulate(std::string(kSmall) + " --replications 2 --json -");
  REQUIRE(plain.status == 0);
  const auto pj = nlohmann::json::parse(plain.out);
  const auto& ps = pj.at("capsim").at("over_seeds").at("statistics");
  REQUIRE(ps.size() == 3);
  CHECK(ps.at(0).at("statistic") == "ttft_p95");
  CHECK(ps.at(2).at("statistic") == "e2el_p95");
  CHECK_FALSE(ps.at(0).contains("decision"));
  // Out of range: exit 2 naming the flag.
  const Run zero = simulate(std::string(kSmall) + " --replications 0");
  CHECK(zero.status == 2);
  CHECK(has(zero.err, "--replications"));
  const Run many = simulate(std::string(kSmall) + " --replications 33");
  CHECK(many.status == 2);
  CHECK(has(many.err, "--replications"));
}

TEST_CASE("simulate cli: --replications on a trace replay says the seeds changed nothing", "[cli][simulate][replications]") {
  // A trace fixes every arrival and length, so seeds 5-7 give the same run; a t interval over
  // three equal estimates would be a spread of zero, so the run's own decision stands.
  const Run r = simulate("-q workloads/trace-azure-conversation.yaml --replications 3 --slo 'ttft_p95<=100ms' --json -");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& o = j.at("capsim").at("over_seeds");
  CHECK(o.at("identical_runs") == true);
  const auto& s = o.at("statistics").at(0);
  const auto& own = j.at("capsim").at("slos").at(0);
  for (std::size_t k = 0; k < 3; ++k) CHECK(s.at("per_seed_ms").at(k) == own.at("estimate_ms"));
  CHECK(s.at("low_ms") == own.at("low_ms"));
  CHECK(s.at("high_ms") == own.at("high_ms"));
  CHECK(s.at("decision") == own.at("decision"));
  const Run text = simulate("-q workloads/trace-azure-conversation.yaml --replications 3");
  CHECK(has(text.out, "the seeds gave identical runs"));
  // A random workload's seeds differ.
  const Run random = simulate(std::string(kSmall) + " --replications 2 --json -");
  CHECK(nlohmann::json::parse(random.out).at("capsim").at("over_seeds").at("identical_runs") == false);
}

namespace {

TEST_CASE("simulate cli: --kv-offloading-size adds vLLM's CPU tier and reports it, bad values exit 2",
          "[cli][simulate][offload]") {
  // Llama-3.1-8B on one H100: a block is 16 x 32 layers x 8 KV heads x 128 x 2 x 2 B = 2 MiB,
  // so 8 GiB hold 4096 blocks (docs/cost-model.md#cpu-kv-offloading).
  const std::string base = std::string(kSmall) + " --seed 4 --prefix-groups 2 --prompts-per-group 3 --system-prompt-tokens 200";
  const Run on = simulate(base + " --kv-offloading-size 8");
  REQUIRE(on.status == 0);
  CHECK(has(on.out, "CPU KV tier (--kv-offloading-size 8 GiB, 4096 blocks): hit rate "));
  const Run json = simulate(base + " --kv-offloading-size 8 --json -");
  REQUIRE(json.status == 0);
  CHECK(has(json.out, "\"cpu_kv_offload\""));
  CHECK(has(json.out, "\"cpu_blocks\": 4096"));
  CHECK(has(json.out, "\"kv_offloading_size_gib\": 8.0"));
  const Run off = simulate(base + " --json -");
  REQUIRE(off.status == 0);
  CHECK_FALSE(has(off.out, "cpu_kv_offload"));
  CHECK_FALSE(has(simulate(base).out, "CPU KV tier"));

  // Bad input: exit 2 with a message naming the flag.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {" --kv-offloading-size 8 --kv-offloading-backend lmcache",
       "--kv-offloading-backend: 'lmcache' is not modelled; accepted: native"},
      {" --kv-offloading-backend native", "needs --kv-offloading-size"},
      {" --kv-offloading-size 0", "--kv-offloading-size"},
      {" --kv-offloading-size 8 --scheduler static",
       "--kv-offloading-size: the CPU tier is modelled with the vllm-v1 scheduler"},
      {" --kv-offloading-size 8 --prefix-caching false", "modelled with prefix caching on"}};
  for (const auto& [flags, message] : bad) {
    const Run r = simulate(base + flags);
    CHECK(r.status == 2);
    CHECK(has(r.err, message));
  }

  // The scenario file's engine section: 4 GiB / 2 MiB = 2048 blocks.
  ScratchDir tmp;
  const std::string yaml = tmp.file("s.yaml");
  std::ofstream(yaml) << "model: llama-3.1-8b\ndeployment: {card: h100-sxm, tp: 1}\n"
                         "engine: {kv_offloading_size: 4, kv_offloading_backend: native}\n"
                         "workload: {rate: 10, requests: 200, input_tokens: 300, output_tokens: 50}\n";
  const Run file = simulate("'" + yaml + "' -q");
  REQUIRE(file.status == 0);
  CHECK(has(file.out, "CPU KV tier (--kv-offloading-size 4 GiB, 2048 blocks)"));
  std::ofstream(yaml) << "model: llama-3.1-8b\nengine: {kv_offloading_size: 0}\n"
                         "workload: {rate: 10, requests: 20}\n";
  const Run negative = simulate("'" + yaml + "' -q");
  CHECK(negative.status == 2);
  CHECK(has(negative.err, "engine.kv_offloading_size: must be in (0, 1000000] GiB"));
}

TEST_CASE("simulate cli: a --kv-offloading-size whose bookkeeping passes the run limits exits 2 naming "
          "the flag or field, --allow-large runs it",
          "[cli][simulate][offload][limits]") {
  // 1e5 GiB / 2 MiB blocks = 51,200,000 CPU blocks; their slots (21 B) and hash table (2^28
  // slots of 12 B) take 4,296,425,472 B = 4.00 GiB, past the 2 GiB the run limits allow. It was
  // allocated up front (4.2 GB; 1e6 GiB ran out of memory).
  const Run flag = simulate(std::string(kSmall) + " --kv-offloading-size 1e5");
  CHECK(flag.status == 2);
  CHECK(has(flag.err, "--kv-offloading-size: 100000 GiB is 51200000 CPU KV blocks per replica, x 1 replica: "
                      "4.0"));
  CHECK(has(flag.err, "GiB of KV-cache bookkeeping is more than one run may ask for (at most 2.00 GiB"));
  CHECK(has(flag.err, "pass --allow-large to run it anyway"));

  ScratchDir tmp;
  const std::string yaml = tmp.file("big-tier.yaml");
  std::ofstream(yaml) << "model: llama-3.1-8b\ndeployment: {card: h100-sxm, tp: 1}\n"
                         "engine: {kv_offloading_size: 100000}\n"
                         "workload: {rate: 10, requests: 20, input_tokens: 300, output_tokens: 50}\n";
  const Run file = simulate("'" + yaml + "' -q");
  CHECK(file.status == 2);
  CHECK(has(file.err, yaml + ": engine.kv_offloading_size: 100000 GiB is 51200000 CPU KV blocks per replica"));
  CHECK(has(file.err, "pass --allow-large"));

  // Lifted, the tier makes its slots as blocks are stored: the run is as cheap as a small tier's.
  const Run lifted = simulate("'" + yaml + "' -q --allow-large");
  REQUIRE(lifted.status == 0);
  CHECK(has(lifted.out, "CPU KV tier (--kv-offloading-size 100000 GiB, 51200000 blocks)"));
  // Past the 32-bit block ids even lifted: 1e6 GiB of 128 KiB blocks (block size 1) is 8.192e9.
  const Run ids = simulate(std::string(kSmall) + " --kv-offloading-size 1e6 --block-size 1 --allow-large");
  CHECK(ids.status == 2);
  CHECK(has(ids.err, "--kv-offloading-size: 1000000 GiB is 8192000000 CPU KV blocks per replica; a replica's "
                     "block ids hold at most 2147483647"));
}

}  // namespace

TEST_CASE("simulate cli: a deployment field from a scenario file is named by file and key",
          "[cli][simulate][errors]") {
  ScratchDir tmp;
  const std::string load = "workload: {rate: 4, requests: 5}\n";
  // 32 attention heads: TP 3 does not divide them (DeploymentSpec::resolve speaks of --tp).
  check_file_refused(tmp, "tp.yaml", "model: llama-3.1-8b\ndeployment: {card: h100-sxm, tp: 3}\n" + load,
                     "tp.yaml: deployment.tp: 3 does not divide the 32 attention heads of llama-3.1-8b");
  // Given on the command line, the same check names the flag.
  check_refused(simulate("-q '" + tmp.file("tp.yaml") + "' --tp 5"), "capsim: error: --tp: 5 does not divide");
  check_file_refused(tmp, "card.yaml", "model: llama-3.1-8b\ndeployment: {card: h100-sxx}\n" + load,
                     "card.yaml: deployment.card: unknown card 'h100-sxx'");
  // A further group of a mixed fleet is named by its place in the list.
  check_file_refused(tmp, "mixed.yaml",
                     "model: llama-3.1-8b\ndeployment:\n  - {card: h100-sxm}\n  - {card: l40s, tp: 3}\n" + load,
                     "mixed.yaml: deployment[1].tp: 3 does not divide");
}

TEST_CASE("simulate cli: rate stages need a duration > 0 on every stage but the last",
          "[cli][simulate][errors]") {
  // Before, a stage of 0 s or without a duration ran to the end and the later stages never came.
  check_refused(simulate("-q -n 20 --rate 5@0s,10@1min"), "--rate: the stage '5@0s' lasts 0 s");
  check_refused(simulate("-q -n 20 --rate 5,10@1min"), "--rate: the stage '5' has no duration");
  ScratchDir tmp;
  const std::string y = tmp.write("stages.yaml",
                                  "model: llama-3.1-8b\nworkload:\n  requests: 20\n  stages:\n"
                                  "    - {rate: 5}\n    - {rate: 10, duration: 1min}\n");
  check_refused(simulate("-q '" + y + "'"), "stages.yaml: workload.stages: the stage '5' has no duration");
  // The last stage may run to the end: 5 req/s for 2 s (10 requests), then 10 req/s.
  const Run ok = simulate("-q -n 30 --rate 5@2s,10 --json -");
  REQUIRE(ok.status == 0);
  CHECK(nlohmann::json::parse(ok.out).at("completed") == 30);
}

TEST_CASE("simulate cli: --burstiness makes Poisson arrivals gamma, as vLLM's benchmark does",
          "[cli][simulate][workload]") {
  const Run plain = simulate("-q -n 50 --rate 5 --json -");
  const Run bursty = simulate("-q -n 50 --rate 5 --burstiness 0.5 --json -");
  const Run gamma = simulate("-q -n 50 --rate 5 --arrival gamma --burstiness 0.5 --json -");
  REQUIRE(plain.status == 0);
  REQUIRE(bursty.status == 0);
  REQUIRE(gamma.status == 0);
  // vLLM draws gamma gaps with shape = burstiness (1 = Poisson): 0.5 is the gamma process.
  CHECK(bursty.out == gamma.out);
  CHECK(bursty.out != plain.out);
  check_refused(simulate("-q -n 50 --rate 5 --arrival constant --burstiness 0.5"),
                "--burstiness: applies to poisson or gamma arrivals, not 'constant'");
}

TEST_CASE("simulate cli: a negative seed is refused, not wrapped to 2^64 - 1", "[cli][simulate][errors]") {
  const Run r = simulate("-q -n 5 --rate 1 --seed -1");
  CHECK(r.status == 2);
  CHECK(has(r.err, "--seed"));
}

TEST_CASE("simulate cli: a key given twice in a YAML mapping is refused, not half-read",
          "[cli][simulate][errors]") {
  ScratchDir tmp;
  // yaml-cpp keeps both and a lookup finds the first: the second model would be ignored.
  check_file_refused(tmp, "dup.yaml", "model: llama-3.1-8b\nworkload: {rate: 2, requests: 5}\nmodel: llama-3.1-70b\n",
                     "dup.yaml:3:1: duplicate key 'model'");
  check_file_refused(tmp, "nested.yaml",
                     "model: llama-3.1-8b\ndeployment: {card: h100-sxm, card: t4}\nworkload: {rate: 2, requests: 5}\n",
                     "nested.yaml:2:30: duplicate key 'card'");
}

TEST_CASE("simulate cli: a closed loop still warming up is INCONCLUSIVE, not an overloaded FAIL",
          "[cli][simulate][slo]") {
  // 430 chat users on one H100 over 6 minutes: TTFT p95 ~0.22 s against a 1 s bound, but its
  // batch means still rise (histories lengthening). Before, that rise read as an overload and
  // failed the run, while the same load over 20 minutes passed.
  const std::string scenario = std::string(CAPSIM_DATA_DIR) + "/workloads/chat-8b-1x-h100.yaml";
  const Run r = simulate("'" + scenario + "' --users 430 --duration 6min --warmup 1min");
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  CHECK(has(r.out, "not at steady state: TTFT still rising"));
  CHECK(has(r.out, "INCONCLUSIVE"));
  CHECK_FALSE(has(r.out, "overloaded"));
  CHECK_FALSE(has(r.out, "FAIL"));
}

TEST_CASE("simulate cli: an engine file with a misspelt field is refused, not run on defaults",
          "[cli][simulate][errors]") {
  // A copy of calibration/engines/vllm.yaml whose optional communication.allreduce_latency_per_peer
  // is misspelt: before, the term silently fell back to 0 (TP 8 all-reduces 18 us cheaper).
  std::ifstream in(std::string(CAPSIM_DATA_DIR) + "/calibration/engines/vllm.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "allreduce_latency_per_peer:";
  const auto at = text.find(key);
  REQUIRE(at != std::string::npos);
  text.replace(at, key.size(), "allreduce_latency_per_gpu:");
  ScratchDir tmp;
  const std::string engine = tmp.write("engine.yaml", text);
  check_refused(simulate("-q -n 5 --rate 1 --engine '" + engine + "'"),
                "engine.yaml: communication: unknown field 'allreduce_latency_per_gpu'; accepted: "
                "allreduce_latency_nvlink, allreduce_latency_pcie, allreduce_latency_per_peer");
}
