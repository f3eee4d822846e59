// Both HTTP front ends (`capsim serve` in this process, `capsim emulate` as a child process) on a
// free loopback port with the same limits, and a raw-socket client, so that one test checks the
// shared HTTP layer (sim/http/server.h) through each (tests/http/hostile_front_ends_test.cc).
#pragma once

#include <sys/socket.h>

#include <utility>  // before Boost 1.74's asio, whose awaitable.hpp uses std::exchange

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <functional>
#include <string>

#include "tests/emulate/emulator_process.h"
#include "tests/server/running_server.h"

namespace capsim_test {

// The limits both front ends are started with.
struct FrontEndLimits {
  int read_timeout_s = 15;
  unsigned max_connections = 256;
  unsigned max_body_kib = 64;
};

// A running front end, as a test sees it.
struct FrontEnd {
  std::string name;          // "serve" or "emulate"
  unsigned short port = 0;
  std::string health;        // a GET request answered 200 at once
  std::string json_target;   // a POST endpoint taking JSON
  std::string max_body_flag; // what a 413 names
};

inline std::string health_request(const std::string& path) {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
}

// Starts front end `name` with `limits` and runs `test` against it; stops it after.
inline void with_front_end(const std::string& name, const FrontEndLimits& limits,
                           const std::function<void(const FrontEnd&)>& test) {
  if (name == "serve") {
    capsim::server::ServerOptions o;
    o.workers = 1;
    o.queue = 1;
    o.read_timeout_s = limits.read_timeout_s;
    o.max_connections = limits.max_connections;
    o.limits.max_body_bytes = std::size_t{limits.max_body_kib} * 1024;
    RunningServer srv(o);
    test({name, srv.port(), health_request("/healthz"), "/v1/fit", "capsim serve --max-body"});
    return;
  }
  REQUIRE(name == "emulate");
  Emulator emu("--model llama-3.1-8b --card h100-sxm --time-scale 20 --read-timeout " +
               std::to_string(limits.read_timeout_s) + " --max-connections " + std::to_string(limits.max_connections) +
               " --max-body " + std::to_string(limits.max_body_kib));
  test({name, emu.port(), health_request("/health"), "/v1/chat/completions", "capsim emulate --max-body"});
}

struct RawReply {
  int status = 0;  // 0: closed without an answer
  std::string body;
};

// Reads one reply (gives up after connect()'s 20 s receive timeout).
inline RawReply read_reply(boost::asio::ip::tcp::socket& s) {
  namespace bhttp = boost::beast::http;
  boost::beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> p;
  p.body_limit(1 << 20);
  boost::system::error_code ec;
  bhttp::read(s, buffer, p, ec);
  if (ec) return {};
  return {static_cast<int>(p.get().result_int()), p.get().body()};
}

// Raw bytes in, the reply out.
inline RawReply http_exchange(unsigned short port, const std::string& bytes) {
  boost::asio::io_context io;
  auto s = connect(io, port);
  boost::asio::write(s, boost::asio::buffer(bytes));
  return read_reply(s);
}

inline std::string json_post(const std::string& target, const std::string& body) {
  return "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Whether the server closed `s` (a read ends at once with an error, not "would block").
inline bool closed_by_server(boost::asio::ip::tcp::socket& s) {
  char c;
  boost::system::error_code ec;
  s.non_blocking(true);
  s.read_some(boost::asio::buffer(&c, 1), ec);
  s.non_blocking(false);
  return ec && ec != boost::asio::error::would_block;
}

}  // namespace capsim_test
