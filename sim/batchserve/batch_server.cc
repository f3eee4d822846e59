#include "sim/batchserve/batch_server.h"

#include <algorithm>
#include <cassert>
#include <deque>
#include <vector>

#include "sim/core/event_queue.h"
#include "sim/core/rng.h"
#include "sim/core/time.h"

namespace capsim {
namespace {

enum EventKind : std::uint32_t { kArrival = 0, kBatchDone = 1, kDelayExpired = 2 };

class BatchServer {
 public:
  explicit BatchServer(const BatchServeConfig& c)
      : config_(c), rng_(Rng(c.seed).split(0)), max_delay_(from_seconds(c.max_delay_s)) {
    // Batch durations resolved to integer time once, before the run.
    duration_.resize(static_cast<std::size_t>(c.max_batch) + 1, 0);
    for (int n = 1; n <= c.max_batch; ++n) duration_[n] = from_seconds(c.cost.seconds(n));
    result_.latency_s.reserve(static_cast<std::size_t>(std::max<std::int64_t>(c.requests, 0)));
  }

  BatchServeResult run() {
    schedule_next_arrival(0);
    while (!events_.empty()) {
      const Event e = events_.pop();
      now_ = e.time;
      switch (e.kind) {
        case kArrival:
          on_arrival();
          break;
        case kBatchDone:
          on_batch_done();
          break;
        case kDelayExpired:
          if (e.time == armed_) armed_ = -1;
          try_start();
          break;
      }
    }
    result_.makespan_s = to_seconds(now_);
    return std::move(result_);
  }

 private:
  void schedule_next_arrival(SimTime after) {
    if (!config_.duration_s && arrivals_ >= config_.requests) return;
    const SimTime t = after + from_seconds(rng_.exponential(1.0 / config_.rate));
    if (config_.duration_s && to_seconds(t) > *config_.duration_s) return;
    ++arrivals_;
    events_.push(t, kArrival, 0);
  }

  void on_arrival() {
    queue_.push_back(now_);
    schedule_next_arrival(now_);
    try_start();
  }

  // Starts a batch if the server is idle and the batching rule allows; otherwise makes sure a
  // timer is set for the moment the oldest item's wait reaches max_delay.
  void try_start() {
    if (busy_ || queue_.empty()) return;
    const SimTime deadline = queue_.front() + max_delay_;
    if (static_cast<int>(queue_.size()) < config_.max_batch && now_ < deadline) {
      if (armed_ != deadline) {
        armed_ = deadline;
        events_.push(deadline, kDelayExpired, 0);
      }
      return;
    }
    const int n = std::min<int>(static_cast<int>(queue_.size()), config_.max_batch);
    in_service_.assign(queue_.begin(), queue_.begin() + n);
    queue_.erase(queue_.begin(), queue_.begin() + n);
    for (SimTime arrival : in_service_) result_.wait_s.add(to_seconds(now_ - arrival));
    busy_ = true;
    result_.busy_s += to_seconds(duration_[n]);
    ++result_.batches;
    events_.push(now_ + duration_[n], kBatchDone, 0);
  }

  void on_batch_done() {
    for (SimTime arrival : in_service_) result_.latency_s.add(to_seconds(now_ - arrival));
    result_.items += static_cast<std::int64_t>(in_service_.size());
    in_service_.clear();
    busy_ = false;
    try_start();
  }

  const BatchServeConfig& config_;
  Rng rng_;
  SimTime max_delay_;
  std::vector<SimTime> duration_;  // by batch size
  EventQueue events_;
  SimTime now_ = 0;
  std::int64_t arrivals_ = 0;
  std::deque<SimTime> queue_;        // arrival times, oldest first
  std::vector<SimTime> in_service_;  // arrival times of the running batch
  bool busy_ = false;
  SimTime armed_ = -1;  // time of the pending max-delay timer, -1 when none
  BatchServeResult result_;
};

}  // namespace

BatchServeResult simulate_batch_serving(const BatchServeConfig& config) {
  assert(config.rate > 0 && config.max_batch >= 1 && config.max_delay_s >= 0);
  return BatchServer(config).run();
}

}  // namespace capsim
