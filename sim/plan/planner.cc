#include "sim/plan/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "sim/scenario/catalogues.h"
#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/core/yaml_fields.h"
#include "sim/llm/memory_plan.h"
#include "sim/report/table.h"

namespace capsim::plan {

std::string label(const Candidate& c) {
  return c.card + (c.tp > 1 ? " tp" + std::to_string(c.tp) : "") + " " + c.weights +
         (c.kv != c.weights ? "/kv " + c.kv : "");
}

std::vector<std::string> routers_to_try(const scenario::ScenarioSpec& base) {
  std::vector<std::string> out = {base.router};
  const bool multi_turn = base.users && base.turns != "1" && base.turns != "fixed:1";
  const bool shared_prefix = base.system_prompt_tokens > 0 || base.trace.has_value();
  if ((multi_turn || shared_prefix) && base.router != "prefix-aware") out.push_back("prefix-aware");
  return out;
}

scenario::ScenarioSpec spec_of(const scenario::ScenarioSpec& base, const Candidate& c) {
  scenario::ScenarioSpec s = base;
  if (!c.router.empty()) s.router = c.router;
  s.deployment.card = c.card;
  s.deployment.tp = c.tp;
  s.deployment.weights = c.weights;
  s.deployment.kv_cache = c.kv;
  return s;
}

namespace {

// The scenario's load and its unit (load_headroom), or an empty unit when there is none to scale.
std::pair<double, std::string> load_of(const scenario::ScenarioSpec& s) {
  if (s.users) return {*s.users, "users"};
  if (s.concurrency) return {*s.concurrency, "concurrent requests"};
  if (s.rate && s.rate->find_first_of(",@") == std::string::npos) {
    return {parse_number(*s.rate, "--rate"), "requests/s"};
  }
  if (s.rate || s.trace) return {1, "x load"};
  return {0, ""};
}

// `s` under `factor` x its load: users and concurrency rounded to the nearest whole number,
// every stage's rate scaled, a trace replayed `factor` x faster.
scenario::ScenarioSpec with_load_factor(const scenario::ScenarioSpec& spec, double factor) {
  scenario::ScenarioSpec s = spec;
  if (s.users) s.users = std::max(1, static_cast<int>(std::lround(*s.users * factor)));
  if (s.concurrency) s.concurrency = std::max(1, static_cast<int>(std::lround(*s.concurrency * factor)));
  if (s.trace && !s.rate) s.time_scale /= factor;
  if (s.rate) {
    std::string out;
    std::size_t start = 0;
    for (;;) {
      const std::size_t comma = s.rate->find(',', start);
      const std::string part = s.rate->substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      const auto at = part.find('@');
      out += (out.empty() ? "" : ",") + fmt("%.17g", parse_number(part.substr(0, at), "--rate") * factor) +
             (at == std::string::npos ? "" : part.substr(at));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    s.rate = out;
  }
  return s;
}

// The whole cluster of `from`'s deployment searched behind each router from `start` replicas
// (search_routers), as verification runs it.
RoutersSearch verify_option(const scenario::ScenarioSpec& base, const PlanSpace& space, const Candidate& from,
                            const std::vector<std::string>& routers, int start, unsigned threads) {
  std::vector<scenario::ScenarioSpec> specs;
  for (const std::string& router : routers) {
    Candidate c;  // the deployment only: no copy of the search's results
    c.card = from.card;
    c.tp = from.tp;
    c.weights = from.weights;
    c.kv = from.kv;
    c.router = router;
    specs.push_back(spec_of(base, c));
  }
  const int by_cards = std::max(1, space.max_cards / from.tp);
  // One replica behind any router is the same run (every router sends every request to it); not
  // with extra card groups (then one replica of the option is not alone).
  const bool shared = routers.size() >= 2 && specs.front().extra_groups.empty();
  return search_routers(
      routers.size(), start, by_cards,
      [&](std::size_t r, int n) {
        Evaluation e = evaluate(specs[r], n, space.min_goodput, space.replications);
        drop_run_details(e.result);
        // More replicas do not lengthen a run that is too short: the search steers by the
        // statistic, and take_verification refuses to call the outcome verified.
        e.too_short = e.verdict.only_too_short();
        e.verdict = search_verdict(std::move(e.verdict));
        return e;
      },
      shared, std::min<unsigned>(threads, static_cast<unsigned>(routers.size())));
}

// Takes a verification's outcome into `c`: the replicas each router needed, the search, and
// either the winning router (verified) or the reason it is rejected. Returns whether it passed.
bool take_verification(Candidate& c, RoutersSearch&& rs, const std::vector<std::string>& routers) {
  c.estimated_replicas = c.search.best.replicas;
  for (std::size_t r = 0; r < routers.size(); ++r) {
    c.router_replicas.push_back({routers[r], rs.routers[r].replicas, rs.routers[r].at_least});
  }
  c.search = std::move(rs.search);
  if (!rs.found) {
    c.rejected = true;
    c.reason = "misses the SLOs as a whole cluster up to --max-cards behind every router tried (the load-share "
               "estimate was " + std::to_string(c.estimated_replicas) + " replicas)";
    return false;
  }
  c.router = routers[rs.router];
  if (c.search.best.too_short) {
    c.rejected = true;
    c.too_short = true;
    c.reason = "not verified: within the SLOs with " + std::to_string(c.search.best.replicas) +
               (c.search.best.replicas == 1 ? " replica" : " replicas") + " behind " + c.router + ", but on " +
               too_short_text(c.search.best.result.steady.observations) + "; lengthen the run (--duration or --requests)";
    return false;
  }
  c.verified = true;
  return true;
}

}  // namespace

Candidate::Headroom load_headroom(const scenario::ScenarioSpec& spec, int replicas,
                                  std::optional<double> min_goodput) {
  Candidate::Headroom h;
  // Not a structured binding: clang 14 (the fuzz and sanitizer builds) refuses lambdas that
  // capture one.
  const std::pair<double, std::string> load_and_unit = load_of(spec);
  const double load = load_and_unit.first;
  const std::string& unit = load_and_unit.second;
  if (unit.empty()) return h;
  h.searched = true;
  h.unit = unit;
  h.load = load;
  h.max_load = load;
  // The load a factor gives, as with_load_factor runs it.
  const auto load_at = [&](double f) {
    return unit == "users" || unit == "concurrent requests" ? std::max(1.0, static_cast<double>(std::lround(load * f)))
                                                             : load * f;
  };
  double lo = 1, hi = 0;
  const auto run = [&](double f) {
    Evaluation e = evaluate(with_load_factor(spec, f), replicas, min_goodput, 1, true);
    e.verdict = search_verdict(std::move(e.verdict));  // above the verified load: more requests
    ++h.runs;
    if (e.verdict.met) {
      lo = f;
      h.max_load = load_at(f);
    } else {
      hi = f;
      h.fail_load = load_at(f);
      h.fails_first = e.verdict.worst;
      h.fails_as = e.verdict.decision;
    }
    return e.verdict.met;
  };
  for (const double f : {1.25, 1.6, 2.5, kHeadroomMaxFactor}) {
    if (load_at(f) <= load_at(lo)) continue;  // a small load rounds to the same count
    if (!run(f)) break;
  }
  if (hi == 0) {
    h.capped = true;
    return h;
  }
  for (int step = 0; step < 2; ++step) {
    const double mid = (lo + hi) / 2;
    if (load_at(mid) <= load_at(lo) || load_at(mid) >= load_at(hi)) break;
    run(mid);
  }
  return h;
}

PlanOutcome search_plan(const scenario::ScenarioSpec& base, const PlanSpace& space, const PriceBook& prices,
                        const PlanProgress& progress) {
  // The first CPU sample: the candidates below (a few hundred memory plans) are the interval the
  // first pool's width is measured on.
  (void)pool_width(2);
  PlanOutcome out;
  std::vector<std::string> card_names = space.cards;
  if (card_names.empty()) {
    for (const Card& c : scenario::cards().cards()) card_names.push_back(c.name);
  }
  // Candidates, rejected by the memory plan before any simulation.
  std::vector<Candidate>& cands = out.candidates;
  for (const auto& card : card_names) {
    for (int tp : space.tps) {
      if (tp > space.max_cards) continue;
      for (const auto& w : space.weights) {
        std::vector<std::string> kvs = space.kv_caches;
        const bool expand = space.try_fp8_kv && !base.deployment.model.empty() &&
                            std::find(kvs.begin(), kvs.end(), "fp8") == kvs.end() &&
                            std::find(kvs.begin(), kvs.end(), "auto") != kvs.end();
        if (expand) {
          // fp8 KV only where the engines support it: otherwise the candidate does not exist
          // (it is not a rejection a user asked for).
          try {
            scenario::ScenarioSpec probe = base;
            probe.deployment.card = card;
            probe.deployment.tp = tp;
            probe.deployment.weights = w;
            probe.deployment.kv_cache = "fp8";
            probe.deployment.resolve();
            kvs.push_back("fp8");
          } catch (const Error&) {
          }
        }
        for (const auto& kv : kvs) {
          Candidate c;
          c.card = card;
          c.tp = tp;
          scenario::ScenarioSpec s = base;
          s.deployment.card = card;
          s.deployment.tp = tp;
          s.deployment.weights = w;
          s.deployment.kv_cache = kv;
          try {
            const Deployment d = s.deployment.resolve();
            // A checkpoint run as shipped keeps the spec ("auto"): re-resolving a plain "bf16"
            // would re-quantise gpt-oss's mxfp4 experts.
            c.weights = d.expert_weights ? w : std::string(precision_name(d.weights));
            c.kv = std::string(precision_name(d.kv_cache));
            // The verdict `fit` and `compare` give (plan_fit): a candidate whose KV cache cannot
            // hold one ordinary request is not searched, whatever the simulator would make of it.
            const MemoryPlan mp = plan_fit(d);
            if (!mp.fits) {
              c.rejected = true;
              c.reason = "does not fit: " + mp.reason;
            } else {
              c.usd_per_hour = prices.usd_per_hour(d.card) * d.gpus();  // tp x pp x dp
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
  // The most threads plan may use; each pool takes as many of them as the machine gives it now
  // (pool_width: on cores other sessions keep busy, one).
  const unsigned threads = default_threads();
  // The search runs on a shortened measurement window (the answer is verified on the full one).
  scenario::ScenarioSpec search_base = base;
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
  // The `top`-th cheapest of `costs` (infinite while there are fewer).
  const auto top_th = [&](std::vector<double> v) {
    if (static_cast<int>(v.size()) < space.top) return std::numeric_limits<double>::infinity();
    std::nth_element(v.begin(), v.begin() + (space.top - 1), v.end());
    return v[static_cast<std::size_t>(space.top - 1)];
  };
  const auto bound = [&]() { return top_th(found_costs); };
  // The most replicas worth searching under a limit (0: not even one would rank). Never
  // decreases as the limit grows.
  const auto cap = [&](const Candidate& c, double limit) {
    const int by_cards = std::max(1, space.max_cards / c.tp);
    const int by_cost = std::isinf(limit) ? by_cards : static_cast<int>(std::floor(limit / c.usd_per_hour + 1e-9));
    return by_cost < 1 ? 0 : std::min(by_cards, by_cost);
  };
  constexpr std::size_t kRound = 4;
  std::size_t start = 0;
  while (start < live.size()) {
    // Rounds run as one batch while each round's caps are certain before the batch's earlier
    // rounds end. A round's limit is the top-th cheapest option found before it. The batch's
    // earlier candidates can each add at most one option, costing at least their price per
    // replica (replicas >= 1), so that limit lies between top_th(found + those prices) and
    // bound() (nothing added); a candidate's cap never decreases with the limit, so when both
    // ends give it the same cap (or both skip it), that is its cap whatever the batch finds.
    // Each round's candidates and limits are then those of running the rounds one by one; a
    // batch only lets the threads work through the rounds without waiting at each round's end
    // for its slowest candidate. (While fewer than `top` options can have been found both ends
    // are infinite: PlanSpace::Batching::kWhileUnbounded, the rule before this one.)
    std::vector<std::size_t> batch;
    std::vector<std::pair<std::size_t, std::size_t>> rounds;  // (first in batch, round's end in live)
    const auto next_round_certain = [&]() {
      if (space.batching == PlanSpace::Batching::kRoundByRound) return false;
      if (space.batching == PlanSpace::Batching::kWhileUnbounded) {
        return found_costs.size() + batch.size() < static_cast<std::size_t>(space.top);
      }
      std::vector<double> lowest = found_costs;
      for (std::size_t i : batch) lowest.push_back(cands[i].usd_per_hour);
      const double low = top_th(lowest), high = bound();
      for (std::size_t k = start; k < std::min(live.size(), start + kRound); ++k) {
        if (cap(cands[live[k]], low) != cap(cands[live[k]], high)) return false;
      }
      return true;
    };
    do {
      const std::size_t end = std::min(live.size(), start + kRound);
      const double limit = bound();
      rounds.emplace_back(batch.size(), end);
      for (std::size_t k = start; k < end; ++k) {
        Candidate& c = cands[live[k]];
        const int most = cap(c, limit);
        if (most < 1) {
          c.rejected = true;
          c.cut_by_cost = true;
          c.reason = "not searched: one replica costs more than the " + std::to_string(space.top) +
                     " cheapest options found";
          ++out.skipped;
          continue;
        }
        c.max_replicas = most;
        batch.push_back(live[k]);
      }
      start = end;
    } while (start < live.size() && next_round_certain());
    ++out.search_batches;
    run_parallel(
        batch.size(), pool_width(threads),
        [&](std::size_t k) {
          Candidate& c = cands[batch[k]];
          c.search = search_replicas(spec_of(search_base, c), c.max_replicas, space.min_goodput, false,
                                     space.early_stop);
          drop_run_details(c.search.best.result);
          if (c.search.below) drop_run_details(c.search.below->result);
        },
        {});
    for (std::size_t r = 0; r < rounds.size(); ++r) {
      const std::size_t to = r + 1 < rounds.size() ? rounds[r + 1].first : batch.size();
      for (std::size_t k = rounds[r].first; k < to; ++k) {
        Candidate& c = cands[batch[k]];
        ++out.searched;
        out.search_evaluations += static_cast<std::size_t>(c.search.evaluations);
        out.stopped_early += static_cast<std::size_t>(c.search.stopped_early);
        out.search_requests += c.search.simulated_requests;
        out.search_steps += c.search.simulated_steps;
        if (c.search.found) {
          found_costs.push_back(c.usd_per_hour * c.search.best.replicas);
        } else {
          c.rejected = true;
          const bool cost_capped = c.max_replicas < std::max(1, space.max_cards / c.tp);
          c.cut_by_cost = cost_capped;
          c.reason = cost_capped
                         ? "not among the " + std::to_string(space.top) + " cheapest: misses the SLOs with the " +
                               std::to_string(c.max_replicas) + (c.max_replicas == 1 ? " replica" : " replicas") +
                               " that would still rank"
                         : "misses the SLOs even with " + std::to_string(c.search.best.replicas) +
                               (c.search.best.replicas == 1 ? " replica" : " replicas") + " (--max-cards " + std::to_string(space.max_cards) + "); worst: " +
                               c.search.best.verdict.worst + " at " +
                               fmt("%.1f", c.search.best.verdict.worst_ratio) + "x its bound, limited by " +
                               binding_resource(c.search.best.result) +
                               (c.search.best.result.stopped_early.empty()
                                    ? ""
                                    : " (that run stopped early: " + c.search.best.result.stopped_early + ")");
        }
      }
      if (progress) progress(rounds[r].second, live.size(), "searching");
    }
  }
  const auto rank = [&](std::vector<std::size_t>& idx) {
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
      const double ca = cands[a].option_usd_per_hour(), cb = cands[b].option_usd_per_hour();
      if (std::fabs(ca - cb) >= 0.005) return ca < cb;
      // Equal price: the better answer first (worst SLO further inside its bound, then fewer
      // cards), never the order the candidates were generated in.
      const double qa = cands[a].search.best.verdict.worst_ratio, qb = cands[b].search.best.verdict.worst_ratio;
      if (qa != qb) return qa < qb;
      return cands[a].total_cards() < cands[b].total_cards();
    });
  };
  std::vector<std::size_t>& ok = out.ok;
  for (std::size_t i : live) {
    if (!cands[i].rejected) ok.push_back(i);
  }
  rank(ok);
  // Verification: every option that will be reported is re-run as the whole cluster it names,
  // behind each router to try; the router needing the fewest replicas wins (ties: the scenario's).
  // Options are verified in order of their load-share estimate, a round at a time, until `top`
  // verified options are known and the next estimate already costs more than the top-th of them
  // (estimates are optimistic: a perfect 1/r split of the load).
  const std::vector<std::string> routers = space.routers.empty() ? std::vector<std::string>{base.router} : space.routers;
  std::vector<std::size_t> verified;
  std::size_t next = 0;
  const auto verified_bound = [&]() {
    if (static_cast<int>(verified.size()) < space.top) return std::numeric_limits<double>::infinity();
    std::vector<double> v;
    for (std::size_t i : verified) v.push_back(cands[i].option_usd_per_hour());
    std::nth_element(v.begin(), v.begin() + (space.top - 1), v.end());
    return v[static_cast<std::size_t>(space.top - 1)];
  };
  // A fixed round width (not the thread count), so which options get verified — and so the
  // output — does not depend on the machine.
  const std::size_t round_width = kRound;
  while (next < ok.size()) {
    // As in the search: rounds run as one batch while their limit is certainly infinite (fewer
    // than `top` options verified before them, whatever the batch's earlier rounds verify), so
    // the options verified are those of verifying round by round.
    std::vector<std::size_t> round;  // this batch's options, round after round
    std::vector<std::size_t> round_next;  // `next` after each round
    for (;;) {
      const double limit = verified_bound();
      const std::size_t before = round.size();
      while (next < ok.size() && round.size() - before < round_width) {
        Candidate& c = cands[ok[next]];
        if (c.option_usd_per_hour() >= limit) break;
        round.push_back(ok[next++]);
      }
      if (round.size() == before) break;
      round_next.push_back(next);
      if (next >= ok.size() || verified.size() + round.size() >= static_cast<std::size_t>(space.top)) break;
    }
    if (round.empty()) break;
    // Each option's routers are searched together (search_routers): the winner and its runs are
    // what each router's own search would give, without finishing searches that can no longer win.
    std::vector<RoutersSearch> results(round.size());
    const unsigned width = pool_width(threads);  // the routers' searches nested inside too
    run_parallel(
        round.size(), width,
        [&](std::size_t k) {
          const Candidate& from = cands[round[k]];
          results[k] = verify_option(base, space, from, routers, from.search.best.replicas, width);
        },
        {});
    for (std::size_t i = 0; i < round.size(); ++i) {
      Candidate& c = cands[round[i]];
      RoutersSearch& rs = results[i];
      out.evaluations += static_cast<std::size_t>(rs.evaluations);
      out.verify_requests += rs.simulated_requests;
      out.verify_steps += rs.simulated_steps;
      if (take_verification(c, std::move(rs), routers)) verified.push_back(round[i]);
    }
    for (const std::size_t after : round_next) {
      ++out.verify_rounds;
      if (progress) progress(std::min(after, ok.size()), ok.size(), "verifying");
    }
  }
  // Verification stopped before the last option: the progress ends there, saying so (a last
  // "verifying" call would leave the line at "verifying 4/26", as if cut off).
  if (progress && next < ok.size()) progress(next, ok.size(), "verified");
  for (std::size_t k = next; k < ok.size(); ++k) {
    Candidate& c = cands[ok[k]];
    c.rejected = true;
    c.cut_by_cost = true;
    c.reason = "not verified: its load-share estimate ($" + fmt("%.2f", c.option_usd_per_hour()) +
               "/hour) already costs more than the " + std::to_string(space.top) + " verified options";
    ++out.not_verified;
  }
  out.verify_n = verified.size();
  if (!space.explain_card.empty()) {
    // Each candidate of the card; those cut by cost are searched and verified as if they had ranked.
    std::vector<std::size_t> to_search;
    for (std::size_t i = 0; i < cands.size(); ++i) {
      if (cands[i].card != space.explain_card) continue;
      PlanOutcome::Explained x;
      x.candidate = i;
      x.searched_now = cands[i].rejected && cands[i].cut_by_cost;
      if (x.searched_now) to_search.push_back(out.explained.size());
      out.explained.push_back(std::move(x));
    }
    run_parallel(
        to_search.size(), pool_width(threads),
        [&](std::size_t k) {
          PlanOutcome::Explained& x = out.explained[to_search[k]];
          Candidate c = cands[x.candidate];
          c.rejected = false;
          c.cut_by_cost = false;
          c.reason.clear();
          c.max_replicas = std::max(1, space.max_cards / c.tp);
          c.search = search_replicas(spec_of(search_base, c), c.max_replicas, space.min_goodput, false,
                                     space.early_stop);
          drop_run_details(c.search.best.result);
          if (c.search.below) drop_run_details(c.search.below->result);
          if (!c.search.found) {
            c.rejected = true;
            c.reason = "misses the SLOs even with " + std::to_string(c.search.best.replicas) +
                       (c.search.best.replicas == 1 ? " replica" : " replicas") + " (--max-cards " +
                       std::to_string(space.max_cards) + ", load shares)";
            x.as_searched = std::move(c);
            return;
          }
          take_verification(c, verify_option(base, space, c, routers, c.search.best.replicas, 1), routers);
          x.as_searched = std::move(c);
        },
        {});
  }
  if (std::getenv("CAPSIM_PLAN_TRACE")) {  // the totals after the per-run lines (evaluate.cc)
    std::fprintf(stderr,
                 "plan-summary searched=%zu skipped=%zu search_runs=%zu stopped_early=%zu search_batches=%zu "
                 "verify_runs=%zu verify_rounds=%zu verified=%zu\n",
                 out.searched, out.skipped, out.search_evaluations, out.stopped_early, out.search_batches,
                 out.evaluations, out.verify_rounds, out.verify_n);
  }
  ok.erase(std::remove_if(ok.begin(), ok.end(), [&](std::size_t i) { return cands[i].rejected || !cands[i].verified; }),
           ok.end());
  rank(ok);
  if (space.headroom) {
    // The listed options' headroom, each on the search's window (a short search; the verified
    // run at the scenario's own load is the full one).
    const std::size_t listed = std::min(ok.size(), static_cast<std::size_t>(std::max(0, space.top)));
    run_parallel(
        listed, pool_width(threads),
        [&](std::size_t k) {
          Candidate& c = cands[ok[k]];
          scenario::ScenarioSpec s = spec_of(search_base, c);
          c.headroom = load_headroom(s, c.search.best.replicas, space.min_goodput);
        },
        {});
  }
  return out;
}

}  // namespace capsim::plan
