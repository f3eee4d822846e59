#include "sim/plan/search.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <exception>
#include <mutex>
#include <thread>

#include "sim/cli/simulate_report.h"
#include "sim/core/error.h"
#include "sim/core/yaml_fields.h"

namespace capsim::plan {

SloVerdict check_slos(const cli::ScenarioSpec& spec, const SimulationResult& r,
                      std::optional<double> min_goodput) {
  SloVerdict v;
  v.met = r.completed > 0;
  for (const cli::SloSpec& s : spec.slos) {
    const double value = cli::slo_value(s, r);
    const double ratio = std::isnan(value) ? INFINITY : value / s.seconds;
    if (ratio > 1) v.met = false;
    if (v.worst.empty() || ratio > v.worst_ratio) {
      v.worst = s.metric + "_" + s.statistic;
      v.worst_ratio = ratio;
    }
  }
  if (min_goodput) {
    const double ratio = r.goodput_fraction > 0 ? *min_goodput / r.goodput_fraction : INFINITY;
    if (r.goodput_fraction < *min_goodput) v.met = false;
    if (v.worst.empty() || ratio > v.worst_ratio) {
      v.worst = "goodput";
      v.worst_ratio = ratio;
    }
  }
  if (r.rejected > 0) v.met = false;
  return v;
}

std::string binding_resource(const SimulationResult& r) {
  double kv_peak = 0, busy = 0, compute = 0, memory = 0, comm = 0, overhead = 0;
  for (const ReplicaSummary& s : r.replicas) {
    if (!s.stats.kv_used_fraction.empty()) kv_peak = std::max(kv_peak, s.stats.kv_used_fraction.peak());
    busy += s.stats.busy_seconds;
    compute += s.stats.compute_s;
    memory += s.stats.memory_s;
    comm += s.stats.communication_s;
    overhead += s.stats.overhead_s;
  }
  if (r.preemptions > 0 || kv_peak > 0.97) return "KV-cache capacity";
  if (busy <= 0) return "idle";
  // Queueing behind other requests; the step of lag of an asynchronous scheduler is not.
  const double queued = std::max(0.0, r.queue.mean - r.scheduling_lag_s);
  const double queue_share = r.ttft.mean > 0 ? queued / r.ttft.mean : 0;
  if (queue_share > 0.5) return "queueing";
  if (comm >= compute && comm >= memory) return "communication";
  if (overhead >= compute && overhead >= memory) return "engine overhead";
  return compute >= memory ? "compute" : "memory bandwidth";
}

Evaluation evaluate(const cli::ScenarioSpec& spec, int replicas, std::optional<double> min_goodput) {
  cli::ScenarioSpec s = spec;
  s.replicas = replicas;
  cli::BuiltScenario b = cli::build_scenario(s);
  b.config.progress = false;
  Evaluation e;
  e.replicas = replicas;
  e.result = simulate(b.config, *b.workload);
  e.verdict = check_slos(spec, e.result, min_goodput);
  return e;
}

cli::ScenarioSpec share_of_load(const cli::ScenarioSpec& spec, int parts) {
  cli::ScenarioSpec s = spec;
  s.replicas = 1;
  if (parts <= 1) return s;
  const auto div_up = [parts](auto v) { return (v + parts - 1) / parts; };
  if (s.users) s.users = div_up(*s.users);
  if (s.concurrency) s.concurrency = div_up(*s.concurrency);
  if (s.requests) s.requests = div_up(*s.requests);
  if (s.trace) s.time_scale *= parts;
  if (s.rate) {
    std::string out;
    std::stringstream in(*s.rate);
    std::string part;
    while (std::getline(in, part, ',')) {
      const auto at = part.find('@');
      const double rate = parse_number(part.substr(0, at), "--rate") / parts;
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", rate);
      out += (out.empty() ? "" : ",") + std::string(buf) +
             (at == std::string::npos ? "" : part.substr(at));
    }
    s.rate = out;
  }
  return s;
}

Evaluation evaluate_share(const cli::ScenarioSpec& spec, int replicas,
                          std::optional<double> min_goodput) {
  Evaluation e = evaluate(share_of_load(spec, replicas), 1, min_goodput);
  e.replicas = replicas;
  e.from_share = replicas > 1;
  return e;
}

ReplicaSearch search_replicas(const cli::ScenarioSpec& spec, int max_replicas,
                              std::optional<double> min_goodput, bool verify) {
  ReplicaSearch out;
  int lo = 0;  // largest count known to fail
  std::optional<Evaluation> fail_at_lo;
  std::optional<Evaluation> pass;
  int r = 1;
  while (r <= max_replicas) {
    Evaluation e = evaluate_share(spec, r, min_goodput);
    ++out.evaluations;
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
  int hi = pass->replicas;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    Evaluation e = evaluate_share(spec, mid, min_goodput);
    ++out.evaluations;
    if (e.verdict.met) {
      hi = mid;
      pass = std::move(e);
    } else {
      lo = mid;
      fail_at_lo = std::move(e);
    }
  }
  out.found = true;
  out.best = std::move(*pass);
  if (fail_at_lo && fail_at_lo->replicas == hi - 1) out.below = std::move(fail_at_lo);
  if (verify) {
    // Shares are an approximation (routing is not a perfect split); the whole cluster decides.
    for (int n = out.best.replicas; n <= max_replicas; ++n) {
      Evaluation whole = evaluate(spec, n, min_goodput);
      ++out.evaluations;
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
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < n; ++t) pool.emplace_back(worker);
  std::thread watcher;
  std::atomic<bool> stop{false};
  if (progress) {
    watcher = std::thread([&] {
      while (!stop) {
        progress(done.load(), jobs);
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

unsigned default_threads() {
  if (const char* env = std::getenv("CAPSIM_THREADS")) {
    const int n = std::atoi(env);
    if (n >= 1) return static_cast<unsigned>(n);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw ? hw : 1;
}

}  // namespace capsim::plan
