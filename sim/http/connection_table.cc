#include "sim/http/connection_table.h"

#include <utility>

namespace capsim::http {

bool ConnectionTable::make_room() {
  if (entries_.size() < cap_) return true;
  auto oldest = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (!it->second.reading) continue;
    // Ties (same instant) go to the smaller id, so the choice does not depend on hash order.
    if (oldest == entries_.end() || it->second.since < oldest->second.since ||
        (it->second.since == oldest->second.since && it->first < oldest->first)) {
      oldest = it;
    }
  }
  if (oldest == entries_.end()) return false;
  std::function<void()> close = std::move(oldest->second.close);
  entries_.erase(oldest);
  ++evicted_;
  if (close) close();
  return true;
}

ConnectionTable::Id ConnectionTable::add(std::function<void()> close, Clock::time_point now) {
  const Id id = next_++;
  entries_.emplace(id, Entry{std::move(close), true, now});
  return id;
}

void ConnectionTable::reading(Id id, Clock::time_point since) {
  const auto it = entries_.find(id);
  if (it == entries_.end()) return;
  it->second.reading = true;
  it->second.since = since;
}

void ConnectionTable::busy(Id id) {
  const auto it = entries_.find(id);
  if (it != entries_.end()) it->second.reading = false;
}

void ConnectionTable::remove(Id id) { entries_.erase(id); }

}  // namespace capsim::http
