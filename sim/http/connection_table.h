// The open connections of one HTTP server, for its connection cap. Under attack by slow or idle
// clients (slowloris: a header sent a byte at a time, or connections opened and left), refusing
// new connections at the cap would let those clients lock everybody else out. Instead, when the
// cap is reached, the connection that has waited longest for the rest of its request is closed
// to make room: an honest client sends its request at once after connecting and is answered,
// while the slow ones lose their places to newer ones in turn.
//
// Contract: single-threaded (the server's I/O thread). A connection is evictable only while it
// waits for a request (reading); one being answered (a job, a stream) is never closed for room.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>

namespace capsim::http {

class ConnectionTable {
 public:
  using Id = std::uint64_t;
  using Clock = std::chrono::steady_clock;

  explicit ConnectionTable(std::size_t cap) : cap_(cap) {}

  // Room for one more connection: true when under the cap, or after evicting the connection
  // that has been reading its request the longest (its `close` runs now, and it leaves the
  // table). False when the table is full of connections that are being answered.
  bool make_room();
  // A new connection, at first waiting for its request; `close` closes its socket.
  Id add(std::function<void()> close, Clock::time_point now = Clock::now());
  // It waits for (the rest of) a request since `since`: evictable.
  void reading(Id id, Clock::time_point since = Clock::now());
  // It is being answered: not evictable.
  void busy(Id id);
  void remove(Id id);

  std::size_t size() const { return entries_.size(); }
  std::size_t cap() const { return cap_; }
  std::uint64_t evicted() const { return evicted_; }

 private:
  struct Entry {
    std::function<void()> close;
    bool reading = true;
    Clock::time_point since;
  };
  std::size_t cap_;
  Id next_ = 1;
  std::uint64_t evicted_ = 0;
  std::unordered_map<Id, Entry> entries_;
};

}  // namespace capsim::http
