#include "sim/core/event_queue.h"

#include <cassert>

namespace capsim {

std::uint64_t EventQueue::push(SimTime time, std::uint32_t kind, std::uint32_t target,
                               std::uint64_t payload) {
  const std::uint64_t seq = next_seq_++;
  heap_.push(Event{time, seq, kind, target, payload});
  return seq;
}

const Event& EventQueue::top() const {
  assert(!heap_.empty());
  return heap_.top();
}

Event EventQueue::pop() {
  assert(!heap_.empty());
  Event e = heap_.top();
  heap_.pop();
  return e;
}

void EventQueue::clear() {
  // Swapping with a fresh queue releases the storage too; the sequence counter keeps
  // running so seq values stay unique for the queue's lifetime.
  decltype(heap_)().swap(heap_);
}

}  // namespace capsim
