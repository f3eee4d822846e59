#include "sim/answers/capacity_answer.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/report/table.h"

namespace capsim::scenario {
namespace {

using plan::LoadAxis;
using plan::load_of;
using plan::with_load;

}  // namespace

CapacityAnswer answer_capacity(const CapacityRequest& o, const CapacityProgress& progress) {
  CapacityAnswer a;
  a.base = o.base;
  const ScenarioSpec& base = a.base;
  validate_names(base);  // unknown names: exit 2 before anything runs
  if (base.slos.empty() && !o.min_goodput) {
    throw Error("--slo: capacity needs at least one SLO (e.g. --slo 'ttft_p95<=1s') or --min-goodput");
  }
  if (o.before_search) o.before_search();
  if (progress) progress("search", 0, 0);
  a.found = plan::find_capacity(base, o.min_goodput);
  const plan::CapacityResult& found = a.found;
  const LoadAxis axis = found.axis;
  const double capacity = found.capacity;
  const double floor_load = found.floor_load;
  const int evaluations = found.evaluations;

  // The curve: fractions of the capacity (or of the scenario's load when nothing meets the SLOs).
  const double ref = capacity > 0 ? capacity : load_of(base, axis);
  std::vector<double> fractions = {0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5};
  if (o.points != 8) {
    fractions.clear();
    for (int i = 1; i <= o.points; ++i) fractions.push_back(1.5 * i / o.points);
  }
  std::vector<double>& loads = a.loads;
  for (double f : fractions) {
    double l = ref * f;
    if (axis.whole) l = std::max(1.0, std::round(l));
    if (loads.empty() || l != loads.back()) loads.push_back(l);
  }
  std::vector<plan::Evaluation>& curve = a.curve;
  curve.resize(loads.size());
  plan::run_parallel(
      loads.size(), plan::default_threads(),
      [&](std::size_t i) { curve[i] = plan::evaluate(with_load(base, axis, loads[i]), base.replicas, o.min_goodput); },
      progress ? [&progress](std::size_t d, std::size_t t) { progress("curve", d, t); }
               : std::function<void(std::size_t, std::size_t)>());

  nlohmann::json& j = a.json;
  j["scenario"] = base.name;
  j["load_axis"] = axis.name;
  j["capacity"] = capacity;
  j["evaluations"] = evaluations;
  nlohmann::json pts = nlohmann::json::array();
  for (std::size_t i = 0; i < loads.size(); ++i) {
    const SimulationResult& r = curve[i].result;
    pts.push_back({{"load", loads[i]}, {"slos_met", curve[i].verdict.met}, {"slos_verdict", plan::decision_name(curve[i].verdict.decision)},
                   {"request_throughput", r.request_throughput}, {"output_throughput", r.output_throughput},
                   {"median_ttft_ms", r.ttft.median * 1e3}, {"p95_ttft_ms", r.ttft.p95 * 1e3},
                   {"p99_ttft_ms", r.ttft.p99 * 1e3}, {"p95_tpot_ms", r.tpot.p95 * 1e3},
                   {"p95_e2el_ms", r.e2el.p95 * 1e3}, {"goodput_fraction", r.goodput_fraction},
                   {"preemptions", r.preemptions}, {"binding_resource", plan::binding_resource(r)}});
  }
  j["curve"] = pts;
  const Deployment d = base.deployment.resolve();
  std::ostringstream text;
  // The title names every pool the load runs on: mixed fleets' other groups, and a
  // disaggregated deployment's decode pool and KV link (the main deployment is its prefill pool).
  const auto pool = [](int replicas, const std::string& card, int tp) {
    return std::to_string(replicas) + " x " + card + (tp > 1 ? " tp" + std::to_string(tp) : "");
  };
  std::string where = pool(base.replicas, d.card.name, d.tp);
  for (const auto& g : base.extra_groups) where += " + " + pool(g.replicas, g.card, g.tp);
  if (base.serving == "pd-disaggregated" && base.decode_pool) {
    where = "prefill " + where + ", decode " +
            pool(base.decode_pool->replicas, base.decode_pool->card, base.decode_pool->tp) + " over " +
            base.kv_link;
  }
  a.title = "capsim capacity: " + d.model.name + " on " + where + " (" + d.weights_label() + ")";
  a.verdict =
      capacity > 0 ? (axis.whole ? fmt("%.0f", capacity) : fmt("%.2f", capacity)) + " " + axis.name +
                         " meet every SLO (" + std::to_string(evaluations) + " simulations)"
                   : "none — the SLOs fail even at " + fmt("%g", floor_load) + " " + axis.name;
  const std::string& title = a.title;
  const std::string& verdict = a.verdict;
  text << title << "\n  capacity: " << verdict << "\n\n";
  TextTable& t = a.table;
  t = TextTable({axis.name, "req/s", "out tok/s", "TTFT p50", "TTFT p95", "TTFT p99", "TPOT p95",
               "E2E p95", "SLOs", "limited by"});
  bool unsure = false;
  for (std::size_t i = 0; i < loads.size(); ++i) {
    const SimulationResult& r = curve[i].result;
    // INCONCLUSIVE is not a miss: within the bounds (or straddling them) but not decided, e.g. a
    // run not yet at steady state; capacity counts only the loads verified to meet the SLOs.
    const bool inconclusive = curve[i].verdict.decision == plan::Decision::kInconclusive;
    unsure = unsure || inconclusive;
    t.row({axis.whole ? fmt("%.0f", loads[i]) : fmt("%.2f", loads[i]), fmt("%.2f", r.request_throughput),
           fmt("%.0f", r.output_throughput), units::format_time(r.ttft.median), units::format_time(r.ttft.p95),
           units::format_time(r.ttft.p99), units::format_time(r.tpot.p95), units::format_time(r.e2el.p95),
           curve[i].verdict.met ? "met" : inconclusive ? "unsure" : "missed", plan::binding_resource(r)});
  }
  t.print(text);
  if (unsure) {
    text << "\n  unsure: not decided (a run not at steady state, or an interval that straddles a bound: `capsim "
            "simulate` at that load says which); capacity counts only loads verified to meet the SLOs, so a "
            "longer run (--duration) can raise it\n";
  }
  a.text = text.str();
  return a;
}

}  // namespace capsim::scenario
