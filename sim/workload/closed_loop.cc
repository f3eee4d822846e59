// Closed-loop users: each of N users sends a request, waits for the whole answer, thinks, and
// sends the next turn of a multi-turn session. A turn's prompt is the group's system prompt,
// every earlier question and answer of the session, and the new question — so history hits the
// prefix cache. Users start spread over the first mean think time so they do not arrive in
// lockstep. With no think time and one turn per session this is fixed concurrency (vLLM's
// --max-concurrency with an unbounded request rate).
#include <sstream>

#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/run_limits.h"
#include "sim/workload/generators.h"

namespace capsim {
namespace {

struct UserState {
  std::vector<ContentSegment> history;  // system prompt, then (question, answer) pairs
  std::int64_t history_tokens = 0;
  std::int64_t turns_left = 0;
  std::uint32_t turn = 0;
  std::uint64_t group = 0;
  std::uint64_t stream = 0;  // Request::stream of the session (0: none sent yet)
};

class ClosedLoop : public Workload {
 public:
  explicit ClosedLoop(const ClosedLoopConfig& c)
      : c_(c), rng_(Rng(c.seed).split(3)) {
    if (c_.users < 1) {
      throw Error(c_.users_where + ": " + std::to_string(c_.users) + " is not a number of users >= 1");
    }
    check_run_limit(RunLimit::kUsers, c_.users, c_.users_where);
    if (c_.requests) check_run_limit(RunLimit::kRequests, static_cast<double>(*c_.requests), "--requests");
    users_.resize(static_cast<std::size_t>(c_.users));  // after the checks: memory grows with it
  }

  void start(ArrivalSink& sink) override {
    const double spread = c_.think.mean();
    for (std::uint32_t u = 0; u < users_.size(); ++u) {
      UserState& s = users_[u];
      s.group = c_.prefix.groups > 0 ? u % static_cast<std::uint32_t>(c_.prefix.groups) : 0;
      new_session(s);
      const double t = spread > 0 ? rng_.uniform(0, spread) : 0;
      send(u, from_seconds(t), sink);
    }
  }

  void on_finish(const Request& r, SimTime now, ArrivalSink& sink) override {
    if (r.user == Request::kNoUser || r.user >= users_.size()) return;
    UserState& s = users_[r.user];
    if (c_.history) {
      // The request's last two segments are its question and its answer.
      const auto n = r.segments.size();
      if (n >= 2) {
        s.history.push_back(r.segments[n - 2]);
        s.history.push_back(r.segments[n - 1]);
        s.history_tokens += r.segments[n - 2].tokens + r.segments[n - 1].tokens;
      }
    }
    if (--s.turns_left <= 0) new_session(s);
    const double think = c_.think.sample(rng_);
    send(r.user, now + from_seconds(think), sink);
  }

  bool bounded_population() const override { return true; }
  std::string describe() const override {
    std::ostringstream o;
    // Said in words because "N users" with no think time is easily misread as N chat users: such
    // users send again the instant an answer ends, which is fixed concurrency, not people reading.
    if (!c_.history) {
      o << "fixed concurrency: " << c_.users << " requests in flight (vLLM bench --max-concurrency)";
    } else {
      o << "closed loop: " << c_.users << " users, think " << c_.think.describe();
      if (c_.think.mean() == 0.0) o << " (each sends again as soon as its answer ends; chat users think, e.g. --think-time exponential:20s)";
      o << ", turns per session " << c_.turns.describe();
    }
    o << "; " << c_.lengths.describe("question", "answer");
    if (c_.prefix.system_prompt_tokens > 0) {
      o << "; system prompt " << c_.prefix.system_prompt_tokens << " tokens";
    }
    return o.str();
  }

 private:
  void new_session(UserState& s) {
    s.history.clear();
    s.history_tokens = 0;
    s.turn = 0;
    s.stream = 0;
    s.turns_left = static_cast<std::int64_t>(c_.turns.sample(rng_));
    if (c_.prefix.system_prompt_tokens > 0) {
      s.history.push_back({0x5000000000000000ULL + s.group, c_.prefix.system_prompt_tokens});
      s.history_tokens = c_.prefix.system_prompt_tokens;
    }
  }

  void send(std::uint32_t u, SimTime at, ArrivalSink& sink) {
    if (c_.requests && sent_ >= *c_.requests) return;
    if (at > from_seconds(checked::kMaxSimSeconds)) {
      throw Error("--think-time: user " + std::to_string(u) + "'s next request would arrive past "
                  "the longest simulated time (" + checked::show(checked::kMaxSimSeconds) +
                  " s); shorten the think time or send fewer requests");
    }
    UserState& s = users_[u];
    const auto [question, answer] = c_.lengths.draw(rng_);
    if (s.turn > 0 && s.history_tokens + question + answer > c_.max_context) new_session(s);
    Request r;
    r.id = sent_++;
    r.arrival = at;
    r.user = u;
    r.turn = s.turn++;
    r.segments = s.history;
    r.segments.push_back({0x1000000000000000ULL + r.id * 2, question});
    r.segments.push_back({0x1000000000000000ULL + r.id * 2 + 1, answer});
    // A session's turns are one stream: each repeats the last one's whole content after the
    // group's system prompt (without history, each request is a stream of its own).
    if (s.stream == 0 || !c_.history) s.stream = r.id + 1;
    r.stream = s.stream;
    r.private_from = c_.prefix.system_prompt_tokens;
    r.prompt_tokens = s.history_tokens + question;
    r.output_tokens = answer;
    sink.arrive(std::move(r));
  }

  ClosedLoopConfig c_;
  Rng rng_;
  std::vector<UserState> users_;
  std::int64_t sent_ = 0;
};

}  // namespace

std::unique_ptr<Workload> make_closed_loop(const ClosedLoopConfig& c) {
  return std::make_unique<ClosedLoop>(c);
}

}  // namespace capsim
