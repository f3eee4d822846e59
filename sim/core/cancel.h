// Cooperative cancellation of long runs: a front end (the HTTP server, when a client goes away or
// a job passes its time limit) sets the flag; a simulation checks it every 1024 distinct event
// times and stops by throwing Cancelled.
//
// Contract: Cancelled is not a capsim::Error, so code that turns bad input into a rejected
// candidate or a FAILED assertion (catch (const Error&)) lets it through to the front end.
// A run that is never cancelled gives the same result, bit for bit, as one without a flag.
#pragma once

#include <atomic>
#include <memory>
#include <stdexcept>

namespace capsim {

class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("cancelled") {}
};

// Shared between the front end (which sets it) and every run of one job (which read it).
using CancelFlag = std::shared_ptr<std::atomic<bool>>;

inline void throw_if_cancelled(const CancelFlag& flag) {
  if (flag && flag->load(std::memory_order_relaxed)) throw Cancelled();
}

}  // namespace capsim
