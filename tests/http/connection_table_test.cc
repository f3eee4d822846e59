// The connection cap both HTTP front ends share (sim/http/connection_table.h): at the cap, the
// connection that has waited longest for its request makes room; one being answered never does.
#include <catch2/catch.hpp>
#include <vector>

#include "sim/http/connection_table.h"

using capsim::http::ConnectionTable;

TEST_CASE("connection table: under the cap every connection is admitted, at it the oldest reader goes", "[http]") {
  ConnectionTable t(3);
  std::vector<int> closed;
  const auto t0 = ConnectionTable::Clock::time_point{} + std::chrono::seconds(100);
  const auto a = t.add([&] { closed.push_back(1); }, t0);
  const auto b = t.add([&] { closed.push_back(2); }, t0 + std::chrono::seconds(1));
  const auto c = t.add([&] { closed.push_back(3); }, t0 + std::chrono::seconds(2));
  CHECK(t.size() == 3);
  // a's request is complete and being answered; b started its next request after c.
  t.busy(a);
  t.reading(b, t0 + std::chrono::seconds(5));
  REQUIRE(t.make_room());
  CHECK(closed == std::vector<int>{3});  // c has waited since t0+2, b only since t0+5
  CHECK(t.size() == 2);
  CHECK(t.evicted() == 1);
  t.add([&] { closed.push_back(4); }, t0 + std::chrono::seconds(6));
  REQUIRE(t.make_room());
  CHECK(closed == std::vector<int>{3, 2});
  // Removing an evicted connection (its session ending later) is harmless.
  t.remove(c);
  t.remove(b);
  CHECK(t.size() == 2);
}

TEST_CASE("connection table: a table full of connections being answered refuses the newcomer", "[http]") {
  ConnectionTable t(2);
  int closes = 0;
  const auto a = t.add([&] { ++closes; });
  const auto b = t.add([&] { ++closes; });
  t.busy(a);
  t.busy(b);
  CHECK_FALSE(t.make_room());
  CHECK(closes == 0);
  t.remove(a);
  CHECK(t.make_room());  // under the cap again
  CHECK(closes == 0);
}
