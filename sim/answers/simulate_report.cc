#include "sim/answers/simulate_report.h"
#include "sim/answers/model_error_answer.h"
#include "sim/scenario/model_error.h"

#include "sim/plan/search.h"

#include <cmath>

#include "sim/core/units.h"
#include "sim/report/table.h"

namespace capsim::answers {

// The scenario layer's specs and catalogues, which every answer reads.
using namespace capsim::scenario;
namespace {

void add_metric(nlohmann::json& j, const std::string& name, const Percentiles& p) {
  j["mean_" + name + "_ms"] = p.mean * 1e3;
  j["median_" + name + "_ms"] = p.median * 1e3;
  j["std_" + name + "_ms"] = p.std * 1e3;
  j["p90_" + name + "_ms"] = p.p90 * 1e3;
  j["p95_" + name + "_ms"] = p.p95 * 1e3;
  j["p99_" + name + "_ms"] = p.p99 * 1e3;
}

struct Totals {
  double busy = 0, compute = 0, memory = 0, comm = 0, overhead = 0, mfu = 0, mbu = 0;
  double steps = 0, mean_step = 0, mean_batch_tokens = 0, mean_batch_seqs = 0;
  double kv_peak = 0, kv_mean = 0, waiting_mean = 0, running_mean = 0;
};

// Speculative decoding's and LoRA's counters, summed over replicas.
struct Features {
  std::int64_t spec_verifies = 0, spec_drafts = 0, spec_accepted = 0, lora_loads = 0, lora_host_misses = 0;
  // CPU KV tier (--kv-offloading-size), over the replicas.
  std::int64_t cpu_blocks = 0, cpu_hit_tokens = 0, lookup_tokens = 0, cpu_loads = 0, cpu_loaded_blocks = 0,
               cpu_stored_blocks = 0, cpu_evictions = 0, cpu_refused_blocks = 0;
  double cpu_load_wait_s = 0;
  double cpu_hit_rate() const { return lookup_tokens ? static_cast<double>(cpu_hit_tokens) / static_cast<double>(lookup_tokens) : 0; }
  double cpu_mean_wait_s() const { return cpu_loads ? cpu_load_wait_s / static_cast<double>(cpu_loads) : 0; }
};
Features features(const BuiltScenario&, const SimulationResult& r) {
  Features f;
  for (const ReplicaSummary& rs : r.replicas) {
    f.spec_verifies += rs.stats.spec_verifies;
    f.spec_drafts += rs.stats.spec_drafts;
    f.spec_accepted += rs.stats.spec_accepted;
    f.lora_loads += rs.stats.lora_loads;
    f.lora_host_misses += rs.stats.lora_host_misses;
    f.cpu_blocks += rs.memory.cpu_kv_blocks;
    f.cpu_hit_tokens += rs.stats.cpu_hit_tokens;
    f.lookup_tokens += rs.stats.prefix_lookup_tokens;
    f.cpu_loads += rs.stats.cpu_loads;
    f.cpu_loaded_blocks += rs.stats.cpu_loaded_blocks;
    f.cpu_stored_blocks += rs.stats.cpu_stored_blocks;
    f.cpu_evictions += rs.stats.cpu_evictions;
    f.cpu_refused_blocks += rs.stats.cpu_refused_blocks;
    f.cpu_load_wait_s += rs.stats.cpu_load_wait_s;
  }
  return f;
}

Totals totals(const BuiltScenario& b, const SimulationResult& r) {
  Totals t;
  std::size_t i = 0;
  double flops_capacity = 0, bytes_capacity = 0, flops = 0, bytes = 0;
  std::vector<const ReplicaGroup*> groups;  // replicas in order: the prefill (or only) pool, then decode
  for (const ReplicaGroup& g : b.config.groups) groups.push_back(&g);
  if (b.config.decode_pool) {
    for (const ReplicaGroup& g : b.config.decode_pool->groups) groups.push_back(&g);
  }
  for (const ReplicaGroup* gp : groups) {
    const ReplicaGroup& g = *gp;
    const Deployment& d = g.deployment;
    const double peak = d.card.peak(d.compute_precision());
    for (int k = 0; k < g.replicas * d.dp; ++k, ++i) {  // every DP rank is a replica of r
      const ReplicaStats& s = r.replicas[i].stats;
      t.busy += s.busy_seconds;
      t.compute += s.compute_s;
      t.memory += s.memory_s;
      t.comm += s.communication_s;
      t.overhead += s.overhead_s;
      flops += s.flops;
      bytes += s.bytes;
      flops_capacity += peak * s.busy_seconds;
      bytes_capacity += d.card.memory_bandwidth * s.busy_seconds;
      t.steps += static_cast<double>(s.steps);
      t.mean_step += s.step_seconds.count() ? s.step_seconds.mean() * s.steps : 0;
      t.mean_batch_tokens += s.batch_tokens.count() ? s.batch_tokens.mean() * s.steps : 0;
      t.mean_batch_seqs += s.batch_sequences.count() ? s.batch_sequences.mean() * s.steps : 0;
      const SimTime end = from_seconds(r.simulated_s);
      if (!s.kv_used_fraction.empty()) {
        t.kv_peak = std::max(t.kv_peak, s.kv_used_fraction.peak());
        t.kv_mean += s.kv_used_fraction.mean(end) / static_cast<double>(r.replicas.size());
      }
      if (!s.waiting.empty()) t.waiting_mean += s.waiting.mean(end);
      if (!s.running.empty()) t.running_mean += s.running.mean(end);
    }
  }
  if (t.steps > 0) {
    t.mean_step /= t.steps;
    t.mean_batch_tokens /= t.steps;
    t.mean_batch_seqs /= t.steps;
  }
  t.mfu = flops_capacity > 0 ? flops / flops_capacity : 0;
  t.mbu = bytes_capacity > 0 ? bytes / bytes_capacity : 0;
  return t;
}

// Percentiles of a per-step quantity over every replica's steps.
template <typename Get>
nlohmann::json distribution(const SimulationResult& r, Get get) {
  WeightedSamples all;
  for (const ReplicaSummary& rs : r.replicas) get(rs.stats).merge_into(all);
  if (all.empty()) return nullptr;
  return {{"mean", all.mean()}, {"p50", all.percentile(50)}, {"p90", all.percentile(90)},
          {"p99", all.percentile(99)}, {"max", all.max()}};
}

}  // namespace

std::vector<std::string> slo_row_headings() {
  return {"SLO", "bound", "measured window", "steady state (95% interval)", "verdict"};
}

std::vector<std::string> slo_row(const SloSpec& slo, const SimulationResult& r) {
  const plan::SloDecision sd = plan::decide_slo(slo, r);
  return {sd.slo, units::format_time(slo.seconds), std::isnan(sd.value) ? "-" : units::format_time(sd.value),
          sd.has_interval ? units::format_time(sd.estimate) + " (" + units::format_time(sd.low) + " - " +
                                units::format_time(sd.high) + ")"
                          : "-",
          plan::decision_name(sd.decision)};
}

std::string bounded_memory_note() {
  return "--bounded-memory: the ITL and step-time percentiles come from histograms, within " +
         fmt("%.2g", 100 * BoundedSamples::kMaxRelativeError) + "% of the exact values; every other figure is exact.";
}

nlohmann::json simulation_json(const ScenarioSpec& spec, const BuiltScenario& b,
                               const SimulationResult& r) {
  nlohmann::json j;
  j["scenario"] = spec.name;
  j["workload"] = b.workload_description;
  j["seed"] = spec.seed;
  nlohmann::json groups = nlohmann::json::array();
  for (const ReplicaGroup& g : b.config.groups) {
    const Deployment& d = g.deployment;
    groups.push_back({{"model", d.model.name}, {"card", d.card.name}, {"tp", d.tp},
                      {"replicas", g.replicas}, {"weights", precision_name(d.weights)},
                      {"kv_cache", precision_name(d.kv_cache)}, {"engine", d.engine.name},
                      {"max_num_seqs", d.limits.max_num_seqs},
                      {"max_num_batched_tokens", d.limits.max_num_batched_tokens},
                      {"block_size", d.limits.block_size},
                      {"gpu_memory_utilization", d.limits.gpu_memory_utilization},
                      {"enable_prefix_caching", d.limits.enable_prefix_caching}});
    if (d.expert_weights) groups.back()["expert_weights"] = precision_name(*d.expert_weights);
    if (d.beyond_tp()) {
      groups.back()["pp"] = d.pp;
      groups.back()["dp"] = d.dp;
      groups.back()["expert_parallel"] = d.expert_parallel;
      groups.back()["gpus_per_replica"] = d.gpus();
    }
  }
  j["deployment"] = groups;
  j["router"] = b.config.router;
  j["scheduler"] = b.config.policy;
  // vLLM benchmark_serving keys.
  j["duration"] = r.duration_s;
  j["completed"] = r.completed;
  j["failed"] = r.rejected + r.timed_out;
  j["total_input_tokens"] = r.total_input_tokens;
  j["total_output_tokens"] = r.total_output_tokens;
  j["request_throughput"] = r.request_throughput;
  j["request_goodput"] = r.request_goodput;
  j["output_throughput"] = r.output_throughput;
  j["total_token_throughput"] = r.total_token_throughput;
  j["max_concurrent_requests"] = r.max_concurrent_requests;
  add_metric(j, "ttft", r.ttft);
  add_metric(j, "tpot", r.tpot);
  add_metric(j, "itl", r.itl);
  add_metric(j, "e2el", r.e2el);
  // capsim's own: TTFT = front end + queue + prefill + return (docs/cost-model.md#request-path).
  add_metric(j, "queue", r.queue);
  add_metric(j, "frontend", r.frontend);
  add_metric(j, "prefill", r.prefill);
  add_metric(j, "first_token_return", r.first_token_return);
  const Totals t = totals(b, r);
  j["capsim"] = {
      {"simulated_seconds", r.simulated_s},
      {"warmup_seconds", to_seconds(b.config.warmup)},
      {"arrived", r.arrived},
      {"goodput_fraction", r.goodput_fraction},
      {"preemptions", r.preemptions},
      {"prefix_cache_hit_rate", r.prefix_hit_rate},
      {"engine_steps", r.steps},
      {"mean_step_ms", t.mean_step * 1e3},
      {"mean_batch_tokens", t.mean_batch_tokens},
      {"mean_batch_sequences", t.mean_batch_seqs},
      {"step_ms", distribution(r, [](const ReplicaStats& s) -> const WeightedSamples& { return s.step_ms_distribution; })},
      {"batch_sequences", distribution(r, [](const ReplicaStats& s) -> const WeightedSamples& { return s.batch_sequences_distribution; })},
      {"kv_cache_peak_fraction", t.kv_peak},
      {"kv_cache_mean_fraction", t.kv_mean},
      {"mean_waiting_requests", t.waiting_mean},
      {"mean_running_requests", t.running_mean},
      {"mfu", t.mfu},
      {"mbu", t.mbu},
      {"busy_seconds", t.busy},
      {"time_share", {{"compute", t.busy > 0 ? t.compute / t.busy : 0},
                      {"memory", t.busy > 0 ? t.memory / t.busy : 0},
                      {"communication", t.busy > 0 ? t.comm / t.busy : 0},
                      {"overhead", t.busy > 0 ? t.overhead / t.busy : 0}}},
  };
  if (b.config.bounded_memory) {
    // Which numbers are no longer exact (sim/core/bounded_samples.h); absent in an exact run.
    j["capsim"]["bounded_memory"] = {
        {"approximate", {"itl std and percentiles", "step_ms percentiles"}},
        {"percentile_max_relative_error", BoundedSamples::kMaxRelativeError},
        {"note", "--bounded-memory: per-step distributions kept as histograms; counts, min, max, means and "
                 "per-request latencies exact"}};
  }
  if (b.config.request_timeout) {
    j["capsim"]["request_timeout_s"] = to_seconds(*b.config.request_timeout);
    j["capsim"]["timed_out"] = r.timed_out;  // measured requests whose client gave up; also in "failed"
  }
  nlohmann::json slos = nlohmann::json::array();
  for (const SloSpec& s : spec.slos) {
    const plan::SloDecision d = plan::decide_slo(s, r);
    slos.push_back({{"slo", d.slo}, {"bound_ms", s.seconds * 1e3}, {"value_ms", d.value * 1e3},
                    {"estimate_ms", d.estimate * 1e3}, {"low_ms", d.low * 1e3}, {"high_ms", d.high * 1e3},
                    {"has_interval", d.has_interval},
                    {"decision", plan::decision_name(d.decision)},
                    {"met", d.decision == plan::Decision::kPass}});
  }
  j["capsim"]["slos"] = slos;
  j["capsim"]["steady_state"] = steady_state_json(r.steady);
  nlohmann::json reps = nlohmann::json::array();
  for (const ReplicaSummary& rs : r.replicas) {
    reps.push_back({{"index", rs.index}, {"card", rs.card}, {"tp", rs.tp},
                    {"kv_blocks", rs.kv_blocks}, {"kv_tokens", rs.kv_tokens},
                    {"steps", rs.stats.steps}, {"busy_seconds", rs.stats.busy_seconds},
                    {"preemptions", rs.stats.preemptions},
                    {"kv_cache_peak_fraction", rs.stats.kv_used_fraction.empty() ? 0.0 : rs.stats.kv_used_fraction.peak()}});
  }
  j["capsim"]["replicas"] = reps;
  const Features f = features(b, r);
  if (const auto& sc = b.config.groups.front().deployment.speculative) {
    j["capsim"]["speculative"] = {{"method", sc->method},
                                  {"num_speculative_tokens", sc->num_speculative_tokens},
                                  {"acceptance", sc->acceptance},
                                  {"expected_tokens_per_verify", sc->expected_tokens()},
                                  {"verifies", f.spec_verifies},
                                  {"drafts", f.spec_drafts},
                                  {"accepted_drafts", f.spec_accepted},
                                  {"mean_tokens_per_verify", f.spec_verifies ? 1.0 + static_cast<double>(f.spec_accepted) / static_cast<double>(f.spec_verifies) : 0.0}};
  }
  if (const auto& lc = b.config.groups.front().deployment.lora) {
    j["capsim"]["lora"] = {{"max_loras", lc->max_loras}, {"max_lora_rank", lc->max_lora_rank},
                           {"max_cpu_loras", lc->cpu_slots()}, {"adapter_rank", lc->adapter_rank()},
                           {"adapters", b.config.adapters.count},
                           {"adapter_bytes", lora_adapter_bytes(*lc, b.config.groups.front().deployment.model)},
                           {"slot_bytes_per_gpu", r.replicas.front().memory.lora_slots},
                           {"loads", f.lora_loads}, {"host_cache_misses", f.lora_host_misses}};
  }
  if (const double gib = b.config.groups.front().deployment.limits.kv_offloading_size; gib > 0) {
    // The CPU tier's hits are beyond the GPU prefix cache's (prefix_cache_hit_rate): vLLM counts
    // them apart too (its connector prefix-cache stats).
    j["capsim"]["cpu_kv_offload"] = {{"kv_offloading_size_gib", gib},
                                     {"cpu_blocks", f.cpu_blocks},
                                     {"hit_rate", f.cpu_hit_rate()},
                                     {"hit_tokens", f.cpu_hit_tokens},
                                     {"loads", f.cpu_loads},
                                     {"loaded_blocks", f.cpu_loaded_blocks},
                                     {"mean_load_wait_ms", f.cpu_mean_wait_s() * 1e3},
                                     {"stored_blocks", f.cpu_stored_blocks},
                                     {"evicted_blocks", f.cpu_evictions},
                                     {"refused_blocks", f.cpu_refused_blocks}};
  }
  j["capsim"]["model_error"] = model_error_json(b.config.groups.front().deployment);
  j["capsim"]["step_costs"] = step_costs_json(b.config.groups.front().deployment);
  if (b.config.decode_pool && r.pd) {
    const ReplicaGroup& g = b.config.decode_pool->groups.front();
    const Deployment& dd = g.deployment;
    j["capsim"]["disaggregation"] = {
        {"prefill_replicas", r.pd->prefill_replicas},
        {"decode_pool", {{"card", dd.card.name}, {"tp", dd.tp}, {"replicas", g.replicas},
                         {"weights", precision_name(dd.weights)}, {"max_num_seqs", dd.limits.max_num_seqs},
                         {"max_num_batched_tokens", dd.limits.max_num_batched_tokens}}},
        {"kv_link", r.pd->link},
        {"kv_bytes_mean", r.pd->mean_kv_bytes},
        {"kv_transfer_ms", {{"mean", r.pd->kv_transfer.mean * 1e3}, {"p50", r.pd->kv_transfer.median * 1e3},
                            {"p95", r.pd->kv_transfer.p95 * 1e3}}},
        {"handoff_ms", {{"mean", r.pd->handoff.mean * 1e3}, {"p50", r.pd->handoff.median * 1e3},
                        {"p95", r.pd->handoff.p95 * 1e3}}}};
  }
  return j;
}

std::vector<std::string> latency_headings() { return {"metric", "mean", "p50", "p90", "p95", "p99"}; }

std::vector<std::vector<std::string>> latency_rows(const SimulationResult& r) {
  std::vector<std::vector<std::string>> rows;
  const auto row = [&](const char* name, const Percentiles& p) {
    if (p.count == 0) return;
    rows.push_back({name, units::format_time(p.mean), units::format_time(p.median), units::format_time(p.p90),
                    units::format_time(p.p95), units::format_time(p.p99)});
  };
  row("TTFT", r.ttft);
  row("TPOT", r.tpot);
  row("ITL", r.itl);
  row("E2E latency", r.e2el);
  row("TTFT: front end", r.frontend);
  row("TTFT: queueing", r.queue);
  row("TTFT: prefill", r.prefill);
  row("TTFT: return", r.first_token_return);
  return rows;
}

void print_simulation(std::ostream& os, const ScenarioSpec& spec, const BuiltScenario& b,
                      const SimulationResult& r) {
  const Deployment& d = b.config.groups.front().deployment;
  os << "capsim simulate: " << spec.name << "\n";
  os << "  model " << d.model.name << "; ";
  std::size_t first_replica = 0;
  for (std::size_t i = 0; i < b.config.groups.size(); ++i) {
    const ReplicaGroup& g = b.config.groups[i];
    os << (i ? " + " : "") << g.replicas << " x " << g.deployment.card.name
       << (g.deployment.tp > 1 ? " tp" + std::to_string(g.deployment.tp) : "")
       << (g.deployment.pp > 1 ? " pp" + std::to_string(g.deployment.pp) : "")
       << (g.deployment.dp > 1 ? " dp" + std::to_string(g.deployment.dp) : "")
       << (g.deployment.expert_parallel ? " ep" : "") << " ("
       << precision_name(g.deployment.weights) << ", KV " << precision_name(g.deployment.kv_cache) << ", "
       << r.replicas[first_replica].kv_tokens
       << (g.deployment.dp > 1 ? " KV tokens/DP rank)" : " KV tokens/replica)");
    // Each DP rank is a replica of the simulation (cluster/cluster.cc).
    first_replica += static_cast<std::size_t>(g.replicas) * static_cast<std::size_t>(g.deployment.dp);
  }
  os << "; engine " << d.engine.name << " (" << b.config.policy << ", max_num_seqs "
     << d.limits.max_num_seqs << ", max_num_batched_tokens " << d.limits.max_num_batched_tokens
     << "); router " << b.config.router << "\n";
  if (b.config.decode_pool) {
    const ReplicaGroup& g = b.config.decode_pool->groups.front();
    os << "  disaggregated: the above is the prefill pool; decode pool " << g.replicas << " x " << g.deployment.card.name
       << (g.deployment.tp > 1 ? " tp" + std::to_string(g.deployment.tp) : "") << " ("
       << precision_name(g.deployment.weights) << ", " << r.replicas[first_replica].kv_tokens
       << " KV tokens/replica, max_num_seqs " << g.deployment.limits.max_num_seqs << "); KV over "
       << b.config.decode_pool->link.name << "\n";
  }
  os << "  workload: " << b.workload_description << "\n";
  os << "  measured: " << r.completed << " requests over " << fmt("%.1f", r.duration_s) << " s";
  if (b.config.warmup > 0) os << " after a " << fmt("%.0f", to_seconds(b.config.warmup)) << " s warm-up";
  if (r.rejected) os << "; " << r.rejected << " rejected (longer than max_model_len)";
  if (r.timed_out) {
    os << "; " << r.timed_out << " timed out (the client gave up after "
       << units::format_time(to_seconds(*b.config.request_timeout)) << "; not in the latencies)";
  }
  os << "\n\n";
  TextTable t(latency_headings());
  for (auto& cells : latency_rows(r)) t.row(std::move(cells));
  t.print(os);
  if (b.config.bounded_memory) os << "  " << bounded_memory_note() << "\n";
  if (r.pd) {
    os << "  disaggregated: TTFT's front end runs from the request to the decode engine: the prefill pool, the "
          "return to the proxy, the decode front end and the KV transfer (p50 "
       << units::format_time(r.pd->handoff.median) << ", p95 " << units::format_time(r.pd->handoff.p95)
       << "); KV transfer p50 " << units::format_time(r.pd->kv_transfer.median) << ", p95 "
       << units::format_time(r.pd->kv_transfer.p95) << ", " << units::format_bytes(r.pd->mean_kv_bytes)
       << " per request on average\n";
  }
  const Totals tt = totals(b, r);
  os << "\n  throughput: " << fmt("%.2f", r.request_throughput) << " requests/s, "
     << fmt("%.0f", r.output_throughput) << " output tokens/s, " << fmt("%.0f", r.total_token_throughput)
     << " total tokens/s";
  if (b.config.slo.any()) {
    os << "; goodput " << fmt("%.2f", r.request_goodput) << " requests/s ("
       << fmt("%.1f%%", 100 * r.goodput_fraction) << " of requests meet every SLO)";
  }
  os << "\n  engine: " << r.steps << " steps, mean " << units::format_time(tt.mean_step) << ", "
     << fmt("%.1f", tt.mean_batch_seqs) << " sequences and " << fmt("%.0f", tt.mean_batch_tokens)
     << " tokens per step; MFU " << fmt("%.1f%%", 100 * tt.mfu) << ", MBU " << fmt("%.1f%%", 100 * tt.mbu) << "\n";
  if (tt.busy > 0) {
    os << "  step time: " << fmt("%.0f%%", 100 * tt.compute / tt.busy) << " compute-bound, "
       << fmt("%.0f%%", 100 * tt.memory / tt.busy) << " memory-bound, "
       << fmt("%.0f%%", 100 * tt.comm / tt.busy) << " communication, "
       << fmt("%.0f%%", 100 * tt.overhead / tt.busy) << " overhead\n";
  }
  os << "  KV cache: peak " << fmt("%.0f%%", 100 * tt.kv_peak) << ", mean " << fmt("%.0f%%", 100 * tt.kv_mean)
     << " used; " << r.preemptions << " preemptions; prefix-cache hit rate "
     << fmt("%.1f%%", 100 * r.prefix_hit_rate) << "; mean queue " << fmt("%.1f", tt.waiting_mean)
     << " requests\n";
  const Features f = features(b, r);
  if (const auto& sc = d.speculative) {
    os << "  speculative decoding: " << sc->method << ", k " << sc->num_speculative_tokens << ": "
       << f.spec_verifies << " verify steps, " << fmt("%.2f", f.spec_verifies ? 1.0 + static_cast<double>(f.spec_accepted) / static_cast<double>(f.spec_verifies) : 0.0)
       << " tokens each (expected " << fmt("%.2f", sc->expected_tokens()) << "); proposer "
       << units::format_bytes_gib(r.replicas.front().memory.proposer_weights) << "/GPU\n";
  }
  if (d.limits.kv_offloading_size > 0) {
    os << "  CPU KV tier (--kv-offloading-size " << fmt("%g", d.limits.kv_offloading_size) << " GiB, "
       << f.cpu_blocks << " blocks): hit rate " << fmt("%.1f%%", 100 * f.cpu_hit_rate())
       << " beyond the GPU's; " << f.cpu_loads << " loads (" << f.cpu_loaded_blocks << " blocks), mean wait "
       << units::format_time(f.cpu_mean_wait_s()) << "; " << f.cpu_stored_blocks << " blocks stored, "
       << f.cpu_evictions << " evicted, " << f.cpu_refused_blocks << " refused\n";
  }
  if (const auto& lc = d.lora) {
    os << "  LoRA: " << b.config.adapters.count << " adapters of rank " << lc->adapter_rank() << " ("
       << units::format_bytes_gib(lora_adapter_bytes(*lc, d.model)) << " each), max_loras " << lc->max_loras
       << " (slots " << units::format_bytes_gib(r.replicas.front().memory.lora_slots) << "/GPU), "
       << f.lora_loads << " loads to GPU, " << f.lora_host_misses << " host-cache misses\n";
  }
  print_steady_state(os, r.steady);
  // capsim's own error beside the interval above: that interval is the simulation's noise, this
  // is how far capsim has been from real servers of the scenario's class (the first group's).
  os << "  " << step_costs_text(d) << "\n";
  os << "  " << model_error_line(d) << "\n";
  if (!spec.slos.empty()) {
    os << "\n";
    TextTable s(slo_row_headings());
    for (const SloSpec& slo : spec.slos) s.row(slo_row(slo, r));
    s.print(os);
    for (const SloSpec& slo : spec.slos) {
      const plan::SloDecision sd = plan::decide_slo(slo, r);
      if (sd.decision != plan::Decision::kPass) os << "  " << plan::decision_name(sd.decision) << ": " << sd.why << "\n";
    }
  }
}

nlohmann::json steady_state_json(const SteadyState& s) {
  const auto iv = [](const Interval& i) {
    return nlohmann::json{{"estimate_ms", i.estimate * 1e3}, {"low_ms", i.low * 1e3}, {"high_ms", i.high * 1e3},
                          {"valid", i.valid}, {"lag1_correlation", i.lag1_correlation}};
  };
  const auto metric = [&](const MetricIntervals& m) {
    return nlohmann::json{{"mean", iv(m.mean)}, {"p50", iv(m.p50)}, {"p90", iv(m.p90)},
                          {"p95", iv(m.p95)}, {"p99", iv(m.p99)}};
  };
  return {{"method", "MSER-5 truncation (White 1997; White, Cobb & Spratt 2000), 95% intervals by batch means"},
          {"observations", s.observations},
          {"mser5_truncated_requests", s.truncated},
          {"transient_end_s", s.transient_end_s},
          {"analysed", s.analysed},
          {"settled", s.settled},
          {"growing", s.growing},
          {"at_steady_state", s.at_steady_state()},
          {"batches", s.batches},
          {"ttft", metric(s.ttft)},
          {"tpot", metric(s.tpot)},
          {"e2el", metric(s.e2el)},
          {"warnings", s.warnings}};
}

void print_steady_state(std::ostream& os, const SteadyState& s) {
  if (s.observations == 0) return;
  os << "  steady state: ";
  if (s.batches == 0) {
    os << "not analysed\n";
  } else {
    os << (s.truncated == 0 ? std::string("MSER-5 finds no transient left after the warm-up")
                            : "MSER-5 drops a further " + std::to_string(s.truncated) + " of " +
                                  std::to_string(s.observations) + " requests as warm-up (to arrival t = " +
                                  fmt("%.0f", s.transient_end_s) + " s)")
       << "; 95% intervals from " << s.batches << " batch means: TTFT p95 "
       << units::format_time(s.ttft.p95.low) << " - " << units::format_time(s.ttft.p95.high) << ", TPOT p95 "
       << units::format_time(s.tpot.p95.low) << " - " << units::format_time(s.tpot.p95.high) << "\n";
  }
  for (const std::string& w : s.warnings) os << "  WARNING: " << w << "\n";
}

namespace {

// The statistics compared over the seeds: the SLOs, or without any the p95 of TTFT, TPOT and E2E
// with no bound (decided against infinity, the verdict is not shown).
std::vector<SloSpec> replicated_statistics(const ScenarioSpec& spec) {
  if (!spec.slos.empty()) return spec.slos;
  const double none = INFINITY;
  return {{"ttft", "p95", none}, {"tpot", "p95", none}, {"e2el", "p95", none}};
}

// One statistic over the seeds: each run's steady-state estimate and the decision over them.
struct OverSeeds {
  SloSpec slo;
  std::vector<double> per_seed;  // seconds, NaN when a run has no sample
  plan::SloDecision decision;
};

struct Replicated {
  std::vector<OverSeeds> rows;
  // Every seed gave the same estimate of every statistic: nothing in the workload is random (a
  // trace replay), and plan::decide_slo_replicated kept the first run's own intervals.
  bool identical = true;
};

Replicated replicate(const ScenarioSpec& spec, const std::vector<const SimulationResult*>& runs) {
  Replicated out;
  for (const SloSpec& s : replicated_statistics(spec)) {
    OverSeeds o{s, {}, plan::decide_slo_replicated(s, runs)};
    for (const SimulationResult* r : runs) o.per_seed.push_back(plan::decide_slo(s, *r).estimate);
    for (double e : o.per_seed) {
      const double first = o.per_seed.front();
      out.identical = out.identical && (e == first || (std::isnan(e) && std::isnan(first)));
    }
    out.rows.push_back(std::move(o));
  }
  return out;
}

}  // namespace

nlohmann::json replications_json(const ScenarioSpec& spec, const std::vector<const SimulationResult*>& runs) {
  const Replicated rep = replicate(spec, runs);
  nlohmann::json seeds = nlohmann::json::array();
  for (std::size_t k = 0; k < runs.size(); ++k) seeds.push_back(spec.seed + k);
  nlohmann::json rows = nlohmann::json::array();
  for (const OverSeeds& o : rep.rows) {
    const plan::SloDecision& d = o.decision;
    nlohmann::json per_seed = nlohmann::json::array();
    for (double e : o.per_seed) per_seed.push_back(e * 1e3);
    nlohmann::json row{{"statistic", o.slo.metric + "_" + o.slo.statistic},
                       {"per_seed_ms", per_seed},
                       {"mean_ms", d.estimate * 1e3},
                       {"low_ms", d.low * 1e3},
                       {"high_ms", d.high * 1e3}};
    if (!spec.slos.empty()) {
      row["bound_ms"] = o.slo.seconds * 1e3;
      row["decision"] = plan::decision_name(d.decision);
      row["met"] = d.decision == plan::Decision::kPass;
      row["why"] = d.why;
    }
    rows.push_back(row);
  }
  return {{"method", "independent replications: the scenario run with seeds seed .. seed + N - 1; per seed the "
                     "steady-state estimate (MSER-5 truncation), 95% t interval over the seeds"},
          {"seeds", seeds},
          {"identical_runs", rep.identical},
          {"statistics", rows}};
}

ReplicationsTable replications_table(const ScenarioSpec& spec, const std::vector<const SimulationResult*>& runs) {
  const Replicated rep = replicate(spec, runs);
  const bool slos = !spec.slos.empty();
  ReplicationsTable out;
  out.caption = "over " + std::to_string(runs.size()) + " seeds (" + std::to_string(spec.seed) + "-" +
                std::to_string(spec.seed + runs.size() - 1) + "; the run above is seed " + std::to_string(spec.seed) +
                "): ";
  out.caption += rep.identical ? "the seeds gave identical runs (nothing in the workload is random, e.g. a trace "
                                 "replay), so the intervals and verdicts are the run's own"
                               : "each seed's steady-state estimate, 95% interval over the seeds; these verdicts are "
                                 "the ones to act on";
  std::vector<std::string> head{"statistic"};
  if (slos) head.push_back("bound");
  head.insert(head.end(), {"per seed", "mean (95% interval)"});
  if (slos) head.push_back("verdict");
  out.table = TextTable(head);
  for (const OverSeeds& o : rep.rows) {
    const plan::SloDecision& d = o.decision;
    std::string per_seed;
    for (double e : o.per_seed) {
      per_seed += (per_seed.empty() ? "" : ", ") + (std::isnan(e) ? std::string("-") : units::format_time(e));
    }
    std::vector<std::string> row{o.slo.metric + "_" + o.slo.statistic};
    if (slos) row.push_back(units::format_time(o.slo.seconds));
    row.push_back(per_seed);
    row.push_back(std::isnan(d.estimate)   ? "-"
                  : !d.has_interval         ? units::format_time(d.estimate) + " (no interval)"
                                            : units::format_time(d.estimate) + " (" + units::format_time(d.low) + " - " +
                                                  units::format_time(d.high) + ")");
    if (slos) {
      row.push_back(plan::decision_name(d.decision));
      out.decisions.push_back(d.decision);
      if (d.decision != plan::Decision::kPass) {
        out.why.push_back(std::string(plan::decision_name(d.decision)) + ": " + d.why);
      }
    }
    out.table.row(row);
  }
  return out;
}

void print_replications(std::ostream& os, const ScenarioSpec& spec, const std::vector<const SimulationResult*>& runs) {
  const ReplicationsTable t = replications_table(spec, runs);
  os << "\n  " << t.caption << "\n";
  t.table.print(os);
  for (const std::string& w : t.why) os << "  " << w << "\n";
}

}  // namespace capsim::answers
