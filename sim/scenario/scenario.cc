#include "sim/scenario/scenario.h"
#include "sim/scenario/model_error.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "sim/cluster/disaggregation.h"
#include "sim/cluster/router.h"
#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/engine/replica.h"
#include "sim/core/units.h"
#include "sim/core/yaml_fields.h"
#include "sim/scenario/catalogues.h"

namespace capsim::scenario {
namespace {

const char* kSloForms = "accepted: METRIC_STAT<=TIME with METRIC ttft, tpot, itl, e2el and STAT "
                        "mean, p50 (median), p90, p95, p99, spaces allowed (e.g. ttft_p95<=1s, "
                        "'tpot p99 <= 100 ms', 'ttft_p95 <= 1 sec')";

std::string lower_trimmed(const std::string& text) {
  std::string t;
  for (unsigned char c : text) t += static_cast<char>(std::tolower(c));
  const auto b = t.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return t.substr(b, t.find_last_not_of(" \t") - b + 1);
}

// A bound as people write it: "1s", "1 s", "1 sec", "250 ms", "0.5 seconds", "100 msec".
double slo_seconds(const std::string& value, const std::string& where) {
  std::string v = lower_trimmed(value);
  std::size_t unit_at = 0;
  while (unit_at < v.size() && (std::isdigit(static_cast<unsigned char>(v[unit_at])) || v[unit_at] == '.' ||
                                v[unit_at] == 'e' || v[unit_at] == '+' || v[unit_at] == '-' ||
                                v[unit_at] == ' ')) {
    // "1e-3 s": an 'e' counts as part of the number only when a digit or sign follows it.
    if (v[unit_at] == 'e' && !(unit_at + 1 < v.size() && (std::isdigit(static_cast<unsigned char>(v[unit_at + 1])) ||
                                                         v[unit_at + 1] == '-' || v[unit_at + 1] == '+'))) {
      break;
    }
    ++unit_at;
  }
  std::string number = v.substr(0, unit_at), unit = v.substr(unit_at);
  static const std::vector<std::pair<std::string, std::string>> words = {
      {"seconds", "s"}, {"second", "s"}, {"secs", "s"}, {"sec", "s"},
      {"milliseconds", "ms"}, {"millisecond", "ms"}, {"msecs", "ms"}, {"msec", "ms"},
      {"microseconds", "us"}, {"microsecond", "us"}, {"\u00b5s", "us"},
      {"minutes", "min"}, {"minute", "min"}, {"mins", "min"}};
  for (const auto& [word, unit_name] : words) {
    if (unit == word) unit = unit_name;
  }
  return units::parse_time(number + unit, where);
}

}  // namespace

SloSpec parse_slo(const std::string& raw_key, const std::string& value, const std::string& where) {
  // "ttft_p95", "TTFT p95", "ttft-p95", "ttft p95" all name the same SLO.
  std::string key = lower_trimmed(raw_key);
  for (char& c : key) {
    if (c == ' ' || c == '-' || c == '\t') c = '_';
  }
  while (key.find("__") != std::string::npos) key.erase(key.find("__"), 1);
  const auto us = key.find('_');
  SloSpec s;
  if (us == std::string::npos) throw Error(where + ": '" + raw_key + "' is not an SLO; " + kSloForms);
  s.metric = key.substr(0, us);
  s.statistic = key.substr(us + 1);
  if (s.statistic == "median") s.statistic = "p50";
  const std::vector<std::string> metrics = {"ttft", "tpot", "itl", "e2el"};
  const std::vector<std::string> stats = {"mean", "p50", "p90", "p95", "p99"};
  if (s.metric == "e2e") s.metric = "e2el";
  if (std::find(metrics.begin(), metrics.end(), s.metric) == metrics.end() ||
      std::find(stats.begin(), stats.end(), s.statistic) == stats.end()) {
    throw Error(where + ": '" + raw_key + "' is not an SLO; " + kSloForms);
  }
  s.seconds = slo_seconds(value, where);
  if (s.seconds <= 0) throw Error(where + ": the bound must be > 0");
  return s;
}

SloSpec parse_slo_expression(const std::string& text, const std::string& where) {
  // "<=", "=<", "≤" or "<" (a bound on a percentile: < and <= are the same test on a continuum).
  for (const std::string op : {"<=", "=<", "\u2264", "<"}) {
    const auto at = text.find(op);
    if (at != std::string::npos) return parse_slo(text.substr(0, at), text.substr(at + op.size()), where);
  }
  throw Error(where + ": '" + text + "' cannot be parsed; " + kSloForms);
}

void validate_names(const ScenarioSpec& s) {
  const auto named = [&](const std::string& flag, const auto& find) {
    try {
      find();
    } catch (const Error& e) {
      throw Error(s.attribute(led_by_flag(flag, e.what())));
    }
  };
  named("--model", [&] { find_model(s.deployment.model); });
  named("--card", [&] { find_card(s.deployment.card); });
  const std::string& eng = s.deployment.engine;
  named("--engine", [&] {
    if (is_engine_file(eng)) EngineCatalogue::load_file(eng); else find_engine(eng);
  });
  for (const auto& g : s.extra_groups) {
    named(g.where.empty() ? "deployment.card" : g.where + ".card", [&] { find_card(g.card); });
  }
  named("--router", [&] { make_router(s.router); });
  if (s.serving == "pd-disaggregated") {
    named("--kv-link", [&] { kv_links().find(s.kv_link); });
    if (s.decode_pool) named("--decode-pool", [&] { cards().find(s.decode_pool->card); });
  }
  if (!s.policy.empty()) {
    named("--scheduler", [&] { make_policy(s.policy); });
  } else {
    scheduler_policy(s);  // the engine file's scheduler.policy: its message names the file
  }
}

std::string scheduler_policy(const ScenarioSpec& s) {
  if (!s.policy.empty()) return s.policy;
  const std::string& eng = s.deployment.engine;
  const EngineProfile e = is_engine_file(eng) ? EngineCatalogue::load_file(eng) : find_engine(eng);
  try {
    make_policy(e.scheduler_policy);
  } catch (const Error& err) {
    // make_policy words it for --scheduler; the name came from the engine file.
    const std::string what = err.what();
    throw Error(e.file + ": scheduler.policy" + what.substr(what.find(':')));
  }
  return e.scheduler_policy;
}

void follow_card_defaults(ScenarioSpec& s, const DeploymentSpec& from_file, const ExplicitFields& given) {
  const Card& old_card = find_card(from_file.card);
  const Card& new_card = find_card(s.deployment.card);
  if (old_card.name == new_card.name) return;
  const auto is_default_half = [&](const std::string& v) {
    return v == "auto" || parse_precision(v, "deployment") == native_half(old_card);
  };
  if (!given.weights && is_default_half(from_file.weights)) s.deployment.weights = "auto";
  if (!given.kv_cache && is_default_half(from_file.kv_cache)) s.deployment.kv_cache = "auto";
  const std::string& eng = from_file.engine;
  const SchedulerLimits old_defaults =
      default_limits(old_card, is_engine_file(eng) ? EngineCatalogue::load_file(eng) : find_engine(eng));
  if (!given.max_num_seqs && from_file.max_num_seqs == old_defaults.max_num_seqs) {
    s.deployment.max_num_seqs.reset();
  }
  if (!given.max_num_batched_tokens && from_file.max_num_batched_tokens == old_defaults.max_num_batched_tokens) {
    s.deployment.max_num_batched_tokens.reset();
  }
}

namespace {

// `message` with its leading flag replaced by the file and field `origin` gives for it.
std::string attributed(const std::map<std::string, std::string>& origin, const std::string& message) {
  if (message.rfind("--", 0) != 0) return message;
  const std::size_t colon = message.find(':');
  if (colon == std::string::npos) return message;
  const auto it = origin.find(message.substr(0, colon));
  return it == origin.end() ? message : it->second + message.substr(colon);
}

// `d` resolved, its messages naming the scenario file's fields: the main group's through
// s.origin; a further group (read at `group_where`) has its own card, tp, weights and KV cache.
Deployment resolve_named(const ScenarioSpec& s, const DeploymentSpec& d, const std::string& group_where = "") {
  try {
    return d.resolve();
  } catch (const Error& e) {
    std::map<std::string, std::string> origin = s.origin;
    if (!group_where.empty()) {
      for (const char* key : {"card", "tp", "weights"}) origin[std::string("--") + key] = group_where + "." + key;
      origin["--kv-cache"] = group_where + ".kv_cache";
    }
    throw Error(attributed(origin, e.what()));
  }
}

}  // namespace

std::string ScenarioSpec::attribute(const std::string& message) const { return attributed(origin, message); }

std::vector<ReplicaGroup> resolve_groups(const ScenarioSpec& s) {
  std::vector<ReplicaGroup> groups;
  Deployment main = resolve_named(s, s.deployment);
  if (s.prefix_caching) main.limits.enable_prefix_caching = *s.prefix_caching;
  groups.push_back({main, s.replicas});
  for (const auto& e : s.extra_groups) {
    DeploymentSpec f = s.deployment;
    f.card = e.card;
    f.tp = e.tp;
    // Pipeline, data and expert parallelism are the first group's (scenario field docs).
    f.pp = 1;
    f.dp = 1;
    f.enable_expert_parallel = false;
    f.expert_imbalance.reset();
    f.weights = e.weights;
    f.kv_cache = e.kv_cache;
    f.max_num_seqs.reset();
    f.max_num_batched_tokens.reset();
    // async_scheduling is the engine's and stays as the main group's.
    Deployment d = resolve_named(s, f, e.where);
    if (s.prefix_caching) d.limits.enable_prefix_caching = *s.prefix_caching;
    groups.push_back({d, e.replicas});
  }
  return groups;
}

DecodePool resolve_decode_pool(const ScenarioSpec& s) {
  find_serving_model(s.serving, "serving");
  if (!s.decode_pool) throw Error("--decode-pool: serving pd-disaggregated needs a decode pool, e.g. --decode-pool '1x h100-sxm tp2'");
  if (!s.extra_groups.empty()) {
    throw Error("deployment: a disaggregated deployment has one card type per pool; mixed groups are for aggregated serving");
  }
  if (scheduler_policy(s) == "static") {
    throw Error("--scheduler: static batching cannot join a decode pool's batch; pd-disaggregated accepts vllm-v1, prefill-first");
  }
  // A pool is 'N x CARD [tpK] [PRECISION]' and nothing more. The main deployment's PP, DP and
  // EP would otherwise ride along into both pools (each DP rank a replica, each replica
  // tp x pp x dp GPUs) while the pools' descriptions and plan --pd-search's prices count TP
  // alone, so they are refused rather than half applied.
  const DeploymentSpec& prefill_spec = s.deployment;
  if (prefill_spec.dp > 1 || prefill_spec.enable_expert_parallel || prefill_spec.pp > 1) {
    const std::string flag = prefill_spec.dp > 1                   ? "--dp"
                             : prefill_spec.enable_expert_parallel ? "--enable-expert-parallel"
                                                                   : "--pp";
    throw Error(s.attribute(
        flag + ": not modelled beside disaggregated pools (--prefill-pool, --decode-pool, a disaggregation: "
        "section): a pool has a card, TP, replicas and a precision only, and " + flag + " would multiply the GPUs "
        "of every prefill and decode replica. A dense model's DP ranks are replicas: for '1x h200 tp1' with --dp 8 "
        "give --prefill-pool '8x h200'; pipeline stages and DP attention with expert parallelism are modelled for "
        "aggregated serving only (docs/deployment-options.md#prefilldecode-disaggregation)"));
  }
  if (s.kv_link.empty()) {
    std::string names;
    for (const std::string& n : kv_links().names()) names += (names.empty() ? "" : ", ") + n;
    throw Error("--kv-link: serving pd-disaggregated needs the link between the pools; accepted: " + names);
  }
  DecodePool pool;
  try {
    pool.link = kv_links().find(s.kv_link);
  } catch (const Error& e) {
    throw Error(std::string("--kv-link: ") + e.what());
  }
  // The decode pool runs the same model, engine, KV-cache precision and limits as the prefill
  // pool (the connector moves KV blocks as they are); its card, TP and weights are its own.
  DeploymentSpec f = s.deployment;
  f.card = s.decode_pool->card;
  f.tp = s.decode_pool->tp;
  f.weights = s.decode_pool->weights;
  if (f.card != s.deployment.card) {
    f.max_num_seqs.reset();  // that card's vLLM defaults unless set
    f.max_num_batched_tokens.reset();
  }
  Deployment d = resolve_named(s, f, s.decode_pool->where);
  if (s.prefix_caching) d.limits.enable_prefix_caching = *s.prefix_caching;
  const Deployment pre = resolve_named(s, s.deployment);
  if (d.kv_cache != pre.kv_cache) {
    throw Error("--decode-pool: the decode pool's KV cache (" + std::string(precision_name(d.kv_cache)) +
                ") differs from the prefill pool's (" + std::string(precision_name(pre.kv_cache)) +
                "); give --kv-cache so both pools hold the same precision");
  }
  pool.groups.push_back({d, s.decode_pool->replicas});
  return pool;
}

BuiltScenario build_scenario(const ScenarioSpec& s) {
  BuiltScenario b;
  SimulationConfig& c = b.config;
  find_serving_model(s.serving, s.where("--serving"));
  model_errors();  // every answer reports it: a bad calibration/model-error.yaml stops before the run
  c.groups = resolve_groups(s);
  if (s.serving == "pd-disaggregated") c.decode_pool = resolve_decode_pool(s);
  // Speculative acceptance draws replay from the scenario's seed.
  for (ReplicaGroup& g : c.groups) {
    if (g.deployment.speculative) g.deployment.speculative->seed = s.seed;
  }
  if (c.decode_pool) {
    for (ReplicaGroup& g : c.decode_pool->groups) {
      if (g.deployment.speculative) g.deployment.speculative->seed = s.seed;
    }
  }
  if (s.lora_adapters > 0) {
    if (!c.groups.front().deployment.lora) {
      throw Error(s.where("--lora-adapters") + ": requests name adapters, but LoRA serving is off; "
                  "add --enable-lora (or a lora: section)");
    }
    c.adapters.count = s.lora_adapters;
    c.adapters.zipf_s = AdapterMix::parse_distribution(s.lora_distribution, s.where("--lora-distribution"));
    c.adapters.seed = s.seed;
  } else if (s.lora_distribution != "uniform") {
    (void)AdapterMix::parse_distribution(s.lora_distribution, s.where("--lora-distribution"));
  }
  c.router = s.router;
  c.policy = scheduler_policy(s);
  // The memory the deployments imply, refused here to name the scenario's field (simulate
  // checks it again for every front end).
  check_kv_bookkeeping(c, s.where("--kv-offloading-size"));
  c.cancel = s.cancel;
  c.bounded_memory = s.bounded_memory;
  c.warmup = checked::sim_time(units::parse_time(s.warmup, s.where("--warmup")), s.where("--warmup"));
  std::optional<double> duration;
  if (s.duration) {
    duration = checked::finite_in(units::parse_time(*s.duration, s.where("--duration")), 0,
                                  checked::kMaxSimSeconds, s.where("--duration"), "s");
  }
  if (duration && *duration <= 0) throw Error(s.where("--duration") + ": must be > 0");
  if (s.request_timeout) {
    const std::string where = s.where("--request-timeout");
    const double t = checked::finite_in(units::parse_time(*s.request_timeout, where), 0, checked::kMaxSimSeconds,
                                        where, "s");
    if (t <= 0) throw Error(where + ": must be > 0 (e.g. 300s, aiohttp's default total timeout)");
    c.request_timeout = from_seconds(t);
  }
  if (duration && to_seconds(c.warmup) >= *duration) {
    throw Error(s.where("--warmup") + ": " + s.warmup + " is not shorter than " +
                s.where("--duration") + " " + *s.duration);
  }
  for (const SloSpec& slo : s.slos) {
    if (slo.metric == "ttft") c.slo.ttft_s = c.slo.ttft_s ? std::min(*c.slo.ttft_s, slo.seconds) : slo.seconds;
    if (slo.metric == "tpot" || slo.metric == "itl") {
      c.slo.tpot_s = c.slo.tpot_s ? std::min(*c.slo.tpot_s, slo.seconds) : slo.seconds;
    }
    if (slo.metric == "e2el") c.slo.e2el_s = c.slo.e2el_s ? std::min(*c.slo.e2el_s, slo.seconds) : slo.seconds;
  }
  LengthSpec lengths;
  lengths.prompt = Distribution::parse(s.input_tokens, Distribution::Unit::kTokens, s.where("--input-tokens"));
  lengths.output = Distribution::parse(s.output_tokens, Distribution::Unit::kTokens, s.where("--output-tokens"));
  PrefixGroups prefix{s.system_prompt_tokens > 0 ? s.prefix_groups : 0, s.system_prompt_tokens};
  if (s.prompts_per_group > 0) {
    if (s.trace || s.users || s.concurrency) {
      throw Error("--prompts-per-group: only for open-loop workloads (--rate or --arrival offline)");
    }
    prefix.prompts_per_group = s.prompts_per_group;
    // Without a system prompt the pool is one group of prompts_per_group prompts.
    // In 64 bits: both factors reach 1e6, and their int product would overflow.
    if (prefix.groups == 0 && s.prefix_groups > 1) {
      const std::int64_t pool = std::int64_t{s.prompts_per_group} * s.prefix_groups;
      if (pool > 10'000'000) {
        throw Error(s.where("--prompts-per-group") + ": " + std::to_string(s.prompts_per_group) +
                    " prompts x " + std::to_string(s.prefix_groups) +
                    " prefix groups is more than 10000000 recurring prompts");
      }
      prefix.prompts_per_group = static_cast<int>(pool);
    }
  }
  if (!s.users) {
    // Turns and think time shape chat users' sessions; a trace, an open loop or a fixed
    // concurrency sends each request once, so either would be silently ignored.
    const std::string mode = s.trace ? "a trace" : s.concurrency ? "--concurrency" : "an open loop (--rate)";
    if (s.turns != "1") {
      throw Error(s.where("--turns") + ": turns per session apply to chat users (--users, workload.users); " + mode +
                  " sends each request once. Remove it, or give users");
    }
    if (s.think_time != "0s") {
      throw Error(s.where("--think-time") + ": the think time applies to chat users (--users, workload.users); " + mode +
                  " has no pause between turns. Remove it, or give users");
    }
  }
  if (s.trace) {
    TraceConfig t;
    t.path = *s.trace;
    if (s.trace_format) t.format = parse_trace_format(*s.trace_format);
    t.time_scale = s.time_scale;
    t.requests = s.requests;
    t.seed = s.seed;
    b.workload = make_trace_workload(t);
    if (duration) c.stop_arrivals = from_seconds(*duration);
  } else if (s.users || s.concurrency) {
    ClosedLoopConfig cl;
    cl.users = s.users ? *s.users : *s.concurrency;
    cl.users_where = s.where(s.users ? "--users" : "--concurrency");
    if (s.users) {
      cl.think = Distribution::parse(s.think_time, Distribution::Unit::kSeconds, s.where("--think-time"));
      cl.turns = Distribution::parse(s.turns, Distribution::Unit::kCount, s.where("--turns"));
    } else {
      cl.history = false;
    }
    cl.lengths = lengths;
    cl.prefix = prefix;
    // A session restarts when its next turn would exceed what the server accepts.
    const Deployment& main = c.groups.front().deployment;
    cl.max_context = main.limits.max_model_len > 0 ? main.limits.max_model_len : main.model.max_context;
    cl.requests = s.requests;
    cl.seed = s.seed;
    if (!duration && !s.requests) {
      throw Error("--users/--concurrency: give --duration D or --requests N (closed loops never end)");
    }
    if (duration) c.stop_arrivals = from_seconds(*duration);
    b.workload = make_closed_loop(cl);
  } else {
    OpenLoopConfig o;
    o.process = parse_arrival_process(s.arrival, s.where("--arrival"));
    o.burstiness = s.burstiness;
    check_burstiness(s.burstiness, s.where("--burstiness"));
    if (s.burstiness != 1.0) {
      // As in vLLM's benchmark, whose arrivals are gamma with shape = burstiness (1 = Poisson):
      // a burstiness with Poisson arrivals is that gamma process; with constant or offline
      // arrivals it would mean nothing, and is refused rather than ignored.
      if (o.process == ArrivalProcess::kPoisson) {
        o.process = ArrivalProcess::kGamma;
      } else if (o.process != ArrivalProcess::kGamma) {
        throw Error(s.where("--burstiness") + ": applies to poisson or gamma arrivals, not '" +
                    std::string(arrival_process_name(o.process)) + "' (" + s.where("--arrival") + ")");
      }
    }
    if (o.process != ArrivalProcess::kOffline) {
      if (!s.rate) throw Error("--rate: missing; give a rate (requests/s), --arrival offline, --users or --concurrency");
      o.stages.clear();
      std::stringstream in(*s.rate);
      std::string part;
      std::vector<std::string> parts;
      const std::string rw = s.where("--rate");
      while (std::getline(in, part, ',')) {
        RateStage st;
        const auto at = part.find('@');
        st.rate = parse_number(part.substr(0, at), rw);
        if (st.rate <= 0) throw Error(rw + ": '" + part.substr(0, at) + "' is not a rate > 0 (requests/s)");
        // 1e-6/s is one request in ~12 days; 1e7/s is beyond any one cluster.
        if (st.rate < 1e-6 || st.rate > 1e7) {
          throw Error(rw + ": '" + part.substr(0, at) + "' is not a rate in 1e-06..1e+07 requests/s");
        }
        if (at != std::string::npos) {
          st.duration_s = checked::finite_in(units::parse_time(part.substr(at + 1), rw), 0,
                                             checked::kMaxSimSeconds, rw, "s");
          if (!(st.duration_s > 0)) {
            throw Error(rw + ": the stage '" + part + "' lasts 0 s; a stage's duration must be > 0 "
                        "(leave it out on the last stage to run that rate to the end)");
          }
        }
        o.stages.push_back(st);
        parts.push_back(part);
      }
      if (o.stages.empty()) throw Error(rw + ": no rate given; accepted: RATE or stages RATE@DURATION,...,RATE");
      // A stage without a duration runs to the end of the run: only the last may be one.
      for (std::size_t i = 0; i + 1 < o.stages.size(); ++i) {
        if (o.stages[i].duration_s == 0) {
          throw Error(rw + ": the stage '" + parts[i] + "' has no duration, so the stages after it "
                      "would never start; give every stage but the last one, e.g. 5@10min,10@10min,20");
        }
      }
    }
    o.requests = s.requests;
    o.duration_s = duration;
    if (!o.requests && !o.duration_s) o.requests = 1000;
    o.lengths = lengths;
    o.prefix = prefix;
    o.seed = s.seed;
    b.workload = make_open_loop(o);
  }
  b.workload_description = b.workload->describe();
  return b;
}

}  // namespace capsim::scenario
