// The jobs of the HTTP API's commands that read a scenario (simulate, fit, plan, capacity,
// compare, check; declared in api_internal.h): each body checked field by field into the command's
// request before any work, and the job that answers it with the CLI's JSON. The readers they share
// are in api.cc.
#include "sim/server/api_internal.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <sstream>
#include <yaml-cpp/yaml.h>

#include "sim/check/assumptions.h"
#include "sim/cluster/simulation.h"
#include "sim/core/error.h"
#include "sim/core/input_limits.h"
#include "sim/core/units.h"
#include "sim/http/request_guard.h"
#include "sim/llm/speculative.h"
#include "sim/plan/search.h"
#include "sim/plan/sweep.h"
#include "sim/report/json_output.h"
#include "sim/report/table.h"
#include "sim/answers/batch_serve_answer.h"
#include "sim/answers/calibrate_answer.h"
#include "sim/answers/calibrate_runs_answer.h"
#include "sim/calibration/bench_runs.h"
#include "sim/answers/capacity_answer.h"
#include "sim/scenario/catalogues.h"
#include "sim/scenario/held_models.h"
#include "sim/llm/model_config_json.h"
#include "sim/answers/compare_answer.h"
#include "sim/answers/finetune_answer.h"
#include "sim/answers/fit_answer.h"
#include "sim/answers/listings.h"
#include "sim/answers/plan_answer.h"
#include "sim/answers/roofline_answer.h"
#include "sim/scenario/scenario.h"
#include "sim/answers/simulate_report.h"

namespace capsim::server::detail {

Job prepare_simulate(const nlohmann::json& body, const Limits& limits) {
  const nlohmann::json o = options_of(body, "simulate", {"replications"});
  // simulate --replications N: the same seeds and the same capsim.over_seeds, run one after
  // another inside this job (the pool bounds how many jobs run at once).
  const int replications =
      o.contains("replications") ? number<int>(o["replications"], "simulate.replications", 1, 10) : 1;
  const Scenario in = scenario_of(body, {"simulate"}, limits);
  return [in, replications](const CancelFlag& cancel, const ProgressFn&) {
    return guarded([&] {
      ScenarioSpec s = in.spec;
      s.cancel = cancel;
      const scenario::BuiltScenario b = scenario::build_scenario(s);
      const SimulationResult r = simulate(b.config, *b.workload);
      nlohmann::json j = answers::simulation_json(s, b, r);
      if (replications > 1) {
        const std::vector<SimulationResult> others = plan::run_next_seeds(s, replications - 1, 1);
        std::vector<const SimulationResult*> runs{&r};
        for (const SimulationResult& x : others) runs.push_back(&x);
        j["capsim"]["over_seeds"] = answers::replications_json(s, runs);
      }
      return json_text(j);
    });
  };
}

Job prepare_fit(const nlohmann::json& body, const Limits& limits) {
  const nlohmann::json o = options_of(body, "fit", {"context"});
  const Scenario in = scenario_of(body, {"fit"}, limits, false);
  std::optional<long long> context;
  if (o.contains("context")) context = number<long long>(o["context"], "fit.context", 1, 1e8);
  return [in, context](const CancelFlag&, const ProgressFn&) {
    return guarded([&] { return json_text(answers::answer_fit(in.spec.deployment, context).json); });
  };
}

// One engine step of the body's deployment (`capsim roofline`); a step of up to a million
// sequences is work for the pool, not the connection's thread.
Job prepare_roofline(const nlohmann::json& body, const Limits& limits) {
  const nlohmann::json o = options_of(body, "roofline", {"batch", "context", "prefill", "prefill_cached"});
  const Scenario in = scenario_of(body, {"roofline"}, limits, false);
  answers::RooflineRequest r;
  r.deployment = in.spec.deployment;
  constexpr double kBatch = answers::kRooflineMaxBatch, kTokens = answers::kRooflineMaxTokens;
  if (o.contains("batch")) r.batch = number<long long>(o["batch"], "roofline.batch", 0, kBatch);
  if (o.contains("context")) r.context = number<long long>(o["context"], "roofline.context", 1, kTokens);
  if (o.contains("prefill")) r.prefill = number<long long>(o["prefill"], "roofline.prefill", 0, kTokens);
  if (o.contains("prefill_cached")) {
    r.prefill_cached = number<long long>(o["prefill_cached"], "roofline.prefill_cached", 0, kTokens);
  }
  if (r.batch == 0 && r.prefill == 0) {
    throw HttpError(400, "roofline.batch, roofline.prefill: the step is empty; give batch >= 1 or prefill >= 1");
  }
  return [r, keep = in.pasted](const CancelFlag&, const ProgressFn&) {
    return guarded([&] { return json_text(answers::answer_roofline(r).json); });
  };
}

// A grid of simulations over the body's scenario (`capsim sweep`): the sweep object holds the
// axes (models, cards, tp, precisions, loads, seeds; docs/scale.md), the body's scenario is the
// one workload. Every name of an axis is a catalogue name, every run within the server's limits,
// the grid within --max-sweep-runs, all checked before the queue; the runs stop when the client
// goes away.
Job prepare_sweep(const nlohmann::json& body, const Limits& limits) {
  if (body.contains("sweep") && body["sweep"].is_object()) {
    const nlohmann::json& o = body["sweep"];
    if (o.contains("workloads")) {
      throw HttpError(400, "sweep.workloads: the server reads no scenario files; the body's scenario is the sweep's "
                           "one workload");
    }
    if (o.contains("set")) throw HttpError(400, "sweep.set: give those scenario fields in the body itself");
  }
  const nlohmann::json o = options_of(body, "sweep", {"name", "description", "models", "cards", "tp", "precisions",
                                                      "loads", "seeds"});
  const Scenario in = scenario_of(body, {"sweep"}, limits);
  for (const char* axis : {"models", "cards"}) {
    if (!o.contains(axis)) continue;
    const nlohmann::json& v = o[axis];
    const std::vector<nlohmann::json> names = v.is_array() ? v.get<std::vector<nlohmann::json>>() : std::vector<nlohmann::json>{v};
    for (std::size_t i = 0; i < names.size(); ++i) {
      const std::string field = std::string("sweep.") + axis + (v.is_array() ? "[" + std::to_string(i) + "]" : "");
      if (!names[i].is_string()) throw HttpError(400, field + ": expected a catalogue name");
      if (std::string(axis) == "models") catalogue_model(names[i].get<std::string>(), field);
      else catalogue_card(names[i].get<std::string>(), field);
    }
  }
  auto sweep = std::make_shared<plan::Sweep>();
  try {
    *sweep = plan::expand_sweep(to_yaml(o), "sweep", "sweep",
                                [&](const std::string&, const YAML::Node&) { return in.spec; });
  } catch (const Error& e) {
    throw HttpError(400, e.what());
  }
  if (sweep->runs.size() > static_cast<std::size_t>(limits.max_sweep_runs)) {
    throw HttpError(422, "sweep: the grid has " + std::to_string(sweep->runs.size()) + " runs; the server runs at most " +
                             std::to_string(limits.max_sweep_runs) + " per request (capsim serve --max-sweep-runs; "
                             "`capsim sweep` runs larger grids, sharded over a cluster: docs/scale.md)");
  }
  // A run past the server's limits (users of the loads axis, replicas) is refused now; one that
  // cannot run for another reason (the model does not fit that card) is a failed cell of the
  // answer, as in `capsim sweep`.
  for (const plan::SweepRun& run : sweep->runs) {
    try {
      (void)scenario::build_scenario(run.spec);
    } catch (const Error& e) {
      if (std::string(e.what()).find("--allow-large") != std::string::npos) rethrow_as_http(e);
    }
  }
  return [sweep, keep = in.pasted](const CancelFlag& cancel, const ProgressFn&) {
    return guarded([&] {
      plan::Sweep mine = *sweep;
      for (plan::SweepRun& run : mine.runs) run.spec.cancel = cancel;
      return json_text(plan::run_sweep(mine, plan::Shard{}, plan::pool_width(plan::default_threads()), false));
    });
  };
}

Job prepare_plan(const nlohmann::json& body, const Limits& limits) {
  const nlohmann::json o = options_of(body, "plan", {"cards", "card_class", "explain", "tp", "weights", "kv_cache",
                                                     "max_cards", "min_goodput", "price", "load_profile", "top",
                                                     "search_duration", "replications"});
  const Scenario in = scenario_of(body, {"plan"}, limits);
  answers::PlanRequest req;
  req.base = in.spec;
  if (o.contains("cards")) {
    req.cards = list_text(o["cards"], "plan.cards");
    catalogue_cards(req.cards, "plan.cards");
  }
  if (o.contains("card_class")) req.card_classes = list_text(o["card_class"], "plan.card_class");
  if (o.contains("explain")) {
    if (!o["explain"].is_string()) throw HttpError(400, "plan.explain: expected a card name such as \"t4\"");
    req.explain = o["explain"].get<std::string>();
    catalogue_card(req.explain, "plan.explain");
  }
  if (o.contains("tp")) req.tps = list_text(o["tp"], "plan.tp");
  if (o.contains("weights")) req.weights = list_text(o["weights"], "plan.weights");
  if (o.contains("kv_cache")) {
    req.kv = list_text(o["kv_cache"], "plan.kv_cache");
    req.kv_given = true;
  }
  if (o.contains("max_cards")) req.max_cards = number<int>(o["max_cards"], "plan.max_cards", 1, limits.max_cards);
  req.min_goodput = min_goodput(o, "plan");
  if (o.contains("price")) req.price_overrides = price_overrides(o["price"], "plan.price");
  if (o.contains("load_profile")) req.load_profile = list_text(o["load_profile"], "plan.load_profile");
  if (o.contains("top")) req.top = number<int>(o["top"], "plan.top", 1, 1000);
  if (o.contains("search_duration")) {
    if (!o["search_duration"].is_string()) throw HttpError(400, "plan.search_duration: expected a duration such as \"5min\"");
    req.search_duration = o["search_duration"].get<std::string>();
    check_duration(req.search_duration, "plan.search_duration", limits);
  }
  if (o.contains("replications")) req.replications = number<int>(o["replications"], "plan.replications", 1, 10);
  if (req.base.slos.empty() && !req.min_goodput) {
    throw HttpError(400, "slo: plan needs at least one SLO (e.g. \"slo\": {\"ttft_p95\": \"1s\"}) or plan.min_goodput");
  }
  return base_job(req, in.pasted, [](const answers::PlanRequest& r, const ProgressFn& progress) {
    return answers::answer_plan(r, [&](std::size_t d, std::size_t t, const char* what) {
             if (progress) progress({{"phase", what}, {"done", d}, {"total", t}});
           }).json;
  });
}

Job prepare_capacity(const nlohmann::json& body, const Limits& limits) {
  const nlohmann::json o = options_of(body, "capacity", {"min_goodput", "points", "replications"});
  const Scenario in = scenario_of(body, {"capacity"}, limits);
  answers::CapacityRequest req;
  req.base = in.spec;
  req.min_goodput = min_goodput(o, "capacity");
  if (o.contains("points")) req.points = number<int>(o["points"], "capacity.points", 2, 100);
  // As `capsim capacity --replications N`; at most 10 here, as plan's and simulate's (a server's
  // job budget; the CLI takes up to 100).
  if (o.contains("replications")) req.replications = number<int>(o["replications"], "capacity.replications", 1, 10);
  if (req.base.slos.empty() && !req.min_goodput) {
    throw HttpError(400, "slo: capacity needs at least one SLO (e.g. \"slo\": {\"ttft_p95\": \"1s\"}) or capacity.min_goodput");
  }
  return base_job(req, in.pasted, [](const answers::CapacityRequest& r, const ProgressFn& progress) {
    return answers::answer_capacity(r, [&](const char* phase, std::size_t d, std::size_t t) {
             if (progress) progress({{"phase", phase}, {"done", d}, {"total", t}});
           }).json;
  });
}

Job prepare_compare(const nlohmann::json& body, const Limits& limits) {
  const nlohmann::json o = options_of(body, "compare", {"deployments", "search_mix", "max_cards", "min_goodput", "price"});
  const Scenario in = scenario_of(body, {"compare"}, limits);
  answers::CompareRequest req;
  req.base = in.spec;
  if (o.contains("deployments")) {
    const nlohmann::json& d = o["deployments"];
    if (!d.is_array()) throw HttpError(400, "compare.deployments: expected a list such as [\"4x rtx-4090\", \"1x h100-sxm\"]");
    for (const auto& x : d) {
      if (!x.is_string()) throw HttpError(400, "compare.deployments: expected texts such as \"4x rtx-4090\"");
      req.deployments.push_back(x.get<std::string>());
    }
  }
  if (o.contains("search_mix")) {
    req.search_mix = list_text(o["search_mix"], "compare.search_mix");
    catalogue_cards(req.search_mix, "compare.search_mix");
  }
  if (o.contains("max_cards")) req.max_cards = number<int>(o["max_cards"], "compare.max_cards", 1, 64);
  req.min_goodput = min_goodput(o, "compare");
  if (o.contains("price")) req.price_overrides = price_overrides(o["price"], "compare.price");
  for (const auto& d : req.deployments) deployment_cards(d, "compare.deployments");
  if (req.deployments.empty() && req.search_mix.empty()) {
    throw HttpError(400, "compare.deployments: give at least one (or compare.search_mix), e.g. [\"4x rtx-4090\", \"1x h100-sxm\"]");
  }
  return base_job(req, in.pasted, [](const answers::CompareRequest& r, const ProgressFn& progress) {
    return answers::answer_compare(r, [&](std::size_t d, std::size_t t) {
             if (progress) progress({{"phase", "deployments"}, {"done", d}, {"total", t}});
           }).json;
  });
}

namespace {

// A check body is an assumptions document (docs/ci.md) as JSON, with its scenarios inline: the
// server reads no scenario, baseline or price file it names.
void refuse_file_fields(const nlohmann::json& j, const std::string& where, int depth = 0) {
  if (depth > kMaxJsonDepth) return;
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      // A baseline is a file whatever its form (expect.baseline: {file, tolerance}).
      if (((k == "scenario" || k == "prices" || k == "trace") && v.is_string()) || k == "baseline") {
        throw HttpError(400, where + k + ": the server reads no files; give it inline");
      }
      refuse_file_fields(v, where + k + ".", depth + 1);
    }
  } else if (j.is_array()) {
    const std::string list = where.empty() ? where : where.substr(0, where.size() - 1);  // "assertions[0]."
    for (std::size_t i = 0; i < j.size(); ++i) refuse_file_fields(j[i], list + "[" + std::to_string(i) + "].", depth + 1);
  }
}

// The names in a check body, before load_assumptions resolves any of them: each assertion's
// scenario fields (or the whole body's, in the one-scenario form) and the cards of a
// plan_cheapest_max_usd_per_hour expectation.
void refuse_check_names(const nlohmann::json& body) {
  const auto scenario_names = [](const nlohmann::json& fields, const std::vector<std::string>& own,
                                 const std::string& prefix) {
    ScenarioSpec s;
    const std::string label = prefix.empty() ? "request body" : "request body: " + prefix.substr(0, prefix.size() - 1);
    try {
      scenario::apply_scenario_yaml(to_yaml(fields), label, prefix, "", s, own);
    } catch (const Error& e) {
      throw HttpError(400, e.what());
    }
    refuse_files(s, "", prefix);
  };
  if (!body.contains("assertions")) {
    if (body.contains("workload")) scenario_names(body, {}, "");
    return;
  }
  const nlohmann::json& list = body["assertions"];
  if (!list.is_array()) return;  // load_assumptions says what it expects
  for (std::size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& a = list[i];
    if (!a.is_object()) continue;
    const std::string prefix = "assertions[" + std::to_string(i) + "].";
    scenario_names(a, {"name", "description", "scenario", "expect"}, prefix);
    if (!a.contains("expect") || !a["expect"].is_object()) continue;
    const nlohmann::json& ex = a["expect"];
    const std::string plan = "plan_cheapest_max_usd_per_hour";
    if (ex.contains(plan) && ex[plan].is_object() && ex[plan].contains("cards")) {
      const std::string field = prefix + "expect." + plan + ".cards";
      catalogue_cards(list_text(ex[plan]["cards"], field), field);
    }
  }
}

}  // namespace

Job prepare_check(const nlohmann::json& body, const Limits& limits) {
  refuse_file_fields(body, "");
  refuse_check_names(body);
  // Parsed in memory as the YAML a file would hold: the same reading as `capsim check FILE`.
  check::Assumptions a;
  try {
    YAML::Emitter out;
    out << to_yaml(body);
    a = check::assumptions_from_text(std::string(out.c_str()) + "\n", "request body");
  } catch (const Error& e) {
    throw HttpError(400, e.what());
  }
  for (const auto& as : a.assertions) check_duration(as.spec.duration, as.where + ": workload.duration", limits);
  return [a](const CancelFlag& cancel, const ProgressFn& progress) {
    return guarded([&] {
      check::Assumptions run = a;
      for (auto& as : run.assertions) as.spec.cancel = cancel;
      const check::CheckOutcome c = check::run_checks(run, [&](const check::AssertionOutcome&, std::size_t d, std::size_t t) {
        if (progress) progress({{"phase", "assertions"}, {"done", d}, {"total", t}});
      });
      return json_text(check::check_json(c));
    });
  };
}

// At most this many runs in one body: each is replayed at every step overhead the fit tries,
// for every fold (docs/calibration.md#your-own-runs).
constexpr std::size_t kMaxCalibrateRuns = 32;

// `capsim calibrate runs` on result files the body carries: the scenario's model and deployment
// (the runs measured them) and calibrate_runs: {runs: [...], date, seed}. Each run is a result
// file's JSON object (vllm bench serve --save-result, or GuideLLM's report), or {"name": ...,
// "result": {...}} to name it as the CLI names a file. Never a path: the server reads no file a
// client names. Each replay counts against --max-requests and --max-users as a run does.
Job prepare_calibrate_runs(const nlohmann::json& body, const Limits& limits) {
  const nlohmann::json o = options_of(body, "calibrate_runs", {"runs", "date", "seed"});
  const Scenario in = scenario_of(body, {"calibrate_runs"}, limits, false);
  answers::CalibrateRunsRequest req;
  req.deployment = in.spec.deployment;
  req.command_line = "POST /v1/calibrate/runs";
  const std::string what =
      "an array of result files' JSON objects (vllm bench serve --save-result, GuideLLM's report), each as "
      "{\"name\": \"conc8.json\", \"result\": {...}} or the object itself";
  if (!o.contains("runs")) throw HttpError(400, "calibrate_runs.runs: missing; expected " + what);
  const nlohmann::json& runs = o["runs"];
  if (!runs.is_array()) throw HttpError(400, "calibrate_runs.runs: expected " + what + ", got " + json_type_word(runs));
  if (runs.size() > kMaxCalibrateRuns) {
    throw HttpError(422, "calibrate_runs.runs: " + std::to_string(runs.size()) + " result files is more than the server fits at once (at most " +
                             std::to_string(kMaxCalibrateRuns) + ")");
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string field = "calibrate_runs.runs[" + std::to_string(i) + "]";
    const nlohmann::json& x = runs[i];
    if (x.is_string()) {
      throw HttpError(400, field + ": the server reads no files; send the result file's JSON object itself");
    }
    if (!x.is_object()) throw HttpError(400, field + ": expected " + what + ", got " + json_type_word(x));
    std::string name = field;
    const nlohmann::json* result = &x;
    if (x.contains("result")) {
      for (const auto& [k, v] : x.items()) {
        if (k != "name" && k != "result") throw HttpError(400, field + ": unknown field '" + k + "'; accepted: name, result");
      }
      if (x.contains("name")) {
        if (!x["name"].is_string() || x["name"].get<std::string>().empty()) {
          throw HttpError(400, field + ".name: expected text such as \"conc8.json\", got " + json_type_word(x["name"]));
        }
        name = x["name"].get<std::string>();
      }
      result = &x["result"];
      if (!result->is_object()) throw HttpError(400, field + ".result: expected a result file's JSON object, got " + json_type_word(*result));
    }
    std::vector<calibration::BenchRun> got;
    try {
      got = calibration::parse_bench_runs(*result, name);
    } catch (const Error& e) {
      throw HttpError(400, e.what());
    }
    for (calibration::BenchRun& r : got) {
      if (r.requests > limits.max_requests) {
        throw HttpError(422, r.label + ": " + std::to_string(r.requests) + " requests is more than the server runs (at most " +
                                 std::to_string(limits.max_requests) + " per run; capsim serve --max-requests)");
      }
      if (r.concurrency && *r.concurrency > limits.max_users) {
        throw HttpError(422, r.label + ": " + std::to_string(*r.concurrency) + " requests in flight is more than the server runs (at most " +
                                 std::to_string(limits.max_users) + "; capsim serve --max-users)");
      }
      req.runs.push_back(std::move(r));
    }
  }
  if (o.contains("date")) {
    const nlohmann::json& d = o["date"];
    const std::string text = d.is_string() ? d.get<std::string>() : "";
    const bool ok = text.size() == 10 && std::all_of(text.begin(), text.end(), [](char c) {
      return (c >= '0' && c <= '9') || c == '-';
    }) && text[4] == '-' && text[7] == '-';
    if (!ok) throw HttpError(400, "calibrate_runs.date: expected a date as YYYY-MM-DD, e.g. \"2026-12-06\"");
    req.date = text;
  }
  if (o.contains("seed")) req.seed = number<std::uint64_t>(o["seed"], "calibrate_runs.seed", 0, 9007199254740992.0);
  return [in, req](const CancelFlag& cancel, const ProgressFn&) {
    return guarded([&] {
      answers::CalibrateRunsRequest r = req;
      r.cancel = cancel;
      return json_text(answers::calibrate_runs_json(answers::answer_calibrate_runs(r), std::nullopt));
    });
  };
}

}  // namespace capsim::server::detail
