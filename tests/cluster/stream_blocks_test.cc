// A closed-loop chat session's turns form one stream (Request::stream): each repeats the last
// one's whole content after the shared system prompt, so the engine names the session's blocks
// (stream, index) instead of hashing them, and publishes the blocks no earlier request of the
// stream published only when it releases them (Replica: stream blocks). That must not change any
// result: each scenario runs twice, once as generated and once with every request's stream
// cleared (its blocks then take the chained-hash path, as before streams existed), and every
// number simulate() returns is compared bit for bit. Each scenario also checks that what it
// exercises happened (history hits, preemptions, partly evicted histories, several replicas
// behind the prefix-aware router, sessions restarting), so the comparison cannot pass vacuously.
#include <catch2/catch.hpp>
#include <memory>
#include <set>
#include <string>

#include "sim/cluster/simulation.h"
#include "sim/workload/generators.h"
#include "tests/cluster/result_fingerprint.h"
#include "tests/engine/test_support.h"

namespace {

using namespace capsim;
using namespace capsim::test;

// Passes `inner`'s requests on; with `hashed`, without their stream.
class StreamRewrite : public Workload, public ArrivalSink {
 public:
  StreamRewrite(std::unique_ptr<Workload> inner, bool hashed) : inner_(std::move(inner)), hashed_(hashed) {}
  void start(ArrivalSink& sink) override {
    sink_ = &sink;
    inner_->start(*this);
  }
  void arrive(Request r) override {
    if (r.stream != 0) streams_.insert(r.stream);
    if (hashed_) r.stream = 0;
    sink_->arrive(std::move(r));
  }
  void on_arrival(const Request& r, ArrivalSink&) override { inner_->on_arrival(r, *this); }
  void on_finish(const Request& r, SimTime now, ArrivalSink&) override { inner_->on_finish(r, now, *this); }
  std::string describe() const override { return inner_->describe(); }
  std::int64_t streams() const { return static_cast<std::int64_t>(streams_.size()); }

 private:
  std::unique_ptr<Workload> inner_;
  ArrivalSink* sink_ = nullptr;
  bool hashed_;
  std::set<std::uint64_t> streams_;
};

// Runs `make()`'s workload on `c` with stream blocks and with hashed blocks; returns the stream
// run after comparing, and the number of streams in `streams`.
template <typename MakeWorkload>
SimulationResult streamed_and_hashed(const SimulationConfig& c, MakeWorkload make, std::int64_t& streams) {
  StreamRewrite streamed(make(), false), hashed(make(), true);
  SimulationResult a = simulate(c, streamed);
  const SimulationResult b = simulate(c, hashed);
  streams = streamed.streams();
  CHECK(streams > 100);  // the stream path was taken
  const std::string fa = fingerprint(a), fb = fingerprint(b);
  CHECK(fa.size() > 1000);
  if (fa != fb) FAIL(first_difference(fa, "streams", fb, "hashed"));
  return a;
}

ClosedLoopConfig chat(int users, const char* think, const char* turns, std::int64_t requests,
                      std::uint64_t seed) {
  ClosedLoopConfig u;
  u.users = users;
  u.think = Distribution::parse(think, Distribution::Unit::kSeconds, "test");
  u.turns = Distribution::parse(turns, Distribution::Unit::kCount, "test");
  u.lengths = {Distribution::parse("lognormal:150:1200", Distribution::Unit::kTokens, "test"),
               Distribution::parse("lognormal:250:1000", Distribution::Unit::kTokens, "test"), nullptr};
  u.prefix.groups = 2;
  u.prefix.system_prompt_tokens = 300;
  u.requests = requests;
  u.seed = seed;
  return u;
}

Deployment small_kv(double utilization) {
  Deployment d = deployment("llama-3.1-8b", "h100-sxm", 1, "vllm", true);
  d.limits.gpu_memory_utilization = utilization;
  d.limits.enable_prefix_caching = true;
  d.validate();
  return d;
}

}  // namespace

TEST_CASE("stream blocks: multi-turn chat under a small KV cache, preempted and partly evicted",
          "[engine][prefix-cache][stream-blocks]") {
  // 35% of an H100's 80 GB for the engine leaves ~12 GB of KV after Llama-3.1-8B's 16 GB of
  // weights (~90k tokens at 128 KiB a token) for 160 users whose prompts grow by ~400 tokens a
  // turn (question + answer, history kept): histories are evicted from their tail first while
  // users think, so a next turn may hit only the head of its history and recompute the rest,
  // whose old blocks may still be cached further on (the table keeps those, as the hash table
  // keeps the first block of a hash); running sequences are preempted and find their own blocks
  // again. Stepping one by one and with implicit decode (whose members publish the blocks they
  // fill only when released).
  for (const bool skip_ahead : {true, false}) {
    SimulationConfig c;
    c.groups = {ReplicaGroup{small_kv(0.35), 1}};
    c.skip_ahead = skip_ahead;
    const ClosedLoopConfig u = chat(160, "exponential:8s", "geometric:6", 1500, 3);
    std::int64_t streams = 0;
    const SimulationResult r = streamed_and_hashed(c, [&] { return make_closed_loop(u); }, streams);
    CHECK(streams < 1500);  // sessions of several turns
    CHECK(r.preemptions > 50);
    CHECK(r.completed == 1500);
    // Turns that hit their history (more than the 288 tokens of a system prompt's full blocks).
    std::int64_t history_hits = 0;
    for (const RequestRecord& q : r.records) history_hits += q.prefix_hit_tokens > 300;
    CHECK(history_hits > 150);
  }
}

TEST_CASE("stream blocks: three replicas behind the prefix-aware router, sessions restarting",
          "[engine][prefix-cache][stream-blocks]") {
  // Turns of a session are routed where their history is cached (the router's one-block probe
  // asks a replica's stream table); max_context 3,000 restarts a long session under a new stream
  // (its old blocks can no longer be hit). Over 3 x 1,100 sessions: some replica opens over
  // 1,100 streams, so its table reaches 1,024 and is swept (streams with no sequence there and no
  // cached block are forgotten, and reopened afresh if they come back).
  SimulationConfig c;
  c.groups = {ReplicaGroup{small_kv(0.3), 3}};
  c.router = "prefix-aware";
  ClosedLoopConfig u = chat(150, "exponential:3s", "geometric:2", 9000, 7);
  u.max_context = 3000;
  std::int64_t streams = 0;
  const SimulationResult r = streamed_and_hashed(c, [&] { return make_closed_loop(u); }, streams);
  CHECK(streams > 3 * 1100);
  CHECK(r.completed == 9000);
  CHECK(r.prefix_hit_rate > 0.3);
  for (const ReplicaSummary& rs : r.replicas) CHECK(rs.stats.prefix_hit_tokens > 0);
}

TEST_CASE("stream blocks: chat without history (each request its own stream)",
          "[engine][prefix-cache][stream-blocks]") {
  // Only the system prompts are shared; each request's own blocks are a stream of one request,
  // found again only after a preemption.
  SimulationConfig c;
  c.groups = {ReplicaGroup{small_kv(0.26), 1}};
  ClosedLoopConfig u = chat(200, "exponential:2s", "geometric:3", 2000, 11);
  u.history = false;
  std::int64_t streams = 0;
  const SimulationResult r = streamed_and_hashed(c, [&] { return make_closed_loop(u); }, streams);
  CHECK(streams == 2000);
  CHECK(r.completed == 2000);
  CHECK(r.preemptions > 0);
  CHECK(r.prefix_hit_rate > 0.05);
}
