#include "sim/plan/capacity.h"

#include <algorithm>
#include <cmath>

#include "sim/core/error.h"
#include "sim/plan/search.h"
#include "sim/report/table.h"

namespace capsim::plan {

LoadAxis load_axis(const scenario::ScenarioSpec& s) {
  if (s.users) return {LoadKind::kUsers, "users", true};
  if (s.concurrency) return {LoadKind::kConcurrency, "concurrency", true};
  if (s.rate) {
    // A fixed request count at a higher rate only arrives sooner: the run never sees sustained
    // load, so the search would find no limit. A duration keeps the load on.
    if (!s.duration) {
      throw Error("--duration: capacity over a request rate needs a duration (e.g. --duration 10min), "
                  "not only --requests, so that a higher rate means more sustained load");
    }
    return {LoadKind::kRate, "requests/s", false};
  }
  throw Error("capacity: the workload needs --users, --concurrency or --rate (a load to vary); "
              "traces and offline runs have none");
}

double load_of(const scenario::ScenarioSpec& s, const LoadAxis& a) {
  switch (a.kind) {
    case LoadKind::kUsers: return *s.users;
    case LoadKind::kConcurrency: return *s.concurrency;
    case LoadKind::kRate: {
      const std::string first = s.rate->substr(0, s.rate->find_first_of(",@"));
      if (s.rate->find(',') != std::string::npos) {
        throw Error("--rate: capacity varies one rate, not stages ('" + *s.rate + "')");
      }
      return std::stod(first);
    }
  }
  return 0;
}

scenario::ScenarioSpec with_load(scenario::ScenarioSpec s, const LoadAxis& a, double load) {
  switch (a.kind) {
    case LoadKind::kUsers: s.users = static_cast<int>(std::llround(load)); break;
    case LoadKind::kConcurrency: s.concurrency = static_cast<int>(std::llround(load)); break;
    case LoadKind::kRate: s.rate = fmt("%.17g", load); break;
  }
  return s;
}

CapacityResult find_capacity(const scenario::ScenarioSpec& base, std::optional<double> min_goodput) {
  const LoadAxis axis = load_axis(base);
  CapacityResult out{axis};
  const auto meets = [&](double load) {
    return evaluate(with_load(base, axis, load), base.replicas, min_goodput).verdict.met;
  };
  const double floor_load = axis.whole ? 1 : 0.01;
  out.floor_load = floor_load;
  double lo = 0, hi = 0;  // lo meets (0 = none found yet), hi fails
  double probe = std::max(floor_load, load_of(base, axis));
  int evaluations = 0;
  if (meets(probe)) {
    lo = probe;
    for (;;) {
      const double next = probe * 2;
      ++evaluations;
      if (next > 1e7) throw Error("capacity: the SLOs still hold at " + fmt("%.0f", next) + " " + axis.name);
      if (!meets(next)) { hi = next; break; }
      lo = probe = next;
    }
  } else {
    hi = probe;
    while (probe > floor_load) {
      probe = std::max(floor_load, axis.whole ? std::floor(probe / 2) : probe / 2);
      ++evaluations;
      if (meets(probe)) { lo = probe; break; }
      hi = probe;
    }
  }
  if (lo > 0) {
    const double resolution = axis.whole ? 1.0 : std::max(0.01, lo * 0.02);
    while (hi - lo > resolution) {
      double mid = (lo + hi) / 2;
      if (axis.whole) mid = std::floor(mid);
      if (mid <= lo) break;
      ++evaluations;
      if (meets(mid)) lo = mid; else hi = mid;
    }
  }
  out.capacity = lo;
  out.evaluations = evaluations;
  return out;
}

}  // namespace capsim::plan
