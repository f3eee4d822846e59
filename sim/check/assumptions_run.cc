// Running an assumptions file's assertions (declared in assumptions.h): each assertion simulated
// or searched as its kind asks, its measurements turned into PASS / FAIL / INCONCLUSIVE rows with
// the measured value, the limit and the margin, and the whole file's outcome. Reading the file is
// in assumptions.cc and the reports in assumptions_report.cc.
#include "sim/check/assumptions.h"
#include "sim/check/model_error_requirement.h"
#include "sim/check/assumptions_internal.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "sim/scenario/catalogues.h"
#include "sim/answers/simulate_report.h"
#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/input_limits.h"
#include "sim/core/units.h"
#include "sim/core/yaml_fields.h"
#include "sim/llm/memory_plan.h"
#include "sim/plan/capacity.h"
#include "sim/plan/search.h"
#include "sim/report/table.h"

namespace capsim::check {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

using detail::lookup;

std::string value_text(double v, const std::string& unit) {
  if (std::isnan(v)) return "-";
  if (unit == "s") return units::format_time(v);
  if (unit == "ms") return fmt("%.1f ms", v);
  if (unit == "users" || unit == "concurrency") return fmt("%.0f ", v) + unit;
  if (unit == "requests/s") return fmt("%.2f req/s", v);
  if (unit == "usd_per_hour") return "$" + fmt("%.2f", v) + "/h";
  if (unit == "preemptions") return fmt("%.0f", v) + " preemptions";
  if (unit == "tokens") return fmt("%.0f", v) + " KV tokens";
  if (unit == "tokens/s") return fmt("%.1f tok/s", v);
  return fmt("%.4g", v);
}

// Upper limit: the margin is the headroom below it as a share of it.
void upper(Row& r, double measured, double limit) {
  r.measured = measured;
  r.limit = limit;
  r.measured_text = value_text(measured, r.unit);
  r.limit_text = "<= " + value_text(limit, r.unit);
  r.passed = !std::isnan(measured) && measured <= limit;
  if (!std::isnan(measured) && limit != 0) r.margin = (limit - measured) / limit;
}

void lower(Row& r, double measured, double limit) {
  r.measured = measured;
  r.limit = limit;
  r.measured_text = value_text(measured, r.unit);
  r.limit_text = ">= " + value_text(limit, r.unit);
  r.passed = !std::isnan(measured) && measured >= limit;
  if (!std::isnan(measured) && limit != 0) r.margin = (measured - limit) / limit;
}

Row failed_row(const std::string& assertion, const std::string& kind, const std::string& item,
               const std::string& why) {
  Row r;
  r.assertion = assertion;
  r.kind = kind;
  r.item = item;
  r.measured_text = "-";
  r.limit_text = "-";
  r.passed = false;
  r.message = why;
  return r;
}

std::string metric_unit(const std::string& name) {
  if (name.size() > 3 && name.compare(name.size() - 3, 3, "_ms") == 0) return "ms";
  if (name.find("token_throughput") != std::string::npos || name == "output_throughput") return "tokens/s";
  if (name.find("request_") != std::string::npos && name.find("put") != std::string::npos) return "requests/s";
  return "";
}

AssertionOutcome run_one(const Assertion& a, const PriceBook& prices, double max_duration_s, int replications) {
  const auto t_start = Clock::now();
  AssertionOutcome out;
  out.name = a.name;
  out.description = a.description;
  out.scenario = a.spec.name;
  auto spec = std::make_shared<scenario::ScenarioSpec>(a.spec);
  out.spec = spec;
  bool needs_sim = false;
  for (const Expectation& e : a.expect) {
    needs_sim = needs_sim || e.kind == "slo" || e.kind == "no_preemption" || e.kind == "baseline";
  }
  // The scenario as built (resolved deployments), and its simulation when a kind needs one.
  auto built = std::make_shared<scenario::BuiltScenario>(scenario::build_scenario(a.spec));
  std::shared_ptr<SimulationResult> result;
  std::vector<SimulationResult> extra_runs;  // --replications: seeds + 1 .. + N - 1
  std::string sim_error;
  double sim_seconds = 0;
  if (needs_sim) {
    const auto t0 = Clock::now();
    try {
      built->config.progress = false;
      result = std::make_shared<SimulationResult>(simulate(built->config, *built->workload));
      // --until-conclusive: while an SLO is INCONCLUSIVE, run twice as long (same seed, same
      // warm-up) as far as the limit allows. Longer runs narrow the interval and let MSER-5 see
      // the end of the transient.
      const auto inconclusive = [&]() {
        for (const Expectation& e : a.expect) {
          if (e.kind != "slo") continue;
          for (const auto& s : e.slos) {
            if (plan::decide_slo(s, *result).decision == plan::Decision::kInconclusive) return true;
            if (!result->steady.analysed) return true;
          }
        }
        return false;
      };
      while (max_duration_s > 0 && spec->duration && inconclusive()) {
        const double now = units::parse_time(*spec->duration, "duration");
        if (2 * now > max_duration_s + 1e-9) break;
        auto longer = std::make_shared<scenario::ScenarioSpec>(*spec);
        longer->duration = fmt("%.17gs", 2 * now);
        if (longer->requests) longer->requests = *longer->requests * 2;
        built = std::make_shared<scenario::BuiltScenario>(scenario::build_scenario(*longer));
        built->config.progress = false;
        result = std::make_shared<SimulationResult>(simulate(built->config, *built->workload));
        spec = longer;
        out.spec = spec;
        ++out.extensions;
      }
      // --replications N: the other seeds of the (possibly extended) scenario, in parallel.
      if (replications > 1) extra_runs = plan::run_next_seeds(*spec, replications - 1, plan::default_threads());
    } catch (const Error& e) {
      sim_error = std::string("the simulation did not run: ") + e.what();
    }
    sim_seconds = since(t0);
    out.built = built;
    out.result = result;
  }
  bool sim_time_given = false;
  const auto take_sim_time = [&]() {
    if (sim_time_given) return 0.0;
    sim_time_given = true;
    return sim_seconds;
  };
  for (const Expectation& e : a.expect) {
    const auto t0 = Clock::now();
    std::vector<Row> rows;
    const auto base_row = [&](const std::string& item, const std::string& unit) {
      Row r;
      r.assertion = a.name;
      r.kind = e.kind;
      r.item = item;
      r.unit = unit;
      return r;
    };
    if (e.kind == "slo" || e.kind == "no_preemption" || e.kind == "baseline") {
      if (!result) {
        if (e.kind == "slo") {
          for (const auto& s : e.slos) rows.push_back(failed_row(a.name, e.kind, s.metric + "_" + s.statistic, sim_error));
        } else if (e.kind == "baseline") {
          for (const auto& m : e.metrics) rows.push_back(failed_row(a.name, e.kind, m.name, sim_error));
        } else {
          rows.push_back(failed_row(a.name, e.kind, "", sim_error));
        }
      } else if (e.kind == "slo") {
        // Decided with the run's 95% interval and its steady-state check (plan::decide_slo):
        // PASS only when the whole interval is inside the bound and the run settled.
        for (const auto& s : e.slos) {
          Row r = base_row(s.metric + "_" + s.statistic, "s");
          std::vector<const SimulationResult*> runs = {result.get()};
          for (const SimulationResult& x : extra_runs) runs.push_back(&x);
          const plan::SloDecision d = plan::decide_slo_replicated(s, runs);
          // The value printed, its interval, the margin and the verdict are one estimate: the
          // steady-state statistic the interval is centred on (the mean over seeds with
          // --replications), not the whole measured window's, which can lie outside it.
          upper(r, d.estimate, s.seconds);
          r.passed = d.decision == plan::Decision::kPass;
          // A run too short for an interval is INCONCLUSIVE there too (SloDecision::too_short).
          r.inconclusive = d.decision == plan::Decision::kInconclusive;
          if (d.has_interval) {
            r.low = d.low;
            r.high = d.high;
            r.measured_text += " (95%" + (d.seeds > 1 ? " over " + std::to_string(d.seeds) + " seeds" : std::string()) +
                               ": " + units::format_time(d.low) + " - " + units::format_time(d.high) + ")";
          }
          if (std::isnan(d.value)) {
            r.measured.reset();
            r.message = "no request completed with this statistic";
          } else if (!r.passed) {
            r.message = d.why;
          }
          rows.push_back(r);
        }
        for (const std::string& w : result->steady.warnings) {
          if (!rows.empty()) rows.back().message += (rows.back().message.empty() ? "" : "; ") + w;
        }
      } else if (e.kind == "no_preemption") {
        Row r = base_row("", "preemptions");
        r.measured = static_cast<double>(result->preemptions);
        r.limit = 0;
        r.measured_text = value_text(*r.measured, r.unit);
        r.limit_text = "0";
        r.passed = result->preemptions == 0;
        if (!r.passed) {
          r.message = std::to_string(result->preemptions) +
                      " preemptions: the KV cache ran out of blocks (more replicas, fp8 KV cache or a larger "
                      "gpu_memory_utilization give it room)";
        }
        rows.push_back(r);
      } else {
        const nlohmann::json now = answers::simulation_json(*spec, *built, *result);
        for (const BaselineMetric& m : e.metrics) {
          Row r = base_row(m.name, metric_unit(m.name));
          const double base = lookup(e.baseline, m.name)->get<double>();
          const nlohmann::json* v = lookup(now, m.name);
          if (!v || !v->is_number()) {
            rows.push_back(failed_row(a.name, e.kind, m.name, "this run has no number '" + m.name + "'"));
            continue;
          }
          const double measured = v->get<double>();
          const double limit = m.higher_is_worse ? base * (1 + e.tolerance) : base * (1 - e.tolerance);
          if (m.higher_is_worse) upper(r, measured, limit); else lower(r, measured, limit);
          r.limit_text += " (baseline " + value_text(base, r.unit) + (m.higher_is_worse ? " +" : " -") +
                          fmt("%g%%", 100 * e.tolerance) + ")";
          if (!r.passed) {
            const double worse = base != 0 ? (m.higher_is_worse ? measured / base - 1 : 1 - measured / base) : 0;
            r.message = m.name + " is " + value_text(measured, r.unit) + ", " + fmt("%.1f%%", 100 * worse) +
                        (m.higher_is_worse ? " above" : " below") + " the baseline's " + value_text(base, r.unit) +
                        " (tolerance " + fmt("%g%%", 100 * e.tolerance) + ")";
          }
          if (!e.baseline_note.empty()) r.message += (r.message.empty() ? "note: " : "; note: ") + e.baseline_note;
          rows.push_back(r);
        }
      }
      if (!rows.empty()) rows.front().seconds += take_sim_time();
    } else if (e.kind == "fits_in_memory") {
      // The verdict fit, compare and plan give (plan_fit), at the context asked about.
      const long long context = e.context ? *e.context : fit_context(built->config.groups.front().deployment);
      Row r = base_row("context " + std::to_string(context), "tokens");
      double min_tokens = INFINITY;
      bool fits = true;
      std::string why;
      for (const ReplicaGroup& g : built->config.groups) {
        const MemoryPlan mp = plan_fit(g.deployment, context);
        min_tokens = std::min(min_tokens, static_cast<double>(mp.kv_tokens));
        if (!mp.fits && fits) {
          fits = false;
          why = g.deployment.card.name + (g.deployment.tp > 1 ? " tp" + std::to_string(g.deployment.tp) : "") +
                ": " + mp.reason;
        }
      }
      lower(r, min_tokens, static_cast<double>(context));
      r.passed = fits;
      if (!fits) {
        r.margin.reset();
        r.message = why;
      }
      rows.push_back(r);
    } else if (e.kind == "max_cost_usd_per_hour") {
      Row r = base_row("", "usd_per_hour");
      double cost = 0;
      std::string what;
      for (const ReplicaGroup& g : built->config.groups) {
        cost += prices.usd_per_hour(g.deployment.card) * g.deployment.tp * g.replicas;
        what += (what.empty() ? "" : " + ") + std::to_string(g.replicas) + "x " + g.deployment.card.name +
                (g.deployment.tp > 1 ? " tp" + std::to_string(g.deployment.tp) : "");
      }
      r.item = what;
      upper(r, cost, e.limit);
      if (!r.passed) r.message = what + " rents for " + value_text(cost, r.unit) + ", over " + value_text(e.limit, r.unit);
      rows.push_back(r);
    } else if (e.kind == "min_users" || e.kind == "min_rate") {
      try {
        // The search and the verdict `capsim capacity --replications N` gives (plan::find_capacity,
        // plan::decide_min_load), so the two never disagree on one scenario and seeds.
        const plan::CapacityResult c =
            plan::find_capacity(a.spec, std::nullopt, replications, plan::default_threads());
        Row r = base_row("", c.axis.name);
        lower(r, c.capacity, e.limit);
        const plan::Decision d = plan::decide_min_load(c, e.limit);
        r.passed = d == plan::Decision::kPass;
        r.inconclusive = d == plan::Decision::kInconclusive;
        const std::string over = c.replications > 1 ? " over " + std::to_string(c.replications) + " seeds" : "";
        if (c.replications > 1) {
          r.low = c.low;
          r.high = c.high;
          r.measured_text += " (interval" + over + ": " + (c.axis.whole ? fmt("%.0f", c.low) : fmt("%.2f", c.low)) +
                             " - " + value_text(c.high, r.unit) + ")";
        }
        if (c.capacity <= 0 && !r.inconclusive) {
          r.message = "the SLOs fail even at " + value_text(c.floor_load, r.unit) + over;
        } else if (r.inconclusive && c.too_short_requests > 0) {
          r.message = "the SLOs hold up to " + value_text(c.capacity, r.unit) + " by the runs' statistics, but the run there had " +
                      plan::too_short_text(c.too_short_requests) + "; run longer (duration)";
        } else if (r.inconclusive) {
          r.message = value_text(e.limit, r.unit) + " is within the capacity's interval" + over + ": the SLOs hold" +
                      over + " up to " + value_text(c.capacity, r.unit) + ", and other seeds may hold them at " +
                      value_text(e.limit, r.unit) + "; more --replications or a longer run to decide";
        } else if (!r.passed) {
          r.message = "the SLOs hold" + over + " up to " + value_text(c.capacity, r.unit) + ", short of " +
                      value_text(e.limit, r.unit) +
                      (c.replications > 1 ? " (above the interval's top, " + value_text(c.high, r.unit) + ")" : std::string());
        }
        rows.push_back(r);
      } catch (const Error& x) {
        rows.push_back(failed_row(a.name, e.kind, "", std::string("the capacity search failed: ") + x.what()));
      }
    } else if (e.kind == "plan_cheapest_max_usd_per_hour") {
      try {
        const plan::PlanOutcome p = plan::search_plan(a.spec, e.space, prices, {});
        if (p.ok.empty()) {
          // Options within the SLOs on runs too short to verify them are not a miss: as plan says.
          const bool too_short = std::any_of(p.candidates.begin(), p.candidates.end(),
                                             [](const plan::Candidate& c) { return c.too_short; });
          Row r = failed_row(a.name, e.kind, "",
                             too_short ? "no option verified: the runs are too short to support a PASS (fewer than " +
                                             std::to_string(kMinSteadyStateObservations) +
                                             " measured requests); lengthen the scenario's duration"
                                       : "no option of the plan's space meets the SLOs");
          r.inconclusive = too_short;
          r.unit = "usd_per_hour";
          r.limit = e.limit;
          r.limit_text = "<= " + value_text(e.limit, r.unit);
          rows.push_back(r);
        } else {
          const plan::Candidate& c = p.candidates[p.ok.front()];
          Row r = base_row(std::to_string(c.search.best.replicas) + "x " + plan::label(c), "usd_per_hour");
          upper(r, c.option_usd_per_hour(), e.limit);
          if (!r.passed) {
            r.message = "the cheapest option, " + r.item + ", costs " + value_text(c.option_usd_per_hour(), r.unit);
          }
          rows.push_back(r);
        }
      } catch (const Error& x) {
        rows.push_back(failed_row(a.name, e.kind, "", std::string("the plan search failed: ") + x.what()));
      }
    }
    const double spent = since(t0);
    if (!rows.empty()) rows.front().seconds += spent;
    for (Row& r : rows) out.rows.push_back(std::move(r));
  }
  out.seconds = since(t_start);
  return out;
}

}  // namespace

bool AssertionOutcome::passed() const {
  return std::all_of(rows.begin(), rows.end(), [](const Row& r) { return r.passed; });
}

CheckOutcome run_checks(const Assumptions& a,
                        const std::function<void(const AssertionOutcome&, std::size_t, std::size_t)>& on_done) {
  const auto t0 = Clock::now();
  CheckOutcome out;
  out.file = a.path;
  out.assertions.resize(a.assertions.size());
  std::mutex m;
  std::size_t done = 0;
  const scenario::ModelErrorTable* errors = scenario::model_errors();  // a bad file throws here, before any run
  plan::run_parallel(
      a.assertions.size(), plan::pool_width(plan::default_threads()),
      [&](std::size_t i) {
        out.assertions[i] = run_one(a.assertions[i], a.prices, a.max_duration_s, a.replications);
        apply_model_error(out.assertions[i], a.require_model_error, errors);
        if (on_done) {
          std::lock_guard<std::mutex> lock(m);
          on_done(out.assertions[i], ++done, a.assertions.size());
        }
      },
      {});
  for (const AssertionOutcome& o : out.assertions) {
    for (const Row& r : o.rows) {
      ++out.tests;
      if (r.inconclusive) ++out.inconclusive;
      else if (!r.passed) ++out.failures;
    }
  }
  out.seconds = since(t0);
  return out;
}

}  // namespace capsim::check
