// The HTTP/1.1 server both front ends run (`capsim serve`, `capsim emulate`): the listener, one
// session per connection, the limits and timeouts, the connection cap, lingering close and
// shutdown on a signal. A front end gives it its routes (Routes) and answers each request through
// an Exchange, at once or later (after a job on a pool, or chunk by chunk as simulated time
// passes); it never touches a socket.
//
// Contract, against hostile clients:
//  - A request's header and body must arrive within read_timeout_s of the first byte being
//    waited for (a header sent a byte at a time included), or the connection is closed without
//    an answer. A header over max_header_bytes, a body over max_body_bytes or a malformed request
//    is answered (Routes::unreadable) and the connection closed.
//  - At max_connections, a new connection takes the place of the one that has waited longest for
//    its request (connection_table.h); connections being answered are never closed for room.
//  - Everything runs on the one I/O thread; nothing blocks it (writes are queued, each
//    connection's in order). An exception out of Routes::handle becomes Routes::internal_error's
//    answer; one out of any other handler is logged and the loop goes on.
//  - Closing after an answer is a lingering close (lingering_close.h), bounded by read_timeout_s.
#pragma once

#include <utility>  // before Boost 1.74's asio, whose awaitable.hpp uses std::exchange

#include <boost/asio.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "sim/http/connection_table.h"
#include "sim/http/listener.h"

namespace capsim::http {

using Request = boost::beast::http::request<boost::beast::http::string_body>;
using Response = boost::beast::http::response<boost::beast::http::string_body>;

struct ServerLimits {
  double read_timeout_s = 15;
  unsigned max_connections = 256;
  std::size_t max_header_bytes = 16 * 1024;
  std::size_t max_body_bytes = std::size_t{4} << 20;
  // A streamed answer whose client reads it slower than it is written (or not at all) is given
  // up, as if the client had gone, once this much waits to be written beyond the socket's
  // buffers: a client cannot make the server hold an endless stream in memory.
  std::size_t max_queued_bytes = std::size_t{4} << 20;
};

// One request being answered. Every member is for the I/O thread only (post to executor() from
// elsewhere). Once the client is gone (or the connection closed) the writing members do nothing.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual Request& request() = 0;
  virtual const std::string& client() const = 0;  // the peer's address ("?" when unknown)
  // The client may keep the connection for another request (HTTP/1.1 keep-alive).
  virtual bool keep_alive() const = 0;
  virtual boost::asio::any_io_executor executor() = 0;

  // A whole answer; ends the exchange. After it is written the connection reads the next
  // request when res.keep_alive(), else closes. It must be written within read_timeout_s.
  virtual void respond(Response res) = 0;
  // A streamed answer: bytes (the head, then each piece, already framed) written in order with
  // no deadline (but see ServerLimits::max_queued_bytes); finish() ends the exchange once they
  // are written.
  virtual void write(std::string bytes) = 0;
  virtual void finish(bool keep_alive) = 0;
  // Pieces queued and not yet written: a stream that may drop pieces drops them for a slow reader.
  virtual std::size_t queued() const = 0;

  // Until the exchange ends, `on_gone` runs (once) when the client closes or resets the
  // connection or a write fails; then the connection is closed. Bytes that arrive meanwhile (a
  // pipelined request, up to 64 KiB) are kept for the next read.
  virtual void watch(std::function<void()> on_gone) = 0;
  virtual bool gone() const = 0;
};

// Why a request could not be read.
enum class Unreadable { kBodyTooLarge, kHeaderTooLarge, kMalformed };

struct Routes {
  // Each request read, on the I/O thread; answered through the exchange, now or later.
  std::function<void(const std::shared_ptr<Exchange>&)> handle;
  // The answer to a request that could not be read (`detail`: the parser's message); the
  // connection closes after it.
  std::function<Response(Unreadable, const std::string& detail)> unreadable;
  // The answer when handle throws (`what`: the exception's message); the connection closes.
  std::function<Response(const std::string& what)> internal_error;
};

class Server {
 public:
  // Binds and listens on `at` (throws capsim::Error naming `flags` and the address).
  Server(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& at, ServerLimits limits, Routes routes,
         const std::string& flags = "--bind/--port");
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  unsigned short port() const;
  void start();  // accepts connections (when the I/O context runs)
  void stop();   // stops accepting; I/O thread only
  const ConnectionTable& connections() const;

  struct State;  // what sessions share with the server (server.cc)

 private:
  std::shared_ptr<State> state_;
  std::shared_ptr<Listener> listener_;
};

// Runs `io` until it stops. With `on_signal`, SIGINT and SIGTERM call it (on the I/O thread: it
// stops the server). An exception out of a handler is logged to stderr as "NAME: internal error
// in a connection handler: ..." and the loop goes on.
void run_until_stopped(boost::asio::io_context& io, const std::string& name, std::function<void()> on_signal);

}  // namespace capsim::http
