// `capsim serve`: HTTP/1.1 on Boost.Beast over Asio. One I/O thread accepts connections, reads
// requests and writes answers (the HTTP server both front ends share, sim/http/server.h);
// simulations run on a bounded asio::thread_pool. The endpoints and their answers are
// sim/server/api.h's; this is the routing: the queue, the page's files, progress as server-sent
// events and cancellation when a client goes away.
//
// Contract:
//  - Every request passes the guard first (sim/http/request_guard.h: Host, Origin, token,
//    Content-Type); nothing a request carries can stop the I/O thread (every exception becomes
//    a JSON 4xx/5xx answer, invalid UTF-8 included).
//  - Two lanes: fit, finetune and calibrate (arithmetic, milliseconds) run on a light lane of
//    their own (one thread, `1 + queue` admitted), the simulations (simulate, plan, capacity,
//    compare, check, batch-serve) on `workers` threads with `workers + queue` admitted, at most
//    `max_jobs_per_client` of them from one client address. A POST past its lane's room is
//    answered 429 with Retry-After, before any parsing; a heavy client never delays a fit. A
//    POST body is validated on the light lane's thread too: the I/O thread never waits on files
//    or long work.
//  - (sim/http/server.h) A request's header and body must arrive within `read_timeout_s`, or
//    the connection is closed; a header over 16 KiB is 431, a body over limits.max_body_bytes is 413. At
//    `max_connections`, a new connection takes the place of the one that has waited longest for
//    its request (sim/http/connection_table.h); connections being answered are never closed.
//  - A job is cancelled (its simulations stop within ~1024 event times) when its client closes
//    the connection, when it runs longer than `job_timeout_s` (then 503), or when the server stops.
#pragma once

#include <memory>
#include <string>

#include "sim/http/request_guard.h"
#include "sim/server/api.h"

namespace capsim::server {

struct ServerOptions {
  std::string bind = "127.0.0.1";  // loopback unless told otherwise
  unsigned short port = 8080;      // 0: any free port (port() tells which)
  unsigned workers = 0;            // simulation threads; 0: the hardware's
  unsigned queue = 16;             // admitted jobs waiting for a worker
  double job_timeout_s = 600;
  double read_timeout_s = 15;
  unsigned max_connections = 256;  // at the cap, the longest-waiting reader makes room
  unsigned max_jobs_per_client = 0;  // simulations admitted per client address; 0: half the room
  http::GuardPolicy guard;           // allowed Host names, the token
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
