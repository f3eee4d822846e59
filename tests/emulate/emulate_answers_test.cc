// One question, one answer (#33): `capsim emulate` and `capsim simulate` of the same deployment,
// given the same requests at the same simulated arrivals, give the same simulated latencies. The
// emulator's side is read in simulated time (its x-capsim-arrival-s header and /metrics, whose
// latencies are simulated seconds), never from the wall clock, so the comparison is exact however
// loaded the machine is: the wall clock only decides when the requests arrive, and the trace
// replays exactly those arrivals. (tests/emulate/client compares client-measured wall times, with
// a tolerance; tests/cluster/live_simulation_test.cc compares the two drivers below the CLI.)
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/check/cli_run.h"
#include "tests/emulate/emulator_process.h"

namespace {

using capsim_test::Emulator;
using capsim_test::metric;
using capsim_test::request;
namespace http = boost::beast::http;
using nlohmann::json;

struct Sent {
  int content = 0;             // which prompt it sent (equal content, equal prompt)
  std::string error;           // set when the request failed
  double arrival_s = 0;        // x-capsim-arrival-s: simulated seconds since the emulator started
  unsigned long long id = 0;   // the emulator's request counter (the id's last 16 hex digits)
  std::int64_t prompt = 0, output = 0;  // usage
};

// A completion of 2000 token ids, all of them `content` * 10000 + position (so prompts of equal
// content are equal), 64 output tokens (ignore_eos: exactly 64).
void send(unsigned short port, Sent& s) {
  try {
    json ids = json::array();
    for (int k = 0; k < 2000; ++k) ids.push_back(s.content * 10000 + k);
    const auto res = request(port, http::verb::post, "/v1/completions",
                             json{{"model", "llama-3.1-8b"}, {"prompt", ids}, {"max_tokens", 64}, {"ignore_eos", true}}.dump());
    if (res.result_int() != 200) throw std::runtime_error("status " + std::to_string(res.result_int()) + ": " + res.body());
    const json body = json::parse(res.body());
    const std::string id = body["id"];
    s.id = std::stoull(id.substr(id.size() - 16), nullptr, 16);
    s.arrival_s = std::stod(std::string(res["x-capsim-arrival-s"]));
    s.prompt = body["usage"]["prompt_tokens"];
    s.output = body["usage"]["completion_tokens"];
  } catch (const std::exception& e) {
    s.error = e.what();
  }
}

}  // namespace

TEST_CASE("emulate and simulate: the same requests at the same arrivals give the same simulated TTFT, E2E "
          "and prefix-cache hits",
          "[answers][emulate]") {
  // Two L4 replicas of Llama-3.1-8B behind prefix-aware routing. Eight 2000-token prompts of four
  // contents (content 1 four times, content 2 twice): one of content 1 first, alone, so that its
  // blocks are cached, then the other seven at once from seven threads, overlapping in the
  // batches. simulate replays them as a Mooncake trace: the arrivals the emulator reported, and
  // one hash id per 512-token block of equal content.
  const std::string deployment = "--model llama-3.1-8b --card l4 --replicas 2 --router prefix-aware";
  Emulator emu(deployment + " --time-scale 100");
  std::vector<Sent> sent;
  for (int content : {1, 1, 1, 2, 3, 1, 4, 2}) {
    Sent s;
    s.content = content;
    sent.push_back(s);
  }
  send(emu.port(), sent[0]);
  {
    std::vector<std::thread> clients;
    for (std::size_t i = 1; i < sent.size(); ++i) clients.emplace_back([&, i] { send(emu.port(), sent[i]); });
    for (std::thread& t : clients) t.join();
  }
  for (const Sent& s : sent) {
    INFO(s.error);
    REQUIRE(s.error.empty());
    REQUIRE(s.prompt == 2000);
    REQUIRE(s.output == 64);
  }
  const std::string m = request(emu.port(), http::verb::get, "/metrics").body();
  const auto both_engines = [&](const std::string& name) {
    return metric(m, name + "{engine=\"0\",model_name=\"llama-3.1-8b\"}") +
           metric(m, name + "{engine=\"1\",model_name=\"llama-3.1-8b\"}");
  };
  const double ttft_sum = both_engines("vllm:time_to_first_token_seconds_sum");
  const double e2e_sum = both_engines("vllm:e2e_request_latency_seconds_sum");
  const double hits = both_engines("vllm:prefix_cache_hits_total");
  const double looked_up = both_engines("vllm:prefix_cache_queries_total");
  CHECK(both_engines("vllm:e2e_request_latency_seconds_count") == 8);
  CHECK(looked_up == 8 * 2000);
  // Content 1 was cached before its three repeats were sent: at least one reuses all but its
  // last block (2000 - 16 tokens), so the cache is part of what is compared.
  CHECK(hits >= 1984);

  // The trace, in the order the emulator took the requests (arrival, then its counter).
  std::sort(sent.begin(), sent.end(), [](const Sent& a, const Sent& b) {
    return a.arrival_s != b.arrival_s ? a.arrival_s < b.arrival_s : a.id < b.id;
  });
  std::string trace;
  for (const Sent& s : sent) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "{\"timestamp\": %.6f, \"input_length\": %lld, \"output_length\": %lld, \"hash_ids\": [%d, %d, %d, %d]}\n",
                  (s.arrival_s - sent.front().arrival_s) * 1e3, static_cast<long long>(s.prompt),
                  static_cast<long long>(s.output), s.content * 10, s.content * 10 + 1, s.content * 10 + 2,
                  s.content * 10 + 3);
    trace += line;
  }
  capsim_test::Scratch tmp("emulate_answers");
  const std::string file = tmp.write("sent.jsonl", trace);
  const auto r = capsim_test::run_capsim("simulate " + deployment + " --trace '" + file + "' -q --json -");
  INFO(r.err << trace);
  REQUIRE(r.status == 0);
  const json sim = json::parse(r.out);
  REQUIRE(sim["completed"] == 8);
  // Sums of the 8 requests' simulated latencies, to the nanosecond the arrivals were printed in.
  CHECK(sim["mean_ttft_ms"].get<double>() * 8 / 1e3 == Approx(ttft_sum).margin(1e-8));
  CHECK(sim["mean_e2el_ms"].get<double>() * 8 / 1e3 == Approx(e2e_sum).margin(1e-8));
  CHECK(sim["capsim"]["prefix_cache_hit_rate"].get<double>() == Approx(hits / looked_up).epsilon(1e-12));
}
