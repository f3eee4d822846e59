// Contract: a Workload produces requests lazily, in arrival-time order per producer. The
// simulation calls start() once, on_arrival() after each of its arrivals is delivered (open-loop
// sources schedule the next one then), and on_finish() when a request completes (closed-loop
// users think, then send the next turn). Requests go out through the sink; their arrival time
// must be >= the current time.
#pragma once

#include <string>

#include "sim/core/time.h"
#include "sim/workload/request.h"

namespace capsim {

class ArrivalSink {
 public:
  virtual ~ArrivalSink() = default;
  virtual void arrive(Request r) = 0;
};

class Workload {
 public:
  virtual ~Workload() = default;
  virtual void start(ArrivalSink& sink) = 0;
  virtual void on_arrival(const Request& r, ArrivalSink& sink) { (void)r; (void)sink; }
  virtual void on_finish(const Request& r, SimTime now, ArrivalSink& sink) {
    (void)r; (void)now; (void)sink;
  }
  // One line describing it, for reports ("closed loop: 500 users, think exp(20 s)").
  virtual std::string describe() const = 0;
  // Whether the workload itself bounds the requests in the system (a closed loop: N users or a
  // fixed concurrency, each waiting for its answer), so that no queue can grow without bound.
  virtual bool bounded_population() const { return false; }
};

}  // namespace capsim
