// Simulation speed: wall time and simulated engine steps per second for
//   1. 10,000 requests of the Azure LLM inference trace 2023 (conversation) on one H100 SXM
//      replica of Llama-3.1-8B (the trace from ../shared/traces, or a path given);
//   2. the 500-user chatbot (workloads/chatbot-500-users.yaml) for one simulated hour;
//   3. issue #12's workload: Llama-2-7B on one A100-80GB, Poisson 8 req/s, 512 in / 256 out,
//      128 sequences, 2,048-token budget, at 10k and 100k requests (growth with trace length);
//   4. the same per-replica load on 1, 4 and 16 replicas (growth with the replica count).
// Each case also runs with skip-ahead off (SimulationConfig::skip_ahead) for its share of the
// speed; the results are identical (tests/cluster/skip_ahead_test.cc).
// Usage: capsim_bench [SHARED_DIR] [REPEATS]. Prints one line per case; the best of REPEATS.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sim/scenario/scenario.h"
#include "sim/core/error.h"

namespace {

struct Timing {
  double wall_s = 1e300;
  capsim::SimulationResult result;
};

Timing time_scenario(const capsim::scenario::ScenarioSpec& spec, int repeats, bool skip_ahead = true) {
  Timing best;
  for (int i = 0; i < repeats; ++i) {
    capsim::scenario::BuiltScenario b = capsim::scenario::build_scenario(spec);
    b.config.skip_ahead = skip_ahead;
    const auto t0 = std::chrono::steady_clock::now();
    capsim::SimulationResult r = capsim::simulate(b.config, *b.workload);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (wall < best.wall_s) {
      best.wall_s = wall;
      best.result = std::move(r);
    }
  }
  return best;
}

void report(const char* name, const Timing& t) {
  std::printf("%-44s wall %8.3f s  steps %9lld  %10.0f steps/s  %9lld requests  %8.0f simulated s\n",
              name, t.wall_s, static_cast<long long>(t.result.steps),
              static_cast<double>(t.result.steps) / t.wall_s,
              static_cast<long long>(t.result.completed), t.result.simulated_s);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string shared = argc > 1 ? argv[1] : CAPSIM_SHARED_DIR;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 3;
  try {
    capsim::scenario::ScenarioSpec azure;
    azure.name = "azure-conv-10k";
    azure.deployment.model = "llama-3.1-8b";
    azure.deployment.card = "h100-sxm";
    azure.trace = shared + "/traces/AzureLLMInferenceTrace_conv.csv";
    azure.requests = 10000;
    report("Azure conversation trace, 10k requests, 1xH100", time_scenario(azure, repeats));

    capsim::scenario::ScenarioSpec chat;
    capsim::scenario::load_scenario_file(std::string(CAPSIM_DATA_DIR) + "/workloads/chatbot-500-users.yaml", chat);
    chat.duration = "60min";
    report("chatbot 500 users, 1 simulated hour, 1xH100", time_scenario(chat, repeats));

    capsim::scenario::ScenarioSpec issue;
    issue.name = "issue-12";
    issue.deployment.model = "llama-2-7b";
    issue.deployment.card = "a100-80gb-sxm";
    issue.deployment.max_num_seqs = 128;
    issue.deployment.max_num_batched_tokens = 2048;
    issue.rate = "8";
    issue.input_tokens = "512";
    issue.output_tokens = "256";
    for (const std::int64_t n : {10000, 100000}) {
      issue.requests = n;
      const std::string k = std::to_string(n / 1000) + "k";
      report(("Llama-2-7B A100-80GB 8 req/s, " + k + " requests").c_str(), time_scenario(issue, repeats));
      report("  the same, skip-ahead off", time_scenario(issue, repeats, false));
    }
    for (const int replicas : {1, 4, 16}) {
      issue.replicas = replicas;
      issue.rate = std::to_string(8 * replicas);
      issue.requests = 10000 * replicas;
      report(("Llama-2-7B A100-80GB x" + std::to_string(replicas) + ", 8 req/s and 10k requests each").c_str(),
             time_scenario(issue, repeats));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "capsim_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
