#include "sim/answers/model_error_answer.h"

#include "sim/cost/roofline_cost.h"
#include "sim/hardware/measured_kernels.h"
#include "sim/scenario/model_error.h"

namespace capsim::answers {

// The scenario layer's specs and catalogues, which every answer reads.
using namespace capsim::scenario;
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

namespace {

std::string step_costs_summary(const Deployment& d, const RooflineCost& cost) {
  bool any_measured = false, all_measured = true;
  for (const std::string* p : {&cost.gemm_source(), &cost.attention_source(), &cost.moe_source(), &cost.allreduce_source()}) {
    if (p->empty()) continue;
    const bool measured = p->rfind("measured:", 0) == 0;
    any_measured = any_measured || measured;
    all_measured = all_measured && measured;
  }
  if (all_measured) return "step costs: measured kernel tables (" + d.card.measured_kernels->describe() + ")";
  std::string s = "step costs: " + std::string(any_measured ? "measured kernel tables where they cover a layer, else " : "") +
                  "the datasheet roofline x " + d.card.name + "'s efficiencies (" + d.card.efficiency_data_text() + ")";
  if (d.card.measured_kernels && !MeasuredKernels::enabled(d.engine.measured_kernels)) {
    s += "; its measured kernel tables are off (--measured-kernels)";
  }
  return s;
}

}  // namespace

std::string step_costs_text(const Deployment& d) { return step_costs_summary(d, RooflineCost(d)); }

nlohmann::json step_costs_json(const Deployment& d) {
  const RooflineCost cost(d);
  const auto or_null = [](const std::string& x) { return x.empty() ? nlohmann::json(nullptr) : nlohmann::json(x); };
  return {{"summary", step_costs_summary(d, cost)},
          {"linear_layers", cost.gemm_source()},
          {"attention", cost.attention_source()},
          {"moe", or_null(cost.moe_source())},
          {"allreduce", or_null(cost.allreduce_source())}};
}

}  // namespace capsim::answers
