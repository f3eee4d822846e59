#include "sim/check/model_error_requirement.h"

#include <cstdio>

#include "sim/answers/model_error_answer.h"
#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/scenario/model_error.h"

namespace capsim::check {

bool parse_require_model_error(const YAML::Node& root, const std::string& path) {
  const YAML::Node n = root["require_model_error"];
  if (!n) return false;
  const std::string where = path + ": require_model_error";
  if (!n.IsScalar() || n.Scalar() != "p90") {
    throw Error(where + ": '" + (n.IsScalar() ? n.Scalar() : std::string("(not a single value)")) +
                "' is not accepted; accepted: p90 (an SLO passes only if latency x (1 + the class's p90 model "
                "error) is within its bound)");
  }
  return true;
}

void apply_model_error(AssertionOutcome& o, bool required, const scenario::ModelErrorTable* table) {
  if (!o.result || !o.built || o.built->config.groups.empty()) return;
  const Deployment& d = o.built->config.groups.front().deployment;
  o.model_error_text = scenario::model_error_line(d);
  o.model_error_json = answers::model_error_json(d);
  o.model_error_json["required"] = required;
  if (!required) return;
  const scenario::ErrorClass cls = scenario::error_class(d);
  for (Row& r : o.rows) {
    if (r.kind != "slo" || !r.passed || !r.limit) continue;
    const auto cut = r.item.rfind('_');
    const auto metric = scenario::error_metric_of_slo(cut == std::string::npos ? r.item : r.item.substr(0, cut));
    if (!metric) continue;
    const std::optional<scenario::ModelError> e = table ? table->find(cls, *metric) : std::nullopt;
    if (!e) {
      r.passed = false;
      r.message = "require_model_error: no model error for " + r.item + " of " + cls.label() +
                  (table ? "" : " (no calibration/model-error.yaml)") + ", so the margin cannot be shown";
      continue;
    }
    const double latency = r.high ? *r.high : r.measured.value_or(0);
    const double with_error = latency * (1 + e->stat.p90);
    if (with_error > *r.limit) {
      char factor[32];
      std::snprintf(factor, sizeof factor, "%.2f", 1 + e->stat.p90);
      r.passed = false;
      r.message = "within its bound, but not at capsim's model error (require_model_error: p90): " +
                  units::format_time(latency) + " x " + factor + " = " + units::format_time(with_error) + " > " +
                  units::format_time(*r.limit) + "; model error for " + cls.label() + " " + e->text();
    }
  }
}

}  // namespace capsim::check
