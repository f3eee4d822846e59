// Requests without content segments (content unique to the request, request.h) skip block
// hashing: their KV blocks are tagged instead (KvBlockManager::unique_tag, Sequence::
// unique_owner). That must not change any result: each scenario runs twice, once as generated
// and once with every segment-less request given one segment of its own content (a content id
// no other request has), which sends its blocks through the chained-hash path, and every number
// simulate() returns is compared bit for bit. Each scenario also checks that what it exercises
// happened (preemptions whose recompute hits the sequence's own cached blocks, prefix hits on
// shared system prompts next to unique requests, several replicas behind the prefix-aware
// router), so the comparison cannot pass vacuously.
#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "sim/cluster/simulation.h"
#include "sim/workload/generators.h"
#include "tests/cluster/result_fingerprint.h"
#include "tests/engine/test_support.h"

namespace {

using namespace capsim;
using namespace capsim::test;

// Passes `inner`'s requests on, changing their content: with `hashed`, a request without
// segments gets one segment covering its prompt and output whose content id is its own (no
// other request's); with `strip_odd`, requests with an odd id lose their segments first (so a
// run mixes shared-prefix requests and unique ones).
class ContentRewrite : public Workload, public ArrivalSink {
 public:
  ContentRewrite(std::unique_ptr<Workload> inner, bool hashed, bool strip_odd)
      : inner_(std::move(inner)), hashed_(hashed), strip_odd_(strip_odd) {}
  void start(ArrivalSink& sink) override {
    sink_ = &sink;
    inner_->start(*this);
  }
  void arrive(Request r) override {
    if (strip_odd_ && r.id % 2 == 1) r.segments.clear();
    if (hashed_ && r.segments.empty()) {
      r.segments.push_back({0x6000000000000000ULL + r.id, r.prompt_tokens + r.output_tokens});
    }
    sink_->arrive(std::move(r));
  }
  void on_arrival(const Request& r, ArrivalSink&) override { inner_->on_arrival(r, *this); }
  void on_finish(const Request& r, SimTime now, ArrivalSink&) override { inner_->on_finish(r, now, *this); }
  std::string describe() const override { return inner_->describe(); }

 private:
  std::unique_ptr<Workload> inner_;
  ArrivalSink* sink_ = nullptr;
  bool hashed_, strip_odd_;
};

// Runs `make()`'s workload on `c` with unique (tagged) content and with hashed content; returns
// the tagged run after comparing.
template <typename MakeWorkload>
SimulationResult tagged_and_hashed(const SimulationConfig& c, MakeWorkload make, bool strip_odd) {
  ContentRewrite tagged(make(), false, strip_odd), hashed(make(), true, strip_odd);
  SimulationResult a = simulate(c, tagged);
  const SimulationResult b = simulate(c, hashed);
  const std::string fa = fingerprint(a), fb = fingerprint(b);
  CHECK(fa.size() > 1000);
  if (fa != fb) FAIL(first_difference(fa, "tagged", fb, "hashed"));
  return a;
}

OpenLoopConfig open_loop(double rate, std::int64_t requests, const char* prompt, const char* output,
                         std::uint64_t seed) {
  OpenLoopConfig o;
  o.stages = {{rate, 0}};
  o.requests = requests;
  o.lengths.prompt = Distribution::parse(prompt, Distribution::Unit::kTokens, "test");
  o.lengths.output = Distribution::parse(output, Distribution::Unit::kTokens, "test");
  o.seed = seed;
  return o;
}

std::int64_t prompt_tokens_computed(const SimulationResult& r) {
  std::int64_t n = 0;
  for (const ReplicaSummary& rs : r.replicas) n += rs.stats.prompt_tokens_computed;
  return n;
}

}  // namespace

TEST_CASE("unique content: preempted requests find their own blocks, tagged as hashed",
          "[engine][prefix-cache][unique-content]") {
  // A KV cache of ~30k tokens (25% of an H100's memory for Llama-3.1-8B) against ~2,100-token
  // sequences at 6 req/s: sequences are preempted and readmitted; with prefix caching their
  // recompute starts after the blocks of theirs still cached (a tagged lookup), so fewer prompt
  // tokens are computed than without prefix caching. Stepping one by one and with implicit
  // decode (whose members publish their blocks only when released).
  for (const bool skip_ahead : {true, false}) {
    Deployment d = deployment("llama-3.1-8b", "h100-sxm", 1, "vllm", true);
    d.limits.gpu_memory_utilization = 0.25;
    d.limits.max_num_seqs = 24;
    d.limits.enable_prefix_caching = true;
    d.validate();
    SimulationConfig c;
    c.groups = {ReplicaGroup{d, 1}};
    c.skip_ahead = skip_ahead;
    const OpenLoopConfig o = open_loop(6.0, 300, "lognormal:1500:6000", "lognormal:600:2400", 11);
    const SimulationResult r = tagged_and_hashed(c, [&] { return make_open_loop(o); }, false);
    CHECK(r.preemptions > 20);
    d.limits.enable_prefix_caching = false;
    c.groups = {ReplicaGroup{d, 1}};
    auto w = make_open_loop(o);
    const SimulationResult off = simulate(c, *w);
    CHECK(off.preemptions > 0);
    CHECK(prompt_tokens_computed(r) < prompt_tokens_computed(off));
  }
}

TEST_CASE("unique content: unique requests next to shared system prompts, one and three replicas",
          "[engine][prefix-cache][unique-content]") {
  // Even ids carry one of 3 system prompts of 400 tokens (hits), odd ids have unique content;
  // behind the prefix-aware router the unique ones are never looked up (nothing to hit), the
  // others go where their prompt is cached. A small KV cache makes blocks of both kinds evicted.
  for (const int replicas : {1, 3}) {
    Deployment d = deployment("llama-3.1-8b", "h100-sxm", 1, "vllm", true);
    d.limits.gpu_memory_utilization = 0.3;
    d.limits.enable_prefix_caching = true;
    d.validate();
    SimulationConfig c;
    c.groups = {ReplicaGroup{d, replicas}};
    c.router = replicas > 1 ? "prefix-aware" : "least-outstanding";
    OpenLoopConfig o = open_loop(8.0 * replicas, 400, "lognormal:800:3000", "lognormal:300:1200", 5);
    o.prefix.groups = 3;
    o.prefix.system_prompt_tokens = 400;
    const SimulationResult r = tagged_and_hashed(c, [&] { return make_open_loop(o); }, true);
    CHECK(r.prefix_hit_rate > 0.05);
    CHECK(r.completed == 400);
  }
}
