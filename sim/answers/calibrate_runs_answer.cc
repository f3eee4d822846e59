#include "sim/answers/calibrate_runs_answer.h"

#include "sim/core/checked.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <tuple>
#include <map>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "sim/cluster/simulation.h"
#include "sim/core/error.h"
#include "sim/core/wall_clock.h"
#include "sim/report/table.h"
#include "sim/scenario/scenario.h"
#include "sim/workload/generators.h"

namespace capsim::answers {

// The scenario layer's specs and catalogues, which every answer reads.
using namespace capsim::scenario;
namespace {

using calibration::BenchRun;

// Step overheads tried (seconds): a coarse grid over what engines show (vLLM 0.6 ms, slower
// front ends a few ms), then every 50 us around the best coarse point.
constexpr double kCoarseStepS = 250e-6, kMaxStepS = 3e-3, kFineStepS = 50e-6;

// One run simulated at one step overhead with the fitted request-path terms at 0.
struct SimPoint {
  double ttft = 0, tpot = 0, e2e = 0;  // ms
  double batch = 0;                    // mean sequences per step
};

struct Params {
  double step = 0, per_prompt_token = 0, per_sequence = 0;  // seconds
};

struct Predicted {
  double ttft = 0, tpot = 0, e2e = 0;  // ms
};

double ape(double predicted, double measured) { return std::abs(predicted / measured - 1); }

// The workload the run's load generator sent: its load (rate, concurrency or all at once), its
// requests and lengths (per request where the file saved them, each prompt with its own answer,
// else the means, fixed as vLLM's random dataset and GuideLLM's synthetic data send them).
ScenarioSpec run_spec(const DeploymentSpec& d, const BenchRun& r, std::uint64_t seed) {
  ScenarioSpec s;
  s.name = r.label;
  s.deployment = d;
  s.seed = seed;
  s.requests = std::max<std::int64_t>(r.requests, r.completed);
  s.input_tokens = std::to_string(std::max<long long>(1, std::llround(r.mean_input_tokens)));
  s.output_tokens = std::to_string(std::max<long long>(1, std::llround(r.mean_output_tokens)));
  if (r.concurrency) {
    s.concurrency = *r.concurrency;
  } else if (r.rate) {
    std::ostringstream rate;
    rate.precision(17);
    rate << *r.rate;
    s.rate = rate.str();
    s.arrival = r.arrival;
    s.burstiness = r.burstiness;
  } else {
    s.arrival = "offline";
  }
  return s;
}

std::unique_ptr<Workload> per_request_workload(const ScenarioSpec& s, const BuiltScenario& b, const BenchRun& r) {
  // Each measured request's prompt with its own answer (drawn independently before: a long
  // prompt met a short answer as often as its own); whole tokens, within what the types carry, as
  // an empirical distribution's draws are.
  LengthSpec lengths;
  auto pairs = std::make_shared<std::vector<std::pair<std::int64_t, std::int64_t>>>();
  const auto tokens = [](double v) { return std::clamp<std::int64_t>(std::llround(v), 1, checked::kMaxTokens); };
  for (std::size_t i = 0; i < r.input_lens.size(); ++i) pairs->emplace_back(tokens(r.input_lens[i]), tokens(r.output_lens[i]));
  lengths.paired = std::move(pairs);
  if (s.concurrency) {
    ClosedLoopConfig c;
    c.users = *s.concurrency;
    c.history = false;
    c.lengths = lengths;
    const Deployment& main = b.config.groups.front().deployment;
    c.max_context = main.limits.max_model_len > 0 ? main.limits.max_model_len : main.model.max_context;
    c.requests = s.requests;
    c.seed = s.seed;
    return make_closed_loop(c);
  }
  OpenLoopConfig o;
  o.process = parse_arrival_process(s.arrival, s.name);
  o.burstiness = s.burstiness;
  if (o.process == ArrivalProcess::kPoisson && s.burstiness != 1.0) o.process = ArrivalProcess::kGamma;
  if (s.rate) o.stages = {{*r.rate, 0}};
  o.requests = s.requests;
  o.lengths = lengths;
  o.seed = s.seed;
  return make_open_loop(o);
}

class Simulator {
 public:
  Simulator(const DeploymentSpec& d, const std::vector<BenchRun>& runs, std::uint64_t seed, CancelFlag cancel)
      : deployment_(d), runs_(runs), seed_(seed), cancel_(std::move(cancel)) {}

  const SimPoint& at(std::size_t run, double step_s) {
    const auto key = std::make_pair(run, std::llround(step_s * 1e9));
    const auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    const BenchRun& r = runs_[run];
    const ScenarioSpec s = run_spec(deployment_, r, seed_);
    BuiltScenario b;
    try {
      b = build_scenario(s);
    } catch (const Error& e) {
      throw Error(r.label + ": cannot replay this run on the deployment: " + std::string(e.what()));
    }
    if (!r.input_lens.empty()) b.workload = per_request_workload(s, b, r);
    for (ReplicaGroup& g : b.config.groups) {
      g.deployment.engine.step_overhead_s = step_s;
      g.deployment.engine.frontend_per_prompt_token_s = 0;
      g.deployment.engine.return_per_sequence_s = 0;
    }
    b.config.progress = false;
    b.config.cancel = cancel_;
    throw_if_cancelled(cancel_);  // between replays too: a short one may end before its first check
    const SimulationResult res = simulate(b.config, *b.workload);
    if (res.completed == 0) throw Error(r.label + ": no request completed in capsim's replay of this run");
    SimPoint p;
    p.ttft = res.ttft.mean * 1e3;
    p.tpot = res.tpot.mean * 1e3;
    p.e2e = res.e2el.mean * 1e3;
    double steps = 0, seqs = 0;
    for (const ReplicaSummary& rep : res.replicas) {
      const ReplicaStats& st = rep.stats;
      if (st.batch_sequences.count()) seqs += st.batch_sequences.mean() * static_cast<double>(st.steps);
      steps += static_cast<double>(st.steps);
    }
    p.batch = steps > 0 ? seqs / steps : 0;
    return cache_.emplace(key, p).first->second;
  }

  std::size_t size() const { return runs_.size(); }
  const BenchRun& run(std::size_t i) const { return runs_[i]; }

 private:
  DeploymentSpec deployment_;
  const std::vector<BenchRun>& runs_;
  std::uint64_t seed_;
  CancelFlag cancel_;
  std::map<std::pair<std::size_t, long long>, SimPoint> cache_;
};

// The request path is linear in its terms (docs/cost-model.md#request-path): TTFT and E2E gain
// per_prompt_token x prompt + per_sequence x the sequences in the step; TPOT keeps the step
// times. As scripts/fit_engine_constants.py, this ignores the small change a front-end delay
// makes to when requests meet in a batch.
Predicted predict(Simulator& sim, std::size_t i, const Params& p) {
  const SimPoint& s = sim.at(i, p.step);
  const double path_ms = (p.per_prompt_token * sim.run(i).mean_input_tokens + p.per_sequence * s.batch) * 1e3;
  return {s.ttft + path_ms, s.tpot, s.e2e + path_ms};
}

// Non-negative least squares of the TTFT residual on [prompt tokens, sequences per step], each
// run's equation divided by its measured TTFT (scripts/dev_runs.py --fit without the constant).
std::pair<double, double> fit_path(Simulator& sim, const std::vector<std::size_t>& set, double step) {
  std::vector<std::array<double, 2>> xs;
  std::vector<double> ys;
  for (std::size_t i : set) {
    const SimPoint& s = sim.at(i, step);
    const double w = 1.0 / sim.run(i).ttft_ms;
    xs.push_back({sim.run(i).mean_input_tokens * 1e3 * w, s.batch * 1e3 * w});  // ms per second of term
    ys.push_back((sim.run(i).ttft_ms - s.ttft) * w);
  }
  auto sse = [&](double a, double b) {
    double e = 0;
    for (std::size_t k = 0; k < xs.size(); ++k) e += std::pow(ys[k] - a * xs[k][0] - b * xs[k][1], 2);
    return e;
  };
  std::vector<std::pair<double, double>> candidates = {{0, 0}};
  double s00 = 0, s01 = 0, s11 = 0, y0 = 0, y1 = 0;
  for (std::size_t k = 0; k < xs.size(); ++k) {
    s00 += xs[k][0] * xs[k][0];
    s01 += xs[k][0] * xs[k][1];
    s11 += xs[k][1] * xs[k][1];
    y0 += xs[k][0] * ys[k];
    y1 += xs[k][1] * ys[k];
  }
  if (s00 > 0 && y0 > 0) candidates.push_back({y0 / s00, 0});
  if (s11 > 0 && y1 > 0) candidates.push_back({0, y1 / s11});
  const double det = s00 * s11 - s01 * s01;
  if (std::abs(det) > 1e-12 * (s00 * s11 + 1e-300)) {
    const double a = (y0 * s11 - y1 * s01) / det, b = (y1 * s00 - y0 * s01) / det;
    if (a >= 0 && b >= 0) candidates.push_back({a, b});
  }
  std::pair<double, double> best = candidates.front();
  for (const auto& c : candidates) {
    if (sse(c.first, c.second) < sse(best.first, best.second) - 1e-15) best = c;
  }
  return best;
}

// The step constants' target: the mean over the set of (|E2E error| + |TPOT error|) / 2 (TPOT
// alone for a run without E2E), as fit_engine_constants.py scores its grid.
double step_score(Simulator& sim, const std::vector<std::size_t>& set, const Params& p) {
  double sum = 0;
  for (std::size_t i : set) {
    const Predicted q = predict(sim, i, p);
    const BenchRun& r = sim.run(i);
    sum += r.e2e_ms ? (ape(q.e2e, *r.e2e_ms) + ape(q.tpot, r.tpot_ms)) / 2 : ape(q.tpot, r.tpot_ms);
  }
  return sum / static_cast<double>(set.size());
}

Params fit(Simulator& sim, const std::vector<std::size_t>& set, bool step_free, bool path_free, const Params& base) {
  auto with_step = [&](double step) {
    Params p = base;
    p.step = step;
    if (path_free) std::tie(p.per_prompt_token, p.per_sequence) = fit_path(sim, set, step);
    return p;
  };
  if (!step_free) return with_step(base.step);
  // A tie goes to the value nearer the base profile's.
  Params best;
  double best_score = 0;
  bool have = false;
  auto consider = [&](double step) {
    const Params p = with_step(step);
    const double s = step_score(sim, set, p);
    if (!have || s < best_score - 1e-12 ||
        (std::abs(s - best_score) <= 1e-12 && std::abs(step - base.step) < std::abs(best.step - base.step))) {
      best = p;
      best_score = s;
      have = true;
    }
  };
  for (double s = 0; s <= kMaxStepS + 1e-12; s += kCoarseStepS) consider(s);
  const double centre = best.step;
  for (int k = -4; k <= 4; ++k) {
    const double s = centre + k * kFineStepS;
    if (s >= 0) consider(s);
  }
  return best;
}

std::string percent(double f) { return fmt("%.1f%%", 100 * f); }

bool model_matches(const std::string& file_model, const ModelSpec& m) {
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
  };
  const std::string f = lower(file_model);
  const std::string tail = f.substr(f.find_last_of('/') == std::string::npos ? 0 : f.find_last_of('/') + 1);
  for (const std::string& known : {lower(m.name), lower(m.hf_id)}) {
    if (known.empty()) continue;
    const std::string known_tail = known.substr(known.find_last_of('/') == std::string::npos ? 0 : known.find_last_of('/') + 1);
    // A fine-tune or quantisation of the same model ("-Instruct", "-FP8") has its shapes.
    if (f == known || tail == known_tail || tail == known || tail.rfind(known_tail + "-", 0) == 0) return true;
  }
  return false;
}

std::string today() { return utc_now().substr(0, 10); }

// The base profile's YAML with the kept constants replaced and their references added.
std::string profile_yaml(const CalibrateRunsAnswer& a, const std::string& command_line, const std::string& files,
                         int runs) {
  YAML::Node root = YAML::LoadFile(a.deployment.engine.file);
  const std::string base = a.deployment.engine.name;
  root["name"] = base + "-calibrated";
  root["display_name"] = a.deployment.engine.display_name + ", calibrated to " + std::to_string(runs) + " runs (" +
                         a.date + ")";
  const std::string where = a.deployment.model.name + " on " + a.deployment.card.name + " TP" +
                            std::to_string(a.deployment.tp);
  auto set = [&](const char* section, const char* key, const std::string& value, const std::string& source) {
    YAML::Node n(YAML::NodeType::Map);
    n.SetStyle(YAML::EmitterStyle::Flow);
    n["value"] = value;
    n["source"] = source;
    root[section][key] = n;
  };
  for (const ConstantFit& c : a.constants) {
    if (!c.kept) continue;
    const std::string ref = c.field == "overhead.step" ? "own-runs-step" : "own-runs-request-path";
    root["references"][ref] =
        "capsim calibrate runs, " + a.date + ", on " + files + " (" + std::to_string(runs) + " runs of " + where +
        ", base profile " + base + "): fitted to every run; leave-one-run-out, the held-out runs' mean " + c.target +
        " error " + percent(c.oof_fitted) + " fitted vs " + percent(c.oof_base) + " at the base profile's value";
    if (c.field == "overhead.step") {
      set("overhead", "step", fmt("%.3f", a.step_s * 1e3) + "ms", ref);
    } else {
      set("request_path", "frontend_per_prompt_token", fmt("%.3f", a.frontend_per_prompt_token_s * 1e6) + "us", ref);
      set("request_path", "return_per_sequence", fmt("%.2f", a.return_per_sequence_s * 1e6) + "us", ref);
    }
  }
  YAML::Emitter out;
  out << root;
  return "# " + a.deployment.engine.display_name + " engine profile calibrated by `" + command_line + "` on " +
         a.date + " (docs/calibration.md#your-own-runs).\n# Schema: docs/data-formats.md#engines.\n" +
         std::string(out.c_str()) + "\n";
}

}  // namespace

CalibrateRunsAnswer answer_calibrate_runs(const CalibrateRunsRequest& request) {
  std::vector<BenchRun> runs = request.runs;
  if (runs.empty()) {
    for (const std::string& f : request.files) {
      for (BenchRun& r : calibration::load_bench_runs(f)) runs.push_back(std::move(r));
    }
  }
  if (runs.size() < 2) {
    throw Error("calibrate runs: " + std::to_string(runs.size()) +
                " run given; leaving one run out needs at least 2, so nothing can be cross-validated and "
                "nothing is fitted (give more result files, e.g. the same deployment at other rates)");
  }
  CalibrateRunsAnswer a;
  a.deployment = request.deployment.resolve();
  a.date = request.date.empty() ? today() : request.date;
  for (const BenchRun& r : runs) {
    if (!r.model.empty() && !model_matches(r.model, a.deployment.model)) {
      a.warnings.push_back(r.label + ": the run served '" + r.model + "', not --model " + a.deployment.model.name +
                           (a.deployment.model.hf_id.empty() ? "" : " (" + a.deployment.model.hf_id + ")") +
                           "; fitted as " + a.deployment.model.name);
    }
  }
  const EngineProfile& e = a.deployment.engine;
  const Params base{e.step_overhead_s, e.frontend_per_prompt_token_s, e.return_per_sequence_s};
  Simulator sim(request.deployment, runs, request.seed, request.cancel);
  const std::size_t n = runs.size();
  std::vector<std::size_t> all(n);
  for (std::size_t i = 0; i < n; ++i) all[i] = i;

  // Out of fold: run k predicted with the constants fitted on the others, for each choice of
  // which constants are free ([step free][path free]).
  std::vector<Predicted> oof[2][2];
  for (int sf = 0; sf < 2; ++sf) {
    for (int pf = 0; pf < 2; ++pf) {
      for (std::size_t k = 0; k < n; ++k) {
        std::vector<std::size_t> rest;
        for (std::size_t i : all) if (i != k) rest.push_back(i);
        oof[sf][pf].push_back(predict(sim, k, fit(sim, rest, sf, pf, base)));
      }
    }
  }
  auto mean_error = [&](const std::vector<Predicted>& pred, const std::string& metric) {
    double sum = 0;
    int count = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const BenchRun& r = runs[i];
      if (metric == "TTFT") sum += ape(pred[i].ttft, r.ttft_ms), ++count;
      if (metric == "TPOT") sum += ape(pred[i].tpot, r.tpot_ms), ++count;
      if (metric == "E2E" && r.e2e_ms) sum += ape(pred[i].e2e, *r.e2e_ms), ++count;
    }
    return std::make_pair(count ? sum / count : 0.0, count);
  };
  auto step_target = [&](const std::vector<Predicted>& pred) {
    const auto tpot = mean_error(pred, "TPOT"), e2e = mean_error(pred, "E2E");
    return e2e.second ? (tpot.first + e2e.first) / 2 : tpot.first;
  };
  // The rule of issue #32: a constant keeps its fitted value only where its out-of-fold error
  // beats the base profile's value (the other constant fitted in both).
  ConstantFit step{"overhead.step", "TPOT, E2E"};
  step.oof_fitted = step_target(oof[1][1]);
  step.oof_base = step_target(oof[0][1]);
  step.kept = step.oof_fitted < step.oof_base;
  ConstantFit path{"request_path", "TTFT"};
  path.oof_fitted = mean_error(oof[1][1], "TTFT").first;
  path.oof_base = mean_error(oof[1][0], "TTFT").first;
  path.kept = path.oof_fitted < path.oof_base;
  a.constants = {step, path};

  const Params final_params = fit(sim, all, step.kept, path.kept, base);
  a.step_s = final_params.step;
  a.frontend_per_prompt_token_s = final_params.per_prompt_token;
  a.return_per_sequence_s = final_params.per_sequence;
  std::vector<Predicted> in_sample, at_base;
  for (std::size_t i = 0; i < n; ++i) {
    in_sample.push_back(predict(sim, i, final_params));
    at_base.push_back(predict(sim, i, base));
    RunRow row;
    row.run = runs[i];
    row.base_ttft = at_base[i].ttft;
    row.base_tpot = at_base[i].tpot;
    row.base_e2e = at_base[i].e2e;
    row.ttft = in_sample[i].ttft;
    row.tpot = in_sample[i].tpot;
    row.e2e = in_sample[i].e2e;
    a.rows.push_back(row);
  }
  const std::vector<Predicted>& written_oof = oof[step.kept][path.kept];
  for (const std::string m : {"TTFT", "TPOT", "E2E"}) {
    const auto b = mean_error(at_base, m);
    if (b.second == 0) continue;
    a.errors.push_back({m, b.second, b.first, mean_error(in_sample, m).first, mean_error(written_oof, m).first});
  }
  std::string files;
  std::vector<std::string> seen;
  for (const BenchRun& r : runs) {
    if (std::find(seen.begin(), seen.end(), r.file) != seen.end()) continue;
    seen.push_back(r.file);
    files += (files.empty() ? "" : ", ") + std::filesystem::path(r.file).filename().string();
  }
  a.profile_yaml = profile_yaml(a, request.command_line.empty() ? "capsim calibrate runs" : request.command_line,
                                files, static_cast<int>(n));
  return a;
}

nlohmann::json calibrate_runs_json(const CalibrateRunsAnswer& a, const std::optional<std::string>& out) {
  nlohmann::json j;
  j["model"] = a.deployment.model.name;
  j["card"] = a.deployment.card.name;
  j["tp"] = a.deployment.tp;
  j["base_engine"] = a.deployment.engine.name;
  j["date"] = a.date;
  j["written"] = {{"overhead_step_ms", a.step_s * 1e3},
                  {"frontend_per_prompt_token_us", a.frontend_per_prompt_token_s * 1e6},
                  {"return_per_sequence_us", a.return_per_sequence_s * 1e6}};
  for (const ConstantFit& c : a.constants) {
    j["constants"].push_back({{"field", c.field}, {"target", c.target}, {"kept", c.kept},
                              {"out_of_fold_fitted", c.oof_fitted}, {"out_of_fold_base", c.oof_base}});
  }
  for (const MetricErrors& m : a.errors) {
    j["errors"].push_back({{"metric", m.metric}, {"runs", m.runs}, {"base", m.base}, {"in_sample", m.in_sample},
                           {"out_of_fold", m.out_of_fold}});
  }
  for (const RunRow& r : a.rows) {
    nlohmann::json x = {{"run", r.run.label}, {"format", r.run.format}, {"measured_ttft_ms", r.run.ttft_ms},
                        {"measured_tpot_ms", r.run.tpot_ms}, {"base_ttft_ms", r.base_ttft},
                        {"base_tpot_ms", r.base_tpot}, {"ttft_ms", r.ttft}, {"tpot_ms", r.tpot}};
    if (r.run.e2e_ms) {
      x["measured_e2e_ms"] = *r.run.e2e_ms;
      x["base_e2e_ms"] = r.base_e2e;
      x["e2e_ms"] = r.e2e;
    }
    j["runs"].push_back(x);
  }
  j["warnings"] = a.warnings;
  j["out"] = out ? nlohmann::json(*out) : nlohmann::json(nullptr);
  // The profile --out writes, so that a client of the HTTP API (which writes no file) has it too.
  j["profile_yaml"] = a.profile_yaml;
  return j;
}

void print_calibrate_runs(std::ostream& os, const CalibrateRunsAnswer& a) {
  os << "Engine overheads of " << a.deployment.model.name << " on " << a.deployment.card.name << " TP"
     << a.deployment.tp << " (base profile " << a.deployment.engine.name << "), from " << a.rows.size()
     << " runs\n\n";
  TextTable runs({"run", "load", "TTFT ms meas/base/fit", "TPOT ms meas/base/fit", "E2E ms meas/base/fit"});
  for (const RunRow& r : a.rows) {
    const BenchRun& b = r.run;
    const std::string load = b.concurrency ? "conc " + std::to_string(*b.concurrency)
                             : b.rate     ? fmt("%g req/s", *b.rate)
                                          : std::string("all at once");
    auto three = [](double m, double base, double fit) {
      return fmt("%.1f", m) + " / " + fmt("%.1f", base) + " / " + fmt("%.1f", fit);
    };
    runs.row({b.label, load, three(b.ttft_ms, r.base_ttft, r.ttft), three(b.tpot_ms, r.base_tpot, r.tpot),
              b.e2e_ms ? three(*b.e2e_ms, r.base_e2e, r.e2e) : "-"});
  }
  runs.print(os);
  os << "\nConstants (leave one run out; kept only where the held-out error beats the base value):\n";
  const EngineProfile& e = a.deployment.engine;
  for (const ConstantFit& c : a.constants) {
    os << "  " << c.field << ": " << (c.kept ? "kept" : "refused, base value stays") << " (out-of-fold "
       << c.target << " error " << percent(c.oof_fitted) << " fitted vs " << percent(c.oof_base) << " at base)\n";
  }
  os << "  written: overhead.step " << fmt("%.3f", a.step_s * 1e3) << " ms (base "
     << fmt("%.3f", e.step_overhead_s * 1e3) << "), frontend_per_prompt_token "
     << fmt("%.3f", a.frontend_per_prompt_token_s * 1e6) << " us (base "
     << fmt("%.3f", e.frontend_per_prompt_token_s * 1e6) << "), return_per_sequence "
     << fmt("%.2f", a.return_per_sequence_s * 1e6) << " us (base " << fmt("%.2f", e.return_per_sequence_s * 1e6)
     << ")\n\nMean error over the runs:\n";
  TextTable errors({"metric", "runs", "base profile", "written, in-sample", "written, out-of-fold"});
  for (const MetricErrors& m : a.errors) {
    errors.row({m.metric, std::to_string(m.runs), percent(m.base), percent(m.in_sample), percent(m.out_of_fold)});
  }
  errors.print(os);
  for (const std::string& w : a.warnings) os << "warning: " << w << "\n";
}

}  // namespace capsim::answers
