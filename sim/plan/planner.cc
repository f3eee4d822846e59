#include "sim/plan/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/cli/common.h"
#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/llm/memory_plan.h"
#include "sim/report/table.h"

namespace capsim::plan {

std::string label(const Candidate& c) {
  return c.card + (c.tp > 1 ? " tp" + std::to_string(c.tp) : "") + " " + c.weights +
         (c.kv != c.weights ? "/kv " + c.kv : "");
}

cli::ScenarioSpec spec_of(const cli::ScenarioSpec& base, const Candidate& c) {
  cli::ScenarioSpec s = base;
  s.deployment.card = c.card;
  s.deployment.tp = c.tp;
  s.deployment.weights = c.weights;
  s.deployment.kv_cache = c.kv;
  return s;
}

PlanOutcome search_plan(const cli::ScenarioSpec& base, const PlanSpace& space, const PriceBook& prices,
                        const PlanProgress& progress) {
  PlanOutcome out;
  std::vector<std::string> card_names = space.cards;
  if (card_names.empty()) {
    for (const Card& c : cli::cards().cards()) card_names.push_back(c.name);
  }
  // Candidates, rejected by the memory plan before any simulation.
  std::vector<Candidate>& cands = out.candidates;
  for (const auto& card : card_names) {
    for (int tp : space.tps) {
      if (tp > space.max_cards) continue;
      for (const auto& w : space.weights) {
        for (const auto& kv : space.kv_caches) {
          Candidate c;
          c.card = card;
          c.tp = tp;
          cli::ScenarioSpec s = base;
          s.deployment.card = card;
          s.deployment.tp = tp;
          s.deployment.weights = w;
          s.deployment.kv_cache = kv;
          try {
            const Deployment d = s.deployment.resolve();
            c.weights = std::string(precision_name(d.weights));
            c.kv = std::string(precision_name(d.kv_cache));
            const MemoryPlan mp = plan_memory(d, 1);
            if (!mp.fits) {
              c.rejected = true;
              c.reason = "does not fit: " + mp.reason;
            } else {
              c.usd_per_hour = prices.usd_per_hour(d.card) * tp;
            }
          } catch (const Error& e) {
            c.rejected = true;
            c.weights = w;
            c.kv = kv;
            c.reason = e.what();
          }
          cands.push_back(c);
        }
      }
    }
  }
  std::vector<std::size_t>& live = out.live;
  for (std::size_t i = 0; i < cands.size(); ++i) {
    if (!cands[i].rejected) live.push_back(i);
  }
  const unsigned threads = default_threads();
  // The search runs on a shortened measurement window (the answer is verified on the full one).
  cli::ScenarioSpec search_base = base;
  if (base.duration) {
    const double full = units::parse_time(*base.duration, "--duration");
    const double warm = units::parse_time(base.warmup, "--warmup");
    const double window = units::parse_time(space.search_duration, "--search-duration");
    if (window <= 0) throw Error("--search-duration: must be > 0");
    if (full - warm > window) search_base.duration = fmt("%.17gs", warm + window);
  }
  // Branch and bound: candidates in order of cost per replica, in rounds of a fixed width (so
  // which candidates are pruned does not depend on the thread count). A
  // candidate is searched only up to the replica count that would still rank among the `top`
  // cheapest options found so far; when not even one replica would, it is skipped.
  std::stable_sort(live.begin(), live.end(), [&](std::size_t a, std::size_t b) {
    return cands[a].usd_per_hour < cands[b].usd_per_hour;
  });
  std::vector<double> found_costs;  // $/hour of options found so far
  const auto bound = [&]() {
    if (static_cast<int>(found_costs.size()) < space.top) return std::numeric_limits<double>::infinity();
    std::vector<double> v = found_costs;
    std::nth_element(v.begin(), v.begin() + (space.top - 1), v.end());
    return v[static_cast<std::size_t>(space.top - 1)];
  };
  constexpr std::size_t kRound = 4;
  for (std::size_t start = 0; start < live.size(); start += kRound) {
    const std::size_t end = std::min(live.size(), start + kRound);
    const double limit = bound();
    std::vector<std::size_t> round;
    for (std::size_t k = start; k < end; ++k) {
      Candidate& c = cands[live[k]];
      const int by_cards = std::max(1, space.max_cards / c.tp);
      const int by_cost = std::isinf(limit) ? by_cards
                                            : static_cast<int>(std::floor(limit / c.usd_per_hour + 1e-9));
      if (by_cost < 1) {
        c.rejected = true;
        c.reason = "not searched: one replica costs more than the " + std::to_string(space.top) +
                   " cheapest options found";
        ++out.skipped;
        continue;
      }
      c.max_replicas = std::min(by_cards, by_cost);
      round.push_back(live[k]);
    }
    run_parallel(
        round.size(), threads,
        [&](std::size_t k) {
          Candidate& c = cands[round[k]];
          c.search = search_replicas(spec_of(search_base, c), c.max_replicas, space.min_goodput, false);
        },
        {});
    for (std::size_t i : round) {
      Candidate& c = cands[i];
      ++out.searched;
      if (c.search.found) {
        found_costs.push_back(c.usd_per_hour * c.search.best.replicas);
      } else {
        c.rejected = true;
        const bool cost_capped = c.max_replicas < std::max(1, space.max_cards / c.tp);
        c.reason = cost_capped
                       ? "not among the " + std::to_string(space.top) + " cheapest: misses the SLOs with the " +
                             std::to_string(c.max_replicas) + " replicas that would still rank"
                       : "misses the SLOs even with " + std::to_string(c.search.best.replicas) +
                             " replicas (--max-cards " + std::to_string(space.max_cards) + "); worst: " +
                             c.search.best.verdict.worst + " at " +
                             fmt("%.1f", c.search.best.verdict.worst_ratio) + "x its bound, limited by " +
                             binding_resource(c.search.best.result);
      }
    }
    if (progress) progress(std::min(end, live.size()), live.size(), "searching");
  }
  const auto rank = [&](std::vector<std::size_t>& idx) {
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
      const double ca = cands[a].option_usd_per_hour(), cb = cands[b].option_usd_per_hour();
      if (ca != cb) return ca < cb;
      return cands[a].total_cards() < cands[b].total_cards();
    });
  };
  std::vector<std::size_t>& ok = out.ok;
  for (std::size_t i : live) {
    if (!cands[i].rejected) ok.push_back(i);
  }
  rank(ok);
  // The cheapest few are re-run as whole clusters behind the router.
  out.verify_n = std::min<std::size_t>(3, ok.size());
  run_parallel(
      out.verify_n, threads,
      [&](std::size_t k) {
        Candidate& c = cands[ok[k]];
        c.search = search_replicas(spec_of(base, c), c.max_replicas, space.min_goodput, true);
        c.verified = c.search.found;
        if (!c.search.found) {
          c.rejected = true;
          c.reason = "misses the SLOs as a whole cluster up to --max-cards";
        }
      },
      progress ? std::function<void(std::size_t, std::size_t)>(
                     [&progress](std::size_t d, std::size_t t) { progress(d, t, "verifying"); })
               : std::function<void(std::size_t, std::size_t)>());
  ok.erase(std::remove_if(ok.begin(), ok.end(), [&](std::size_t i) { return cands[i].rejected; }), ok.end());
  rank(ok);
  return out;
}

}  // namespace capsim::plan
