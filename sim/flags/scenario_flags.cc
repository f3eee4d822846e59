#include "sim/flags/scenario_flags.h"

#include "sim/core/error.h"
#include "sim/answers/compare_answer.h"
#include "sim/flags/engine_flags.h"
#include "sim/scenario/deployment_spec.h"

namespace capsim::flags {

using scenario::DeploymentSpec;
using scenario::load_scenario_file;
using scenario::member_of;
using scenario::parse_slo_expression;

void ScenarioFlags::add_to(CLI::App& cmd, bool with_deployment) { add(cmd, with_deployment, true); }

void ScenarioFlags::add_deployment_to(CLI::App& cmd) { add(cmd, true, false); }

void ScenarioFlags::add(CLI::App& cmd, bool with_deployment, bool with_workload) {
  const auto bind = [&](auto member, const std::string& names, const std::string& help) {
    CLI::Option* o = cmd.add_option(names, cli_.*member, help);
    setters_.emplace_back(o, [member](ScenarioSpec& dst, const ScenarioSpec& src) { dst.*member = src.*member; });
    return o;
  };
  const auto bind_dep = [&](auto member, const std::string& names, const std::string& help) {
    CLI::Option* o = cmd.add_option(names, cli_.deployment.*member, help);
    setters_.emplace_back(o, [member](ScenarioSpec& dst, const ScenarioSpec& src) {
      dst.deployment.*member = src.deployment.*member;
    });
    return o;
  };
  bind_dep(&DeploymentSpec::model, "--model,-m", "model: catalogue name, Hugging Face id or config.json path (default llama-3.1-8b)");
  if (with_deployment) {
    card_option_ = bind_dep(&DeploymentSpec::card, "--card,-c", "card type (capsim list cards; default h100-sxm); "
                            "over a scenario file, the card's own 16-bit type and vLLM limits replace the file card's defaults");
    bind_dep(&DeploymentSpec::tp, "--tp,--tensor-parallel-size", "GPUs per replica (default 1)")->check(CLI::Range(1, 64));
    bind_dep(&DeploymentSpec::pp, "--pp,--pipeline-parallel-size",
             "pipeline stages of TP GPUs each; layers split as vLLM splits them, one batch in flight per stage (default 1)")
        ->check(CLI::Range(1, 64));
    bind_dep(&DeploymentSpec::dp, "--dp,--data-parallel-size",
             "data-parallel ranks of one engine, each its own scheduler and KV cache; with --enable-expert-parallel on an MoE model, DP attention (default 1)")
        ->check(CLI::Range(1, 1024));
    {
      CLI::Option* o = cmd.add_flag("--enable-expert-parallel", cli_.deployment.enable_expert_parallel,
                                    "MoE: whole experts spread over the TP x DP GPUs instead of TP slices of every expert");
      setters_.emplace_back(o, [](ScenarioSpec& dst, const ScenarioSpec& src) {
        dst.deployment.enable_expert_parallel = src.deployment.enable_expert_parallel;
      });
    }
    bind_dep(&DeploymentSpec::expert_imbalance, "--expert-imbalance",
             "expert-parallel load imbalance, busiest GPU's tokens over the mean (default 1.3)")
        ->check(CLI::Range(1.0, 64.0));
    weights_option_ = bind_dep(&DeploymentSpec::weights, "--weights,--dtype", "weights: auto (the checkpoint as shipped), bf16, fp16, fp8, int8, int4, nvfp4, mxfp4");
    kv_option_ = bind_dep(&DeploymentSpec::kv_cache, "--kv-cache,--kv-cache-dtype", "KV cache: auto, bf16, fp16, fp8");
  }
  bind_dep(&DeploymentSpec::engine, "--engine", "engine profile: vllm (default), tensorrt-llm, lmdeploy, or a path to an engine .yaml");
  // The engine options, one flag per row of their table (sim/scenario/engine_options.h).
  for (const EngineFlag& f : add_engine_flags(cmd, EngineFlagSet::kAll, cli_.deployment, &cli_)) {
    setters_.emplace_back(f.option, [row = f.row](ScenarioSpec& dst, const ScenarioSpec& src) {
      std::visit([&](auto m) { member_of(dst, m) = member_of(src, m); }, row->member);
    });
    if (f.row->member == scenario::EngineOptionMember(&DeploymentSpec::max_num_seqs)) max_seqs_option_ = f.option;
    if (f.row->member == scenario::EngineOptionMember(&DeploymentSpec::max_num_batched_tokens)) {
      max_tokens_option_ = f.option;
    }
  }
  bind_dep(&DeploymentSpec::speculative_config, "--speculative-config",
           "speculative decoding, vLLM's JSON: '{\"method\": \"eagle3\", \"num_speculative_tokens\": 3}'; "
           "methods eagle3, eagle, mtp (deepseek_mtp), ngram, draft_model (with \"model\": a catalogue name)");
  bind_dep(&DeploymentSpec::spec_acceptance, "--spec-acceptance",
           "speculative acceptance per draft position: one alpha (0.7) or one per position (0.9,0.8,0.7); "
           "default: the method's cited value (docs/deployment-options.md)");
  bind_dep(&DeploymentSpec::spec_acceptance_decay, "--spec-acceptance-decay",
           "with one --spec-acceptance alpha: alpha_i = alpha x decay^(i-1) (default 1)")->check(CLI::Range(0.0, 1.0));
  bind_dep(&DeploymentSpec::enable_lora, "--enable-lora", "true/false: serve LoRA adapters (vLLM --enable-lora)");
  bind_dep(&DeploymentSpec::max_loras, "--max-loras", "LoRA adapters in one batch / GPU slots (vLLM default 1)")->check(CLI::Range(1, 4096));
  bind_dep(&DeploymentSpec::max_lora_rank, "--max-lora-rank", "rank every GPU slot is sized for (vLLM default 16; 1, 8, 16, 32, 64, 128, 256, 320, 512)");
  bind_dep(&DeploymentSpec::max_cpu_loras, "--max-cpu-loras", "adapters cached in host memory (vLLM default: max-loras)")->check(CLI::Range(1, 1'000'000));
  bind_dep(&DeploymentSpec::lora_rank, "--lora-rank", "the adapters' own rank r (default: max-lora-rank)")->check(CLI::Range(1, 512));
  bind_dep(&DeploymentSpec::lora_target_modules, "--lora-target-modules",
           "layers the adapters train, comma-separated (default q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj)");
  if (with_workload) {
    bind(&ScenarioSpec::lora_adapters, "--lora-adapters", "distinct adapters the requests name (0 = base model only)")->check(CLI::Range(0, 1'000'000));
    bind(&ScenarioSpec::lora_distribution, "--lora-distribution", "how requests pick adapters: uniform (default) or zipf:S");
  }
  if (with_deployment) {
    bind(&ScenarioSpec::replicas, "--replicas", "replicas behind the router (default 1)")->check(CLI::Range(1, 100000));
  }
  {  // also for plan: plan --pd-search takes the pools' cards and TP from them
    bind(&ScenarioSpec::serving, "--serving", "serving model: aggregated (default) or pd-disaggregated (capsim list serving)");
    prefill_option_ = cmd.add_option("--prefill-pool", prefill_pool_,
                                     "disaggregated serving: the prefill pool, 'N x CARD [tpK] [PRECISION]' (e.g. '2x h100-sxm'); "
                                     "replaces --card/--tp/--replicas/--weights");
    decode_option_ = cmd.add_option("--decode-pool", decode_pool_,
                                    "disaggregated serving: the decode pool, 'N x CARD [tpK] [PRECISION]' (e.g. '1x h100-sxm tp2')");
    bind(&ScenarioSpec::kv_link, "--kv-link", "disaggregated serving: the link the KV crosses between the pools "
         "(calibration/links.yaml: nvlink-h100, ib-ndr-400, roce-400, pcie-gen5-x16, ...)");
  }
  bind(&ScenarioSpec::router, "--router", "round-robin, least-outstanding (default), prefix-aware, size-aware");
  if (with_workload) {
    bind(&ScenarioSpec::requests, "--requests,-n", "requests to send (open loop default 1000)")->check(CLI::Range(1LL, 2'000'000'000LL));
    bind(&ScenarioSpec::duration, "--duration", "stop sending after this long (e.g. 30min)");
    bind(&ScenarioSpec::warmup, "--warmup", "requests arriving before this are not measured (e.g. 5min)");
    bind(&ScenarioSpec::request_timeout, "--request-timeout",
         "the client gives up on a request this long after sending it (e.g. 300s, aiohttp's default): "
         "the engine aborts it, it counts as failed (default: clients wait)");
    bind(&ScenarioSpec::input_tokens, "--input-tokens", "prompt length: N, uniform:A:B, normal:M:SD, lognormal:MEAN:P99, empirical:FILE:COLUMN");
  }
  bind(&ScenarioSpec::output_tokens, "--output-tokens", "output length, same forms (fixed = ignore-EOS benchmark)");
  if (with_workload) {
    bind(&ScenarioSpec::rate, "--rate", "requests/s; stages as 5@10min,10@10min");
    bind(&ScenarioSpec::arrival, "--arrival", "poisson (default), gamma, constant, offline (all at t=0)");
    bind(&ScenarioSpec::burstiness, "--burstiness", "gamma shape (vLLM --burstiness; 1 = Poisson)")->check(CLI::PositiveNumber);
    bind(&ScenarioSpec::concurrency, "--concurrency,--max-concurrency", "fixed number of requests in flight")->check(CLI::Range(1, 10'000'000));
    bind(&ScenarioSpec::users, "--users", "closed-loop users who read, think and write again")->check(CLI::Range(1, 10'000'000));
    bind(&ScenarioSpec::think_time, "--think-time", "user think time: 20s, exponential:20s, uniform:5s:30s");
    bind(&ScenarioSpec::turns, "--turns", "turns per chat session: 1, geometric:5");
    bind(&ScenarioSpec::system_prompt_tokens, "--system-prompt-tokens", "shared system prompt length")->check(CLI::Range(0LL, 10'000'000LL));
    bind(&ScenarioSpec::prefix_groups, "--prefix-groups", "distinct shared system prompts")->check(CLI::Range(1, 1'000'000));
    bind(&ScenarioSpec::prompts_per_group, "--prompts-per-group",
         "open loop: a pool of N recurring questions per prefix group, each resent every groups x N requests (inference-perf shared_prefix); 0 = every question unique")
        ->check(CLI::Range(0, 1'000'000));
    bind(&ScenarioSpec::trace, "--trace", "replay a trace file (Azure CSV, Mooncake JSONL, BurstGPT CSV, plain CSV)");
    bind(&ScenarioSpec::trace_format, "--trace-format", "azure, mooncake, burstgpt, csv (default: detected)");
    bind(&ScenarioSpec::time_scale, "--time-scale", "multiply the trace's inter-arrival gaps (0.5 = twice the rate)")->check(CLI::PositiveNumber);
  }
  bind(&ScenarioSpec::seed, "--seed", "random seed (same seed, same result)")->check(CLI::NonNegativeNumber);
  if (with_workload) {
    slo_option_ = cmd.add_option("--slo", slo_texts_, "SLO, repeatable: ttft_p95<=1s, tpot_p99<=100ms, e2el_p90<=20s");
  }
}

ScenarioSpec ScenarioFlags::resolve(const std::string& file) const {
  ScenarioSpec s;
  if (!file.empty()) load_scenario_file(file, s);
  const DeploymentSpec from_file = s.deployment;
  for (const auto& [opt, set] : setters_) {
    if (opt->count() > 0) {
      set(s, cli_);
      s.origin.erase(opt->get_name());
    }
  }
  // A card given on the command line brings its own defaults (scenario::follow_card_defaults).
  if (!file.empty() && card_option_ && card_option_->count() > 0) {
    const auto given = [](const CLI::Option* o) { return o && o->count() > 0; };
    scenario::follow_card_defaults(s, from_file, {given(weights_option_), given(kv_option_),
                                                  given(max_seqs_option_), given(max_tokens_option_)});
  }
  // A pool given on the command line makes the run disaggregated (names: scenario.h).
  const auto one_group = [](const std::string& text, const std::string& flag) {
    const auto groups = answers::parse_deployment_groups(text, flag);
    if (groups.size() != 1) throw Error(flag + ": '" + text + "': one card type per pool, e.g. '2x h100-sxm tp1'");
    if (groups.front().kv_cache_named) {
      throw Error(flag + ": '" + text + "': both pools hold one KV precision; give --kv-cache instead of kv:");
    }
    return groups.front();
  };
  if (prefill_option_ && prefill_option_->count() > 0) {
    const answers::GroupSpec g = one_group(prefill_pool_, "--prefill-pool");
    s.deployment.card = g.card;
    s.deployment.tp = g.tp;
    s.deployment.weights = g.weights;
    s.replicas = g.replicas;
    s.serving = "pd-disaggregated";
  }
  if (decode_option_ && decode_option_->count() > 0) {
    const answers::GroupSpec g = one_group(decode_pool_, "--decode-pool");
    s.decode_pool = ScenarioSpec::ExtraGroup{g.card, g.tp, g.replicas, g.weights, ""};
    s.serving = "pd-disaggregated";
  }
  if (slo_option_ && slo_option_->count() > 0) {
    s.slos.clear();
    for (const auto& t : slo_texts_) s.slos.push_back(parse_slo_expression(t, "--slo"));
  }
  return s;
}

}  // namespace capsim::flags
