// The workload generators (one file each) and their settings.
//   open loop   (open_loop.cc):   arrivals by a process (Poisson, Gamma, constant, offline),
//                                 one rate or piecewise stages; optional shared-prefix groups
//   closed loop (closed_loop.cc): N users who send, wait for the whole answer, think, send again,
//                                 in multi-turn sessions whose history is the next prefix;
//                                 fixed concurrency is closed loop with no think time, one turn
//   trace       (trace_workload.cc): replay of a trace file (Azure, Mooncake, BurstGPT, CSV)
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/workload/distributions.h"
#include "sim/workload/trace.h"
#include "sim/workload/workload.h"

namespace capsim {

enum class ArrivalProcess { kPoisson, kGamma, kConstant, kOffline };
ArrivalProcess parse_arrival_process(const std::string& name, const std::string& where);
const char* arrival_process_name(ArrivalProcess p);

struct RateStage {
  double rate = 1;       // requests/s
  double duration_s = 0; // 0 = until the end
};

struct LengthSpec {
  Distribution prompt = Distribution::fixed(512, Distribution::Unit::kTokens);
  Distribution output = Distribution::fixed(128, Distribution::Unit::kTokens);
  // Measured requests' (prompt, output) lengths, drawn together: one pair, uniformly, per
  // request, so a run's long prompts keep their own answers (`capsim calibrate runs` replaying a
  // `vllm bench serve --save-detailed` file). When set, prompt and output are not drawn.
  // Each length >= 1.
  std::shared_ptr<const std::vector<std::pair<std::int64_t, std::int64_t>>> paired;

  // One request's (prompt, output) tokens: a pair when `paired` is set, else prompt then output
  // drawn in that order (the order every seeded run has used).
  std::pair<std::int64_t, std::int64_t> draw(Rng& rng) const {
    if (paired) {
      return (*paired)[static_cast<std::size_t>(rng.uniform_int(0, static_cast<std::int64_t>(paired->size()) - 1))];
    }
    const auto question = static_cast<std::int64_t>(prompt.sample(rng));
    return {question, static_cast<std::int64_t>(output.sample(rng))};
  }
  // "prompt 512, output 128" (with the callers' words), or "(prompt, output) pairs of 480
  // measured requests".
  std::string describe(const std::string& prompt_word, const std::string& output_word) const {
    if (paired) {
      return "(" + prompt_word + ", " + output_word + ") pairs of " + std::to_string(paired->size()) +
             " measured requests";
    }
    return prompt_word + " " + prompt.describe() + ", " + output_word + " " + output.describe();
  }
};

// Shared-prefix groups: each request carries one of `groups` system prompts of
// `system_prompt_tokens` tokens ahead of its own prompt.
struct PrefixGroups {
  int groups = 0;  // 0 = no shared system prompt
  std::int64_t system_prompt_tokens = 0;
  // Open loop only. 0: every request asks its own question. N > 0: a fixed pool of N questions
  // per group (groups x N prompts, lengths drawn once), shuffled once; request i sends prompt
  // pool[i mod size], so each prompt recurs every `size` requests, as inference-perf's
  // shared_prefix generator does (num_groups x num_prompts_per_group).
  int prompts_per_group = 0;
};

// The gamma shapes accepted as burstiness. vLLM's benchmark takes any shape > 0; these bounds
// are capsim's. Gaps have a coefficient of variation of 1/sqrt(shape): at 0.01 (CV 10) the median
// gap is already ~1e-28 of the mean, far below a nanosecond, so a run is a few bursts and the
// rate holds only on average over many of them; at 100 (CV 0.1) gaps are within about 10% of
// `constant`'s. A value beyond either end (1e-300, 1e6) is a slip, not a workload.
inline constexpr double kMinBurstiness = 0.01;
inline constexpr double kMaxBurstiness = 100;
// Throws capsim::Error "where: 'VALUE' is not a gamma shape in 0.01..100 ..." unless `burstiness`
// is within [kMinBurstiness, kMaxBurstiness].
void check_burstiness(double burstiness, const std::string& where);

struct OpenLoopConfig {
  ArrivalProcess process = ArrivalProcess::kPoisson;
  std::vector<RateStage> stages = {{1.0, 0}};
  double burstiness = 1.0;  // Gamma shape (vLLM --burstiness); 1 = Poisson
  std::optional<std::int64_t> requests;
  std::optional<double> duration_s;
  LengthSpec lengths;
  PrefixGroups prefix;
  std::uint64_t seed = 0;
};

struct ClosedLoopConfig {
  int users = 1;
  std::string users_where = "--users";  // what gave `users`, for messages: --concurrency, a file's field
  Distribution think = Distribution::fixed(0, Distribution::Unit::kSeconds);
  Distribution turns = Distribution::fixed(1, Distribution::Unit::kCount);  // per session
  LengthSpec lengths;
  PrefixGroups prefix;  // system prompt shared by each group of users
  bool history = true;  // a turn's prompt = system + earlier turns + new question
  std::int64_t max_context = 1 << 30;  // a session restarts when the next turn would not fit
  std::optional<std::int64_t> requests;
  std::uint64_t seed = 0;
};

struct TraceConfig {
  std::string path;
  std::optional<TraceFormat> format;
  double time_scale = 1.0;
  std::optional<std::int64_t> requests;
  std::int64_t hash_block_tokens = 512;  // tokens per Mooncake hash_id
  std::uint64_t seed = 0;
};

std::unique_ptr<Workload> make_open_loop(const OpenLoopConfig& c);
std::unique_ptr<Workload> make_closed_loop(const ClosedLoopConfig& c);
std::unique_ptr<Workload> make_trace_workload(const TraceConfig& c);

}  // namespace capsim
