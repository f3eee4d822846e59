#include "sim/http/server.h"

#include <boost/beast/core.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <optional>
#include <sstream>

#include "sim/http/lingering_close.h"

namespace capsim::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

struct Server::State {
  ServerLimits limits;
  Routes routes;
  ConnectionTable table;
  State(ServerLimits l, Routes r) : limits(l), routes(std::move(r)), table(std::max(1u, l.max_connections)) {}
};

namespace {

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

// How much a watched connection may buffer of what its client sends while it is answered.
constexpr std::size_t kWatchBufferCap = 64 * 1024;

// One connection: reads a request, hands it to the routes, writes what they answer (in order),
// then reads the next one or closes. Destroyed on the I/O thread (it leaves the table there).
class Session : public Exchange, public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<Server::State> state) : stream_(std::move(socket)), state_(std::move(state)) {
    beast::error_code ec;
    const auto peer = stream_.socket().remote_endpoint(ec);
    client_ = ec ? std::string("?") : peer.address().to_string();
  }
  ~Session() override { state_->table.remove(id_); }

  void start() {
    const std::weak_ptr<Session> weak = shared_from_this();
    id_ = state_->table.add([weak] {
      if (const auto self = weak.lock()) self->evicted();
    });
    read_request();
  }

  Request& request() override { return request_; }
  const std::string& client() const override { return client_; }
  bool keep_alive() const override { return keep_alive_; }
  asio::any_io_executor executor() override { return stream_.get_executor(); }

  void respond(Response res) override {
    if (finished_ || closed_) return;
    finished_ = true;
    next_keep_alive_ = res.keep_alive();
    std::ostringstream text;
    text << res;
    stream_.expires_after(millis(state_->limits.read_timeout_s));
    queue(text.str());
  }

  void write(std::string bytes) override {
    if (finished_ || closed_) return;
    if (queued_bytes_ > state_->limits.max_queued_bytes) return lost();  // it does not read
    queue(std::move(bytes));
  }

  void finish(bool keep_alive) override {
    if (finished_ || closed_) return;
    finished_ = true;
    next_keep_alive_ = keep_alive;
    if (!writing_) after_exchange();
  }

  std::size_t queued() const override { return outbox_.size(); }

  void watch(std::function<void()> on_gone) override {
    if (finished_ || closed_) return;
    on_gone_ = std::move(on_gone);
    if (!watching_) watch_read();
  }

  bool gone() const override { return gone_ || closed_; }

 private:
  // Closed to make room for a new connection (connection_table.h): only while reading.
  void evicted() {
    closed_ = true;
    beast::error_code ignored;
    stream_.socket().close(ignored);
  }

  void read_request() {
    state_->table.reading(id_);
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(state_->limits.max_header_bytes));
    parser_->body_limit(state_->limits.max_body_bytes);
    // One deadline for the whole request: a header sent a byte at a time does not extend it.
    stream_.expires_after(millis(state_->limits.read_timeout_s));
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (closed_) return;
    if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
        ec == asio::error::connection_reset || ec == asio::error::eof) {
      return close_now();  // nothing to answer: the client left or was too slow
    }
    begin_exchange();
    if (ec) {
      const Unreadable why = ec == bhttp::error::body_limit     ? Unreadable::kBodyTooLarge
                             : ec == bhttp::error::header_limit ? Unreadable::kHeaderTooLarge
                                                                : Unreadable::kMalformed;
      keep_alive_ = false;
      return respond_closing(state_->routes.unreadable(why, ec.message()));
    }
    request_ = parser_->release();
    keep_alive_ = request_.keep_alive();
    // Nothing a request carries may escape to the I/O loop (it would stop every connection).
    try {
      state_->routes.handle(shared_from_this());
    } catch (const std::exception& x) {
      internal_error(x.what());
    } catch (...) {
      internal_error("unknown exception");
    }
  }

  void begin_exchange() {
    state_->table.busy(id_);
    stream_.expires_never();  // an answer may take minutes (a job, a stream)
    finished_ = false;
    on_gone_ = nullptr;
  }

  void internal_error(const std::string& what) {
    if (finished_ || closed_) return;
    keep_alive_ = false;
    respond_closing(state_->routes.internal_error(what));
  }

  void respond_closing(Response res) {
    res.keep_alive(false);
    respond(std::move(res));
  }

  void queue(std::string bytes) {
    queued_bytes_ += bytes.size();
    outbox_.push_back(std::move(bytes));
    if (!writing_) write_next();
  }

  void write_next() {
    if (outbox_.empty()) {
      if (finished_) after_exchange();
      return;
    }
    writing_ = true;
    // outbox_.front() must outlive the write: only this handler removes it.
    asio::async_write(stream_, asio::buffer(outbox_.front()), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->writing_ = false;
      if (self->closed_) {
        self->outbox_.clear();
        self->queued_bytes_ = 0;
        return;
      }
      if (ec) return self->lost();
      self->queued_bytes_ -= self->outbox_.front().size();
      self->outbox_.pop_front();
      self->write_next();
    });
  }

  // While an answer is under way, a read that fails means the client went away. Bytes that
  // arrive (a pipelined next request) stay in the buffer for the next read.
  void watch_read() {
    watching_ = true;
    stream_.socket().async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      self->watching_ = false;
      if (self->closed_) return;
      if (!ec) self->buffer_.commit(n);
      if (self->finished_) {
        // after_exchange stopped this read to go on; else the last writes are still going out
        // and write_next goes on when they are done.
        if (self->resume_after_watch_) {
          self->resume_after_watch_ = false;
          self->next_or_close();
        }
        return;
      }
      if (ec) return self->lost();
      if (self->buffer_.size() < kWatchBufferCap) self->watch_read();
    });
  }

  // The client is gone (or a write failed): the one waiting for it is told, the socket closed.
  void lost() {
    if (gone_) return;
    gone_ = true;
    std::function<void()> told = std::move(on_gone_);
    on_gone_ = nullptr;
    if (!writing_) {
      outbox_.clear();  // else the write in flight still reads its front; its handler clears
      queued_bytes_ = 0;
    }
    close_now();
    if (told) told();
  }

  // The exchange is over and everything it queued is written.
  void after_exchange() {
    if (closed_) return;
    on_gone_ = nullptr;
    if (watching_) {
      // No write is in flight: cancelling stops the watch read only; its handler goes on.
      resume_after_watch_ = true;
      beast::error_code ignored;
      stream_.socket().cancel(ignored);
      return;
    }
    next_or_close();
  }

  void next_or_close() {
    if (next_keep_alive_) return read_request();
    linger_close();
  }

  // A lingering close (lingering_close.h), bounded by the read timeout. A closing connection is
  // the first to make room for a new one.
  void linger_close() {
    if (closed_) return;
    closed_ = true;
    state_->table.reading(id_, ConnectionTable::Clock::time_point::min());
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(millis(state_->limits.read_timeout_s));
    drain_then_close(shared_from_this(), stream_, buffer_);
  }

  void close_now() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    stream_.socket().close(ignored);
    state_->table.remove(id_);
  }

  beast::tcp_stream stream_;
  std::shared_ptr<Server::State> state_;
  ConnectionTable::Id id_ = 0;
  std::string client_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  Request request_;
  bool keep_alive_ = false;       // the request's wish
  bool finished_ = false;         // the exchange has its whole answer (queued)
  bool next_keep_alive_ = false;  // after it: read the next request (else close)
  bool writing_ = false;
  bool watching_ = false;
  bool resume_after_watch_ = false;
  bool gone_ = false;
  bool closed_ = false;  // the socket is closed or closing: nothing more is written
  std::function<void()> on_gone_;
  std::deque<std::string> outbox_;
  std::size_t queued_bytes_ = 0;  // in outbox_
};

}  // namespace

Server::Server(asio::io_context& io, const tcp::endpoint& at, ServerLimits limits, Routes routes, const std::string& flags)
    : state_(std::make_shared<State>(limits, std::move(routes))) {
  raise_open_file_limit();
  const std::shared_ptr<State> state = state_;
  listener_ = std::make_shared<Listener>(io, at, state_->table, [state](tcp::socket socket) {
    std::make_shared<Session>(std::move(socket), state)->start();
  }, flags);
}

Server::~Server() { listener_->stop(); }

unsigned short Server::port() const { return listener_->port(); }
void Server::start() { listener_->start(); }
void Server::stop() { listener_->stop(); }
const ConnectionTable& Server::connections() const { return state_->table; }

void run_until_stopped(asio::io_context& io, const std::string& name, std::function<void()> on_signal) {
  std::optional<asio::signal_set> signals;
  if (on_signal) {
    signals.emplace(io, SIGINT, SIGTERM);
    signals->async_wait([on_signal](beast::error_code ec, int) {
      if (!ec) on_signal();
    });
  }
  for (;;) {
    try {
      io.run();
      break;
    } catch (const std::exception& x) {
      std::fprintf(stderr, "%s: internal error in a connection handler: %s\n", name.c_str(), x.what());
    } catch (...) {
      std::fprintf(stderr, "%s: internal error in a connection handler\n", name.c_str());
    }
  }
}

}  // namespace capsim::http
