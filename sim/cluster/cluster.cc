#include "sim/cluster/cluster.h"

#include <chrono>
#include <cstdio>
#include <limits>

#include "sim/cluster/disaggregation.h"
#include "sim/core/error.h"
#include "sim/core/progress.h"
#include "sim/core/run_limits.h"
#include "sim/cost/expert_parallel.h"
#include "sim/cost/serving_cost.h"

namespace capsim {

Cluster::Cluster(const SimulationConfig& cfg, Workload& w) : cfg_(cfg), workload_(w), metrics_(cfg.warmup) {
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

void Cluster::build_pool(int p, const std::vector<ReplicaGroup>& groups) {
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
    // DP attention (DP ranks of an MoE model with expert parallelism): each engine's ranks step
    // together. A dense model's DP ranks (and those of an MoE model without expert parallelism,
    // refused in Deployment::validate) share no layer: they step apart, like replicas.
    const bool lockstep = d.dp > 1 && d.expert_parallel && d.model.is_moe();
    const double dummy_s = lockstep ? cost->totals(dummy_batch()).seconds : 0;
    for (int i = 0; i < g.replicas * d.dp; ++i) {
      const auto index = static_cast<std::uint32_t>(replicas_.size());
      if (lockstep && i % d.dp == 0) lockstep_.push_back({index, static_cast<std::uint32_t>(d.dp), dummy_s});
      lockstep_of_.push_back(lockstep ? static_cast<std::int32_t>(lockstep_.size() - 1) : -1);
      pools_[p].push_back(std::make_unique<Replica>(index, d, cost, plan.kv_blocks,
                                                    make_policy(cfg_.policy), plan.layout, cpu));
      replicas_.push_back(pools_[p].back().get());
      if (cfg_.bounded_memory) replicas_.back()->bound_step_samples();
      max_len_.push_back(max_len);
      plans_.push_back(plan);
    }
  }
}

void Cluster::on_finish(const Sequence& s, SimTime now) {
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

SimulationResult Cluster::run() {
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

std::uint64_t Cluster::process_instant(SimTime now) {
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
    if (lockstep_of_[i] >= 0) {
      // One try per engine and instant: its other ranks' kicks are taken with this one.
      const LockstepEngine& e = lockstep_[static_cast<std::size_t>(lockstep_of_[i])];
      for (std::uint32_t j = e.first; j < e.first + e.ranks; ++j) kick_[j] = 0;
      start_lockstep(static_cast<std::uint32_t>(lockstep_of_[i]), now);
      continue;
    }
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
  // have run (or recorded) the steps after it. Nor for the ranks of a DP-attention engine,
  // whose steps take every rank's batch.
  for (std::size_t k = 0; k < started_.size(); ++k) {
    SimTime end = started_[k].second;
    if (cfg_.skip_ahead && !live_ && stopped_.empty() && lockstep_of_[started_[k].first] < 0) {
      SimTime horizon = queue_.empty() ? std::numeric_limits<SimTime>::max() : queue_.top().time;
      for (std::size_t l = k + 1; l < started_.size(); ++l) horizon = std::min(horizon, started_[l].second);
      end = replicas_[started_[k].first]->fast_forward(end, horizon, *this);
    }
    if (end >= 0) queue_.push_few(end, kStepDone, started_[k].first, 0);
  }
  return events;
}

void Cluster::start_step(std::uint32_t i, SimTime now) {
  if (lockstep_of_[i] >= 0) {
    started_.clear();
    start_lockstep(static_cast<std::uint32_t>(lockstep_of_[i]), now);
    for (const auto& [rank, end] : started_) queue_.push_few(end, kStepDone, rank, 0);
    return;
  }
  Replica& r = *replicas_[i];
  if (r.stepping() || !r.has_work()) return;
  const SimTime dur = r.begin_step(now);
  if (dur > 0) queue_.push_few(now + dur, kStepDone, i, 0);
}

void Cluster::start_lockstep(std::uint32_t e, SimTime now) {
  const LockstepEngine& engine = lockstep_[e];
  bool work = false;
  for (std::uint32_t i = engine.first; i < engine.first + engine.ranks; ++i) {
    if (replicas_[i]->stepping()) return;  // the engine's step in flight; all its ranks end together
    work = work || replicas_[i]->has_work();
  }
  if (!work) return;  // every rank idle: the engine pauses (vLLM ends its DP wave)
  struct Planned {
    std::uint32_t replica;
    Replica::PlannedStep kind;
    StepBreakdown own;
  };
  std::vector<Planned> planned;
  std::vector<RankStep> ranks;
  ranks.reserve(engine.ranks);
  SimTime poll = std::numeric_limits<SimTime>::max();
  bool forward = false;
  for (std::uint32_t i = engine.first; i < engine.first + engine.ranks; ++i) {
    Replica& r = *replicas_[i];
    const Replica::PlannedStep kind = r.has_work() ? r.plan_step(now) : Replica::PlannedStep::kNothing;
    if (kind == Replica::PlannedStep::kForward) {
      forward = true;
      planned.push_back({i, kind, r.step_cost().totals(r.planned_shape())});
      ranks.push_back({planned.back().own.seconds, static_cast<double>(r.planned_shape().tokens())});
      continue;
    }
    if (kind == Replica::PlannedStep::kLoadsOnly) {
      planned.push_back({i, kind, {}});
      poll = std::min(poll, r.polling_step());
    }
    ranks.push_back({engine.dummy_s, 1.0});  // vLLM's execute_dummy_batch
  }
  if (planned.empty()) return;
  SimTime dur = poll;  // only CPU-tier loads under way: dummy batches until the first one finishes
  if (forward) {
    const double seconds = lockstep_step_seconds(replicas_[engine.first]->step_cost(), ranks);
    for (const Planned& p : planned) {
      if (p.kind == Replica::PlannedStep::kForward) dur = replicas_[p.replica]->time_step(p.own, seconds);
    }
  }
  for (const Planned& p : planned) started_.push_back({p.replica, now + dur});
}

void Cluster::handle_arrival(std::uint64_t slot, SimTime now) {
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

void Cluster::hand_off(const Sequence& s, SimTime now) {
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

void Cluster::handle_engine_arrival(std::uint32_t target, std::uint64_t slot, SimTime now) {
  Request r = take(slot);
  replicas_[target]->note_delivered();
  if (undelivered_aborts_.erase(r.id)) {  // the client left during the front end
    --in_flight_;
    return;
  }
  deliver(target, std::move(r), now);
}

void Cluster::handle_step_done(std::uint32_t i, SimTime now) {
  current_replica_ = i;
  replicas_[i]->end_step(now, *this);
  kick_[i] = 1;
  if (!step_aborts_.empty()) apply_step_aborts(i, now);
}

void Cluster::apply_step_aborts(std::uint32_t i, SimTime now) {
  const auto it = step_aborts_.find(i);
  if (it == step_aborts_.end()) return;
  for (const std::uint64_t id : it->second) {
    if (replicas_[i]->abort(id, now) == Replica::AbortResult::kAborted) --in_flight_;
  }
  step_aborts_.erase(it);
}

std::optional<std::uint32_t> Cluster::drop(std::uint64_t id, SimTime now) {
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

void Cluster::handle_timeout(std::uint64_t id, SimTime now) {
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

void Cluster::check_early_stop(SimTime now) {
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

}  // namespace capsim
