#include "sim/core/event_queue.h"

#include <cassert>

namespace capsim {

void EventQueue::clear() {
  // Swapping with a fresh queue releases the storage too; the sequence counter keeps
  // running so seq values stay unique for the queue's lifetime.
  decltype(heap_)().swap(heap_);
  decltype(few_)().swap(few_);
}

}  // namespace capsim
