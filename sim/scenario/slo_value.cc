#include "sim/scenario/slo_value.h"

#include <cmath>
#include <string>

namespace capsim::scenario {
namespace {

const Percentiles& metric(const std::string& name, const SimulationResult& r) {
  if (name == "ttft") return r.ttft;
  if (name == "tpot") return r.tpot;
  if (name == "itl") return r.itl;
  return r.e2el;
}

}  // namespace

double slo_value(const SloSpec& slo, const SimulationResult& r) {
  const Percentiles& p = metric(slo.metric, r);
  if (p.count == 0) return std::nan("");
  if (slo.statistic == "mean") return p.mean;
  if (slo.statistic == "p50") return p.median;
  if (slo.statistic == "p90") return p.p90;
  if (slo.statistic == "p95") return p.p95;
  return p.p99;
}

}  // namespace capsim::scenario
