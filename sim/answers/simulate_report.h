// The report of a simulation: a readable summary and the JSON (vLLM benchmark key names for what
// they share, documented in docs/json-output.md#simulate).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "sim/plan/search.h"
#include "sim/report/table.h"
#include "sim/scenario/scenario.h"
#include "sim/scenario/slo_value.h"

namespace capsim::answers {

nlohmann::json simulation_json(const scenario::ScenarioSpec& spec, const scenario::BuiltScenario& b,
                               const SimulationResult& r);
void print_simulation(std::ostream& os, const scenario::ScenarioSpec& spec, const scenario::BuiltScenario& b,
                      const SimulationResult& r);
// SimulationConfig::bounded_memory: the sentence the text and HTML reports give (which figures
// come from histograms and how close they are).
std::string bounded_memory_note();

// A run's latency table, one row per metric measured (TTFT, TPOT, ITL, E2E, then TTFT's parts:
// front end, queueing, prefill, return), as print_simulation and the HTML report both show it.
std::vector<std::string> latency_headings();
std::vector<std::vector<std::string>> latency_rows(const SimulationResult& r);
// The steady-state analysis as JSON (docs/json-output.md#steady-state): MSER-5 truncation, the
// 95% intervals of TTFT/TPOT/E2E (ms) and warnings.
nlohmann::json steady_state_json(const SteadyState& s);
// A few lines: the warm-up MSER-5 found, the intervals of the SLOs' statistics, the warnings.
void print_steady_state(std::ostream& os, const SteadyState& s);
// `simulate --replications N`: the scenario's statistics over independent runs (runs[0] is the
// scenario's own seed, runs[k] seed + k). Each SLO is decided by plan::decide_slo_replicated on
// the runs' steady-state estimates (a t interval over the seeds, which holds however correlated
// one run's output is); without SLOs the TTFT, TPOT and E2E p95 are shown the same way, with no
// verdict. REQUIRES: runs.size() >= 2.
nlohmann::json replications_json(const scenario::ScenarioSpec& spec, const std::vector<const SimulationResult*>& runs);
void print_replications(std::ostream& os, const scenario::ScenarioSpec& spec, const std::vector<const SimulationResult*>& runs);
// What print_replications prints, for the HTML page to show the same rows: a caption, the table
// (one row per SLO, or per p95 statistic without SLOs), each SLO's verdict in row order, and a
// line per SLO that did not pass saying why.
struct ReplicationsTable {
  std::string caption;
  TextTable table{std::vector<std::string>{}};
  std::vector<plan::Decision> decisions;
  std::vector<std::string> why;
};
ReplicationsTable replications_table(const scenario::ScenarioSpec& spec, const std::vector<const SimulationResult*>& runs);

// One SLO's row as the text report and the HTML page both show it: the SLO, its bound, the
// measured window, the steady state with its 95% interval, and decide_slo's verdict.
std::vector<std::string> slo_row(const scenario::SloSpec& slo, const SimulationResult& r);
// The headings of those rows.
std::vector<std::string> slo_row_headings();

}  // namespace capsim::answers
