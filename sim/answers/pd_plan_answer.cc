#include "sim/answers/pd_plan_answer.h"

#include <algorithm>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/plan/prices.h"
#include "sim/report/table.h"
#include "sim/scenario/catalogues.h"
#include "sim/answers/launch_command.h"

namespace capsim::answers {

// The scenario layer's specs and catalogues, which every answer reads.
using namespace capsim::scenario;
namespace {

// Why a split misses: the SLO it misses worst, read as the pool that is short. TTFT is the
// prefill pool's queue and compute (plus the handoff); TPOT is the decode pool's batch.
std::string why_of(const plan::Evaluation& e) {
  if (e.verdict.met) return "meets every SLO";
  const std::string& w = e.verdict.worst;
  const std::string ratio = fmt("%.2f", e.verdict.worst_ratio);
  if (w.rfind("ttft", 0) == 0) return "misses " + w + " (" + ratio + "x the bound): prefill-bound, add prefill";
  if (w.rfind("tpot", 0) == 0 || w.rfind("itl", 0) == 0) {
    return "misses " + w + " (" + ratio + "x the bound): decode-bound, add decode";
  }
  return "misses " + w + " (" + ratio + "x the bound)";
}

nlohmann::json eval_json(const plan::Evaluation& e) {
  const SimulationResult& r = e.result;
  nlohmann::json j = {{"slos_met", e.verdict.met}, {"worst_slo", e.verdict.worst},
                      {"worst_slo_ratio", e.verdict.worst_ratio}, {"p95_ttft_ms", r.ttft.p95 * 1e3},
                      {"p95_tpot_ms", r.tpot.p95 * 1e3}, {"output_throughput", r.output_throughput},
                      {"decision", plan::decision_name(e.verdict.decision)}};
  if (r.pd) {
    j["kv_transfer_p50_ms"] = r.pd->kv_transfer.median * 1e3;
    j["kv_transfer_p95_ms"] = r.pd->kv_transfer.p95 * 1e3;
    j["kv_bytes_mean"] = r.pd->mean_kv_bytes;
  }
  return j;
}

}  // namespace

PdPlanAnswer answer_pd_plan(const PdPlanRequest& o) {
  PdPlanAnswer a;
  const ScenarioSpec& base = o.base;
  validate_names(base);
  if (base.serving != "pd-disaggregated" || !base.decode_pool) {
    throw Error("--pd-search: give the pools' cards and TP with --prefill-pool and --decode-pool (their replica "
                "counts are searched) and --kv-link, or a scenario with a disaggregation section");
  }
  if (base.slos.empty() && !o.min_goodput) {
    throw Error("--slo: plan --pd-search needs at least one SLO (e.g. --slo 'ttft_p95<=1s') or --min-goodput");
  }
  (void)resolve_decode_pool(base);  // bad pools are bad input (exit 2), not "no split fits"
  const PriceBook prices = load_prices_with_overrides(
      o.prices_file.empty() ? data_dir() + "/calibration/prices.yaml" : o.prices_file, cards(), o.price_overrides);
  const int tp_p = base.deployment.tp, tp_d = base.decode_pool->tp;
  const double usd_p = prices.usd_per_hour(cards().find(base.deployment.card)) * tp_p;
  const double usd_d = prices.usd_per_hour(cards().find(base.decode_pool->card)) * tp_d;
  const int lo = o.total_cards ? *o.total_cards : tp_p + tp_d;
  const int hi = o.total_cards ? *o.total_cards : o.max_cards;
  if (lo < tp_p + tp_d) {
    throw Error("--pd-total: " + std::to_string(lo) + " GPUs cannot hold one prefill (TP " + std::to_string(tp_p) +
                ") and one decode replica (TP " + std::to_string(tp_d) + ")");
  }
  // Totals smallest first; each total's splits run in parallel; the first total with a split
  // that meets the SLOs ends the search (a larger one costs more for the same cards).
  for (int total = lo; total <= hi && a.best < 0; ++total) {
    std::vector<PdSplit> batch;
    for (int p = 1; p * tp_p < total; ++p) {
      const int rest = total - p * tp_p;
      if (rest % tp_d != 0) continue;
      PdSplit s;
      s.prefill = p;
      s.decode = rest / tp_d;
      s.cards = total;
      s.usd_per_hour = p * usd_p + s.decode * usd_d;
      batch.push_back(s);
    }
    plan::run_parallel(batch.size(), plan::default_threads(), [&](std::size_t i) {
      ScenarioSpec s = base;
      s.decode_pool->replicas = batch[i].decode;
      batch[i].eval = plan::evaluate(s, batch[i].prefill, o.min_goodput);
      batch[i].why = why_of(batch[i].eval);
    }, {});
    for (const PdSplit& s : batch) {
      a.splits.push_back(s);
      const bool better = a.best < 0 || s.usd_per_hour < a.splits[static_cast<std::size_t>(a.best)].usd_per_hour - 1e-9 ||
                          (s.usd_per_hour < a.splits[static_cast<std::size_t>(a.best)].usd_per_hour + 1e-9 &&
                           s.eval.verdict.worst_ratio < a.splits[static_cast<std::size_t>(a.best)].eval.verdict.worst_ratio);
      if (s.eval.verdict.met && better) a.best = static_cast<int>(a.splits.size()) - 1;
    }
  }
  // Aggregated serving on the same cards: each pool's card at TP 1, 2, 4, 8 (as plan's default
  // --tp list), fewest replicas meeting the SLOs; deployments that do not fit are skipped.
  std::vector<std::pair<std::string, int>> configs;
  for (const std::string& card : {base.deployment.card, base.decode_pool->card}) {
    for (int tp : {1, 2, 4, 8}) {
      if (std::find(configs.begin(), configs.end(), std::make_pair(card, tp)) == configs.end()) configs.push_back({card, tp});
    }
  }
  for (const auto& [card, tp] : configs) {
    ScenarioSpec s = base;
    s.serving = "aggregated";
    s.decode_pool.reset();
    s.deployment.card = card;
    s.deployment.tp = tp;
    if (tp > hi) continue;
    const int max_replicas = std::max(1, hi / tp);
    plan::ReplicaSearch r;
    try {
      r = plan::search_whole_cluster(s, 1, max_replicas, o.min_goodput);
    } catch (const Error&) {
      continue;  // does not fit (or TP does not divide the heads): not a baseline
    }
    if (!r.found) continue;
    const double usd = prices.usd_per_hour(cards().find(card)) * tp * r.best.replicas;
    if (!a.aggregated || usd < a.aggregated_usd_per_hour) {
      a.aggregated = r.best;
      a.aggregated_usd_per_hour = usd;
      a.aggregated_label = std::to_string(r.best.replicas) + "x " + card + (tp > 1 ? " tp" + std::to_string(tp) : "");
    }
  }

  nlohmann::json& j = a.json;
  j["scenario"] = base.name;
  j["model"] = base.deployment.model;
  j["kv_link"] = base.kv_link;
  j["prefill_pool"] = {{"card", base.deployment.card}, {"tp", tp_p}};
  j["decode_pool"] = {{"card", base.decode_pool->card}, {"tp", tp_d}};
  nlohmann::json splits = nlohmann::json::array();
  for (std::size_t i = 0; i < a.splits.size(); ++i) {
    const PdSplit& s = a.splits[i];
    splits.push_back({{"prefill_replicas", s.prefill}, {"decode_replicas", s.decode}, {"cards", s.cards},
                      {"usd_per_hour", s.usd_per_hour}, {"best", static_cast<int>(i) == a.best}, {"why", s.why},
                      {"result", eval_json(s.eval)}});
  }
  j["splits"] = splits;
  if (a.aggregated) {
    j["aggregated"] = {{"deployment", a.aggregated_label}, {"usd_per_hour", a.aggregated_usd_per_hour},
                       {"result", eval_json(*a.aggregated)}};
  } else {
    j["aggregated"] = nullptr;
  }
  std::ostringstream t;
  t << "capsim plan --pd-search: " << base.deployment.model << " for " << base.name << "\n  prefill pool "
    << base.deployment.card << " tp" << tp_p << ", decode pool " << base.decode_pool->card << " tp" << tp_d
    << ", KV over " << base.kv_link << "; SLOs:";
  for (const SloSpec& s : base.slos) t << " " << s.metric << "_" << s.statistic << "<=" << units::format_time(s.seconds);
  t << "\n\n";
  TextTable table({"", "prefill", "decode", "cards", "$/hour", "TTFT p95", "TPOT p95", "KV transfer p95", "out tok/s", "why"});
  for (std::size_t i = 0; i < a.splits.size(); ++i) {
    const PdSplit& s = a.splits[i];
    const SimulationResult& r = s.eval.result;
    table.row({static_cast<int>(i) == a.best ? ">" : "", std::to_string(s.prefill), std::to_string(s.decode),
               std::to_string(s.cards), fmt("%.2f", s.usd_per_hour), units::format_time(r.ttft.p95),
               units::format_time(r.tpot.p95), r.pd ? units::format_time(r.pd->kv_transfer.p95) : "-",
               fmt("%.0f", r.output_throughput), s.why});
  }
  table.print(t);
  if (a.best >= 0) {
    const PdSplit& b = a.splits[static_cast<std::size_t>(a.best)];
    t << "\n  answer: " << b.prefill << " prefill + " << b.decode << " decode replicas (" << b.cards << " GPUs, $"
      << fmt("%.2f", b.usd_per_hour) << "/hour), the cheapest split that meets every SLO\n";
  } else {
    t << "\n  answer: no split " << (o.total_cards ? "of " + std::to_string(*o.total_cards) + " GPUs" : "up to --max-cards")
      << " meets every SLO\n";
  }
  if (a.aggregated) {
    t << "  aggregated on the same cards: " << a.aggregated_label << " ($" << fmt("%.2f", a.aggregated_usd_per_hour)
      << "/hour, TTFT p95 " << units::format_time(a.aggregated->result.ttft.p95) << ", TPOT p95 "
      << units::format_time(a.aggregated->result.tpot.p95) << ")";
    if (a.best >= 0) {
      const double pd = a.splits[static_cast<std::size_t>(a.best)].usd_per_hour;
      t << (pd < a.aggregated_usd_per_hour - 1e-9 ? ": disaggregation is cheaper by " + fmt("%.0f%%", 100 * (1 - pd / a.aggregated_usd_per_hour))
            : pd > a.aggregated_usd_per_hour + 1e-9 ? ": aggregated serving is cheaper by " + fmt("%.0f%%", 100 * (1 - a.aggregated_usd_per_hour / pd))
            : ": the same cost");
    }
    t << "\n";
  } else {
    t << "  aggregated on the same cards: none up to " << hi << " GPUs meets every SLO\n";
  }
  if (a.best >= 0) {
    ScenarioSpec s = base;
    const PdSplit& b = a.splits[static_cast<std::size_t>(a.best)];
    s.replicas = b.prefill;
    s.decode_pool->replicas = b.decode;
    t << "\n  to launch as simulated (docs/deployment-options.md#the-config-to-launch):\n";
    std::vector<LaunchCommand> cmds;
    for (const LaunchTarget& lt : launch_targets(s)) {
      for (LaunchCommand& c : launch_commands(lt)) cmds.push_back(std::move(c));
    }
    t << launch_text(cmds, "    ");
    j["launch"] = launch_json(cmds);
  }
  a.text = t.str();
  return a;
}

}  // namespace capsim::answers
