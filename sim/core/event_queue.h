// The simulation's agenda: a min-priority queue of pending events.
//
// Events are small plain values. The queue gives them no meaning: `kind` says what happens,
// `target` says to whom (an index into the caller's own table) and `payload` carries one
// word of caller data. The simulator that owns the queue defines all three.
//
// Order contract: events come out by ascending time; events with equal time come out in the
// order they were pushed (first in, first out). Each push gets the next value of a 64-bit
// sequence counter, so the order is a total order on (time, seq) and is the same on every
// run, platform and standard library. Nothing here depends on heap implementation details.
//
// The queue does not know "now": it accepts any time, including one earlier than an event
// already popped. Keeping time monotonic is the simulator's job.
//
// Cost: push and pop are O(log n); top, empty and size are O(1). Events pushed with push_few()
// (a kind of which few are pending at once: a replica's step end, one per replica) are kept in
// a heap of their own, so that pushing and popping them costs O(log few) rather than O(log n)
// with many other events pending (a closed loop's thinking users each hold an arrival); the
// order contract is over both heaps together (one sequence counter, pop takes the earlier top).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <queue>
#include <vector>

#include "sim/core/time.h"

namespace capsim {

struct Event {
  SimTime time;          // when it fires, ns
  std::uint64_t seq;     // push order; breaks ties between equal times
  std::uint32_t kind;    // caller-defined event type
  std::uint32_t target;  // caller-defined recipient index
  std::uint64_t payload; // caller-defined data
};

class EventQueue {
 public:
  EventQueue() = default;

  // Schedules an event and returns the sequence number it was given (0, 1, 2, ... in push
  // order over the queue's lifetime; clear() does not restart it).
  std::uint64_t push(SimTime time, std::uint32_t kind, std::uint32_t target,
                     std::uint64_t payload = 0) {
    const std::uint64_t seq = next_seq_++;
    heap_.push(Event{time, seq, kind, target, payload});
    return seq;
  }
  // push() for an event of a kind with few pending at once (see above); the same order.
  std::uint64_t push_few(SimTime time, std::uint32_t kind, std::uint32_t target,
                         std::uint64_t payload = 0) {
    const std::uint64_t seq = next_seq_++;
    few_.push(Event{time, seq, kind, target, payload});
    return seq;
  }

  // The earliest event (lowest time, then lowest seq). Precondition: !empty().
  const Event& top() const {
    assert(!empty());
    return few_first() ? few_.top() : heap_.top();
  }

  // Removes and returns top(). Precondition: !empty().
  Event pop() {
    assert(!empty());
    if (few_first()) {
      Event e = few_.top();
      few_.pop();
      return e;
    }
    Event e = heap_.top();
    heap_.pop();
    return e;
  }

  bool empty() const { return heap_.empty() && few_.empty(); }
  std::size_t size() const { return heap_.size() + few_.size(); }

  // Drops every pending event.
  void clear();

 private:
  // std::priority_queue is a max-heap; "a comes out after b" makes it a min-heap on
  // (time, seq).
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      if (a.time != b.time) return a.time > b.time;
      return a.seq > b.seq;
    }
  };

  // Whether the earliest event is in few_ (REQUIRES: !empty()).
  bool few_first() const {
    if (few_.empty()) return false;
    return heap_.empty() || Later{}(heap_.top(), few_.top());
  }

  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  std::priority_queue<Event, std::vector<Event>, Later> few_;  // push_few()'s events
  std::uint64_t next_seq_ = 0;
};

}  // namespace capsim
