// A capsim serve Server in the test's process, on 127.0.0.1 and a free port, serving on its own
// thread for the fixture's lifetime (tests/server/).
#pragma once

#include <memory>
#include <thread>

#include "sim/server/server.h"

namespace capsim_test {

class RunningServer {
 public:
  explicit RunningServer(capsim::server::ServerOptions o) {
    o.bind = "127.0.0.1";
    o.port = 0;
    server_ = std::make_unique<capsim::server::Server>(o);
    thread_ = std::thread([this] { server_->run(false); });
  }
  ~RunningServer() {
    server_->stop();
    thread_.join();
  }
  RunningServer(const RunningServer&) = delete;
  RunningServer& operator=(const RunningServer&) = delete;
  unsigned short port() const { return server_->port(); }

 private:
  std::unique_ptr<capsim::server::Server> server_;
  std::thread thread_;
};

}  // namespace capsim_test
