// Every number simulate() returns, as one string (doubles as hexadecimal floats), so that two
// runs that must agree bit for bit can be compared in one CHECK: per-request records,
// percentiles, throughputs, each replica's statistics and timeline, the cluster timeline and the
// steady-state analysis (not ReplicaStats::skipped_steps: how a run was computed).
#pragma once

#include <cstdio>
#include <string>

#include "sim/cluster/simulation.h"

namespace capsim::test {

struct Fingerprint {
  std::string text;
  void add(const char* name, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %s=%a", name, v);
    text += buf;
  }
  void add(const char* name, std::int64_t v) {
    // Appended piece by piece: " " + std::string(name) trips GCC 12's -Wrestrict false positive.
    text += ' ';
    text += name;
    text += '=';
    text += std::to_string(v);
  }
  void add(const char* name, const Percentiles& p) {
    text += std::string("\n") + name + ":";
    add("mean", p.mean); add("median", p.median); add("std", p.std); add("p90", p.p90);
    add("p95", p.p95); add("p99", p.p99); add("min", p.min); add("max", p.max);
    add("count", static_cast<std::int64_t>(p.count));
  }
  void add(const char* name, const StreamingStats& s) {
    text += std::string("\n") + name + ":";
    add("n", static_cast<std::int64_t>(s.count()));
    if (s.count() == 0) return;
    add("mean", s.mean()); add("var", s.variance()); add("min", s.min()); add("max", s.max());
  }
  void add(const char* name, const WeightedSamples& s) {
    text += std::string("\n") + name + ":";
    add("n", s.size());
    if (s.empty()) return;
    add("mean", s.mean()); add("sd", s.stddev()); add("p50", s.percentile(50));
    add("p99", s.percentile(99)); add("max", s.max());
  }
  void add(const char* name, const TimeWeightedStats& s, SimTime end) {
    text += std::string("\n") + name + ":";
    if (s.empty()) return;
    add("mean", s.mean(end)); add("peak", s.peak()); add("integral", s.integral(end));
  }
};

inline std::string fingerprint(const SimulationResult& r) {
  Fingerprint f;
  for (const RequestRecord& q : r.records) {
    f.text += "\nrec";
    f.add("id", static_cast<std::int64_t>(q.id));
    f.add("arrival", q.arrival_s); f.add("frontend", q.frontend_s); f.add("queue", q.queue_s);
    f.add("prefill", q.prefill_s); f.add("return", q.return_s); f.add("ttft", q.ttft_s);
    f.add("e2el", q.e2el_s); f.add("tpot", q.tpot_s);
    f.add("prompt", q.prompt_tokens); f.add("output", q.output_tokens);
    f.add("hit", q.prefix_hit_tokens); f.add("preempt", static_cast<std::int64_t>(q.preemptions));
    f.add("replica", static_cast<std::int64_t>(q.replica));
  }
  f.add("ttft", r.ttft); f.add("tpot", r.tpot); f.add("itl", r.itl); f.add("e2el", r.e2el);
  f.add("queue", r.queue); f.add("frontend", r.frontend); f.add("prefill", r.prefill);
  f.add("first_token_return", r.first_token_return);
  f.text += "\ntotals";
  f.add("duration", r.duration_s); f.add("simulated", r.simulated_s);
  f.add("completed", r.completed); f.add("rejected", r.rejected); f.add("arrived", r.arrived);
  f.add("in", r.total_input_tokens); f.add("out", r.total_output_tokens);
  f.add("req_tp", r.request_throughput); f.add("out_tp", r.output_throughput);
  f.add("tok_tp", r.total_token_throughput); f.add("goodput", r.request_goodput);
  f.add("good_frac", r.goodput_fraction); f.add("max_conc", r.max_concurrent_requests);
  f.add("preemptions", r.preemptions); f.add("hit_rate", r.prefix_hit_rate);
  f.add("lag", r.scheduling_lag_s); f.add("steps", r.steps);
  const SimTime end = from_seconds(r.simulated_s);
  for (const ReplicaSummary& rs : r.replicas) {
    const ReplicaStats& s = rs.stats;
    f.text += "\nreplica " + std::to_string(rs.index) + " " + rs.card;
    f.add("step_s", s.step_seconds); f.add("batch_tokens", s.batch_tokens);
    f.add("batch_seqs", s.batch_sequences); f.add("step_ms", s.step_ms_distribution);
    f.add("seq_dist", s.batch_sequences_distribution);
    f.add("kv", s.kv_used_fraction, end); f.add("running", s.running, end);
    f.add("waiting", s.waiting, end);
    f.add("steps", s.steps); f.add("preemptions", s.preemptions);
    f.add("prompt_computed", s.prompt_tokens_computed); f.add("hits", s.prefix_hit_tokens);
    f.add("looked", s.prefix_lookup_tokens); f.add("busy", s.busy_seconds);
    f.add("compute", s.compute_s); f.add("memory", s.memory_s);
    f.add("comm", s.communication_s); f.add("overhead", s.overhead_s);
    f.add("flops", s.flops); f.add("bytes", s.bytes);
    f.add("interval", s.timeline_interval); f.add("next", s.timeline_next);
    for (const TimelineSample& t : s.timeline) {
      f.text += "\n t";
      f.add("at", t.time_s); f.add("kv", t.kv_used_fraction);
      f.add("run", static_cast<std::int64_t>(t.running)); f.add("wait", static_cast<std::int64_t>(t.waiting));
    }
  }
  for (const ClusterSample& c : r.timeline) {
    f.text += "\n c";
    f.add("at", c.time_s); f.add("kv", c.kv_used_fraction); f.add("run", c.running); f.add("wait", c.waiting);
  }
  f.text += "\nsteady";
  f.add("transient_end", r.steady.transient_end_s);
  f.add("truncated", static_cast<std::int64_t>(r.steady.truncated));
  return f.text;
}

// Where two fingerprints first differ, with 200 bytes of context around it on each side (for a
// failure message; empty when they are equal).
inline std::string first_difference(const std::string& a, const char* a_name, const std::string& b,
                                    const char* b_name) {
  if (a == b) return {};
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  const std::size_t from = i > 200 ? i - 200 : 0;
  return "results differ at byte " + std::to_string(i) + ":\n" + a_name + ": " + a.substr(from, 400) +
         "\n" + b_name + ": " + b.substr(from, 400);
}

}  // namespace capsim::test
