// The end of a run: the invariants that must hold when nothing is in flight, and the
// SimulationResult summarized from the metrics and the replicas' statistics.
#include "sim/cluster/cluster.h"

#include <future>

#include "sim/core/threads.h"

namespace capsim {
namespace {

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
}  // namespace

void Cluster::check_end_invariants() const {
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

SimulationResult Cluster::finish(SimTime end) {
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

}  // namespace capsim
