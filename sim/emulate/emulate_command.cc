// `capsim emulate`: the scenario's deployment (the deployment flags and scenario files of `capsim
// simulate`; its clients are the workload, so no workload flags) served as an OpenAI-compatible
// endpoint with the simulated timing.
#include <cstdlib>
#include <memory>

#include "sim/emulate/emulate.h"
#include "sim/emulate/server.h"
#include "sim/flags/scenario_flags.h"
#include "sim/http/request_guard.h"
#include "sim/scenario/scenario.h"

namespace capsim::emulate {
namespace {

struct EmulateCommand {
  std::string scenario;
  flags::ScenarioFlags deployment_flags;
  EmulateOptions options;
  std::string served_model;
  double max_body_kib = 4096;
};

}  // namespace

void add_emulate_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<EmulateCommand>();
  CLI::App* cmd = app.add_subcommand(
      "emulate", "serve an OpenAI-compatible API (as vLLM serves it) that answers with the simulated deployment's timing");
  cmd->footer(
      "examples:\n"
      "  capsim emulate --model llama-3.1-8b --card h100-sxm --port 8000\n"
      "  capsim emulate --model llama-3.1-70b --card h100-sxm --tp 2 --replicas 2 --time-scale 10\n"
      "  capsim emulate workloads/chatbot-500-users.yaml --host 0.0.0.0 --output-tokens lognormal:200:800\n"
      "  curl -N localhost:8000/v1/chat/completions -H 'Content-Type: application/json' \\\n"
      "      -d '{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 20, \"stream\": true}'\n"
      "routes: GET /v1/models, POST /v1/completions, POST /v1/chat/completions, GET /metrics, GET /health;\n"
      "answers are filler text; a request without ignore_eos stops after a length drawn from --output-tokens\n"
      "(at most max_tokens); latencies in /metrics are simulated seconds. See docs/emulate.md.");
  cmd->add_option("scenario", o->scenario, "scenario YAML file (its deployment is served; its workload is not sent)");
  o->deployment_flags.add_deployment_to(*cmd);
  cmd->get_option("--output-tokens")
      ->description("length of an answer that stops by itself (a request without ignore_eos): N, uniform:A:B, "
                    "normal:M:SD, lognormal:MEAN:P99, empirical:FILE:COLUMN (default 128)");
  // Not the scenario's --time-scale (which stretches a trace's arrivals; emulate sends none): a
  // scenario file's time_scale is not read.
  cmd->add_option("--time-scale", o->options.time_scale,
                  "simulated seconds per wall-clock second, 0.001..10000 (default 1 = real time; 10 = ten times faster)");
  cmd->add_option("--host,--bind", o->options.bind, "address to listen on (default 127.0.0.1; 0.0.0.0 for all)");
  cmd->add_option("--port", o->options.port, "TCP port (default 8000; 0 = any free port, printed on start)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--read-timeout", o->options.read_timeout_s, "seconds a request's header and body may take to arrive")
      ->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--max-connections", o->options.max_connections,
                  "open connections; at the cap a new one replaces the one waiting longest for its request")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--max-body", o->max_body_kib, "largest request body, KiB (413 beyond)")
      ->capture_default_str()->check(CLI::Range(1.0, 65536.0));
  cmd->add_option("--api-key", o->options.guard.auth_token,
                  "require 'Authorization: Bearer KEY' on /v1/ (vLLM's flag; default: $VLLM_API_KEY; /health, /metrics stay open)");
  cmd->add_option("--allowed-host", o->options.guard.allowed_hosts,
                  "a host name clients may reach the emulator by (repeatable; IP addresses and localhost always are)");
  cmd->add_option("--served-model-name", o->served_model,
                  "the model name clients send and /v1/models lists (default: --model as given)");
  cmd->callback([o, &exit_code] {
    scenario::ScenarioSpec spec = o->deployment_flags.resolve(o->scenario);
    // Only the deployment matters; a scenario without a workload gets a placeholder one so that
    // build_scenario (which insists on a workload) accepts it. It is never run.
    if (!spec.trace && !spec.users && !spec.concurrency && !spec.rate) spec.arrival = "offline";
    scenario::BuiltScenario b = scenario::build_scenario(spec);
    EmulateOptions opts = o->options;
    opts.max_body_bytes = static_cast<std::size_t>(o->max_body_kib * 1024);
    if (opts.guard.auth_token.empty()) {
      if (const char* key = std::getenv("VLLM_API_KEY")) opts.guard.auth_token = key;
    }
    http::normalize_allowed_hosts(opts.guard.allowed_hosts, "--allowed-host");
    opts.guard.allowed_host_flag = "capsim emulate --allowed-host";
    opts.guard.auth_token_flag = "capsim emulate --api-key or $VLLM_API_KEY";
    opts.served_model = o->served_model.empty() ? spec.deployment.model : o->served_model;
    opts.seed = spec.seed;
    opts.output_lengths = Distribution::parse(spec.output_tokens, Distribution::Unit::kTokens, spec.where("--output-tokens"));
    run_emulator(b.config, opts);
    exit_code = 0;
  });
}

}  // namespace capsim::emulate
