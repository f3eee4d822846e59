// Live mode (capsim emulate): the cluster driven from outside, request by request and instant
// by instant, its tokens and completions returned as client events instead of batch metrics.
#include "sim/cluster/live_simulation.h"

#include <algorithm>

#include "sim/cluster/cluster.h"
#include "sim/core/error.h"

namespace capsim {

void Cluster::go_live(std::vector<LiveEvent>* out) {
  if (cfg_.decode_pool) throw Error("serving pd-disaggregated: not available in live mode (capsim emulate)");
  live_ = out;
  // Live clients get one event per token, and abort/replicas() read sequences' state.
  for (Replica* r : replicas_) r->set_implicit_decode(false);
}

void Cluster::advance_to(SimTime t) {
  while (!queue_.empty() && queue_.top().time <= t) {
    live_now_ = queue_.top().time;
    process_instant(live_now_);
  }
  live_now_ = std::max(live_now_, t);
}

void Cluster::submit(Request r) {
  live_ids_.insert(r.id);
  arrive(std::move(r));
}

bool Cluster::abort(std::uint64_t id) {
  if (live_ids_.erase(id) == 0) return false;
  if (const auto freed = drop(id, live_now_)) start_step(*freed, live_now_);  // between instants
  return true;
}

void Cluster::live_token(const Sequence& s, SimTime now) {
  if (!live_ids_.count(s.req.id)) return;  // aborted while its step ran
  live_->push_back({LiveEvent::kToken, s.req.id, now, s.generated, current_replica_});
}

void Cluster::live_finish(const Sequence& s, SimTime now) {
  --in_flight_;
  where_.erase(s.req.id);
  if (live_ids_.erase(s.req.id)) {
    live_->push_back({LiveEvent::kFinished, s.req.id, now, s.generated, current_replica_});
  }
}

namespace {

// A live cluster has no workload of its own: requests come through LiveSimulation::submit.
class NoWorkload : public Workload {
 public:
  void start(ArrivalSink&) override {}
  std::string describe() const override { return "live requests"; }
};

}  // namespace

struct LiveSimulation::Impl {
  explicit Impl(SimulationConfig c) : config(std::move(c)), cluster(config, workload) {
    cluster.go_live(&produced);
  }
  SimulationConfig config;
  NoWorkload workload;
  Cluster cluster;
  std::vector<LiveEvent> produced;  // filled by the cluster during advance_to
  // Client events not yet returned, by (time, production order).
  std::vector<LiveEvent> pending;
};

LiveSimulation::LiveSimulation(SimulationConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
LiveSimulation::~LiveSimulation() = default;

SimTime LiveSimulation::now() const { return impl_->cluster.live_now(); }
std::int64_t LiveSimulation::max_model_len() const { return impl_->cluster.max_model_len(); }
std::int64_t LiveSimulation::in_flight() const { return impl_->cluster.in_flight(); }

void LiveSimulation::submit(Request r) {
  if (r.arrival < now()) throw Error("live simulation: a request submitted in the past");
  impl_->cluster.submit(std::move(r));
}

bool LiveSimulation::abort(std::uint64_t id) {
  if (!impl_->cluster.abort(id)) return false;
  std::vector<LiveEvent>& p = impl_->pending;
  p.erase(std::remove_if(p.begin(), p.end(), [id](const LiveEvent& e) { return e.id == id; }), p.end());
  return true;
}

std::vector<LiveEvent> LiveSimulation::advance_to(SimTime t) {
  if (t < now()) throw Error("live simulation: time cannot go backwards");
  Impl& m = *impl_;
  m.cluster.advance_to(t);
  // Every event produced now has a time >= the instant that produced it, and those instants are
  // later than anything returned before, so merging by a stable sort keeps the order contract.
  m.pending.insert(m.pending.end(), m.produced.begin(), m.produced.end());
  m.produced.clear();
  std::stable_sort(m.pending.begin(), m.pending.end(),
                   [](const LiveEvent& a, const LiveEvent& b) { return a.time < b.time; });
  const auto split = std::find_if(m.pending.begin(), m.pending.end(),
                                  [t](const LiveEvent& e) { return e.time > t; });
  std::vector<LiveEvent> out(m.pending.begin(), split);
  m.pending.erase(m.pending.begin(), split);
  return out;
}

std::optional<SimTime> LiveSimulation::next_time() const {
  std::optional<SimTime> t = impl_->cluster.next_event_time();
  if (!impl_->pending.empty() && (!t || impl_->pending.front().time < *t)) t = impl_->pending.front().time;
  return t;
}

std::vector<LiveReplicaState> LiveSimulation::replicas() const {
  std::vector<LiveReplicaState> out;
  for (const auto& r : impl_->cluster.replicas()) {
    LiveReplicaState s;
    s.index = r->index();
    s.running = static_cast<std::int64_t>(r->running_count());
    s.waiting = static_cast<std::int64_t>(r->outstanding() - r->running_count());
    s.kv_used_blocks = r->kv().used_blocks();
    s.kv_blocks = r->kv().num_blocks();
    const ReplicaStats& st = r->stats();
    s.preemptions = st.preemptions;
    s.prompt_tokens_computed = st.prompt_tokens_computed;
    s.prefix_hit_tokens = st.prefix_hit_tokens;
    s.prefix_lookup_tokens = st.prefix_lookup_tokens;
    s.steps = st.steps;
    out.push_back(s);
  }
  return out;
}

}  // namespace capsim
