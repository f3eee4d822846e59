#include "sim/answers/model_error_answer.h"

#include "sim/hardware/measured_kernels.h"
#include "sim/scenario/model_error.h"

namespace capsim::scenario {
namespace {

nlohmann::json class_json(const ErrorClass& c) {
  return {{"cost_source", c.cost_source}, {"engine", c.engine}, {"architecture", c.architecture}, {"label", c.label()}};
}

ErrorClass option_class(const ScenarioSpec& base, const plan::Candidate& c) {
  return error_class(plan::spec_of(base, c).deployment.resolve());
}

// Where a deployment's step times come from: "measured" only when its card has kernel tables and
// they are on for its engine (kernels.measured_kernels, or the --measured-kernels override); the
// error class above says only whether the card has tables, which is not the same while the tables
// are off by default (docs/cost-model.md#measured-kernels).
std::string cost_source_of(const Deployment& d) {
  const bool tables = d.card.measured_kernels && !d.card.measured_kernels->empty();
  return tables && MeasuredKernels::enabled(d.engine.measured_kernels) ? "measured" : "roofline";
}

std::string option_cost_source(const ScenarioSpec& base, const plan::Candidate& c) {
  return cost_source_of(plan::spec_of(base, c).deployment.resolve());
}

}  // namespace

nlohmann::json model_error_json(const Deployment& d) {
  const ModelErrorTable* t = model_errors();
  nlohmann::json j = {{"class", class_json(error_class(d))}, {"file", nullptr}, {"metrics", nlohmann::json::object()}};
  if (!t) return j;
  j["file"] = "calibration/model-error.yaml";
  j["date"] = t->date();
  j["min_runs"] = t->min_runs();
  for (const ModelError& e : model_errors_for(d)) {
    j["metrics"][e.metric] = {{"p50", e.stat.p50}, {"p90", e.stat.p90}, {"bias", e.stat.bias}, {"runs", e.stat.runs},
                              {"pooled_over", e.fallback() ? nlohmann::json(class_json(e.used)) : nlohmann::json(nullptr)}};
  }
  return j;
}

std::string option_cost_source_text(const ScenarioSpec& base, const plan::Candidate& c) {
  return option_cost_source(base, c) == "measured" ? "measured tables" : "roofline";
}

plan::ModelErrorMargin option_model_error_margin(const ScenarioSpec& base, const plan::Candidate& c) {
  return plan::model_error_margin(c.search.best.verdict, model_errors(), option_class(base, c));
}

nlohmann::json margin_json(const plan::ModelErrorMargin& m) {
  nlohmann::json slos = nlohmann::json::array();
  for (const plan::SloMargin& s : m.slos) {
    slos.push_back({{"slo", s.slo}, {"bound_s", s.bound}, {"latency_s", s.latency},
                    {"p90", s.error ? nlohmann::json(s.error->stat.p90) : nlohmann::json(nullptr)},
                    {"with_error_s", s.error ? nlohmann::json(s.with_error) : nlohmann::json(nullptr)},
                    {"holds", s.error ? nlohmann::json(s.holds) : nlohmann::json(nullptr)}});
  }
  return {{"holds_at_p90", m.holds ? nlohmann::json(*m.holds) : nlohmann::json(nullptr)},
          {"rule", "latency x (1 + p90) <= bound, latency = the SLO's 95% interval upper end"},
          {"text", m.text()},
          {"slos", slos}};
}

nlohmann::json option_model_error_json(const ScenarioSpec& base, const plan::Candidate& c) {
  return deployment_model_error_json(plan::spec_of(base, c).deployment.resolve(), c.search.best.verdict);
}

plan::ModelErrorMargin deployment_model_error_margin(const Deployment& d, const plan::SloVerdict& verdict) {
  return plan::model_error_margin(verdict, model_errors(), error_class(d));
}

nlohmann::json deployment_model_error_json(const Deployment& d, const plan::SloVerdict& verdict) {
  const ErrorClass cls = error_class(d);
  nlohmann::json j = margin_json(plan::model_error_margin(verdict, model_errors(), cls));
  j["cost_source"] = cost_source_of(d);
  j["class"] = class_json(cls);
  return j;
}

}  // namespace capsim::scenario
