// What an SLO measures in a simulation's result. Part of the scenario spec (the plan's search
// decides SLOs with it; the answers above report it), so it sits below sim/plan/.
#pragma once

#include "sim/cluster/simulation.h"
#include "sim/scenario/scenario.h"

namespace capsim::scenario {

// The value of an SLO's statistic in a result, seconds (NaN when there is no sample).
double slo_value(const SloSpec& slo, const SimulationResult& r);

}  // namespace capsim::scenario
