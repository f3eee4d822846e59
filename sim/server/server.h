// `capsim serve`: HTTP/1.1 on Boost.Beast over Asio. One I/O thread accepts connections, reads
// requests and writes answers; simulations run on a bounded asio::thread_pool. The endpoints and
// their answers are sim/server/api.h's; this is the transport: timeouts, limits, the queue, the
// page's files, progress as server-sent events and cancellation when a client goes away.
//
// Contract:
//  - A POST that would make more than `workers + queue` jobs admitted at once is answered 429
//    with Retry-After, before any work.
//  - A request's header and body must arrive within `read_timeout_s`, or the connection is
//    closed; a header over 16 KiB is 431, a body over limits.max_body_bytes is 413.
//  - A job is cancelled (its simulations stop within ~1024 event times) when its client closes
//    the connection, when it runs longer than `job_timeout_s` (then 503), or when the server stops.
#pragma once

#include <memory>
#include <string>

#include "sim/server/api.h"

namespace capsim::server {

struct ServerOptions {
  std::string bind = "127.0.0.1";  // loopback unless told otherwise
  unsigned short port = 8080;      // 0: any free port (port() tells which)
  unsigned workers = 0;            // simulation threads; 0: the hardware's
  unsigned queue = 16;             // admitted jobs waiting for a worker
  double job_timeout_s = 600;
  double read_timeout_s = 15;
  unsigned max_connections = 256;  // more are closed at once
  std::string web_dir;             // the built page (index.html, assets/); empty: no page
  Limits limits;
};

class Server {
 public:
  // Binds and listens (throws capsim::Error naming the address when it cannot).
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  unsigned short port() const;
  // Serves until stop() or SIGINT/SIGTERM (when handle_signals).
  void run(bool handle_signals = true);
  // Thread-safe: cancels every job and makes run() return.
  void stop();

  struct Impl;  // server.cc's (public so that its connections can name it)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace capsim::server
