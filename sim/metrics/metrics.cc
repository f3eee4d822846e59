#include "sim/metrics/metrics.h"

namespace capsim {

namespace {

// Both sample kinds offer mean, stddev (population) and numpy-linear percentiles.
template <typename SampleSet>
Percentiles summarize_any(const SampleSet& s) {
  Percentiles p;
  p.count = static_cast<std::size_t>(s.size());
  if (s.empty()) return p;
  p.mean = s.mean();
  p.median = s.percentile(50);
  p.std = s.stddev();
  p.p90 = s.percentile(90);
  p.p95 = s.percentile(95);
  p.p99 = s.percentile(99);
  p.min = s.min();
  p.max = s.max();
  return p;
}

}  // namespace

Percentiles summarize(const Samples& s) { return summarize_any(s); }
Percentiles summarize(const WeightedSamples& s) { return summarize_any(s); }

void MetricsCollector::on_token(const Sequence& s, SimTime now) {
  if (s.generated > 1 && counted(s.req)) itl_.add(to_seconds(now - s.last_token));
}

void MetricsCollector::on_finish(const Sequence& s, SimTime now, std::uint32_t replica) {
  if (!counted(s.req)) return;
  RequestRecord r;
  r.id = s.req.id;
  r.arrival_s = to_seconds(s.req.arrival);
  r.frontend_s = to_seconds(s.engine_arrival - s.req.arrival);
  r.queue_s = to_seconds(s.first_scheduled - s.engine_arrival);
  r.prefill_s = to_seconds(s.first_token_engine - s.first_scheduled);
  r.return_s = to_seconds(s.first_token - s.first_token_engine);
  r.ttft_s = to_seconds(s.first_token - s.req.arrival);
  r.e2el_s = to_seconds(now - s.req.arrival);
  r.tpot_s = s.generated > 1 ? (r.e2el_s - r.ttft_s) / static_cast<double>(s.generated - 1) : 0.0;
  r.prompt_tokens = s.req.prompt_tokens;
  r.output_tokens = s.generated;
  r.prefix_hit_tokens = s.prefix_hit_tokens;
  r.preemptions = s.preemptions;
  r.replica = replica;
  records_.push_back(r);
  if (first_arrival_ < 0 || s.req.arrival < first_arrival_) first_arrival_ = s.req.arrival;
  if (now > last_finish_) last_finish_ = now;
}

}  // namespace capsim
