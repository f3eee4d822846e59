#include "sim/cluster/simulation.h"

#include <optional>

#include "sim/core/progress.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <iostream>
#include <limits>
#include <unordered_map>
#include <utility>
#include <unordered_set>

#include "sim/cluster/disaggregation.h"
#include "sim/cluster/live_simulation.h"
#include "sim/cluster/router.h"
#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/event_queue.h"
#include "sim/core/invariant.h"
#include "sim/core/threads.h"
#include "sim/core/run_limits.h"
#include "sim/cost/serving_cost.h"
#include "sim/engine/block_hash.h"

namespace capsim {
namespace {

// kArrival: the client sends a request; kEngineArrival: it reaches its replica's engine core
// after the front end (docs/cost-model.md#request-path); kStepDone: a replica's step ends;
// kTimeout: the client gives up on a request (SimulationConfig::request_timeout; payload: its id).
enum EventKind : std::uint32_t { kArrival = 0, kStepDone = 1, kEngineArrival = 2, kTimeout = 3 };
// Step ends (one per replica at most) and engine arrivals (requests in the front end) are few at
// once: they go through EventQueue::push_few, apart from the arrivals a closed loop's thinking
// users hold (hundreds), and come out in the same order.

// A run's end-of-run ITL summary uses a second thread from this many completed requests on:
// a new thread costs more than the overlap saves on short runs (measured, issue #12 workload:
// 10k +1.6 ms when the sort allocated in the thread, +0.6-0.8 ms without; 20k and 40k within
// noise, 100k -10 ms); never when default_threads() is 1 (CAPSIM_THREADS=1, or one core). At
// 10k the summary takes ~0.9 ms, and on the project's 2-vCPU machine the new thread starts
// 0.4-0.9 ms after it is created (measured 2026-12-03: the scheduler queues it behind the
// creating thread, or, pinned to the other CPU, waits for that idle vCPU to wake), while the
// main thread's own summaries slow down beside it.
constexpr std::size_t kSideThreadRecords = 50000;

// The replicas' sampled timelines on one grid: the coarsest replica interval (>= 1 s), widened
// so the grid has at most ~4096 points; point k stands for [k step, (k+1) step) and takes each
// replica's latest sample before its end (none yet: idle, empty).
std::vector<ClusterSample> cluster_timeline(const std::vector<ReplicaSummary>& replicas, double end_s) {
  std::vector<ClusterSample> out;
  if (replicas.empty() || end_s <= 0) return out;
  double step = 1.0;
  for (const ReplicaSummary& r : replicas) step = std::max(step, to_seconds(r.stats.timeline_interval));
  while (end_s / step > static_cast<double>(ReplicaStats::kMaxTimelineSamples)) step *= 2;
  const std::size_t points = static_cast<std::size_t>(end_s / step) + 1;
  out.resize(points);
  for (std::size_t k = 0; k < points; ++k) out[k].time_s = static_cast<double>(k) * step;
  for (const ReplicaSummary& r : replicas) {
    const std::vector<TimelineSample>& t = r.stats.timeline;
    std::size_t j = 0;
    const TimelineSample* last = nullptr;
    for (std::size_t k = 0; k < points; ++k) {
      while (j < t.size() && t[j].time_s < out[k].time_s + step) last = &t[j++];
      if (!last) continue;
      out[k].kv_used_fraction += last->kv_used_fraction / static_cast<double>(replicas.size());
      out[k].running += last->running;
      out[k].waiting += last->waiting;
    }
  }
  return out;
}

// The records sorted by request id (ids are unique; the order std::sort by id gives). They come
// in finish order, often already in id order (an open loop's requests of equal length finish in
// arrival order): then they are kept as they are. Otherwise, when the n ids are exactly
// min..min+n-1 (a workload numbers its requests 0, 1, 2, ...), each record goes to its place in
// one pass; anything else is sorted.
std::vector<RequestRecord> records_by_id(std::vector<RequestRecord> records) {
  const auto by_id = [](const RequestRecord& a, const RequestRecord& b) { return a.id < b.id; };
  if (records.empty() || std::is_sorted(records.begin(), records.end(), by_id)) return records;
  std::uint64_t lo = records.front().id, hi = lo;
  for (const RequestRecord& r : records) {
    lo = std::min(lo, r.id);
    hi = std::max(hi, r.id);
  }
  if (hi - lo == records.size() - 1) {
    std::vector<RequestRecord> out(records.size());
    std::vector<char> placed(records.size(), 0);
    bool dense = true;
    for (const RequestRecord& r : records) {
      const std::size_t i = static_cast<std::size_t>(r.id - lo);
      dense = dense && !placed[i];
      placed[i] = 1;
      out[i] = r;
    }
    if (dense) return out;
  }
  std::sort(records.begin(), records.end(), by_id);
  return records;
}

class Cluster : public ArrivalSink, public ReplicaObserver {
 public:
  Cluster(const SimulationConfig& cfg, Workload& w) : cfg_(cfg), workload_(w), metrics_(cfg.warmup) {
    if (cfg.bounded_memory) metrics_.bound_itl_samples();
    router_ = make_router(cfg.router);
    double replicas = 0, cards = 0;
    std::vector<const ReplicaGroup*> all_groups;
    for (const ReplicaGroup& g : cfg.groups) all_groups.push_back(&g);
    if (cfg.decode_pool) {
      for (const ReplicaGroup& g : cfg.decode_pool->groups) all_groups.push_back(&g);
    }
    for (const ReplicaGroup* g : all_groups) {
      // Each data-parallel rank of an engine is one replica here (its own scheduler and KV cache).
      replicas += static_cast<double>(g->replicas) * g->deployment.dp;
      cards += static_cast<double>(g->replicas) * g->deployment.gpus();
    }
    check_run_limit(RunLimit::kReplicas, replicas, "the cluster");
    check_run_limit(RunLimit::kCards, cards, "the cluster");
    check_kv_bookkeeping(cfg);
    build_pool(0, cfg.groups);
    if (cfg.decode_pool) {
      if (cfg.groups.empty() || cfg.decode_pool->groups.empty()) {
        throw Error("disaggregation: the prefill and the decode pool need at least one replica each");
      }
      decode_router_ = make_router(cfg.router);
      offset_[1] = static_cast<std::uint32_t>(replicas_.size());
      build_pool(1, cfg.decode_pool->groups);
      decode_max_len_ = *std::min_element(max_len_.begin() + offset_[1], max_len_.end());
    }
    if (replicas_.empty()) throw Error("--replicas: the cluster has no replicas");
    if (cfg.request_timeout && cfg.decode_pool) {
      throw Error("--request-timeout: not modelled with serving pd-disaggregated (aggregated serving only)");
    }
    if (cfg.request_timeout && *cfg.request_timeout <= 0) throw Error("--request-timeout: must be > 0");
    kick_.assign(replicas_.size(), 0);
    for (const Replica* r : replicas_) hash_sessions_ = hash_sessions_ || r->kv().prefix_caching();
    // Implicit decode goes with skip-ahead (both off in live mode: go_live).
    for (Replica* r : replicas_) r->set_implicit_decode(cfg.skip_ahead);
  }

  // Builds pool `p`'s replicas (0: the only pool, or the prefill pool; 1: the decode pool).
  void build_pool(int p, const std::vector<ReplicaGroup>& groups) {
    for (const ReplicaGroup& g : groups) {
      if (g.replicas < 1) throw Error("--replicas: must be >= 1");
      deployments_.push_back(std::make_unique<Deployment>(g.deployment));
      const Deployment& d = *deployments_.back();
      // The longest sequence a replica serves: --max-model-len when set (the plan refuses one
      // the KV cache cannot hold, as vLLM does), otherwise the model's context capped by the
      // KV cache (vLLM refuses to start otherwise, so users set --max-model-len this low).
      // The hybrid (sliding-window) layout is vLLM V1's; the other schedulers admit whole
      // prompts, beyond the prefill-chunk bound the layout's capacity assumes, so they count
      // sliding-window layers as full attention.
      MemoryPlan plan = plan_memory(d, 1, cfg_.policy == "vllm-v1");
      if (!plan.fits) {
        throw Error(does_not_fit_message(d, plan));
      }
      if ((d.speculative || d.lora) && cfg_.policy != "vllm-v1") {
        throw Error(std::string(d.speculative ? "--speculative-config" : "--enable-lora") +
                    ": modelled with the vllm-v1 scheduler only (got --scheduler " + cfg_.policy + ")");
      }
      CpuTierConfig cpu;
      if (d.limits.kv_offloading_size > 0) {
        if (cfg_.policy != "vllm-v1" || d.speculative || d.lora || cfg_.decode_pool) {
          throw Error(std::string("--kv-offloading-size: the CPU tier is modelled with the vllm-v1 scheduler, "
                                  "aggregated serving, without speculative decoding or LoRA (got ") +
                      (cfg_.policy != "vllm-v1" ? "--scheduler " + cfg_.policy
                       : d.speculative          ? std::string("--speculative-config")
                       : d.lora                 ? std::string("--enable-lora")
                                                : std::string("serving pd-disaggregated")) + ")");
        }
        // Each GPU loads its share of a block over its own host link: the card's PCIe x16 rate
        // per direction (Card::pcie_bandwidth, from the card file's pcie_generation).
        cpu.blocks = plan.cpu_kv_blocks;
        cpu.load_seconds_per_block = plan.kv_block_bytes / d.card.pcie_bandwidth();
      }
      auto cost = make_serving_cost(d);
      const std::int64_t max_len = plan.max_model_len;
      for (int i = 0; i < g.replicas * d.dp; ++i) {
        const auto index = static_cast<std::uint32_t>(replicas_.size());
        pools_[p].push_back(std::make_unique<Replica>(index, d, cost, plan.kv_blocks,
                                                      make_policy(cfg_.policy), plan.layout, cpu));
        replicas_.push_back(pools_[p].back().get());
        if (cfg_.bounded_memory) replicas_.back()->bound_step_samples();
        max_len_.push_back(max_len);
        plans_.push_back(plan);
      }
    }
  }

  void arrive(Request r) override {
    if (cfg_.adapters.count > 0 && r.adapter < 0) r.adapter = cfg_.adapters.adapter_of(r.id);
    const SimTime at = r.arrival;
    queue_.push(at, kArrival, 0, hold(std::move(r)));
  }

  void on_token(const Sequence& s, SimTime now) override {
    if (live_) {
      live_token(s, now);
      return;
    }
    metrics_.on_token(s, now);
  }

  void on_decode_step(std::int64_t counted, SimTime previous, SimTime delivered) override {
    metrics_.on_decode_step(counted, previous, delivered);
  }
  bool counts(const Sequence& s) const override { return metrics_.counted(s.req); }

  void on_finish(const Sequence& s, SimTime now) override {
    if (cfg_.decode_pool && current_replica_ < offset_[1]) {
      hand_off(s, now);
      return;
    }
    if (hash_sessions_) {
      session_hashes_.remember(s.req, replicas_[current_replica_]->limits().block_size, s.hashes);
    }
    if (live_) {
      live_finish(s, now);
      return;
    }
    if (timeouts_on()) {
      where_.erase(s.req.id);
      if (waiting_clients_.erase(s.req.id) == 0) {
        // Its last step was in flight when the client gave up (handle_timeout): already ended.
        --in_flight_;
        return;
      }
    }
    CAPSIM_INVARIANT(s.generated == s.req.output_tokens && s.computed <= s.tokens(),
                     "a request finished without exactly its output tokens");
#if CAPSIM_INVARIANTS_ON
    CAPSIM_INVARIANT(ended_.insert(s.req.id).second, "a request ended twice");
    ++finished_all_;
#endif
    metrics_.on_finish(s, now, current_replica_);
    if (!cfg_.early_stop.empty() && !live_ && metrics_.counted(s.req)) check_early_stop(now);
    --in_flight_;
    workload_.on_finish(s.req, now, *this);
  }

  SimulationResult run() {
    workload_.start(*this);
    const auto wall_start = std::chrono::steady_clock::now();
    std::uint64_t events = 0, loops = 0;
    SimTime now = 0;
    bool printed = false;
    std::optional<ProgressLine> progress;  // stderr: in place on a terminal, a line per 5 s in logs
    const auto progress_text = [&](SimTime t) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "capsim: simulated %.0f s, %zu requests done, %lld in flight",
                    to_seconds(t), metrics_.records().size(), static_cast<long long>(in_flight_));
      return std::string(buf);
    };
    // Timeouts of requests answered in time are left in the queue; once only those remain
    // (and no client waits), the run is over.
    while ((queue_.size() > timeouts_queued_ || !waiting_clients_.empty()) && stopped_.empty()) {
      CAPSIM_INVARIANT(queue_.top().time >= now, "simulated time went backwards");
      now = queue_.top().time;
      events += process_instant(now);
      if ((++loops & 0x3FF) == 0) throw_if_cancelled(cfg_.cancel);  // every 1024 time points
      if (cfg_.progress && (events & 0xFFF) == 0) {
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
        if (wall > 1.0) {
          if (!progress) progress.emplace();
          progress->update(progress_text(now));
          printed = true;
        }
      }
    }
    if (printed) progress->finish(progress_text(now) + ", done");
    return finish(now);
  }

  // ---- Live mode (LiveSimulation, live_simulation.h): the cluster driven step by step ----

  // From now on tokens, completions and rejections go to `out` (as client events) instead of
  // the batch metrics, and the request-count backstop no longer applies (a live run is open-ended).
  void go_live(std::vector<LiveEvent>* out) {
    if (cfg_.decode_pool) throw Error("serving pd-disaggregated: not available in live mode (capsim emulate)");
    live_ = out;
    // Live clients get one event per token, and abort/replicas() read sequences' state.
    for (Replica* r : replicas_) r->set_implicit_decode(false);
  }
  SimTime live_now() const { return live_now_; }
  std::optional<SimTime> next_event_time() const {
    if (queue_.empty()) return std::nullopt;
    return queue_.top().time;
  }
  // Processes every event at or before `t` (>= live_now()), instant by instant.
  void advance_to(SimTime t) {
    while (!queue_.empty() && queue_.top().time <= t) {
      live_now_ = queue_.top().time;
      process_instant(live_now_);
    }
    live_now_ = std::max(live_now_, t);
  }
  void submit(Request r) {
    live_ids_.insert(r.id);
    arrive(std::move(r));
  }
  // See LiveSimulation::abort. Returns whether `id` was live.
  bool abort(std::uint64_t id) {
    if (live_ids_.erase(id) == 0) return false;
    if (const auto freed = drop(id, live_now_)) start_step(*freed, live_now_);  // between instants
    return true;
  }
  const std::vector<std::unique_ptr<Replica>>& replicas() const { return pools_[0]; }
  std::int64_t max_model_len() const { return *std::min_element(max_len_.begin(), max_len_.end()); }
  std::int64_t in_flight() const { return in_flight_; }

 private:
  // Processes every event at `now` (the earliest pending time), then starts a step on each idle
  // replica that an event touched. Returns the number of events processed.
  std::uint64_t process_instant(SimTime now) {
    std::uint64_t events = 0;
    while (!queue_.empty() && queue_.top().time == now) {
      const Event e = queue_.pop();
      switch (e.kind) {
        case kArrival: handle_arrival(e.payload, now); break;
        case kEngineArrival: handle_engine_arrival(e.target, e.payload, now); break;
        case kTimeout:
          --timeouts_queued_;
          handle_timeout(e.payload, now);
          break;
        default: handle_step_done(e.target, now); break;
      }
      ++events;
    }
    started_.clear();
    for (std::uint32_t i = 0; i < replicas_.size(); ++i) {
      if (!kick_[i]) continue;
      kick_[i] = 0;
      Replica& r = *replicas_[i];
      if (r.stepping() || !r.has_work()) continue;
      const SimTime dur = r.begin_step(now);
      if (dur > 0) started_.push_back({i, now + dur});
    }
    // Skip-ahead (Replica::fast_forward) up to the next event anything could see: the queue's
    // next event and the other steps begun now. Steps are pushed in replica order, as stepping
    // one by one pushes them, so events at equal times keep their order. Off in live mode:
    // requests arrive from outside (the queue's next event is no safe stopping point) and
    // live clients need one event per token (implicit decode is off there as well). Not after
    // an early stop either: the run ends at this instant, and stepping one by one would not
    // have run (or recorded) the steps after it.
    for (std::size_t k = 0; k < started_.size(); ++k) {
      SimTime end = started_[k].second;
      if (cfg_.skip_ahead && !live_ && stopped_.empty()) {
        SimTime horizon = queue_.empty() ? std::numeric_limits<SimTime>::max() : queue_.top().time;
        for (std::size_t l = k + 1; l < started_.size(); ++l) horizon = std::min(horizon, started_[l].second);
        end = replicas_[started_[k].first]->fast_forward(end, horizon, *this);
      }
      if (end >= 0) queue_.push_few(end, kStepDone, started_[k].first, 0);
    }
    return events;
  }

  // Replica `i` begins its next step at `now` if it is idle and has work.
  void start_step(std::uint32_t i, SimTime now) {
    Replica& r = *replicas_[i];
    if (r.stepping() || !r.has_work()) return;
    const SimTime dur = r.begin_step(now);
    if (dur > 0) queue_.push_few(now + dur, kStepDone, i, 0);
  }

  void live_token(const Sequence& s, SimTime now) {
    if (!live_ids_.count(s.req.id)) return;  // aborted while its step ran
    live_->push_back({LiveEvent::kToken, s.req.id, now, s.generated, current_replica_});
  }
  void live_finish(const Sequence& s, SimTime now) {
    --in_flight_;
    where_.erase(s.req.id);
    if (live_ids_.erase(s.req.id)) {
      live_->push_back({LiveEvent::kFinished, s.req.id, now, s.generated, current_replica_});
    }
  }

  void handle_arrival(std::uint64_t slot, SimTime now) {
    Request r = take(slot);
    if (live_ && undelivered_aborts_.erase(r.id)) return;  // the client left before it was sent
    if (cfg_.stop_arrivals && r.arrival > *cfg_.stop_arrivals) return;  // the run is over
    ++arrived_;
    // A backstop for workloads whose size is not known up front (closed loops, traces).
    if (!live_ && arrived_ > run_limit(RunLimit::kRequests)) {
      check_run_limit(RunLimit::kRequests, static_cast<double>(arrived_), "the workload");
    }
    workload_.on_arrival(r, *this);
    // A client that gives up (a timeout, a live client's abort) ends its request for the
    // workload while a step may still hold it, so the stream's next request could be sent
    // before this one's blocks are published (Request::stream): its blocks are hashed instead.
    if (live_ || cfg_.request_timeout) r.stream = 0;
    if (hash_sessions_) (void)session_hashes_.seed(r);
    const std::uint32_t target = router_->route(r, pools_[0]);
    // Disaggregated: the prefill computes the prompt and one token; the decode pool must hold
    // the whole sequence (a proxy finds out when the decode instance refuses it).
    const bool too_long = cfg_.decode_pool
                              ? r.prompt_tokens + 1 > max_len_[target] || r.prompt_tokens + r.output_tokens > decode_max_len_
                              : r.prompt_tokens + r.output_tokens > max_len_[target];
    if (too_long) {
      // vLLM rejects a request longer than max_model_len before it is queued.
      if (live_ && live_ids_.erase(r.id)) {
        live_->push_back({LiveEvent::kRejected, r.id, now, 0, target});
        return;
      }
      metrics_.on_reject(r);
#if CAPSIM_INVARIANTS_ON
      ++rejected_all_;
      CAPSIM_INVARIANT(ended_.insert(r.id).second, "a request ended twice");
#endif
      workload_.on_finish(r, now, *this);
      return;
    }
    ++in_flight_;
    max_in_flight_ = std::max(max_in_flight_, in_flight_);
    if (cfg_.decode_pool) {
      // The proxy asks the prefill pool for one token (max_tokens 1); the rest is the decode's.
      decode_output_[r.id] = r.output_tokens;
      r.output_tokens = 1;
    }
    if (timeouts_on()) {
      queue_.push(r.arrival + *cfg_.request_timeout, kTimeout, 0, r.id);
      ++timeouts_queued_;
      waiting_clients_.emplace(r.id, r);
    }
    const EngineProfile& e = replicas_[target]->deployment().engine;
    const SimTime frontend = from_seconds(e.frontend_s + e.frontend_per_prompt_token_s *
                                                             static_cast<double>(r.prompt_tokens));
    if (frontend > 0) {
      const std::uint64_t held = hold(std::move(r));
      replicas_[target]->note_routed();
      queue_.push_few(now + frontend, kEngineArrival, target, held);
      return;
    }
    deliver(target, std::move(r), now);
  }

  // A prefill replica finished request `s` (its one token reached the proxy at `now`): the proxy
  // sends the original request to a decode replica, which pulls the prompt's KV over the link
  // and recomputes the last prompt token to sample the first output token (disaggregation.h).
  // The request reaches the decode engine after its front end and the transfer.
  void hand_off(const Sequence& s, SimTime now) {
    Request d = s.req;
    const auto out = decode_output_.find(d.id);
    CAPSIM_INVARIANT(out != decode_output_.end(), "a prefilled request has no decode half");
    d.output_tokens = out->second;
    decode_output_.erase(out);
    d.external_computed = std::max<std::int64_t>(0, d.prompt_tokens - 1);
    const std::uint32_t target = offset_[1] + decode_router_->route(d, pools_[1]);
    const Deployment& from = replicas_[current_replica_]->deployment();
    const Deployment& to = replicas_[target]->deployment();
    const double bytes = kv_transfer_bytes(from, d.prompt_tokens);
    const double transfer = kv_transfer_seconds(cfg_.decode_pool->link, bytes, from.tp, to.tp);
    const EngineProfile& e = to.engine;
    const double frontend = e.frontend_s + e.frontend_per_prompt_token_s * static_cast<double>(d.prompt_tokens);
    const SimTime at = now + from_seconds(frontend) + from_seconds(transfer);
    if (metrics_.counted(d)) {
      kv_transfer_.add(transfer);
      kv_bytes_ += bytes;
      handoff_.add(to_seconds(at - d.arrival));
    }
    replicas_[target]->note_routed();
    queue_.push_few(at, kEngineArrival, target, hold(std::move(d)));
  }

  void handle_engine_arrival(std::uint32_t target, std::uint64_t slot, SimTime now) {
    Request r = take(slot);
    replicas_[target]->note_delivered();
    if (undelivered_aborts_.erase(r.id)) {  // the client left during the front end
      --in_flight_;
      return;
    }
    deliver(target, std::move(r), now);
  }

  // The request reaches replica `target`'s engine core at `now`.
  void deliver(std::uint32_t target, Request r, SimTime now) {
    if (live_ || timeouts_on()) where_[r.id] = target;
    replicas_[target]->add_request(std::move(r), now);
    kick_[target] = 1;
  }

  // Takes back the request held in `slot` (see hold()).
  Request take(std::uint64_t slot) {
    Request r = std::move(pending_[slot]);
    free_pending_.push_back(slot);
    return r;
  }

  // Keeps a request in `pending_` until its event fires; returns its slot.
  std::uint64_t hold(Request r) {
    std::uint64_t slot;
    if (!free_pending_.empty()) {
      slot = free_pending_.back();
      free_pending_.pop_back();
      pending_[slot] = std::move(r);
    } else {
      slot = pending_.size();
      pending_.push_back(std::move(r));
    }
    return slot;
  }

  void handle_step_done(std::uint32_t i, SimTime now) {
    current_replica_ = i;
    replicas_[i]->end_step(now, *this);
    kick_[i] = 1;
    if (!step_aborts_.empty()) apply_step_aborts(i, now);
  }

  // Aborts that waited for replica `i`'s step to end (a request that finished in that step is
  // already gone: abort() finds nothing).
  void apply_step_aborts(std::uint32_t i, SimTime now) {
    const auto it = step_aborts_.find(i);
    if (it == step_aborts_.end()) return;
    for (const std::uint64_t id : it->second) {
      if (replicas_[i]->abort(id, now) == Replica::AbortResult::kAborted) --in_flight_;
    }
    step_aborts_.erase(it);
  }

  bool timeouts_on() const { return cfg_.request_timeout.has_value() && !live_; }

  // The engine lets go of request `id` (its client left): in the front end it is dropped when it
  // reaches its replica, queued or running at once (Replica::abort: its KV blocks return), in a
  // step in flight when that step ends (apply_step_aborts; a request that finishes in that step
  // is already gone). Returns the replica it left at once, whose freed KV may let a waiting
  // request in (the caller starts its next step).
  std::optional<std::uint32_t> drop(std::uint64_t id, SimTime now) {
    const auto at = where_.find(id);
    if (at == where_.end()) {
      undelivered_aborts_.insert(id);
      return std::nullopt;
    }
    const std::uint32_t i = at->second;
    where_.erase(at);
    switch (replicas_[i]->abort(id, now)) {
      case Replica::AbortResult::kInStep: step_aborts_[i].push_back(id); break;
      case Replica::AbortResult::kAborted: --in_flight_; return i;
      case Replica::AbortResult::kNotHere: break;
    }
    return std::nullopt;
  }

  // The client of request `id` gives up at `now` (SimulationConfig::request_timeout) unless it
  // already has its answer. The request ends here for the metrics and the workload (a closed-loop
  // user thinks and asks again); the engine drops it where it is: in the front end when it
  // reaches its replica, in the queue or running at once (vLLM's abort: its KV blocks return),
  // and in a step in flight when that step ends (finishing in that step changes nothing: the
  // client has left).
  void handle_timeout(std::uint64_t id, SimTime now) {
    const auto it = waiting_clients_.find(id);
    if (it == waiting_clients_.end()) return;  // answered in time
    const Request r = std::move(it->second);
    waiting_clients_.erase(it);
    metrics_.on_timeout(r);
#if CAPSIM_INVARIANTS_ON
    ++timed_out_all_;
    CAPSIM_INVARIANT(ended_.insert(r.id).second, "a request ended twice");
#endif
    if (const auto freed = drop(id, now)) kick_[*freed] = 1;  // its step starts with this instant's
    workload_.on_finish(r, now, *this);
  }

  // SimulationConfig::early_stop, after each measured completion: counts, per rule, the measured
  // requests over kFactor x the bound; stops the run when they exceed twice the share the
  // quantile allows among at least kMinRequests completions.
  void check_early_stop(SimTime now) {
    const RequestRecord& r = metrics_.records().back();
    if (over_.size() != cfg_.early_stop.size()) over_.assign(cfg_.early_stop.size(), 0);
    const auto n = static_cast<std::int64_t>(metrics_.records().size());
    for (std::size_t k = 0; k < cfg_.early_stop.size(); ++k) {
      const EarlyStop& e = cfg_.early_stop[k];
      const double v = e.metric == EarlyStop::kTtft ? r.ttft_s
                       : e.metric == EarlyStop::kTpot ? (r.output_tokens > 1 ? r.tpot_s : 0.0)
                                                      : r.e2el_s;
      if (v > EarlyStop::kFactor * e.bound_s) ++over_[k];
      if (n < EarlyStop::kMinRequests || !stopped_.empty()) continue;
      const double share = static_cast<double>(over_[k]) / static_cast<double>(n);
      if (share <= 2 * (1 - e.quantile)) continue;
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "%.0f%% of the first %lld measured requests over 3x its bound of %g s "
                    "(stopped early at %.0f simulated s)",
                    100 * share, static_cast<long long>(n), e.bound_s, to_seconds(now));
      stopped_ = e.slo + ": " + buf;
      stopped_slo_ = e.slo;
    }
  }

  // At the end nothing is in flight: every arrived request finished or was rejected once, and
  // every KV block is back in its replica's free queue.
  void check_end_invariants() const {
    if (!stopped_.empty()) return;  // stopped early: requests are still in flight
#if CAPSIM_INVARIANTS_ON
    CAPSIM_INVARIANT(in_flight_ == 0, "requests still in flight when the run ended");
    CAPSIM_INVARIANT(static_cast<std::int64_t>(ended_.size()) == arrived_,
                     "arrived requests != finished + rejected");
    CAPSIM_INVARIANT(finished_all_ + rejected_all_ + timed_out_all_ == arrived_,
                     "a request was lost between arrival and its end");
    for (const auto& r : replicas_) {
      CAPSIM_INVARIANT(r->kv().consistent(), "KV block accounting is inconsistent");
      CAPSIM_INVARIANT(r->kv().used_blocks() == 0, "KV blocks leaked: held after every request ended");
    }
#endif
  }

  SimulationResult finish(SimTime end) {
    check_end_invariants();
    SimulationResult res;
    res.simulated_s = to_seconds(end);
    res.records = records_by_id(metrics_.take_records());
    // The pooled ITL samples (a run per step: the largest sort) do not depend on the per-request
    // summaries below; on a long run they are summarised on a second thread meanwhile, exactly as
    // on one (mean first, then the in-place sort, in the collector's own samples; nothing else is
    // shared). The sort's room is allocated here first, so the summary neither allocates nor
    // frees in the thread: memory it took from a glibc arena of its own would be fresh 4 KiB
    // pages, which cost more than the sort saves. (The arena itself is still set up, with
    // its per-thread cache: std::thread's start routine frees the thread's start state there.)
    const auto summarize_itl = [this] { return summarize(metrics_.itl()); };
    std::future<Percentiles> itl;
    if (res.records.size() >= kSideThreadRecords && default_threads() > 1) {
      metrics_.itl().reserve_sort_room();  // the summary then allocates nothing in the thread
      itl = std::async(std::launch::async, summarize_itl);
    }
    Samples ttft, tpot, e2el, queue, frontend, prefill, ret;
    for (Samples* s : {&ttft, &tpot, &e2el, &queue, &frontend, &prefill, &ret}) s->reserve(res.records.size());
    std::int64_t good = 0;
    for (const RequestRecord& r : res.records) {
      ttft.add(r.ttft_s);
      e2el.add(r.e2el_s);
      queue.add(r.queue_s);
      frontend.add(r.frontend_s);
      prefill.add(r.prefill_s);
      ret.add(r.return_s);
      if (r.output_tokens > 1) tpot.add(r.tpot_s);
      res.total_input_tokens += r.prompt_tokens;
      res.total_output_tokens += r.output_tokens;
      const RequestSlo& slo = cfg_.slo;
      const bool ok = (!slo.ttft_s || r.ttft_s <= *slo.ttft_s) &&
                      (!slo.tpot_s || r.output_tokens <= 1 || r.tpot_s <= *slo.tpot_s) &&
                      (!slo.e2el_s || r.e2el_s <= *slo.e2el_s);
      good += ok;
    }
    res.ttft = summarize(ttft);
    res.tpot = summarize(tpot);
    res.e2el = summarize(e2el);
    res.queue = summarize(queue);
    res.frontend = summarize(frontend);
    res.prefill = summarize(prefill);
    res.first_token_return = summarize(ret);
    res.itl = itl.valid() ? itl.get() : summarize_itl();
    res.completed = static_cast<std::int64_t>(res.records.size());
    res.rejected = metrics_.rejected();
    res.timed_out = metrics_.timed_out();
    res.arrived = arrived_;
    if (res.completed > 0) {
      const SimTime start = std::max(metrics_.warmup_end(), metrics_.first_counted_arrival());
      res.duration_s = to_seconds(metrics_.last_finish() - start);
    }
    if (res.duration_s > 0) {
      res.request_throughput = res.completed / res.duration_s;
      res.output_throughput = res.total_output_tokens / res.duration_s;
      res.total_token_throughput = (res.total_input_tokens + res.total_output_tokens) / res.duration_s;
      res.request_goodput = good / res.duration_s;
    }
    res.goodput_fraction = res.completed ? static_cast<double>(good) / res.completed : 0;
    res.max_concurrent_requests = max_in_flight_;
    std::int64_t hit = 0, looked = 0;
    for (std::uint32_t i = 0; i < replicas_.size(); ++i) {
      Replica& r = *replicas_[i];
      r.close_stats(end);
      const ReplicaStats& st = r.stats();
      res.preemptions += st.preemptions;
      res.steps += st.steps;
      hit += st.prefix_hit_tokens;
      looked += st.prefix_lookup_tokens;
      res.replicas.push_back({i, r.deployment().card.name, r.deployment().tp, r.kv().num_blocks(),
                              plans_[i].kv_tokens, st, plans_[i]});
    }
    res.prefix_hit_rate = looked ? static_cast<double>(hit) / looked : 0;
    double async_busy = 0;
    std::int64_t async_steps = 0;
    for (const auto& r : replicas_) {
      if (!r->deployment().engine.async_scheduling) continue;
      async_busy += r->stats().busy_seconds;
      async_steps += r->stats().steps;
    }
    if (async_steps > 0) res.scheduling_lag_s = async_busy / static_cast<double>(async_steps);
    res.timeline = cluster_timeline(res.replicas, res.simulated_s);
    if (cfg_.decode_pool) {
      PdSummary pd;
      pd.prefill_replicas = offset_[1];
      pd.link = cfg_.decode_pool->link.name;
      pd.mean_kv_bytes = kv_transfer_.size() ? kv_bytes_ / static_cast<double>(kv_transfer_.size()) : 0;
      pd.kv_transfer = summarize(kv_transfer_);
      pd.handoff = summarize(handoff_);
      res.pd = pd;
    }
    res.steady = analyze_steady_state(res.records, kSteadyStateBatches, workload_.bounded_population());
    res.stopped_early = stopped_;
    res.stopped_slo = stopped_slo_;
    return res;
  }

  const SimulationConfig& cfg_;
  Workload& workload_;
  MetricsCollector metrics_;
  std::unique_ptr<Router> router_;
  std::vector<std::unique_ptr<Deployment>> deployments_;
  // Owners of the replicas by pool (1: the decode pool, empty unless disaggregated); replicas_
  // indexes them all, the prefill (or only) pool first.
  std::vector<std::unique_ptr<Replica>> pools_[2];
  std::vector<Replica*> replicas_;
  std::uint32_t offset_[2] = {0, 0};
  std::unique_ptr<Router> decode_router_;
  // Prefix caching on some replica: a user's next turn starts with the block hashes of the
  // previous one (exactly those a replica would compute; only hashing work is saved).
  bool hash_sessions_ = false;
  SessionHashCache session_hashes_;
  std::int64_t decode_max_len_ = 0;
  std::unordered_map<std::uint64_t, std::int64_t> decode_output_;  // id -> output tokens, while prefilling
  Samples kv_transfer_, handoff_;
  double kv_bytes_ = 0;
  std::vector<std::int64_t> max_len_;
  std::vector<MemoryPlan> plans_;
  std::vector<char> kick_;
  std::vector<std::pair<std::uint32_t, SimTime>> started_;  // replicas whose step began now, its end
  EventQueue queue_;
  std::vector<Request> pending_;
  std::vector<std::uint64_t> free_pending_;
  std::uint32_t current_replica_ = 0;
  std::int64_t in_flight_ = 0, max_in_flight_ = 0, arrived_ = 0;
  std::vector<std::int64_t> over_;      // per early-stop rule: measured requests over kFactor x bound
  std::string stopped_, stopped_slo_;  // set when an early-stop rule ended the run
  // Live mode, and where_/undelivered_aborts_/step_aborts_ also with request_timeout (empty otherwise).
  std::vector<LiveEvent>* live_ = nullptr;
  SimTime live_now_ = 0;
  std::unordered_set<std::uint64_t> live_ids_;             // submitted, not yet ended or aborted
  std::unordered_map<std::uint64_t, std::uint32_t> where_;  // delivered id -> replica
  std::unordered_set<std::uint64_t> undelivered_aborts_;   // dropped before reaching a replica
  std::unordered_map<std::uint32_t, std::vector<std::uint64_t>> step_aborts_;  // replica -> ids
  // SimulationConfig::request_timeout only (empty otherwise): requests whose client still waits
  // (with where_ telling their replica once delivered; drop() lets go of the others).
  std::unordered_map<std::uint64_t, Request> waiting_clients_;
  std::size_t timeouts_queued_ = 0;  // kTimeout events in queue_
#if CAPSIM_INVARIANTS_ON
  std::unordered_set<std::uint64_t> ended_;  // ids of requests that finished or were rejected
  std::int64_t finished_all_ = 0, rejected_all_ = 0, timed_out_all_ = 0;  // warm-up ones included
#endif
};

}  // namespace

void check_kv_bookkeeping(const SimulationConfig& cfg, const std::string& offloading_where) {
  constexpr std::int64_t kBlockIds = std::numeric_limits<std::int32_t>::max();
  double gpu_bytes = 0, cpu_bytes = 0, replicas = 0;
  std::int64_t gpu_blocks = 0, cpu_blocks = 0;  // the most per replica, for the message
  double offloading_gib = 0;
  const auto add = [&](const std::vector<ReplicaGroup>& groups) {
    for (const ReplicaGroup& g : groups) {
      const Deployment& d = g.deployment;
      // As Cluster::build_pool plans it; a deployment that does not fit is refused there.
      const MemoryPlan plan = plan_memory(d, 1, cfg.policy == "vllm-v1");
      if (!plan.fits) continue;
      const bool tier = d.limits.kv_offloading_size > 0;
      if (plan.kv_blocks > kBlockIds) {
        throw Error("the KV cache of " + d.model.name + " on " + d.card.name + ": " + std::to_string(plan.kv_blocks) +
                    " blocks per replica; a replica's block ids hold at most " + std::to_string(kBlockIds) +
                    " (a larger --block-size)");
      }
      if (tier && plan.cpu_kv_blocks > kBlockIds) {
        throw Error(offloading_where + ": " + checked::show(d.limits.kv_offloading_size) + " GiB is " +
                    std::to_string(plan.cpu_kv_blocks) + " CPU KV blocks per replica; a replica's block ids hold at most " +
                    std::to_string(kBlockIds) + " (give a smaller size)");
      }
      const double n = static_cast<double>(g.replicas) * d.dp;
      replicas += n;
      gpu_bytes += n * KvBlockManager::bookkeeping_bytes(plan.kv_blocks, d.limits.enable_prefix_caching);
      gpu_blocks = std::max<std::int64_t>(gpu_blocks, plan.kv_blocks);
      if (tier) {
        cpu_bytes += n * CpuKvTier::bookkeeping_bytes(plan.cpu_kv_blocks);
        cpu_blocks = std::max<std::int64_t>(cpu_blocks, plan.cpu_kv_blocks);
        offloading_gib = d.limits.kv_offloading_size;
      }
    }
  };
  add(cfg.groups);
  if (cfg.decode_pool) add(cfg.decode_pool->groups);
  const std::string count = checked::show(replicas) + (replicas == 1 ? " replica" : " replicas");
  const std::string where =
      cpu_bytes >= gpu_bytes
          ? offloading_where + ": " + checked::show(offloading_gib) + " GiB is " + std::to_string(cpu_blocks) +
                " CPU KV blocks per replica, x " + count
          : "the cluster: " + count + " x " + std::to_string(gpu_blocks) + " GPU KV blocks per replica";
  check_run_limit(RunLimit::kKvBookkeepingBytes, gpu_bytes + cpu_bytes, where);
}

SimulationResult simulate(const SimulationConfig& config, Workload& workload) {
  Cluster c(config, workload);
  return c.run();
}

}  // namespace capsim

namespace capsim {
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
