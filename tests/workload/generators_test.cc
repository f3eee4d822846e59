// Workload generators (sim/workload/generators.h) and length distributions
// (sim/workload/distributions.h), driven without a simulation: an open loop emits its next
// request when told the previous one arrived; a closed-loop user sends its next turn when told
// the previous one finished. Statistical checks use tolerances of about 4 standard errors,
// each derived in the comment.
#include "sim/workload/generators.h"

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/rng.h"
#include "sim/core/stats.h"
#include "tests/support/skip.h"

#ifndef CAPSIM_SHARED_DIR
#error "CAPSIM_SHARED_DIR must name the shared data folder (the build defines it)"
#endif

namespace {

using namespace capsim;

struct Capture : ArrivalSink {
  std::vector<Request> got;
  void arrive(Request r) override { got.push_back(std::move(r)); }
};

// Every request an open-loop workload sends, delivering each arrival in turn.
std::vector<Request> drain(Workload& w, std::size_t limit = 10'000'000) {
  Capture c;
  w.start(c);
  for (std::size_t i = 0; i < c.got.size() && i < limit; ++i) {
    const Request r = c.got[i];
    w.on_arrival(r, c);
  }
  return c.got;
}

OpenLoopConfig open_cfg(ArrivalProcess p, double rate, std::int64_t n, std::uint64_t seed = 1) {
  OpenLoopConfig o;
  o.process = p;
  o.stages = {{rate, 0}};
  o.requests = n;
  o.seed = seed;
  return o;
}

// Gaps between consecutive arrivals, the first measured from t = 0.
std::vector<double> gaps(const std::vector<Request>& rs) {
  std::vector<double> g;
  SimTime prev = 0;
  for (const Request& r : rs) {
    g.push_back(to_seconds(r.arrival - prev));
    prev = r.arrival;
  }
  return g;
}

StreamingStats stats_of(const std::vector<double>& v) {
  StreamingStats s;
  for (double x : v) s.add(x);
  return s;
}

TEST_CASE("open loop: Poisson gaps have mean 1/rate and variance 1/rate^2", "[workload][open]") {
  // rate 4, n = 40000 gaps. Exponential(mean 0.25): the sample mean has sd 0.25 / sqrt(n) =
  // 0.5% -> 2% is 4 sd. The sample variance of exponentials has relative sd sqrt(8 / n) = 1.4%
  // (fourth central moment 9 sigma^4) -> 6% is > 4 sd.
  auto w = make_open_loop(open_cfg(ArrivalProcess::kPoisson, 4.0, 40000, 3));
  const auto rs = drain(*w);
  REQUIRE(rs.size() == 40000);
  const StreamingStats g = stats_of(gaps(rs));
  CHECK(g.mean() == Approx(0.25).epsilon(0.02));
  CHECK(g.variance() == Approx(1.0 / 16).epsilon(0.06));
  for (std::size_t i = 0; i < rs.size(); ++i) {
    if (rs[i].id != i) FAIL("ids must be 0, 1, 2, ... in arrival order");
  }
}

TEST_CASE("open loop: constant spacing is exact", "[workload][open]") {
  // rate 4: 0.25 s is exact in binary, so the k-th arrival (k = 1, 2, ...) is at exactly
  // k x 250 ms. The first arrival comes one gap after t = 0.
  {
    auto w = make_open_loop(open_cfg(ArrivalProcess::kConstant, 4.0, 1000));
    const auto rs = drain(*w);
    REQUIRE(rs.size() == 1000);
    for (std::size_t k = 0; k < rs.size(); ++k) {
      if (rs[k].arrival != static_cast<SimTime>(k + 1) * 250'000'000) {
        FAIL("arrival " << k << " at " << rs[k].arrival << " ns");
      }
    }
  }
  // rate 3: 1/3 s is not exact; summing 1000 of them drifts < 1e-12 s, far under 1 ns.
  {
    auto w = make_open_loop(open_cfg(ArrivalProcess::kConstant, 3.0, 1000));
    const auto rs = drain(*w);
    for (std::size_t k = 0; k < rs.size(); ++k) {
      const SimTime want = from_seconds(static_cast<double>(k + 1) / 3.0);
      if (std::llabs(rs[k].arrival - want) > 1) FAIL("arrival " << k << " off by " << rs[k].arrival - want << " ns");
    }
  }
}

TEST_CASE("open loop: stages — 5 req/s for 10 s, then 10 req/s", "[workload][open]") {
  // 100 seeds of a 20 s run: expected 100 x 5 x 10 = 5000 arrivals in [0, 10 s) (Poisson sd
  // sqrt(5000) = 71; 300 is > 4 sd) and 100 x 10 x 10 = 10000 in [10, 20] (sd 100; 400 is 4
  // sd). Note: the gap that crosses 10 s is drawn at the first stage's rate, which costs about
  // one arrival per run in the second stage (mean residual 0.2 s instead of 0.1 s at 10 req/s),
  // i.e. ~100 of the 10000 here — inside the tolerance.
  std::int64_t first = 0, second = 0;
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    OpenLoopConfig o = open_cfg(ArrivalProcess::kPoisson, 5.0, 0, seed);
    o.requests.reset();
    o.stages = {{5.0, 10.0}, {10.0, 0}};
    o.duration_s = 20.0;
    auto w = make_open_loop(o);
    for (const Request& r : drain(*w)) {
      REQUIRE(r.arrival <= from_seconds(20.0));
      (r.arrival < from_seconds(10.0) ? first : second) += 1;
    }
  }
  CHECK(first == Approx(5000).margin(300));
  CHECK(second == Approx(10000).margin(400));
}

TEST_CASE("open loop: offline sends everything at t = 0", "[workload][open]") {
  auto w = make_open_loop(open_cfg(ArrivalProcess::kOffline, 1.0, 50));
  const auto rs = drain(*w);
  REQUIRE(rs.size() == 50);
  for (const Request& r : rs) CHECK(r.arrival == 0);
}

TEST_CASE("open loop: gamma burstiness sets the gap variance to 1 / (rate^2 x burstiness)",
          "[workload][open]") {
  // vLLM's gamma gaps: shape k = burstiness, scale 1 / (rate k): mean 1/rate, variance
  // k / (rate k)^2 = 1 / (rate^2 k). n = 200000 gaps at rate 2.
  //   k = 0.25: variance 1 / (4 x 0.25) = 1. Gamma kurtosis 3 + 6/k = 27, so the sample
  //     variance has relative sd sqrt(26 / n) = 1.1%: 5% is > 4 sd. Mean: CV 1/sqrt(k) = 2,
  //     sd of the mean 2 / sqrt(n) = 0.45%: 2% is > 4 sd.
  //   k = 4: variance 1 / 16; kurtosis 4.5, relative sd sqrt(3.5 / n) = 0.42%: 2%.
  struct Case { double k, variance, tolerance; };
  for (const Case c : {Case{0.25, 1.0, 0.05}, Case{4.0, 1.0 / 16, 0.02}}) {
    OpenLoopConfig o = open_cfg(ArrivalProcess::kGamma, 2.0, 200000, 17);
    o.burstiness = c.k;
    auto w = make_open_loop(o);
    const StreamingStats g = stats_of(gaps(drain(*w)));
    INFO("burstiness " << c.k);
    CHECK(g.mean() == Approx(0.5).epsilon(0.02));
    CHECK(g.variance() == Approx(c.variance).epsilon(c.tolerance));
  }
}

TEST_CASE("open loop: bad settings are refused", "[workload][open]") {
  OpenLoopConfig o = open_cfg(ArrivalProcess::kPoisson, 0.0, 10);
  CHECK_THROWS_WITH(make_open_loop(o), Catch::Contains("not a positive rate"));
  o = open_cfg(ArrivalProcess::kPoisson, 1.0, 10);
  o.requests.reset();
  CHECK_THROWS_WITH(make_open_loop(o), Catch::Contains("give --requests N or --duration D"));
  o = open_cfg(ArrivalProcess::kGamma, 1.0, 10);
  o.burstiness = 0;
  CHECK_THROWS_WITH(make_open_loop(o), Catch::Contains("--burstiness"));
}

TEST_CASE("open loop: shared system prompts prefix every prompt", "[workload][open][prefix]") {
  // 3 groups of a 200-token system prompt: prompt = 200 + question; segments = system,
  // question, answer; 3 distinct system contents over many requests.
  OpenLoopConfig o = open_cfg(ArrivalProcess::kPoisson, 10.0, 300, 4);
  o.lengths.prompt = Distribution::parse("uniform:10:100", Distribution::Unit::kTokens, "t");
  o.prefix = {3, 200};
  auto w = make_open_loop(o);
  std::vector<std::uint64_t> systems;
  for (const Request& r : drain(*w)) {
    REQUIRE(r.segments.size() == 3);
    CHECK(r.segments[0].tokens == 200);
    CHECK(r.prompt_tokens == 200 + r.segments[1].tokens);
    CHECK(r.segments[2].tokens == r.output_tokens);
    if (std::find(systems.begin(), systems.end(), r.segments[0].content) == systems.end()) {
      systems.push_back(r.segments[0].content);
    }
  }
  CHECK(systems.size() == 3);
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("closed loop: a turn's prompt is the system prompt plus the session's history",
          "[workload][closed]") {
  // One user, 3-turn sessions, 100-token system prompt, random question/answer lengths,
  // think time 2 s.
  //   turn 0: system + q1                     (segments S, q1, a1)
  //   turn 1: system + q1 + a1 + q2           (segments S, q1, a1, q2, a2)
  //   turn 2: system + q1 + a1 + q2 + a2 + q3
  //   then a new session: system + q4 again.
  ClosedLoopConfig c;
  c.users = 1;
  c.turns = Distribution::parse("3", Distribution::Unit::kCount, "turns");
  c.think = Distribution::parse("2s", Distribution::Unit::kSeconds, "think");
  c.lengths.prompt = Distribution::parse("uniform:10:60", Distribution::Unit::kTokens, "q");
  c.lengths.output = Distribution::parse("uniform:5:40", Distribution::Unit::kTokens, "a");
  c.prefix = {1, 100};
  c.seed = 5;
  auto w = make_closed_loop(c);
  Capture sink;
  w->start(sink);
  REQUIRE(sink.got.size() == 1);
  // The user starts at a uniform time within the first mean think time.
  CHECK(sink.got[0].arrival >= 0);
  CHECK(sink.got[0].arrival < from_seconds(2.0));
  SimTime now = from_seconds(10.0);
  for (int i = 0; i < 3; ++i) {
    const Request last = sink.got.back();  // a copy: the sink grows during the call
    w->on_finish(last, now, sink);
    now += from_seconds(10.0);
  }
  REQUIRE(sink.got.size() == 4);
  const Request &r0 = sink.got[0], &r1 = sink.got[1], &r2 = sink.got[2], &r3 = sink.got[3];
  const std::int64_t q1 = r0.segments.at(1).tokens, a1 = r0.output_tokens;
  CHECK(r0.prompt_tokens == 100 + q1);
  CHECK(r0.segments.at(2).tokens == a1);
  REQUIRE(r1.segments.size() == 5);
  const std::int64_t q2 = r1.segments[3].tokens, a2 = r1.output_tokens;
  CHECK(r1.prompt_tokens == 100 + q1 + a1 + q2);
  for (std::size_t k = 0; k < 3; ++k) {
    CHECK(r1.segments[k].content == r0.segments[k].content);  // same tokens -> prefix hits
    CHECK(r1.segments[k].tokens == r0.segments[k].tokens);
  }
  REQUIRE(r2.segments.size() == 7);
  CHECK(r2.prompt_tokens == 100 + q1 + a1 + q2 + a2 + r2.segments[5].tokens);
  CHECK(r0.turn == 0);
  CHECK(r1.turn == 1);
  CHECK(r2.turn == 2);
  CHECK(r1.user == 0);
  // Next arrival = finish + think: 10 s + 2 s, 20 s + 2 s.
  CHECK(r1.arrival == from_seconds(12.0));
  CHECK(r2.arrival == from_seconds(22.0));
  // After 3 turns a new session starts over from the system prompt.
  CHECK(r3.turn == 0);
  REQUIRE(r3.segments.size() == 3);
  CHECK(r3.segments[0].content == r0.segments[0].content);
  CHECK(r3.prompt_tokens == 100 + r3.segments[1].tokens);
}

TEST_CASE("closed loop: fixed concurrency keeps N requests out and has no history",
          "[workload][closed]") {
  ClosedLoopConfig c;
  c.users = 8;
  c.history = false;
  c.lengths.prompt = Distribution::parse("64", Distribution::Unit::kTokens, "q");
  c.turns = Distribution::parse("5", Distribution::Unit::kCount, "turns");
  auto w = make_closed_loop(c);
  Capture sink;
  w->start(sink);
  REQUIRE(sink.got.size() == 8);
  for (const Request& r : sink.got) CHECK(r.arrival == 0);  // no think time: all at once
  const Request third = sink.got[3];
  w->on_finish(third, from_seconds(1.0), sink);
  REQUIRE(sink.got.size() == 9);
  CHECK(sink.got[8].user == 3);
  CHECK(sink.got[8].arrival == from_seconds(1.0));
  CHECK(sink.got[8].prompt_tokens == 64);  // no history
  CHECK_THROWS_WITH(make_closed_loop([] { ClosedLoopConfig z; z.users = 0; return z; }()),
                    Catch::Contains("--users"));
}

TEST_CASE("closed loop: requests cap the total sent", "[workload][closed]") {
  ClosedLoopConfig c;
  c.users = 4;
  c.requests = 6;
  auto w = make_closed_loop(c);
  Capture sink;
  w->start(sink);
  for (std::size_t i = 0; i < sink.got.size() && i < 100; ++i) {
    const Request r = sink.got[i];
    w->on_finish(r, 0, sink);
  }
  CHECK(sink.got.size() == 6);
}

// ---------------------------------------------------------------------------------------------

TEST_CASE("distributions: lognormal by mean and p99", "[workload][dist]") {
  // mean 150, p99 1200: sigma = z - sqrt(z^2 - 2 ln(1200/150)) with z = 2.3263 -> 1.2069;
  // CV = sqrt(exp(sigma^2) - 1) = 1.81. n = 200000: the sample mean has relative sd
  // 1.81 / sqrt(n) = 0.41% (2% > 4 sd). The sample p99 has sd sqrt(0.99 x 0.01 / n) / f(p99)
  // with f(p99) = phi(z) / (p99 sigma) = 0.02665 / (1200 x 1.2069): 12 tokens = 1% (5% > 4 sd).
  // Rounding to whole tokens and the floor of 1 move neither measurably.
  const Distribution d = Distribution::parse("lognormal:150:1200", Distribution::Unit::kTokens, "t");
  CHECK(d.mean() == 150);
  Rng rng(99);
  Samples s;
  s.reserve(200000);
  for (int i = 0; i < 200000; ++i) s.add(d.sample(rng));
  CHECK(s.mean() == Approx(150).epsilon(0.02));
  CHECK(s.percentile(99) == Approx(1200).epsilon(0.05));
  CHECK(s.min() >= 1);
  for (double x : {s.percentile(10), s.percentile(50)}) CHECK(x == std::round(x));
}

TEST_CASE("distributions: empirical draws from a CSV column", "[workload][dist]") {
  CAPSIM_REQUIRE_SHARED(std::string(CAPSIM_SHARED_DIR) + "/traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv");
  // ShareGPT (filtered, llama2 tokenizer) prompt lengths. The column's mean and sd, computed
  // once with:
  //   awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="num_prefill_tokens") c=i; next}
  //            $0!=""{n++; s+=$c; q+=$c*$c} END{m=s/n; printf "n=%d mean=%.4f sd=%.4f\n",
  //            n, m, sqrt(q/n-m*m)}' sharegpt_8k_filtered_stats_llama2_tokenizer.csv
  //   -> n=30731 mean=2340.0335 sd=2088.8182
  // 100000 draws with replacement: the sample mean has sd 2088.8 / sqrt(1e5) = 6.6 = 0.28%;
  // 1.5% is > 5 sd.
  const std::string file =
      std::string(CAPSIM_SHARED_DIR) + "/traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv";
  const Distribution d =
      Distribution::parse("empirical:" + file + ":num_prefill_tokens", Distribution::Unit::kTokens, "t");
  CHECK(d.mean() == Approx(2340.0335).epsilon(1e-7));  // the exact column mean
  Rng rng(7);
  StreamingStats s;
  for (int i = 0; i < 100000; ++i) s.add(d.sample(rng));
  CHECK(s.mean() == Approx(2340.0335).epsilon(0.015));
  CHECK(s.stddev() == Approx(2088.8182).epsilon(0.05));
  CHECK_THROWS_WITH(
      Distribution::parse("empirical:" + file + ":nope", Distribution::Unit::kTokens, "--input-tokens"),
      Catch::Contains("has no column 'nope'"));
}

TEST_CASE("distributions: fixed, uniform and exponential", "[workload][dist]") {
  Rng rng(1);
  const Distribution f = Distribution::parse("512", Distribution::Unit::kTokens, "t");
  for (int i = 0; i < 10; ++i) CHECK(f.sample(rng) == 512);
  // uniform:100:1000 on whole tokens: mean 550, every draw in range.
  const Distribution u = Distribution::parse("uniform:100:1000", Distribution::Unit::kTokens, "t");
  StreamingStats su;
  for (int i = 0; i < 100000; ++i) {
    const double x = u.sample(rng);
    if (x < 100 || x > 1000) FAIL("uniform draw " << x << " out of [100, 1000]");
    su.add(x);
  }
  // sd of the mean: (900 / sqrt(12)) / sqrt(1e5) = 0.82 -> 4 tokens is ~5 sd.
  CHECK(su.mean() == Approx(550).margin(4));
  // exponential:20s: mean 20 s, sd 20 / sqrt(1e5) = 0.063 s -> 0.3 s is ~5 sd.
  const Distribution e = Distribution::parse("exponential:20s", Distribution::Unit::kSeconds, "t");
  StreamingStats se;
  for (int i = 0; i < 100000; ++i) se.add(e.sample(rng));
  CHECK(se.mean() == Approx(20).margin(0.3));
  CHECK_THROWS_WITH(Distribution::parse("zipf:3", Distribution::Unit::kTokens, "--input-tokens"),
                    Catch::Contains("unknown distribution 'zipf'"));
}

}  // namespace

TEST_CASE("open loop: paired lengths send each measured prompt with its own answer", "[workload][open]") {
  // Two measured requests, (100 in, 10 out) and (2000 in, 400 out): drawn as pairs, no request
  // is (100, 400) or (2000, 10), and both pairs appear (200 draws: the chance one never does is
  // 2 x 2^-200). `capsim calibrate runs` replays --save-detailed files this way.
  OpenLoopConfig o = open_cfg(ArrivalProcess::kConstant, 10.0, 200);
  o.lengths.paired = std::make_shared<std::vector<std::pair<std::int64_t, std::int64_t>>>(
      std::vector<std::pair<std::int64_t, std::int64_t>>{{100, 10}, {2000, 400}});
  auto w = make_open_loop(o);
  int short_ones = 0, long_ones = 0;
  for (const Request& r : drain(*w)) {
    if (r.prompt_tokens == 100 && r.output_tokens == 10) ++short_ones;
    else if (r.prompt_tokens == 2000 && r.output_tokens == 400) ++long_ones;
    else FAIL("a request of " << r.prompt_tokens << " in, " << r.output_tokens << " out is no measured pair");
  }
  CHECK(short_ones + long_ones == 200);
  CHECK(short_ones > 0);
  CHECK(long_ones > 0);
  CHECK(w->describe().find("(prompt, output) pairs of 2 measured requests") != std::string::npos);
}
