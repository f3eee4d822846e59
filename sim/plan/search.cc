// The searches of plan (declared in search.h): the fewest replicas that meet the SLOs, for one
// router, for a whole cluster, and for several routers searched in step with the cuts that keep
// each answer exact, and the thread pool they run on. The verdicts are in slo_verdict.cc and one
// evaluation in evaluate.cc.
#include "sim/plan/search.h"

#include <algorithm>
#include <functional>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <exception>
#include <mutex>
#include <thread>
#include <ctime>

#include "sim/scenario/slo_value.h"
#include "sim/core/allocator_tuning.h"
#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/core/yaml_fields.h"
#include "sim/report/table.h"

namespace capsim::plan {

// Narrows [lo fails, pass meets] to the fewest replicas that meet the SLOs; `out.best` is that
// evaluation and `out.below` the one at one replica fewer, when it was run. `eval` counts its runs.
static void bisect(int lo, Evaluation pass, std::optional<Evaluation> fail_at_lo, ReplicaSearch& out,
            const std::function<Evaluation(int)>& eval) {
  int hi = pass.replicas;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    Evaluation e = eval(mid);  // counted by eval
    if (e.verdict.met) {
      hi = mid;
      pass = std::move(e);
    } else {
      lo = mid;
      fail_at_lo = std::move(e);
    }
  }
  out.found = true;
  out.best = std::move(pass);
  if (fail_at_lo && fail_at_lo->replicas == hi - 1) out.below = std::move(fail_at_lo);
}

ReplicaSearch search_replicas(const scenario::ScenarioSpec& spec, int max_replicas,
                              std::optional<double> min_goodput, bool verify, bool early_stop) {
  ReplicaSearch out;
  int lo = 0;  // largest count known to fail
  std::optional<Evaluation> fail_at_lo;
  std::optional<Evaluation> pass;
  int r = 1;
  while (r <= max_replicas) {
    Evaluation e = evaluate_share(spec, r, min_goodput, early_stop);
    out.count(e);
    if (e.verdict.met) {
      pass = std::move(e);
      break;
    }
    lo = r;
    fail_at_lo = std::move(e);
    if (r == max_replicas) break;
    r = std::min(max_replicas, r * 2);
  }
  if (!pass) {
    if (fail_at_lo) out.best = std::move(*fail_at_lo);
    return out;
  }
  bisect(lo, std::move(*pass), std::move(fail_at_lo), out, [&](int n) {
    Evaluation e = evaluate_share(spec, n, min_goodput, early_stop);
    out.count(e);
    return e;
  });
  if (verify) {
    // Shares are an approximation (routing is not a perfect split); the whole cluster decides.
    for (int n = out.best.replicas; n <= max_replicas; ++n) {
      Evaluation whole = evaluate(spec, n, min_goodput);
      out.count(whole);
      if (whole.verdict.met) {
        out.best = std::move(whole);
        return out;
      }
      out.below = std::move(whole);
    }
    out.found = false;
  }
  return out;
}

ReplicaSearch search_whole_cluster(const scenario::ScenarioSpec& spec, int start, int max_replicas,
                                   std::optional<double> min_goodput, int replications,
                                   const std::function<Evaluation(int)>& evaluator) {
  const auto evaluate = [&](const scenario::ScenarioSpec& s, int n, std::optional<double> g, int reps) {
    return evaluator ? evaluator(n) : plan::evaluate(s, n, g, reps);
  };
  ReplicaSearch out;
  start = std::clamp(start, 1, std::max(1, max_replicas));
  Evaluation first = evaluate(spec, start, min_goodput, replications);
  ++out.evaluations;
  if (first.verdict.met) {
    out.found = true;
    out.best = std::move(first);
    for (int n = start - 1; n >= 1; --n) {
      Evaluation e = evaluate(spec, n, min_goodput, replications);
      ++out.evaluations;
      if (!e.verdict.met) {
        out.below = std::move(e);
        break;
      }
      out.best = std::move(e);
    }
    return out;
  }
  int lo = start;  // largest count known to fail
  std::optional<Evaluation> fail_at_lo = std::move(first);
  std::optional<Evaluation> pass;
  for (int step = 1; lo < max_replicas; step *= 2) {
    const int n = std::min(max_replicas, start + step);
    Evaluation e = evaluate(spec, n, min_goodput, replications);
    ++out.evaluations;
    if (e.verdict.met) {
      pass = std::move(e);
      break;
    }
    lo = n;
    fail_at_lo = std::move(e);
  }
  if (!pass) {
    out.best = std::move(*fail_at_lo);
    return out;
  }
  bisect(lo, std::move(*pass), std::move(fail_at_lo), out,
         [&](int n) {
           ++out.evaluations;
           return evaluate(spec, n, min_goodput, replications);
         });
  return out;
}

// Why each cut below is exact, router by router, against search_whole_cluster (which the
// routers' searches would run independently, and whose answers the winner is picked from: the
// fewest replicas, ties to the lower index):
// - From `start`, a router that meets the SLOs walks down while one fewer still meets them; its
//   answer is <= start. A router that misses them at `start` searches upwards only, so its answer
//   is > start (or none): it cannot win (nor tie) against one that met them at start, and is cut
//   with at_least = start + 1.
// - Walking down in step, a router that misses at level-1 has the answer `level` (exactly what its
//   own walk would stop at); the walk goes on while any router still meets the SLOs, so the winner
//   is the router still meeting them at the lowest level (ties: the lower index), its `below` the
//   run that missed one level lower.
// - When one replica is the same run behind every router (one_replica_shared), a router that
//   meets the SLOs with 2 walks down to that same run: two routers meeting them with 2 end on the
//   same answer (1 or 2). So at level 2 the routers are run in index order and, once one meets the
//   SLOs, the later ones are cut: they would tie at best, and ties go to the lower index
//   (at_least = the winner's answer: 1 fails for them exactly when it fails for the winner).
// - When no router meets them at start, every router's own search takes the same doubling steps
//   start+1, start+2, start+4, ... (capped at max_replicas) while it misses; at the first step
//   `hi` where some router meets them, a router that missed at hi would keep doubling (answer >
//   hi) while one that met them at hi bisects in (lo, hi] (answer <= hi): the first is cut with
//   at_least = hi + 1. When hi = lo + 1 a router meeting them there has the answer hi, so the
//   routers are run in index order and the ones after the first that meets them are cut (a tie at
//   best, at_least = hi). Those that met them bisect as they would alone; a router is cut once its
//   interval's lower end (a count it misses with: answer > lo) reaches another's upper end (a
//   count that router meets them with: answer <= hi), so its answer would be strictly larger.
// No step assumes that more replicas never make latency worse: each router's answer, where
// reported, is the one its own search would give, and a cut router's would be larger than the
// winner's, or equal with a higher index.
RoutersSearch search_routers(std::size_t routers, int start, int max_replicas,
                             const std::function<Evaluation(std::size_t, int)>& eval, bool one_replica_shared,
                             unsigned threads) {
  RoutersSearch out;
  out.routers.assign(routers, RouterOutcome{});
  if (routers == 0) return out;
  max_replicas = std::max(1, max_replicas);
  start = std::clamp(start, 1, max_replicas);
  std::optional<Evaluation> one_replica;  // the shared one-replica run, once run
  // Runs router r at n for every (r, n) asked, in parallel; results by position.
  const auto run = [&](const std::vector<std::pair<std::size_t, int>>& asks) {
    std::vector<std::optional<Evaluation>> got(asks.size());
    std::vector<std::size_t> todo;
    bool one_here = false;
    for (std::size_t k = 0; k < asks.size(); ++k) {
      if (one_replica_shared && asks[k].second == 1) {
        if (one_replica || one_here) continue;
        one_here = true;
      }
      todo.push_back(k);
    }
    run_parallel(todo.size(), std::max(1u, threads), [&](std::size_t j) {
      got[todo[j]] = eval(asks[todo[j]].first, asks[todo[j]].second);
    }, {});
    out.evaluations += static_cast<int>(todo.size());
    for (std::size_t k : todo) {
      out.simulated_requests += got[k]->result.arrived;
      out.simulated_steps += got[k]->result.steps;
      if (one_replica_shared && asks[k].second == 1) one_replica = *got[k];
    }
    std::vector<Evaluation> res;
    for (std::size_t k = 0; k < asks.size(); ++k) res.push_back(got[k] ? std::move(*got[k]) : *one_replica);
    return res;
  };
  // Runs the routers `who` (ascending) at n: all at once, or, with `first_wins`, one after another
  // until one meets the SLOs (the later ones are then not run: nullopt).
  const auto level = [&](const std::vector<std::size_t>& who, int n, bool first_wins) {
    std::vector<std::optional<Evaluation>> res(who.size());
    if (!first_wins) {
      std::vector<std::pair<std::size_t, int>> asks;
      for (std::size_t r : who) asks.emplace_back(r, n);
      std::vector<Evaluation> got = run(asks);
      for (std::size_t k = 0; k < who.size(); ++k) res[k] = std::move(got[k]);
      return res;
    }
    for (std::size_t k = 0; k < who.size(); ++k) {
      res[k] = std::move(run({{who[k], n}}).front());
      if (res[k]->verdict.met) break;
    }
    return res;
  };
  std::vector<std::size_t> everyone(routers);
  for (std::size_t r = 0; r < routers; ++r) everyone[r] = r;
  std::vector<ReplicaSearch> per(routers);
  std::vector<int> tied;  // routers cut as a tie at best: at_least = the winner's answer, set at the end
  const auto finish = [&](std::size_t winner) {
    for (std::size_t r : tied) out.routers[r].at_least = per[winner].best.replicas;
    // Needing more than max_replicas is what "none within max_replicas" means: that answer is exact.
    for (RouterOutcome& o : out.routers) {
      if (o.at_least > max_replicas) o = RouterOutcome{};
    }
    out.found = true;
    out.router = winner;
    out.search = std::move(per[winner]);
    out.search.found = true;
    out.search.evaluations = out.evaluations;
    return out;
  };
  const bool tie_at_two = one_replica_shared && routers > 1;
  std::vector<std::optional<Evaluation>> first = level(everyone, start, tie_at_two && start == 2);
  std::vector<std::size_t> alive;  // routers still walking down
  for (std::size_t r = 0; r < routers; ++r) {
    if (!first[r]) {
      tied.push_back(static_cast<int>(r));
    } else if (first[r]->verdict.met) {
      alive.push_back(r);
    }
  }
  if (!alive.empty()) {
    for (std::size_t r = 0; r < routers; ++r) {
      if (first[r] && !first[r]->verdict.met) out.routers[r].at_least = start + 1;
      if (first[r]) per[r].best = std::move(*first[r]);
    }
    int at = start;
    while (at > 1) {
      std::vector<std::optional<Evaluation>> got = level(alive, at - 1, tie_at_two && at - 1 == 2);
      std::vector<std::size_t> still;
      for (std::size_t k = 0; k < alive.size(); ++k) {
        const std::size_t r = alive[k];
        if (!got[k]) {
          tied.push_back(static_cast<int>(r));
        } else if (got[k]->verdict.met) {
          per[r].best = std::move(*got[k]);
          still.push_back(r);
        } else {
          per[r].below = std::move(*got[k]);
          out.routers[r].replicas = at;
        }
      }
      if (still.empty()) break;  // every router still walking missed at level - 1
      alive = std::move(still);
      --at;
    }
    // The routers still walking share the lowest level (answers elsewhere are larger).
    for (std::size_t r : alive) out.routers[r].replicas = at;
    return finish(alive.front());
  }
  // Upwards: every router missed at start.
  int lo = start;
  std::vector<std::optional<Evaluation>> fail_at_lo(routers);
  for (std::size_t r = 0; r < routers; ++r) fail_at_lo[r] = std::move(first[r]);
  std::vector<std::size_t> met;
  int hi = 0;
  for (int step = 1; lo < max_replicas; step *= 2) {
    const int n = std::min(max_replicas, start + step);
    std::vector<std::optional<Evaluation>> got = level(everyone, n, routers > 1 && n == lo + 1);
    for (std::size_t r = 0; r < routers; ++r) {
      if (!got[r]) {
        out.routers[r].at_least = n;  // a tie at best with the first that met them at n
      } else if (got[r]->verdict.met) {
        met.push_back(r);
        per[r].best = std::move(*got[r]);
      }
    }
    if (!met.empty()) {
      hi = n;
      for (std::size_t r = 0; r < routers; ++r) {
        if (got[r] && !got[r]->verdict.met) out.routers[r].at_least = n + 1;
      }
      break;
    }
    lo = n;
    for (std::size_t r = 0; r < routers; ++r) fail_at_lo[r] = std::move(got[r]);
  }
  if (met.empty()) {
    // None within max_replicas: routers[0]'s search, as search_whole_cluster would leave it.
    out.search.best = std::move(*fail_at_lo[0]);
    out.search.evaluations = out.evaluations;
    return out;  // every RouterOutcome stays {0, 0}: none within max_replicas
  }
  // Bisection in (lo, hi] for each router that met the SLOs at hi, in step.
  std::vector<int> lo_of(routers, lo), hi_of(routers, hi);
  std::vector<std::size_t> active = met;
  for (;;) {
    // Cut: a router whose lower end reaches another's upper end needs more replicas than it.
    std::vector<std::size_t> next;
    for (std::size_t r : active) {
      bool beaten = false;
      for (std::size_t o : met) {
        if (o != r && out.routers[o].at_least == 0 && lo_of[r] >= hi_of[o]) beaten = true;
      }
      if (beaten) {
        out.routers[r].at_least = lo_of[r] + 1;
      } else if (hi_of[r] - lo_of[r] > 1) {
        next.push_back(r);
      }
    }
    active = std::move(next);
    if (active.empty()) break;
    std::vector<std::pair<std::size_t, int>> asks;
    for (std::size_t r : active) asks.emplace_back(r, lo_of[r] + (hi_of[r] - lo_of[r]) / 2);
    std::vector<Evaluation> got = run(asks);
    for (std::size_t k = 0; k < active.size(); ++k) {
      const std::size_t r = active[k];
      if (got[k].verdict.met) {
        hi_of[r] = asks[k].second;
        per[r].best = std::move(got[k]);
      } else {
        lo_of[r] = asks[k].second;
        fail_at_lo[r] = std::move(got[k]);
      }
    }
  }
  std::optional<std::size_t> winner;
  for (std::size_t r : met) {
    if (out.routers[r].at_least != 0) continue;
    out.routers[r].replicas = hi_of[r];
    if (!winner || hi_of[r] < hi_of[*winner]) winner = r;
  }
  if (fail_at_lo[*winner] && fail_at_lo[*winner]->replicas == hi_of[*winner] - 1) {
    per[*winner].below = std::move(fail_at_lo[*winner]);
  }
  return finish(*winner);
}

namespace {

// Threads that run_parallel has started and that are still working through jobs, process-wide.
std::atomic<unsigned> pool_threads_running{0};

// Takes up to `wanted` extra threads, no more than keep the process's running pool threads plus
// the one that asks at or under `threads`: a run_parallel inside a job of another (plan's
// verification searches each option's routers in parallel) then starts threads only as the
// outer pool's finish, instead of 2 x 2 threads oversubscribing 2 cores.
unsigned claim_pool_threads(unsigned wanted, unsigned threads) {
  unsigned running = pool_threads_running.load();
  for (;;) {
    const unsigned room = threads > running + 1 ? threads - running - 1 : 0;
    const unsigned take = std::min(wanted, room);
    if (take == 0) return 0;
    if (pool_threads_running.compare_exchange_weak(running, running + take)) return take;
  }
}

}  // namespace

void run_parallel(std::size_t jobs, unsigned threads, const std::function<void(std::size_t)>& job,
                  const std::function<void(std::size_t, std::size_t)>& progress) {
  std::atomic<std::size_t> next{0}, done{0};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  const auto worker = [&] {
    for (std::size_t i = next++; i < jobs; i = next++) {
      try {
        job(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
      }
      ++done;
    }
  };
  const unsigned n = std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(jobs)));
  const unsigned extra = claim_pool_threads(n - 1, threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < extra; ++t) {
    pool.emplace_back([&worker] {
      tune_thread_heap();  // this thread's own arena on huge pages too, as main's heap is
      worker();
      --pool_threads_running;  // its jobs are done: a nested run_parallel may take its core
    });
  }
  std::thread watcher;
  std::atomic<bool> stop{false};
  if (progress) {
    watcher = std::thread([&] {
      while (!stop) {
        // The last report (jobs of jobs) comes once, after the workers joined.
        const std::size_t d = done.load();
        if (d < jobs) progress(d, jobs);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  worker();
  for (auto& t : pool) t.join();
  stop = true;
  if (watcher.joinable()) watcher.join();
  if (progress) progress(jobs, jobs);
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace capsim::plan
