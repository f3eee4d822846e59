// `capsim emulate` as a child process on a free loopback port, and a plain HTTP/1.1 client for
// it (Boost.Beast), shared by the emulator's tests (tests/emulate/).
#pragma once

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>  // before Boost 1.74's asio, whose awaitable.hpp uses std::exchange

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <regex>
#include <string>

#ifndef CAPSIM_BINARY
#error "CAPSIM_BINARY must name the built capsim executable (the build defines it)"
#endif

namespace capsim_test {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

// `capsim emulate ARGS --port 0` in a child process; the port it printed.
class Emulator {
 public:
  // `shell` runs before it in the child's shell (e.g. a ulimit).
  explicit Emulator(const std::string& args, const std::string& shell = "") {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      ::close(fds[0]);
      const std::string cmd = shell + "exec '" + std::string(CAPSIM_BINARY) + "' emulate --port 0 " + args;
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    std::string out;
    char c;
    while (out.find('\n') == std::string::npos && ::read(fds[0], &c, 1) == 1) out += c;
    ::close(fds[0]);
    std::smatch m;
    INFO(out);
    REQUIRE(std::regex_search(out, m, std::regex("http://127\\.0\\.0\\.1:(\\d+)")));
    port_ = static_cast<unsigned short>(std::stoi(m[1]));
  }
  ~Emulator() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  unsigned short port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  unsigned short port_ = 0;
};

// A connected socket that gives up on a read after 20 s instead of hanging the test.
inline tcp::socket connect(net::io_context& io, unsigned short port) {
  tcp::socket s(io);
  s.connect({net::ip::address_v4::loopback(), port});
  timeval tv{20, 0};
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return s;
}

inline http::response<http::string_body> request(unsigned short port, http::verb verb, const std::string& target,
                                          const std::string& body = "") {
  net::io_context io;
  tcp::socket s = connect(io, port);
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  http::write(s, req);
  boost::beast::flat_buffer b;
  http::response<http::string_body> res;
  http::read(s, b, res);
  return res;
}

// The value of the metric line that starts with `prefix` (name and labels).
inline double metric(const std::string& text, const std::string& prefix) {
  const auto at = text.find("\n" + prefix + " ");
  REQUIRE(at != std::string::npos);
  return std::stod(text.substr(at + prefix.size() + 2));
}

}  // namespace capsim_test
