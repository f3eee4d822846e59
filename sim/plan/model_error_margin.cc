#include "sim/plan/model_error_margin.h"

#include <cstdio>

#include "sim/core/units.h"

namespace capsim::plan {
namespace {

// "ttft_p95" -> "ttft"
std::string metric_of(const std::string& slo) {
  const auto cut = slo.rfind('_');
  return cut == std::string::npos ? slo : slo.substr(0, cut);
}

}  // namespace

ModelErrorMargin model_error_margin(const SloVerdict& verdict, const scenario::ModelErrorTable* table,
                                    const scenario::ErrorClass& cls) {
  ModelErrorMargin m;
  bool all_known = true, all_hold = true;
  for (const SloDecision& d : verdict.slos) {
    const auto metric = scenario::error_metric_of_slo(metric_of(d.slo));
    if (!metric) continue;
    SloMargin s;
    s.slo = d.slo;
    s.bound = d.bound;
    s.latency = d.has_interval ? d.high : d.value;
    if (table) s.error = table->find(cls, *metric);
    if (s.error) {
      s.with_error = s.latency * (1 + s.error->stat.p90);
      s.holds = s.with_error <= s.bound;
      all_hold = all_hold && s.holds;
    } else {
      all_known = false;
    }
    m.slos.push_back(s);
  }
  if (verdict.met && all_known) m.holds = all_hold;
  return m;
}

std::string ModelErrorMargin::text() const {
  if (holds && *holds) return "holds";
  if (holds) {
    for (const SloMargin& s : slos) {
      if (s.error && !s.holds) {
        char p[32];
        std::snprintf(p, sizeof p, "%.2f", 1 + s.error->stat.p90);
        return "fails: " + s.slo + " " + units::format_time(s.latency) + " x " + p + " = " +
               units::format_time(s.with_error) + " > " + units::format_time(s.bound);
      }
    }
  }
  for (const SloMargin& s : slos)
    if (!s.error) return "unknown: no model error for " + s.slo;
  return "unknown: the option does not pass";
}

}  // namespace capsim::plan
