#include "sim/answers/capacity_answer.h"
#include "sim/answers/model_error_answer.h"
#include "sim/scenario/model_error.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/steady_state.h"
#include "sim/core/units.h"
#include "sim/report/table.h"

namespace capsim::answers {

// The scenario layer's specs and catalogues, which every answer reads.
using namespace capsim::scenario;
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
  a.found = plan::find_capacity(base, o.min_goodput, o.replications, plan::default_threads());
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
      loads.size(), plan::pool_width(plan::default_threads()),
      // Each point decided over the same seeds as the search, so the curve's verdict at the
      // capacity is the search's.
      [&](std::size_t i) {
        curve[i] = plan::evaluate(with_load(base, axis, loads[i]), base.replicas, o.min_goodput, found.replications);
      },
      progress ? [&progress](std::size_t d, std::size_t t) { progress("curve", d, t); }
               : std::function<void(std::size_t, std::size_t)>());

  nlohmann::json& j = a.json;
  j["scenario"] = base.name;
  j["load_axis"] = axis.name;
  j["capacity"] = capacity;
  // null, or the requests the capacity's run measured when too few to verify it (a PASS needs 200).
  j["too_short_requests"] = found.too_short_requests > 0 ? nlohmann::json(found.too_short_requests) : nlohmann::json();
  j["evaluations"] = evaluations;
  j["replications"] = found.replications;
  j["first_seed"] = found.first_seed;
  j["simulations"] = found.simulations;
  j["interval"] = {{"low", found.low},
                   {"high", found.high},
                   {"standard_error", found.standard_error},
                   {"jackknife_error", found.jackknife_error},
                   {"seed_capacity_sd", found.seed_capacity_sd},
                   {"fails_from", found.fails_from > 0 ? nlohmann::json(found.fails_from) : nlohmann::json()},
                   {"seed_capacities", found.seed_capacities.empty() ? std::vector<double>{capacity}
                                                                     : found.seed_capacities},
                   {"leave_one_out", found.leave_one_out}};
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
  j["model_error"] = model_error_json(d);
  j["step_costs"] = step_costs_json(d);
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
  const auto load_text = [&axis](double l) { return axis.whole ? fmt("%.0f", l) : fmt("%.2f", l); };
  const int n = found.replications;
  const std::string seeds = n > 1 ? "seeds " + std::to_string(found.first_seed) + "-" +
                                        std::to_string(found.first_seed + static_cast<std::uint64_t>(n) - 1)
                                  : "seed " + std::to_string(found.first_seed);
  a.verdict =
      capacity > 0 ? load_text(capacity) + " " + axis.name + " meet every SLO" +
                         (n > 1 ? " over " + std::to_string(n) + " seeds (" + seeds + ", " +
                                      std::to_string(found.simulations)
                                : " (" + std::to_string(evaluations)) +
                         " simulations)"
                   : "none — the SLOs fail even at " + fmt("%g", floor_load) + " " + axis.name +
                         (n > 1 ? " over " + seeds : "");
  if (found.too_short_requests > 0) {
    a.verdict += "; not verified: within the SLOs by its statistics, but the run at that load had " +
                 plan::too_short_text(found.too_short_requests) + "; lengthen --duration";
  }
  if (n > 1) {
    const auto [seed_lo, seed_hi] = std::minmax_element(found.seed_capacities.begin(), found.seed_capacities.end());
    a.interval = load_text(found.low) + " - " + load_text(found.high) + " " + axis.name +
                 " (capacity +/- " + load_text(student_t_quantile(n - 1, 0.975) * found.standard_error) +
                 ", and every answer of a seed alone or one left out); each seed alone: " + load_text(*seed_lo) + " - " +
                 load_text(*seed_hi) + "; " +
                 (found.fails_from > 0 ? "the seeds together fail from " + load_text(found.fails_from)
                                       : "no load the search tried fails over the seeds");
  }
  const std::string& title = a.title;
  const std::string& verdict = a.verdict;
  text << title << "\n  capacity: " << verdict << "\n";
  if (n > 1) text << "  interval: " << a.interval << "\n";
  text << "  " << step_costs_text(d) << "\n";
  text << "  " << model_error_line(d) << "\n";
  text << "\n";
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
    text << "\n  unsure: not decided (a run not at steady state, too short for an interval (under " << kMinSteadyStateObservations
         << " measured requests), or an interval that straddles a bound: `capsim "
            "simulate` at that load says which); capacity counts only loads verified to meet the SLOs, so a "
            "longer run (--duration) can raise it\n";
  }
  // What the numbers mean (docs/planning.md#capsim-capacity-how-much-load-one-deployment-serves).
  if (n > 1) {
    text << "\n  capacity: the most load whose verdict over the " << n
         << " seeds is PASS (each SLO's 95% interval over the seeds inside its bound, as `plan --replications` "
            "decides). interval: where another " << n
         << " seeds' answer is expected: the capacity +/- t(" << n - 1
         << ", 0.975) x a standard error (the larger of the jackknife's, the search rerun with each seed left out, "
            "and the single-seed capacities' standard deviation: the verdict hangs on the worst seed), widened to "
            "the answers of each seed alone and each left out, below the load the seeds fail at. `check` "
            "min_users/min_rate with the same --replications passes up to the capacity, fails above the interval, "
            "is inconclusive within it\n";
  } else {
    text << "\n  one seed (" << found.first_seed
         << "), no interval: where lengths, think times or arrivals are random the answer moves with the seed; "
            "--replications 8 decides each load over 8 seeds and gives one\n";
  }
  a.text = text.str();
  return a;
}

}  // namespace capsim::answers
