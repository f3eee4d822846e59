// The shared HTTP layer (sim/http/server.h) against slow and careless clients, through both front
// ends: each test runs once on `capsim serve` and once on `capsim emulate` (tests/http/front_ends.h).
#include <utility>  // before Boost 1.74's asio, whose awaitable.hpp uses std::exchange

#include <poll.h>

#include <boost/asio.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/http/front_ends.h"

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using capsim_test::closed_by_server;
using capsim_test::http_exchange;
using capsim_test::FrontEnd;
using capsim_test::FrontEndLimits;
using capsim_test::json_post;
using capsim_test::with_front_end;

// Whether `s` has something to read (bytes or the server's close) within `ms`.
bool readable(tcp::socket& s, int ms) {
  pollfd p{s.native_handle(), POLLIN, 0};
  return ::poll(&p, 1, ms) > 0;
}

}  // namespace

TEST_CASE("http front ends: a header sent a byte at a time is cut at the read timeout while others are served",
          "[http][server][emulate][hostile]") {
  const std::string which = GENERATE(as<std::string>{}, "serve", "emulate");
  INFO(which);
  FrontEndLimits limits;
  limits.read_timeout_s = 1;
  with_front_end(which, limits, [](const FrontEnd& f) {
    asio::io_context io;
    tcp::socket slow = capsim_test::connect(io, f.port);
    asio::write(slow, asio::buffer(std::string("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")));
    // A byte every 50 ms for up to 15 s: each arrives well within the timeout, but the request
    // never completes. A timeout per read (not per request) would never cut it.
    bool cut = false;
    int served = 0;
    for (int i = 0; i < 300 && !cut; ++i) {
      boost::system::error_code ec;
      asio::write(slow, asio::buffer(std::string("a")), ec);
      if (ec || readable(slow, 50)) cut = true;
      if (i == 5 && http_exchange(f.port, f.health).status == 200) ++served;  // another client meanwhile
    }
    CHECK(cut);
    CHECK(served == 1);
    // Cut without an answer: the connection ends with no byte of a reply.
    const auto reply = capsim_test::read_reply(slow);
    CHECK(reply.status == 0);
    CHECK(http_exchange(f.port, f.health).status == 200);
  });
}

TEST_CASE("http front ends: at the connection cap a client that sends its request takes a slow one's place",
          "[http][server][emulate][hostile]") {
  // On 64e18c4 serve closed a connection past the cap at once, so slow clients holding every
  // place kept /healthz from answering; the emulator had no cap at all.
  const std::string which = GENERATE(as<std::string>{}, "serve", "emulate");
  INFO(which);
  FrontEndLimits limits;
  limits.read_timeout_s = 30;
  limits.max_connections = 4;
  with_front_end(which, limits, [](const FrontEnd& f) {
    asio::io_context io;
    std::vector<tcp::socket> slow;
    for (int i = 0; i < 4; ++i) {
      slow.push_back(capsim_test::connect(io, f.port));
      asio::write(slow.back(), asio::buffer(std::string("GET /v1/models HTTP/1.1\r\nHo")));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (int round = 0; round < 3; ++round) CHECK(http_exchange(f.port, f.health).status == 200);
    // The oldest slow connection made room: closed without an answer. (Each answered client
    // leaves again, so later rounds may find the place it freed.)
    CHECK(closed_by_server(slow.front()));
    CHECK_FALSE(closed_by_server(slow.back()));
  });
}

TEST_CASE("http front ends: a body past --max-body is 413 naming the flag and read before the close, a header past 16 KiB 431",
          "[http][server][emulate][hostile]") {
  const std::string which = GENERATE(as<std::string>{}, "serve", "emulate");
  INFO(which);
  FrontEndLimits limits;
  limits.max_body_kib = 64;
  with_front_end(which, limits, [](const FrontEnd& f) {
    // 100 KiB sent at once: the server stops reading at 64 KiB and answers; it then reads and
    // drops the rest (lingering close), so the client reads the 413, not a connection reset.
    const auto big = http_exchange(f.port, json_post(f.json_target, "{\"x\": \"" + std::string(100 * 1024, 'a') + "\"}"));
    CHECK(big.status == 413);
    CHECK_THAT(big.body, Catch::Contains("more than 65536 bytes") && Catch::Contains(f.max_body_flag));
    const auto header = http_exchange(f.port, "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " +
                                             std::string(17 * 1024, 'h') + "\r\n\r\n");
    CHECK(header.status == 431);
    CHECK_THAT(header.body, Catch::Contains("request header: more than 16384 bytes"));
    const auto malformed = http_exchange(f.port, "GET / HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n");
    CHECK(malformed.status == 400);
    CHECK_THAT(malformed.body, Catch::Contains("malformed HTTP request"));
    CHECK(http_exchange(f.port, f.health).status == 200);
  });
}
