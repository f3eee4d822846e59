// The whole simulation (sim/cluster/simulation.h) with the real roofline step cost: what must
// hold whatever the cost model's constants — conservation, event ordering, determinism,
// queueing laws (Little, Pollaczek-Khinchine), physical floors — and what the routers do.
// Where a number is expected it is derived in the comment from the law, not read off a run.
#include "sim/cluster/simulation.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/rng.h"
#include "sim/cost/roofline_cost.h"
#include "sim/llm/memory_plan.h"
#include "sim/workload/generators.h"
#include "tests/engine/test_support.h"

namespace {

using namespace capsim;
using namespace capsim::test;

SimulationConfig config_for(const std::vector<ReplicaGroup>& groups,
                            const std::string& router = "least-outstanding") {
  SimulationConfig c;
  c.groups = groups;
  c.router = router;
  return c;
}
SimulationConfig single(const Deployment& d, int replicas = 1,
                        const std::string& router = "least-outstanding") {
  return config_for({ReplicaGroup{d, replicas}}, router);
}

// Wraps a workload and remembers every request it sends (id -> prompt, output).
class Tapped : public Workload {
 public:
  explicit Tapped(std::unique_ptr<Workload> w) : inner_(std::move(w)) {}
  void start(ArrivalSink& sink) override {
    Tap t(*this, sink);
    inner_->start(t);
  }
  void on_arrival(const Request& r, ArrivalSink& sink) override {
    Tap t(*this, sink);
    inner_->on_arrival(r, t);
  }
  void on_finish(const Request& r, SimTime now, ArrivalSink& sink) override {
    Tap t(*this, sink);
    inner_->on_finish(r, now, t);
  }
  std::string describe() const override { return inner_->describe(); }
  struct Sent {
    std::int64_t prompt, output;
    SimTime arrival;
  };
  std::map<std::uint64_t, Sent> sent;
  std::int64_t duplicates = 0;

 private:
  struct Tap : ArrivalSink {
    Tap(Tapped& s, ArrivalSink& o) : self(s), out(o) {}
    void arrive(Request r) override {
      if (!self.sent.emplace(r.id, Sent{r.prompt_tokens, r.output_tokens, r.arrival}).second) ++self.duplicates;
      out.arrive(std::move(r));
    }
    Tapped& self;
    ArrivalSink& out;
  };
  std::unique_ptr<Workload> inner_;
};

OpenLoopConfig open_loop(double rate, std::int64_t requests, std::uint64_t seed = 1) {
  OpenLoopConfig o;
  o.process = ArrivalProcess::kPoisson;
  o.stages = {{rate, 0}};
  o.requests = requests;
  o.seed = seed;
  return o;
}

Distribution tokens(const std::string& text) {
  return Distribution::parse(text, Distribution::Unit::kTokens, "test");
}

SimTime step_time(const Deployment& d, const BatchShape& b) {
  const RooflineCost cost(d);
  return std::max<SimTime>(1, from_seconds(cost.totals(b).seconds));
}

// ---------------------------------------------------------------------------------------------
// Conservation

TEST_CASE("simulation: every request completes exactly once and outputs are conserved",
          "[cluster][conservation]") {
  SECTION("open loop with variable lengths, two replicas") {
    OpenLoopConfig o = open_loop(30, 2000, 5);
    o.lengths.prompt = tokens("lognormal:600:4000");
    o.lengths.output = tokens("lognormal:150:800");
    Tapped w(make_open_loop(o));
    const SimulationResult r = simulate(single(deployment(), 2), w);
    REQUIRE(w.sent.size() == 2000);
    CHECK(w.duplicates == 0);
    CHECK(r.arrived == 2000);
    CHECK(r.rejected == 0);
    CHECK(r.completed == 2000);
    CHECK(r.completed + r.rejected == r.arrived);
    std::set<std::uint64_t> ids;
    std::int64_t out = 0, in = 0;
    for (const RequestRecord& rec : r.records) {
      CHECK(ids.insert(rec.id).second);  // exactly once
      const auto& s = w.sent.at(rec.id);
      CHECK(rec.output_tokens == s.output);  // generated = requested (fixed-length benchmark)
      CHECK(rec.prompt_tokens == s.prompt);
      out += s.output;
      in += s.prompt;
    }
    CHECK(ids.size() == w.sent.size());
    CHECK(r.total_output_tokens == out);
    CHECK(r.total_input_tokens == in);
  }
  SECTION("requests longer than max_model_len are rejected, the rest complete") {
    // llama-3.1-8b: max_model_len = min(131072 context, KV tokens); 200000 + 10 exceeds it.
    Rng rng(3);
    std::vector<Request> rs;
    std::int64_t out = 0;
    for (std::uint64_t i = 0; i < 60; ++i) {
      const bool too_long = (i == 17 || i == 41);
      const std::int64_t p = too_long ? 200000 : rng.uniform_int(1, 3000);
      const std::int64_t o = rng.uniform_int(1, 300);
      if (!too_long) out += o;
      rs.push_back(request(i, from_seconds(0.05 * static_cast<double>(i)), p, o));
    }
    ScriptedWorkload w(rs);
    const SimulationResult r = simulate(single(deployment()), w);
    CHECK(r.arrived == 60);
    CHECK(r.rejected == 2);
    CHECK(r.completed == 58);
    CHECK(r.completed + r.rejected == r.arrived);
    CHECK(r.total_output_tokens == out);
    for (const RequestRecord& rec : r.records) CHECK((rec.id != 17 && rec.id != 41));
  }
}

// With a warm-up, `completed` and `failed` count requests arriving in the same window.
TEST_CASE("simulation: with a warm-up, failed and completed count the same window",
          "[cluster][conservation]") {
  // 40 requests 0.1 s apart; warm-up 2 s: ids 0-19 arrive before it (0.0 .. 1.9 s), 20-39
  // after. One too-long request in each half (ids 5 and 25): measured = 20, of which 19 complete
  // and 1 fails.
  std::vector<Request> rs;
  for (std::uint64_t i = 0; i < 40; ++i) {
    rs.push_back(request(i, from_seconds(0.1 * static_cast<double>(i)),
                         (i == 5 || i == 25) ? 200000 : 100, 8));
  }
  ScriptedWorkload w(rs);
  SimulationConfig c = single(deployment());
  c.warmup = from_seconds(2.0);
  const SimulationResult r = simulate(c, w);
  CHECK(r.completed == 19);
  CHECK(r.rejected == 1);
}

// With chunked prefill off (the tensorrt-llm and lmdeploy profiles) a prompt longer than
// max_num_batched_tokens runs alone, past the budget, instead of blocking the queue forever.
TEST_CASE("simulation: with chunked prefill off, a prompt over the token budget is not lost",
          "[cluster][conservation]") {
  Deployment d = deployment("llama-3.1-8b", "h100-sxm", 1, "tensorrt-llm");
  REQUIRE_FALSE(d.limits.enable_chunked_prefill);
  d.limits.max_num_batched_tokens = 2048;
  // id 1: 3000 tokens > 2048; ids 0 and 2: 500 tokens. 0.5 s apart.
  ScriptedWorkload w({request(0, 0, 500, 16), request(1, from_seconds(0.5), 3000, 16),
                      request(2, from_seconds(1.0), 500, 16)});
  const SimulationResult r = simulate(single(d), w);
  CHECK(r.arrived == 3);
  CHECK(r.completed + r.rejected == r.arrived);
  // Whatever happens to the long prompt, the short one behind it must be served.
  bool served2 = false;
  for (const RequestRecord& rec : r.records) served2 = served2 || rec.id == 2;
  CHECK(served2);
}

// ---------------------------------------------------------------------------------------------
// Event ordering

TEST_CASE("simulation: requests arriving at the same instant share the first step",
          "[cluster][events]") {
  // Offline: 8 requests at t = 0, 512-token prompts, 1 output token. 8 x 512 = 4096 tokens fit
  // the H100 default budget of 8192, so one step runs all 8 prompts and finishes everything.
  OpenLoopConfig o;
  o.process = ArrivalProcess::kOffline;
  o.requests = 8;
  o.lengths.prompt = tokens("512");
  o.lengths.output = tokens("1");
  auto w = make_open_loop(o);
  const Deployment d = deployment();
  REQUIRE(d.limits.max_num_batched_tokens >= 8 * 512);
  const SimulationResult r = simulate(single(d), *w);
  REQUIRE(r.completed == 8);
  CHECK(r.steps == 1);
  const ReplicaStats& st = r.replicas.at(0).stats;
  CHECK(st.batch_sequences.max() == 8);
  CHECK(st.batch_tokens.max() == 4096);
  // The step's time, from the cost model for that one shape.
  BatchShape b;
  for (int i = 0; i < 8; ++i) b.add_prefill_chunk(0, 512, true);
  const double t1 = to_seconds(step_time(d, b));
  for (const RequestRecord& rec : r.records) {
    CHECK(rec.queue_s == 0.0);
    CHECK(rec.ttft_s == Approx(t1).margin(1e-9));
  }
}

TEST_CASE("simulation: an arrival at the instant a step ends joins the next step",
          "[cluster][events]") {
  // A (prompt 256, output 3) at t = 0 runs step 1 alone, which lasts T1 = cost(prefill 256).
  // B arrives exactly at T1: the step-end and the arrival are processed before the replica
  // plans step 2, so B is scheduled at T1 with no queueing.
  const Deployment d = deployment();
  BatchShape b;
  b.add_prefill_chunk(0, 256, true);
  const SimTime t1 = step_time(d, b);
  ScriptedWorkload w({request(0, 0, 256, 3), request(1, t1, 64, 2)});
  const SimulationResult r = simulate(single(d), w);
  REQUIRE(r.completed == 2);
  CHECK(r.records[0].ttft_s == Approx(to_seconds(t1)).margin(1e-9));
  CHECK(r.records[1].queue_s == 0.0);
  CHECK(r.replicas[0].stats.batch_sequences.max() == 2);  // B's prefill with A's decode
}

// ---------------------------------------------------------------------------------------------
// Determinism

std::vector<RequestRecord> run_records(std::uint64_t seed) {
  OpenLoopConfig o = open_loop(40, 1500, seed);
  o.lengths.prompt = tokens("lognormal:400:3000");
  o.lengths.output = tokens("uniform:10:300");
  o.prefix = {4, 256};
  auto w = make_open_loop(o);
  return simulate(single(deployment(), 2, "prefix-aware"), *w).records;
}

bool same(const RequestRecord& a, const RequestRecord& b) {
  return a.id == b.id && a.arrival_s == b.arrival_s && a.queue_s == b.queue_s &&
         a.ttft_s == b.ttft_s && a.e2el_s == b.e2el_s && a.tpot_s == b.tpot_s &&
         a.prompt_tokens == b.prompt_tokens && a.output_tokens == b.output_tokens &&
         a.prefix_hit_tokens == b.prefix_hit_tokens && a.preemptions == b.preemptions &&
         a.replica == b.replica;
}

TEST_CASE("simulation: the same config and seed give identical records, another seed differs",
          "[cluster][determinism]") {
  const auto a = run_records(11), b = run_records(11), c = run_records(12);
  REQUIRE(a.size() == 1500);
  REQUIRE(b.size() == a.size());
  std::size_t identical = 0;
  for (std::size_t i = 0; i < a.size(); ++i) identical += same(a[i], b[i]);
  CHECK(identical == a.size());
  REQUIRE(c.size() == a.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i) differ += !same(a[i], c[i]);
  CHECK(differ > a.size() / 2);  // a new seed redraws every arrival and length
}

// ---------------------------------------------------------------------------------------------
// Queueing laws

TEST_CASE("simulation: Little's law for a closed loop, X = N / (R + Z)", "[cluster][laws]") {
  // 40 users, think time exponential with mean Z = 1 s, 256-token questions, 64-token answers;
  // measured for 1200 s after a 60 s warm-up. In a closed loop each user alternates thinking
  // and waiting, so over a window T: N T = X T (R + Z) + edge terms. Tolerance 3%:
  //   - sampling: the mean think time of ~30000 exponential draws has relative sd
  //     1/sqrt(30000) = 0.6% of Z, i.e. < 0.4% of R + Z (Z is ~2/3 of it);
  //   - edges: at most one partial cycle per user at each end of the window,
  //     2 (R + Z) / T < 2 x 2 s / 1200 s = 0.3%.
  // 3% is more than 5 sd of the sampling error plus the edge bound.
  ClosedLoopConfig cl;
  cl.users = 40;
  cl.think = Distribution::parse("exponential:1s", Distribution::Unit::kSeconds, "think");
  cl.lengths.prompt = tokens("256");
  cl.lengths.output = tokens("64");
  cl.seed = 7;
  auto w = make_closed_loop(cl);
  SimulationConfig c = single(deployment());
  c.warmup = from_seconds(60);
  c.stop_arrivals = from_seconds(1260);
  const SimulationResult r = simulate(c, *w);
  const double X = r.request_throughput, R = r.e2el.mean, Z = 1.0;
  INFO("X = " << X << " req/s, R = " << R << " s, X (R + Z) = " << X * (R + Z));
  REQUIRE(r.completed > 20000);
  CHECK(X * (R + Z) == Approx(40.0).epsilon(0.03));
}

TEST_CASE("simulation: M/D/1 — mean queueing delay follows Pollaczek-Khinchine",
          "[cluster][laws]") {
  // max_num_seqs 1 and 1-token prompts with 1 output token: every request is served alone in
  // one prefill step of fixed length S (the cost model's time for that shape), FCFS. With
  // Poisson arrivals at rate lambda = rho / S this is M/D/1:
  //   Wq = rho S / (2 (1 - rho)),  at rho = 0.5:  Wq = S / 2.
  // Tolerance 5%: the mean of n waiting times in M/D/1 at rho 0.5 has relative sd ~2.6% at
  // n = 20000 (measured over 2000 independent replications of the Lindley recursion
  // W' = max(0, W + S - gap) with exponential gaps, a 20-line C program), so ~1.2% at
  // n = 100000 (1/sqrt(n) scaling); 5% is about 4 sd.
  Deployment d = deployment();
  d.limits.max_num_seqs = 1;
  BatchShape one;
  one.add_prefill_chunk(0, 1, true);
  const SimTime S_ns = step_time(d, one);
  const double S = to_seconds(S_ns);
  const double rho = 0.5;
  OpenLoopConfig o = open_loop(rho / S, 100000, 21);
  o.lengths.prompt = tokens("1");
  o.lengths.output = tokens("1");
  auto w = make_open_loop(o);
  const SimulationResult r = simulate(single(d), *w);
  REQUIRE(r.completed == 100000);
  const double wq = rho * S / (2 * (1 - rho));
  INFO("S = " << S * 1e3 << " ms, simulated Wq = " << r.queue.mean * 1e3 << " ms, P-K Wq = " << wq * 1e3 << " ms");
  CHECK(r.queue.mean == Approx(wq).epsilon(0.05));
  // Service is deterministic: E2E - queueing = S for every request (to 1 ns of rounding).
  for (std::size_t i = 0; i < r.records.size(); i += 997) {
    CHECK(r.records[i].e2el_s - r.records[i].queue_s == Approx(S).margin(2e-9));
  }
  // Utilisation: busy time / time ~ rho (the arrival rate's own noise, 1/sqrt(1e5) = 0.3%).
  CHECK(r.replicas[0].stats.busy_seconds / r.simulated_s == Approx(rho).epsilon(0.02));
}

// ---------------------------------------------------------------------------------------------
// Physics

TEST_CASE("simulation: at batch 1, TPOT is at least the weights over peak bandwidth",
          "[cluster][physics]") {
  // One request alone: each decode step reads every weight once, so it cannot be faster than
  // weight bytes per GPU / the card's datasheet bandwidth. Nor should it be much slower: at
  // batch 1 decode is memory-bound, the cards' achieved bandwidth is ~0.75-0.8 of peak (1.3x),
  // plus a small per-step overhead; 2x the floor is a loose ceiling.
  struct Case { const char* model; const char* card; int tp; };
  for (const Case& k : {Case{"llama-3.1-8b", "h100-sxm", 1}, Case{"llama-3.1-8b", "rtx-4090", 1},
                        Case{"llama-3.1-70b", "h100-sxm", 4}}) {
    const Deployment d = deployment(k.model, k.card, k.tp);
    const MemoryPlan plan = plan_memory(d, 1024);
    const double floor_s = plan.weights / d.card.memory_bandwidth;
    ScriptedWorkload w({request(0, 0, 128, 256)});
    const SimulationResult r = simulate(single(d), w);
    REQUIRE(r.completed == 1);
    INFO(k.model << " on " << k.card << " tp" << k.tp << ": TPOT " << r.records[0].tpot_s * 1e3
                 << " ms, floor " << floor_s * 1e3 << " ms");
    CHECK(r.records[0].tpot_s >= floor_s);
    CHECK(r.records[0].tpot_s <= 2 * floor_s);
  }
}

TEST_CASE("simulation: a load sweep — throughput rises then saturates while TTFT p99 climbs",
          "[cluster][sweep]") {
  // llama-3.1-8b on one H100, prompts 512, outputs 128, Poisson, 3000 requests per rate.
  // Below saturation the server keeps up: completed / duration equals the offered rate (the
  // measured one, (n - 1) / arrival span) up to the last request's latency over the span
  // (~1 s / 75 s at 40 req/s): 3%. Past saturation throughput stops growing: the last two
  // rates give the same throughput within 3% and well below what was offered, and TTFT p99
  // grows with the queue.
  const std::vector<double> rates = {5, 10, 20, 40, 60, 80, 120, 160};
  struct Row { double rate, offered, throughput, ttft_p99, tpot_mean; };
  std::vector<Row> rows;
  for (const double rate : rates) {
    OpenLoopConfig o = open_loop(rate, 3000, 3);
    o.lengths.prompt = tokens("512");
    o.lengths.output = tokens("128");
    auto w = make_open_loop(o);
    const SimulationResult r = simulate(single(deployment()), *w);
    REQUIRE(r.completed == 3000);
    double first = 1e300, last = 0;
    for (const RequestRecord& rec : r.records) {
      first = std::min(first, rec.arrival_s);
      last = std::max(last, rec.arrival_s);
    }
    rows.push_back({rate, 2999 / (last - first), r.request_throughput, r.ttft.p99, r.tpot.mean});
  }
  std::cout << "\nload sweep: llama-3.1-8b, 1 x h100-sxm, vllm-v1 defaults, prompt 512, output 128, "
               "3000 Poisson requests per rate, seed 3\n";
  std::cout << "  rate req/s | offered req/s | throughput req/s | TTFT p99 ms | mean TPOT ms\n";
  for (const Row& w : rows) {
    char line[160];
    std::snprintf(line, sizeof line, "  %10.0f | %13.2f | %16.2f | %11.1f | %12.2f\n", w.rate,
                  w.offered, w.throughput, w.ttft_p99 * 1e3, w.tpot_mean * 1e3);
    std::cout << line;
  }
  // Rises: the low rates are served as offered.
  for (std::size_t i = 0; i < 4; ++i) {
    INFO("rate " << rows[i].rate);
    CHECK(rows[i].throughput == Approx(rows[i].offered).epsilon(0.03));
  }
  // Never falls by more than noise as the offered load grows.
  for (std::size_t i = 1; i < rows.size(); ++i) CHECK(rows[i].throughput >= 0.97 * rows[i - 1].throughput);
  // Saturates.
  const Row& a = rows[rows.size() - 2];
  const Row& b = rows.back();
  CHECK(b.throughput == Approx(a.throughput).epsilon(0.03));
  CHECK(b.throughput < 0.8 * b.offered);
  CHECK(a.throughput < 0.8 * a.offered);
  // TTFT p99 climbs: from tens of ms to seconds once the queue builds.
  for (std::size_t i = 1; i < rows.size(); ++i) CHECK(rows[i].ttft_p99 >= 0.9 * rows[i - 1].ttft_p99);
  CHECK(b.ttft_p99 > 20 * rows[0].ttft_p99);
}

// ---------------------------------------------------------------------------------------------
// Routers

std::vector<std::uint32_t> replicas_of(const SimulationResult& r) {
  std::vector<std::uint32_t> v;
  for (const RequestRecord& rec : r.records) v.push_back(rec.replica);  // records sorted by id
  return v;
}

TEST_CASE("router: round-robin alternates, least-outstanding picks the idlest",
          "[cluster][router]") {
  // Six short requests 1 s apart, each done long before the next arrives.
  std::vector<Request> rs;
  for (std::uint64_t i = 0; i < 6; ++i) rs.push_back(request(i, from_seconds(static_cast<double>(i)), 100, 10));
  {
    ScriptedWorkload w(rs);
    const auto r = simulate(single(deployment(), 2, "round-robin"), w);
    CHECK(replicas_of(r) == std::vector<std::uint32_t>{0, 1, 0, 1, 0, 1});
  }
  {
    // Both replicas idle at every arrival: ties go to the lowest index.
    ScriptedWorkload w(rs);
    const auto r = simulate(single(deployment(), 2, "least-outstanding"), w);
    CHECK(replicas_of(r) == std::vector<std::uint32_t>(6, 0));
  }
  {
    // Request 0 now decodes 3000 tokens (many seconds at several ms per token): replica 0 stays
    // busy with it, so least-outstanding sends every later request to replica 1.
    rs[0].output_tokens = 3000;
    ScriptedWorkload w(rs);
    const auto r = simulate(single(deployment(), 2, "least-outstanding"), w);
    CHECK(replicas_of(r) == std::vector<std::uint32_t>{0, 1, 1, 1, 1, 1});
  }
}

TEST_CASE("router: a burst is spread while its requests are still in the front end",
          "[cluster][router]") {
  // Eight requests at the same instant, four replicas, a 2 ms API-server front end: none has
  // reached an engine when the next is routed. The router counts what it has sent, so
  // least-outstanding deals them out 0,1,2,3,0,1,2,3 (ties to the lowest index) — two per
  // replica. Counting only the engines' queues sent all eight to replica 0.
  Deployment d = deployment();
  d.engine.frontend_s = 0.002;
  std::vector<Request> rs;
  for (std::uint64_t i = 0; i < 8; ++i) rs.push_back(request(i, 0, 100, 10));
  for (const std::string router : {"least-outstanding", "prefix-aware", "size-aware"}) {
    ScriptedWorkload w(rs);
    const auto r = simulate(single(d, 4, router), w);
    CHECK(replicas_of(r) == std::vector<std::uint32_t>{0, 1, 2, 3, 0, 1, 2, 3});
  }
}

TEST_CASE("router: least-outstanding balances a loaded cluster", "[cluster][router]") {
  // 4 replicas, 4000 Poisson requests at 100 req/s: each should get a quarter, +-10%.
  OpenLoopConfig o = open_loop(100, 4000, 9);
  o.lengths.prompt = tokens("lognormal:500:3000");
  o.lengths.output = tokens("lognormal:150:800");
  auto w = make_open_loop(o);
  const auto r = simulate(single(deployment(), 4, "least-outstanding"), *w);
  std::vector<int> n(4, 0);
  for (const RequestRecord& rec : r.records) ++n.at(rec.replica);
  for (int k : n) CHECK(k == Approx(1000).epsilon(0.10));
}

TEST_CASE("router: prefix-aware sends a shared-prefix request to the replica holding it",
          "[cluster][router][prefix]") {
  // S = a 320-token system prompt.
  //   id 0  t 0    unique, decodes 3000 tokens  -> replica 0 (both idle, lowest index)
  //   id 1  t 0.5  S + 50, short                -> replica 1 (0 outstanding vs 1); caches S
  //   id 2  t 1    unique, decodes 3000 tokens  -> replica 1 (id 1 done: 0 vs 1)
  //   id 3  t 2    S + 50, short: both replicas have 1 outstanding. least-outstanding takes the
  //                lowest index, 0; prefix-aware takes replica 1, which holds S's 20 blocks
  //                (and is not busier than 2 x 1 + 8), and so hits 320 tokens.
  const std::uint64_t S = 0xFEED;
  const auto seg = [&](std::uint64_t id) {
    return std::vector<ContentSegment>{{S, 320}, {0x100 + 2 * id, 50}, {0x101 + 2 * id, 4}};
  };
  const std::vector<Request> rs = {request(0, 0, 100, 3000), request(1, from_seconds(0.5), 370, 4, seg(1)),
                                   request(2, from_seconds(1.0), 100, 3000),
                                   request(3, from_seconds(2.0), 370, 4, seg(3))};
  {
    ScriptedWorkload w(rs);
    const auto r = simulate(single(deployment(), 2, "least-outstanding"), w);
    CHECK(replicas_of(r) == std::vector<std::uint32_t>{0, 1, 1, 0});
    CHECK(r.records[3].prefix_hit_tokens == 0);
  }
  {
    ScriptedWorkload w(rs);
    const auto r = simulate(single(deployment(), 2, "prefix-aware"), w);
    CHECK(replicas_of(r) == std::vector<std::uint32_t>{0, 1, 1, 1});
    CHECK(r.records[3].prefix_hit_tokens == 320);
  }
}

TEST_CASE("router: unknown names are refused with the accepted ones", "[cluster][router]") {
  ScriptedWorkload w({request(0, 0, 10, 1)});
  SimulationConfig c = single(deployment(), 1, "random");
  CHECK_THROWS_WITH(simulate(c, w), Catch::Contains("accepted: round-robin, least-outstanding, prefix-aware, size-aware"));
}

// ---------------------------------------------------------------------------------------------
// Mixed card types

TEST_CASE("simulation: an h100-sxm replica and an rtx-4090 replica behind one router",
          "[cluster][mixed]") {
  // Round-robin splits 400 requests 200 / 200. Both serve llama-3.1-8b; the 4090 has about 30%
  // of the H100's memory bandwidth (1008 GB/s vs 3.35 TB/s), so its decode steps, memory-bound
  // at these small batches, are slower: its requests' mean TPOT is higher.
  const Deployment h100 = deployment("llama-3.1-8b", "h100-sxm");
  const Deployment rtx = deployment("llama-3.1-8b", "rtx-4090");
  OpenLoopConfig o = open_loop(4, 400, 13);
  o.lengths.prompt = tokens("256");
  o.lengths.output = tokens("64");
  Tapped w(make_open_loop(o));
  const auto r = simulate(config_for({{h100, 1}, {rtx, 1}}, "round-robin"), w);
  REQUIRE(r.completed == 400);
  REQUIRE(r.replicas.size() == 2);
  CHECK(r.replicas[0].card == "h100-sxm");
  CHECK(r.replicas[1].card == "rtx-4090");
  CHECK(r.replicas[1].kv_tokens < r.replicas[0].kv_tokens);  // 24 GB vs 80 GB
  double tpot[2] = {0, 0};
  int n[2] = {0, 0};
  for (const RequestRecord& rec : r.records) {
    tpot[rec.replica] += rec.tpot_s;
    ++n[rec.replica];
  }
  CHECK(n[0] == 200);
  CHECK(n[1] == 200);
  CHECK(tpot[1] / n[1] > 1.5 * tpot[0] / n[0]);
  CHECK(r.total_output_tokens == 400 * 64);
}

TEST_CASE("router: size-aware sends long requests to the largest KV cache", "[cluster][mixed][router]") {
  // An rtx-4090 replica of llama-3.1-8b holds 35,152 KV tokens (memory_plan_test works the
  // 24 GB card's budget), an h100-sxm 438,048. A request is long when prompt + output exceeds
  // an eighth of the smaller cache: 35,152 / 8 = 4,394 tokens. Alternate 6,000-token and
  // 300-token prompts (64-token outputs): every long one must land on the H100 (replica 0),
  // every short one on the 4090 (replica 1).
  const Deployment h100 = deployment("llama-3.1-8b", "h100-sxm");
  const Deployment rtx = deployment("llama-3.1-8b", "rtx-4090");
  std::vector<Request> rs;
  for (std::uint64_t i = 0; i < 40; ++i) {
    rs.push_back(request(i, from_seconds(0.5 * static_cast<double>(i)), i % 2 ? 300 : 6000, 64));
  }
  ScriptedWorkload w(rs);
  const auto r = simulate(config_for({{h100, 1}, {rtx, 1}}, "size-aware"), w);
  REQUIRE(r.completed == 40);
  REQUIRE(r.replicas[1].kv_tokens * 1 < r.replicas[0].kv_tokens);
  for (const RequestRecord& rec : r.records) {
    CHECK(rec.replica == (rec.prompt_tokens == 6000 ? 0u : 1u));
  }
}

}  // namespace

// vLLM rejects a request whose prompt + max_tokens exceed max_model_len before queueing it.
TEST_CASE("simulation: --max-model-len rejects longer requests and serves the rest",
          "[cluster][conservation]") {
  // llama-3.1-8b on h100-sxm, max_model_len 4096: prompt 4000 + output 96 = 4096 is served,
  // 4000 + 97 = 4097 and 5000 + 1 are rejected; short ones complete.
  Deployment d = deployment();
  d.limits.max_model_len = 4096;
  d.validate();
  std::vector<Request> rs;
  rs.push_back(request(0, 0, 4000, 96));
  rs.push_back(request(1, 0, 4000, 97));
  rs.push_back(request(2, from_seconds(0.1), 5000, 1));
  rs.push_back(request(3, from_seconds(0.2), 100, 10));
  ScriptedWorkload w(rs);
  const SimulationResult r = simulate(single(d), w);
  CHECK(r.arrived == 4);
  CHECK(r.rejected == 2);
  CHECK(r.completed == 2);
  CHECK(r.total_output_tokens == 96 + 10);
  for (const RequestRecord& rec : r.records) CHECK((rec.id == 0 || rec.id == 3));
  // Unset, the same 4097-token request is served (the context is 131072).
  ScriptedWorkload w2(rs);
  const SimulationResult r2 = simulate(single(deployment()), w2);
  CHECK(r2.rejected == 0);
  CHECK(r2.completed == 4);
}

TEST_CASE("simulation: a --max-model-len the KV cache cannot hold refuses to start",
          "[cluster][errors]") {
  // llama-3.1-8b on one rtx-4090 (24 GiB): about 16 GB of weights leaves a few GB of KV, far
  // less than one 131072-token sequence (131072 x 131,072 B = 16 GiB).
  Deployment d = deployment("llama-3.1-8b", "rtx-4090");
  d.limits.max_model_len = 131072;
  d.validate();
  ScriptedWorkload w({request(0, 0, 100, 10)});
  try {
    simulate(single(d), w);
    FAIL("simulate() started");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("to serve one request of max_model_len 131072 tokens, 17179869184 B (16.00 GiB)"
                   " of KV cache is needed per GPU") != std::string::npos);
    CHECK(msg.find("the estimated maximum model length is ") != std::string::npos);
  }
}

// A sliding-window model through the whole simulation: every request of a mixed load completes
// and none is lost, and gemma-2-9b's KV pool counts 21-layer blocks.
TEST_CASE("simulation: gemma-2-9b with its hybrid KV layout serves a load to completion",
          "[cluster][conservation][sliding]") {
  Rng rng(11);
  std::vector<Request> rs;
  std::int64_t out = 0;
  for (std::uint64_t i = 0; i < 80; ++i) {
    const std::int64_t p = rng.uniform_int(100, 7000);
    const std::int64_t o = rng.uniform_int(1, 8192 - p);
    out += o;
    rs.push_back(request(i, from_seconds(0.02 * static_cast<double>(i)), p, o));
  }
  ScriptedWorkload w(rs);
  const SimulationResult r = simulate(single(deployment("gemma-2-9b", "h100-sxm")), w);
  CHECK(r.rejected == 0);
  CHECK(r.completed == 80);
  CHECK(r.total_output_tokens == out);
  REQUIRE(r.replicas.size() == 1);
  CHECK(r.replicas[0].memory.layout.layers_per_group == 21);
  CHECK(r.replicas[0].kv_tokens == r.replicas[0].memory.kv_tokens);
  // The prefill-first scheduler admits whole prompts, which the layout's prefill bound does not
  // cover: it counts gemma's sliding layers as full attention (blocks of all 42 layers), and
  // also serves everything.
  SimulationConfig c = single(deployment("gemma-2-9b", "h100-sxm"));
  c.policy = "prefill-first";
  ScriptedWorkload w2(rs);
  const SimulationResult r2 = simulate(c, w2);
  CHECK(r2.completed == 80);
  CHECK_FALSE(r2.replicas[0].memory.layout.hybrid());
  CHECK(r2.replicas[0].memory.layout.layers_per_group == 42);
}

// SimulationResult::records is sorted by request id whatever order the requests finish in
// (simulation.cc records_by_id: kept when already in order, placed by id when the ids are one
// range, sorted otherwise). Each record must stay its request's: checked by its output length.
TEST_CASE("simulation: records come back by id, each with its own request's numbers",
          "[cluster][records]") {
  // All arrive together and run in one batch; a shorter output finishes earlier, so the
  // completion order is by output length: 3 (1 token), 1 (2), 2 (50), 0 (200).
  const auto check_by_id = [](const std::vector<Request>& rs) {
    ScriptedWorkload w(rs);
    const SimulationResult r = simulate(single(deployment()), w);
    REQUIRE(r.records.size() == rs.size());
    std::map<std::uint64_t, std::int64_t> output;
    for (const Request& q : rs) output[q.id] = q.output_tokens;
    auto expected = output.begin();
    for (const RequestRecord& rec : r.records) {
      CHECK(rec.id == expected->first);
      CHECK(rec.output_tokens == expected->second);
      ++expected;
    }
  };
  SECTION("ids 0..3, finishing 3, 1, 2, 0 (one range: placed by id)") {
    check_by_id({request(0, 0, 100, 200), request(1, 0, 100, 2), request(2, 0, 100, 50), request(3, 0, 100, 1)});
  }
  SECTION("ids with gaps, finishing out of order (sorted)") {
    check_by_id({request(9, 0, 100, 1), request(2, 0, 100, 120), request(7, 0, 100, 3), request(4, 0, 100, 60)});
  }
  SECTION("already in id order (kept)") {
    check_by_id({request(0, 0, 100, 5), request(1, 0, 100, 6), request(2, 0, 100, 7)});
  }
}

TEST_CASE("steady state: TTFT rising through a closed loop is a transient, through an open loop an overload",
          "[metrics][steady-state]") {
  // 400 requests 0.1 s apart whose TTFT climbs 0.05 s -> 0.25 s: batch means rise 5x with a
  // t-statistic far above 3. An open loop's queue can grow without bound (overloaded); N users
  // waiting for their answers cannot, so there the run is only not settled yet.
  std::vector<RequestRecord> records;
  for (std::uint64_t i = 0; i < 400; ++i) {
    const double ttft = 0.05 + 0.0005 * static_cast<double>(i);
    records.push_back({i, 0.1 * static_cast<double>(i), 0, 0, ttft, 0, ttft, 1.0, 0.01, 100, 10, 0, 0, 0});
  }
  const SteadyState open = analyze_steady_state(records, kSteadyStateBatches, false);
  CHECK(open.growing);
  CHECK_FALSE(open.at_steady_state());
  const SteadyState closed = analyze_steady_state(records, kSteadyStateBatches, true);
  CHECK_FALSE(closed.growing);
  CHECK_FALSE(closed.settled);
  CHECK_FALSE(closed.at_steady_state());
  bool said = false;
  for (const auto& w : closed.warnings) said = said || w.rfind("not at steady state: TTFT still rising", 0) == 0;
  CHECK(said);
  for (const auto& w : closed.warnings) CHECK(w.find("overloaded") == std::string::npos);
}
