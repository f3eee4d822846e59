#include "sim/answers/roofline_answer.h"

#include <sstream>

#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/cost/registry.h"
#include "sim/cost/roofline_cost.h"
#include "sim/report/table.h"

namespace capsim::answers {
namespace {

void check_range(long long v, long long lo, long long hi, const char* flag) {
  if (v < lo || v > hi) {
    throw Error(std::string(flag) + ": " + std::to_string(v) + " is not in " + std::to_string(lo) + ".." +
                std::to_string(hi));
  }
}

std::string text_of(const Deployment& d, const RooflineRequest& r, const RooflineCost& cost, const StepBreakdown& s,
                    double tokens_per_s) {
  std::ostringstream out;
  out << "capsim roofline: " << d.model.name << " on " << d.tp << " x " << d.card.name
      << (d.pp > 1 ? " x " + std::to_string(d.pp) + " pipeline stages" : std::string())
      << (d.expert_parallel
              ? ", expert parallel over " + std::to_string(d.tp * d.dp) + " GPUs (DP " + std::to_string(d.dp) + ")"
              : std::string())
      << ", weights " << precision_name(d.weights) << " (math " << precision_name(d.compute_precision()) << "), KV "
      << precision_name(d.kv_cache) << ", engine " << d.engine.name << "\n";
  out << "  step: " << r.batch << " decode sequences of " << r.context << " tokens";
  if (r.prefill > 0) out << " + a prefill chunk of " << r.prefill << " tokens";
  out << "\n  achieved rates per GPU: " << units::format_rate(cost.gemm_flops_per_s(), "FLOP/s") << " (GEMM), "
      << units::format_rate(cost.bytes_per_s(), "B/s") << " (memory)\n"
      << "  linear layers: " << cost.gemm_source() << "\n"
      << "  attention: " << cost.attention_source() << "\n";
  if (!cost.moe_source().empty()) out << "  MoE layers: " << cost.moe_source() << "\n";
  if (!cost.allreduce_source().empty()) out << "  all-reduce: " << cost.allreduce_source() << "\n";
  out << "\n";
  TextTable t({"group", "GFLOP/GPU", "MB/GPU", "compute", "memory", "time", "share", "bound"});
  for (const auto& g : s.groups) {
    t.row({g.group, fmt("%.2f", g.flops / 1e9), fmt("%.1f", g.bytes / 1e6), units::format_time(g.compute_s),
           units::format_time(g.memory_s), units::format_time(g.seconds), fmt("%.1f%%", 100 * g.seconds / s.seconds),
           g.measured ? std::string("measured") : std::string(bound_name(g.bound))});
  }
  t.rule();
  t.row({"step", fmt("%.2f", s.flops / 1e9), fmt("%.1f", s.bytes / 1e6), "", "", units::format_time(s.seconds),
         "100%", ""});
  t.print(out);
  out << "\n  MFU " << fmt("%.1f%%", 100 * s.mfu) << ", MBU " << fmt("%.1f%%", 100 * s.mbu) << "; decode throughput "
      << fmt("%.0f", tokens_per_s) << " tokens/s (" << units::format_time(s.seconds)
      << " per output token per sequence)\n";
  out << "  time by bound: compute " << units::format_time(s.compute_s) << ", memory "
      << units::format_time(s.memory_s) << ", communication " << units::format_time(s.communication_s)
      << ", overhead " << units::format_time(s.overhead_s) << "\n";
  return out.str();
}

}  // namespace

RooflineAnswer answer_roofline(const RooflineRequest& r) {
  check_range(r.batch, 0, kRooflineMaxBatch, "--batch");
  check_range(r.context, 1, kRooflineMaxTokens, "--context");
  check_range(r.prefill, 0, kRooflineMaxTokens, "--prefill");
  check_range(r.prefill_cached, 0, kRooflineMaxTokens, "--prefill-cached");
  if (r.batch == 0 && r.prefill == 0) {
    throw Error("--batch, --prefill: the step is empty; give --batch >= 1 or --prefill >= 1");
  }
  const Deployment d = r.deployment.resolve();
  if (d.model.encoder_only) {
    throw Error("--model: " + d.model.name + " is encoder-only; roofline models decoder steps");
  }
  BatchShape b;
  for (long long i = 0; i < r.batch; ++i) b.add_decode(r.context);
  if (r.prefill > 0) b.add_prefill_chunk(r.prefill_cached, r.prefill, true);
  const RooflineCost cost(d);  // its achieved rates are every model's
  const StepBreakdown s = d.beyond_tp() ? make_step_cost(d)->breakdown(b) : cost.breakdown(b);

  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : s.groups) {
    groups.push_back({{"group", g.group}, {"flops", g.flops}, {"bytes", g.bytes}, {"compute_s", g.compute_s},
                      {"memory_s", g.memory_s}, {"seconds", g.seconds}, {"bound", bound_name(g.bound)},
                      {"source", g.measured ? "measured" : "roofline"}});
  }
  const double tokens_per_s = static_cast<double>(r.batch) / s.seconds;
  RooflineAnswer a;
  a.json = {{"model", d.model.name}, {"card", d.card.name}, {"tp", d.tp},
            {"weights", precision_name(d.weights)}, {"kv_cache", precision_name(d.kv_cache)},
            {"compute_precision", precision_name(d.compute_precision())}, {"engine", d.engine.name},
            {"batch", r.batch}, {"context", r.context}, {"prefill_tokens", r.prefill},
            {"step_seconds", s.seconds}, {"flops_per_gpu", s.flops}, {"bytes_per_gpu", s.bytes},
            {"compute_seconds", s.compute_s}, {"memory_seconds", s.memory_s},
            {"communication_seconds", s.communication_s}, {"overhead_seconds", s.overhead_s},
            {"mfu", s.mfu}, {"mbu", s.mbu}, {"decode_tokens_per_s", tokens_per_s},
            {"achieved_flops_per_s", cost.gemm_flops_per_s()}, {"achieved_bytes_per_s", cost.bytes_per_s()},
            {"gemm_source", cost.gemm_source()}, {"moe_source", cost.moe_source()},
            {"allreduce_source", cost.allreduce_source()}, {"attention_source", cost.attention_source()},
            {"groups", groups}};
  if (d.beyond_tp()) {
    a.json["pp"] = d.pp;
    a.json["dp"] = d.dp;
    a.json["expert_parallel"] = d.expert_parallel;
    a.json["cost_model"] = step_cost_model_name(d);
  }
  a.text = text_of(d, r, cost, s, tokens_per_s);
  return a;
}

}  // namespace capsim::answers
