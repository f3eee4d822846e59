#include "sim/http/listener.h"

#include <sys/resource.h>

#include "sim/core/error.h"

namespace capsim::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

Listener::Listener(asio::io_context& io, const tcp::endpoint& at, ConnectionTable& table, OnAccept on_accept,
                   const std::string& flags)
    : acceptor_(io), retry_(io), table_(table), on_accept_(std::move(on_accept)) {
  boost::system::error_code ec;
  acceptor_.open(at.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(at, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    throw Error(flags + ": cannot listen on " + at.address().to_string() + ":" + std::to_string(at.port()) + ": " +
                ec.message());
  }
}

unsigned short Listener::port() const { return acceptor_.local_endpoint().port(); }

void Listener::start() { accept(); }

void Listener::stop() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  retry_.cancel();
}

void Listener::accept() {
  acceptor_.async_accept([self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
    if (!self->acceptor_.is_open()) return;
    if (ec) {
      self->retry_.expires_after(std::chrono::milliseconds(100));
      self->retry_.async_wait([self](boost::system::error_code) {
        if (self->acceptor_.is_open()) self->accept();
      });
      return;
    }
    if (self->table_.make_room()) {
      socket.set_option(tcp::no_delay(true), ec);
      self->on_accept_(std::move(socket));
    } else {
      boost::system::error_code ignored;
      socket.close(ignored);
    }
    self->accept();
  });
}

std::uint64_t raise_open_file_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  if (r.rlim_cur < r.rlim_max) {
    rlimit raised = r;
    raised.rlim_cur = r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) r = raised;
  }
  return static_cast<std::uint64_t>(r.rlim_cur);
}

}  // namespace capsim::http
