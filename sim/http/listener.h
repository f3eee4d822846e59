// The accepting side shared by both HTTP front ends: listens on an address, accepts connections
// on the I/O thread, and hands each accepted socket to the server, after making room for it in
// the server's ConnectionTable (connection_table.h).
//
// Contract: a connection that finds the table full of connections being answered is closed at
// once. When accept fails (out of file descriptors: EMFILE), accepting pauses 100 ms instead of
// retrying at once, a busy loop that would keep the sessions that free descriptors from running.
#pragma once

#include <utility>  // before Boost 1.74's asio, whose awaitable.hpp uses std::exchange

#include <boost/asio.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "sim/http/connection_table.h"

namespace capsim::http {

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  using OnAccept = std::function<void(boost::asio::ip::tcp::socket)>;
  // Binds and listens; throws capsim::Error "FLAGS: cannot listen on ADDRESS:PORT: reason".
  Listener(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& at, ConnectionTable& table,
           OnAccept on_accept, const std::string& flags = "--bind/--port");
  unsigned short port() const;
  void start();
  void stop();

 private:
  void accept();
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_;
  ConnectionTable& table_;
  OnAccept on_accept_;
};

// Raises this process's soft limit on open files to its hard limit (a server holds one per
// connection; Debian's default soft limit is 1024). Returns the limit now in force.
std::uint64_t raise_open_file_limit();

}  // namespace capsim::http
