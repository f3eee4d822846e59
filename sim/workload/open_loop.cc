// Open-loop arrivals: requests come whatever the server does. Inter-arrival gaps are drawn
// lazily, one request ahead. Gamma gaps follow vLLM's benchmark (shape = burstiness,
// scale = 1 / (rate x burstiness)), so burstiness 1 is Poisson and < 1 is burstier.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/run_limits.h"
#include "sim/workload/generators.h"

namespace capsim {

ArrivalProcess parse_arrival_process(const std::string& name, const std::string& where) {
  if (name == "poisson") return ArrivalProcess::kPoisson;
  if (name == "gamma") return ArrivalProcess::kGamma;
  if (name == "constant" || name == "uniform") return ArrivalProcess::kConstant;
  if (name == "offline") return ArrivalProcess::kOffline;
  throw Error(where + ": unknown arrival process '" + name +
              "'; accepted: poisson, gamma, constant, offline");
}

const char* arrival_process_name(ArrivalProcess p) {
  switch (p) {
    case ArrivalProcess::kPoisson: return "poisson";
    case ArrivalProcess::kGamma: return "gamma";
    case ArrivalProcess::kConstant: return "constant";
    case ArrivalProcess::kOffline: return "offline";
  }
  return "?";
}

void check_burstiness(double burstiness, const std::string& where) {
  if (!(burstiness >= kMinBurstiness && burstiness <= kMaxBurstiness)) {
    throw Error(where + ": '" + checked::show(burstiness) + "' is not a gamma shape in " +
                checked::show(kMinBurstiness) + ".." + checked::show(kMaxBurstiness) +
                " (1 = Poisson, below 1 burstier, above 1 more regular)");
  }
}

namespace {

class OpenLoop : public Workload {
 public:
  explicit OpenLoop(const OpenLoopConfig& c)
      : c_(c), arrivals_(Rng(c.seed).split(1)), lengths_(Rng(c.seed).split(2)) {
    if (c_.stages.empty()) throw Error("--rate: no rate given");
    for (const auto& s : c_.stages) {
      if (!(s.rate > 0) || !std::isfinite(s.rate)) {
        throw Error("--rate: " + std::to_string(s.rate) + " requests/s is not a positive rate");
      }
    }
    if (c_.process == ArrivalProcess::kGamma) check_burstiness(c_.burstiness, "--burstiness");
    if (!c_.requests && !c_.duration_s) {
      throw Error("open-loop workload: give --requests N or --duration D (it would never end)");
    }
    if (c_.requests) check_run_limit(RunLimit::kRequests, static_cast<double>(*c_.requests), "--requests");
    if (c_.duration_s && c_.process != ArrivalProcess::kOffline) {
      // Expected arrivals within the duration: each stage's rate for its length, the last one
      // (or one without a length) to the end.
      double expected = 0, t = 0;
      for (const auto& st : c_.stages) {
        const double len = st.duration_s > 0 ? std::min(st.duration_s, *c_.duration_s - t)
                                             : *c_.duration_s - t;
        if (len <= 0) break;
        expected += st.rate * len;
        t += len;
      }
      if (t < *c_.duration_s) expected += c_.stages.back().rate * (*c_.duration_s - t);
      if (!c_.requests || expected < static_cast<double>(*c_.requests)) {
        check_run_limit(RunLimit::kRequests, expected, "--rate x --duration");
      }
    }
    if (c_.prefix.prompts_per_group > 0) build_prompt_pool();
  }

  void start(ArrivalSink& sink) override { emit(sink); }
  void on_arrival(const Request&, ArrivalSink& sink) override { emit(sink); }

  std::string describe() const override {
    std::ostringstream o;
    o << "open loop, " << arrival_process_name(c_.process);
    if (c_.process != ArrivalProcess::kOffline) {
      o << " at ";
      for (std::size_t i = 0; i < c_.stages.size(); ++i) {
        o << (i ? " then " : "") << c_.stages[i].rate << " req/s";
        if (c_.stages[i].duration_s > 0) o << " for " << c_.stages[i].duration_s << " s";
      }
    }
    o << "; " << c_.lengths.describe("prompt", "output");
    if (c_.prefix.groups > 0) {
      o << "; " << c_.prefix.groups << " shared system prompts of " << c_.prefix.system_prompt_tokens
        << " tokens";
    }
    if (!pool_length_.empty()) {
      o << "; " << pool_length_.size() << " recurring prompts (" << c_.prefix.prompts_per_group
        << " per group)";
    }
    return o.str();
  }

 private:
  // Emits the next request, if the run has room for one.
  void emit(ArrivalSink& sink) {
    if (c_.requests && emitted_ >= *c_.requests) return;
    if (emitted_ > 0 || c_.process != ArrivalProcess::kOffline) advance_clock();
    if (c_.duration_s && clock_s_ > *c_.duration_s) return;
    if (!(clock_s_ <= checked::kMaxSimSeconds)) {
      throw Error("--rate: request " + std::to_string(emitted_ + 1) + " would arrive at " +
                  checked::show(clock_s_) + " s, past the longest simulated time (" +
                  checked::show(checked::kMaxSimSeconds) + " s); raise the rate or send fewer requests");
    }
    Request r;
    r.id = emitted_++;
    r.arrival = from_seconds(clock_s_);
    if (!pool_length_.empty()) {
      emit_from_pool(r);
      sink.arrive(std::move(r));
      return;
    }
    const auto [question, answer] = c_.lengths.draw(lengths_);
    r.output_tokens = answer;
    if (c_.prefix.groups > 0) {
      const auto g = static_cast<std::uint64_t>(lengths_.uniform_int(0, c_.prefix.groups - 1));
      r.segments.push_back({0x5000000000000000ULL + g, c_.prefix.system_prompt_tokens});
      r.segments.push_back({0x1000000000000000ULL + r.id * 2, question});
      r.segments.push_back({0x1000000000000000ULL + r.id * 2 + 1, r.output_tokens});
      r.prompt_tokens = c_.prefix.system_prompt_tokens + question;
    } else {
      r.prompt_tokens = question;
    }
    sink.arrive(std::move(r));
  }

  // The pool's prompt lengths and its one shuffle (Fisher-Yates) come from their own RNG
  // streams, so the arrival times and output lengths do not depend on the pool.
  void build_prompt_pool() {
    constexpr std::int64_t kMaxPool = 10'000'000;
    const std::int64_t groups = std::max(1, c_.prefix.groups);
    const std::int64_t size = groups * c_.prefix.prompts_per_group;
    if (size > kMaxPool) {
      throw Error("prompts_per_group: " + std::to_string(groups) + " groups x " +
                  std::to_string(c_.prefix.prompts_per_group) + " prompts is more than " +
                  std::to_string(kMaxPool) + " recurring prompts");
    }
    Rng lengths = Rng(c_.seed).split(3), shuffle = Rng(c_.seed).split(4);
    pool_length_.resize(static_cast<std::size_t>(size));
    for (auto& len : pool_length_) len = static_cast<std::int64_t>(c_.lengths.prompt.sample(lengths));
    pool_order_.resize(static_cast<std::size_t>(size));
    for (std::int64_t i = 0; i < size; ++i) pool_order_[static_cast<std::size_t>(i)] = i;
    for (std::int64_t i = size - 1; i > 0; --i) {
      std::swap(pool_order_[static_cast<std::size_t>(i)],
                pool_order_[static_cast<std::size_t>(shuffle.uniform_int(0, i))]);
    }
  }

  // Request r.id sends pool prompt order[id mod size]: its group's system prompt (if any), then
  // the prompt's own question; the answer is unique to the request.
  void emit_from_pool(Request& r) {
    const auto size = static_cast<std::uint64_t>(pool_order_.size());
    const std::int64_t p = pool_order_[static_cast<std::size_t>(r.id % size)];
    const std::int64_t question = pool_length_[static_cast<std::size_t>(p)];
    r.output_tokens = static_cast<std::int64_t>(c_.lengths.output.sample(lengths_));
    r.prompt_tokens = question;
    if (c_.prefix.groups > 0) {
      const auto g = static_cast<std::uint64_t>(p / c_.prefix.prompts_per_group);
      r.segments.push_back({0x5000000000000000ULL + g, c_.prefix.system_prompt_tokens});
      r.prompt_tokens += c_.prefix.system_prompt_tokens;
    }
    r.segments.push_back({0x2000000000000000ULL + static_cast<std::uint64_t>(p), question});
    r.segments.push_back({0x1000000000000000ULL + r.id * 2 + 1, r.output_tokens});
  }

  void advance_clock() {
    if (c_.process == ArrivalProcess::kOffline) return;
    // The stage in force at the current time.
    double stage_end = 0;
    double rate = c_.stages.back().rate;
    for (const auto& s : c_.stages) {
      if (s.duration_s <= 0) { rate = s.rate; break; }
      stage_end += s.duration_s;
      if (clock_s_ < stage_end) { rate = s.rate; break; }
    }
    double gap = 0;
    switch (c_.process) {
      case ArrivalProcess::kPoisson: gap = arrivals_.exponential(1.0 / rate); break;
      case ArrivalProcess::kGamma:
        gap = arrivals_.gamma(c_.burstiness, 1.0 / (rate * c_.burstiness));
        break;
      case ArrivalProcess::kConstant: gap = 1.0 / rate; break;
      case ArrivalProcess::kOffline: break;
    }
    clock_s_ += gap;
  }

  OpenLoopConfig c_;
  Rng arrivals_, lengths_;
  double clock_s_ = 0;
  std::int64_t emitted_ = 0;
  std::vector<std::int64_t> pool_length_;  // question tokens of each pool prompt
  std::vector<std::int64_t> pool_order_;   // the shuffled pool: request i sends order[i % size]
};

}  // namespace

std::unique_ptr<Workload> make_open_loop(const OpenLoopConfig& c) {
  return std::make_unique<OpenLoop>(c);
}

}  // namespace capsim
