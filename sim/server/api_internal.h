// Internal to the HTTP API's files (api.cc, api_scenario_jobs.cc, api_command_jobs.cc): the body
// readers and name checks that api.cc defines and each command's job uses, the templates among
// them, and the job makers that api.cc's prepare() dispatches to. Not part of the server's
// interface (api.h); each function's contract is stated where it is defined, in api.cc.
#pragma once

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>
#include <yaml-cpp/yaml.h>

#include "sim/core/error.h"
#include "sim/scenario/scenario.h"
#include "sim/server/api.h"

namespace capsim::server::detail {

using scenario::ScenarioSpec;

class PastedModel;

std::string json_text(const nlohmann::json& j);
YAML::Node to_yaml(const nlohmann::json& j);
std::string joined(const std::vector<std::string>& names);
void catalogue_card(const std::string& name, const std::string& field);
void catalogue_model(const std::string& name, const std::string& field);
void catalogue_engine(const std::string& name, const std::string& field);
void refuse_files(const ScenarioSpec& s, const std::string& pasted_model = "", const std::string& prefix = "");
[[noreturn]] void rethrow_as_http(const Error& e);
void check_duration(const std::optional<std::string>& text, const std::string& field, const Limits& limits);

// A body's scenario, and what must live as long as the job (a pasted config.json).
struct Scenario {
  ScenarioSpec spec;
  std::shared_ptr<const PastedModel> pasted;
};

Scenario scenario_of(const nlohmann::json& body, std::vector<std::string> own, const Limits& limits,
                     bool build = true);
nlohmann::json options_of(const nlohmann::json& body, const std::string& name, const std::vector<std::string>& keys);
std::string list_text(const nlohmann::json& v, const std::string& field);
std::string fmt_range(double lo, double hi);

template <typename T>
T number(const nlohmann::json& v, const std::string& field, double lo, double hi) {
  if (!v.is_number()) throw HttpError(400, field + ": expected a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi || (std::is_integral_v<T> && x != std::floor(x))) {
    throw HttpError(400, field + ": " + v.dump() + " is not " + (std::is_integral_v<T> ? "a whole number" : "a number") +
                             " in " + fmt_range(lo, hi));
  }
  return static_cast<T>(x);
}


std::vector<std::string> price_overrides(const nlohmann::json& v, const std::string& field);
void catalogue_cards(const std::string& list, const std::string& field);
void deployment_cards(const std::string& text, const std::string& field);
std::optional<double> min_goodput(const nlohmann::json& o, const std::string& field);

// Every answer runs with the job's cancel flag in its specs, and answers bad input found only by
// a run as 400 (422 for a run limit).
template <typename F>
std::string guarded(F&& run) {
  try {
    return run();
  } catch (const Error& e) {
    rethrow_as_http(e);
  }
}

// The job of a command with a base scenario (plan, capacity, compare): `run` answers one request
// whose base carries the job's cancel flag and returns the command's JSON.
template <typename Request, typename Run>
Job base_job(Request request, std::shared_ptr<const PastedModel> keep, Run run) {
  return [request = std::move(request), keep = std::move(keep), run](const CancelFlag& cancel, const ProgressFn& progress) {
    return guarded([&] {
      Request r = request;
      r.base.cancel = cancel;
      return json_text(run(r, progress));
    });
  };
}

// The job of each command's POST body (api.cc's prepare()); each throws HttpError before any work.
Job prepare_simulate(const nlohmann::json& body, const Limits& limits);
Job prepare_fit(const nlohmann::json& body, const Limits& limits);
Job prepare_plan(const nlohmann::json& body, const Limits& limits);
Job prepare_capacity(const nlohmann::json& body, const Limits& limits);
Job prepare_compare(const nlohmann::json& body, const Limits& limits);
Job prepare_check(const nlohmann::json& body, const Limits& limits);
Job prepare_batch_serve(const nlohmann::json& body, const Limits& limits);
Job prepare_finetune(const nlohmann::json& body, const Limits& limits);
Job prepare_calibrate(const nlohmann::json& body, const Limits& limits);
Job prepare_calibrate_runs(const nlohmann::json& body, const Limits& limits);
Job prepare_roofline(const nlohmann::json& body, const Limits& limits);
Job prepare_kernels(const nlohmann::json& body, const Limits& limits);
Job prepare_diff(const nlohmann::json& body, const Limits& limits);
Job prepare_sweep(const nlohmann::json& body, const Limits& limits);

}  // namespace capsim::server::detail
