#include "sim/core/event_queue.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "sim/core/time.h"

using capsim::Event;
using capsim::EventQueue;
using capsim::SimTime;

TEST_CASE("time: seconds <-> nanoseconds", "[core][time]") {
  static_assert(capsim::from_seconds(1.0) == capsim::kNsPerSecond);
  static_assert(capsim::to_seconds(capsim::kNsPerSecond) == 1.0);
  CHECK(capsim::from_seconds(1.5) == 1'500'000'000);
  // 0.1 s is 100000000.00000001 ns after the multiply; rounds to 1e8.
  CHECK(capsim::from_seconds(0.1) == 100'000'000);
  // 1.4e-9 * 1e9 = 1.4 and 1.6e-9 * 1e9 = 1.6 in doubles: nearest ns is 1 and 2.
  CHECK(capsim::from_seconds(1.4e-9) == 1);
  CHECK(capsim::from_seconds(1.6e-9) == 2);
  CHECK(capsim::from_seconds(-1.6e-9) == -2);
  CHECK(capsim::from_seconds(0.0) == 0);
  CHECK(capsim::to_seconds(2'500'000'000) == 2.5);
  CHECK(capsim::to_seconds(-1) == -1e-9);
}

TEST_CASE("event queue: equal times pop in push order", "[core][event_queue]") {
  EventQueue q;
  // Five events at t=100 pushed between events at other times; the t=100 ones must come
  // out as kinds 10, 11, 12, 13, 14 whatever the heap does internally.
  q.push(100, 10, 0);
  q.push(200, 99, 0);
  q.push(100, 11, 0);
  q.push(50, 98, 0);
  q.push(100, 12, 0);
  q.push(100, 13, 0);
  q.push(300, 97, 0);
  q.push(100, 14, 0);
  REQUIRE(q.size() == 8);

  CHECK(q.pop().kind == 98);  // t=50
  for (std::uint32_t kind = 10; kind <= 14; ++kind) {
    const Event e = q.pop();
    CHECK(e.time == 100);
    CHECK(e.kind == kind);
  }
  CHECK(q.pop().kind == 99);  // t=200
  CHECK(q.pop().kind == 97);  // t=300
  CHECK(q.empty());
}

TEST_CASE("event queue: interleaved push and pop, worked by hand", "[core][event_queue]") {
  EventQueue q;
  // Pushes get seq 0, 1, 2, ... in order. Working (time, seq, kind):
  //   push (5,0,1) (3,1,2) (5,2,3)         pending {(3,1,2) (5,0,1) (5,2,3)}
  //   pop -> (3,1,2)
  //   push (4,3,4) (5,4,5) (3,5,6)         pending {(3,5,6) (4,3,4) (5,0,1) (5,2,3) (5,4,5)}
  //   pop -> (3,5,6), (4,3,4), (5,0,1)
  //   push (5,6,7)                         pending {(5,2,3) (5,4,5) (5,6,7)}
  //   pop -> (5,2,3), (5,4,5), (5,6,7)
  CHECK(q.push(5, 1, 100, 1000) == 0);
  CHECK(q.push(3, 2, 101, 1001) == 1);
  CHECK(q.push(5, 3, 102, 1002) == 2);
  REQUIRE(q.top().seq == 1);

  Event e = q.pop();
  CHECK(e.time == 3);
  CHECK(e.seq == 1);
  CHECK(e.kind == 2);
  CHECK(e.target == 101);
  CHECK(e.payload == 1001);

  q.push(4, 4, 103);
  q.push(5, 5, 104);
  q.push(3, 6, 105);
  CHECK(q.size() == 5);

  struct Expected {
    SimTime time;
    std::uint64_t seq;
    std::uint32_t kind;
  };
  for (const Expected& want : {Expected{3, 5, 6}, Expected{4, 3, 4}, Expected{5, 0, 1}}) {
    e = q.pop();
    CHECK(e.time == want.time);
    CHECK(e.seq == want.seq);
    CHECK(e.kind == want.kind);
  }
  CHECK(q.push(5, 7, 106) == 6);
  for (const Expected& want : {Expected{5, 2, 3}, Expected{5, 4, 5}, Expected{5, 6, 7}}) {
    e = q.pop();
    CHECK(e.time == want.time);
    CHECK(e.seq == want.seq);
    CHECK(e.kind == want.kind);
  }
  CHECK(q.empty());
  CHECK(q.size() == 0);
}

TEST_CASE("event queue: matches a stable sort by time", "[core][event_queue]") {
  // Oracle: popping everything must equal the pushes stable-sorted by time. Times come
  // from a fixed LCG (Numerical Recipes constants) over a small range so ties are common.
  EventQueue q;
  std::vector<Event> pushed;
  std::uint32_t lcg = 12345;
  for (std::uint32_t i = 0; i < 5000; ++i) {
    lcg = lcg * 1664525u + 1013904223u;
    const SimTime time = static_cast<SimTime>(lcg >> 24);  // 0..255
    const std::uint64_t seq = q.push(time, i % 7, i, i * 3);
    pushed.push_back(Event{time, seq, i % 7, i, std::uint64_t{i} * 3});
  }
  std::stable_sort(pushed.begin(), pushed.end(),
                   [](const Event& a, const Event& b) { return a.time < b.time; });
  for (const Event& want : pushed) {
    REQUIRE(!q.empty());
    const Event got = q.pop();
    REQUIRE(got.time == want.time);
    REQUIRE(got.seq == want.seq);
    REQUIRE(got.target == want.target);
    REQUIRE(got.payload == want.payload);
  }
  CHECK(q.empty());
}

TEST_CASE("event queue: push_few keeps the order of a single heap", "[core][event_queue]") {
  // The same pushes, each going to push() or push_few() by a second LCG, pop exactly as from a
  // queue given every event by push(), interleaved with pops (a simulation pops as it pushes).
  EventQueue mixed, plain;
  std::uint32_t lcg = 777, pick = 99;
  std::size_t popped = 0;
  for (std::uint32_t i = 0; i < 20000; ++i) {
    lcg = lcg * 1664525u + 1013904223u;
    pick = pick * 22695477u + 1u;
    const SimTime time = static_cast<SimTime>(i / 4 + (lcg >> 26));  // ties and near-ties
    const bool few = (pick >> 28) < 3;
    const std::uint64_t a = few ? mixed.push_few(time, i % 5, i, i) : mixed.push(time, i % 5, i, i);
    REQUIRE(a == plain.push(time, i % 5, i, i));
    REQUIRE(mixed.size() == plain.size());
    if ((lcg >> 20) % 3 == 0) {
      REQUIRE(mixed.top().seq == plain.top().seq);
      const Event x = mixed.pop(), y = plain.pop();
      REQUIRE(x.time == y.time);
      REQUIRE(x.seq == y.seq);
      REQUIRE(x.payload == y.payload);
      ++popped;
    }
  }
  CHECK(popped > 5000);
  while (!plain.empty()) {
    REQUIRE(!mixed.empty());
    const Event x = mixed.pop(), y = plain.pop();
    REQUIRE(x.seq == y.seq);
    REQUIRE(x.time == y.time);
  }
  CHECK(mixed.empty());
  mixed.push_few(1, 0, 0);
  mixed.clear();
  CHECK(mixed.empty());
}

TEST_CASE("event queue: clear keeps sequence numbers unique", "[core][event_queue]") {
  EventQueue q;
  q.push(1, 0, 0);
  q.push(2, 0, 0);
  q.clear();
  CHECK(q.empty());
  CHECK(q.push(0, 0, 0) == 2);
}
