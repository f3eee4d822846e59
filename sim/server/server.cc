#include "sim/server/server.h"

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <deque>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "sim/core/error.h"
#include "sim/core/run_limits.h"

namespace capsim::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

// The page's files: "/" is index.html; "/assets/NAME" a file of the bundle. Names are plain
// (letters, digits, '.', '-', '_'; no "..") so nothing outside web_dir is ever read.
bool plain_name(std::string_view name) {
  if (name.empty() || name.find("..") != std::string_view::npos) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
  });
}

std::string content_type(std::string_view name) {
  const auto ends = [&](std::string_view ext) {
    return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".json") || ends(".map")) return "application/json";
  return "application/octet-stream";
}

// One SSE event; every line of `data` becomes a data: line (the client joins them with '\n').
std::string sse_event(const std::string& event, const std::string& data) {
  std::string out = "event: " + event + "\n";
  std::size_t start = 0;
  std::string body = data;
  while (!body.empty() && body.back() == '\n') body.pop_back();
  while (start <= body.size()) {
    const std::size_t end = body.find('\n', start);
    out += "data: " + body.substr(start, end == std::string::npos ? std::string::npos : end - start) + "\n";
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out + "\n";
}

}  // namespace

// Members are destroyed bottom up: the pool first (its jobs post to the I/O context), then the
// I/O context (its pending handlers own sessions, which touch the counters), then the rest.
struct Server::Impl {
  ServerOptions opt;
  unsigned workers = 1;
  std::atomic<unsigned> admitted{0};
  std::atomic<unsigned> connections{0};
  // Answers of the GET endpoints, computed once (the catalogues never change in a process).
  std::string cards, models, engines, openapi, health;
  // Every running job's flag, so that stop() cancels them.
  std::mutex jobs_mutex;
  std::set<CancelFlag> jobs;
  // The process's run limits before the server set its own (restored when it stops).
  std::int64_t saved_limits[4] = {};
  asio::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  asio::steady_timer accept_retry{ioc};
  std::unique_ptr<asio::thread_pool> pool;

  void accept();
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Server::Impl& server) : stream_(std::move(socket)), server_(server) {
    ++server_.connections;
  }
  ~Session() { --server_.connections; }

  void start() { read_request(); }

 private:
  using Response = http::response<http::string_body>;

  void read_request() {
    parser_.emplace();
    parser_->header_limit(16 * 1024);
    parser_->body_limit(server_.opt.limits.max_body_bytes);
    stream_.expires_after(millis(server_.opt.read_timeout_s));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
        ec == asio::error::connection_reset || ec == asio::error::eof) {
      beast::error_code ignored;
      stream_.socket().close(ignored);  // nothing to answer: the client left or was too slow
      return;
    }
    if (ec == http::error::body_limit) {
      return send_error(413, "request body: more than " + std::to_string(server_.opt.limits.max_body_bytes) +
                                 " bytes; the limit (capsim serve --max-body)", false);
    }
    if (ec == http::error::header_limit) return send_error(431, "request header: more than 16384 bytes", false);
    if (ec) return send_error(400, std::string("malformed HTTP request: ") + ec.message(), false);
    request_ = parser_->release();
    keep_alive_ = request_.keep_alive();
    handle();
  }

  void handle() {
    const std::string target(request_.target());
    const std::string path = target.substr(0, target.find('?'));
    const std::string method(request_.method_string());
    Endpoint e;
    try {
      e = route(method, path);
    } catch (const HttpError& x) {
      return send_error(x.status(), x.what(), keep_alive_);
    }
    if (e == Endpoint::kPage) return send_page(path);
    if (!runs_on_pool(e)) {
      const std::string* body = e == Endpoint::kCards    ? &server_.cards
                                : e == Endpoint::kModels  ? &server_.models
                                : e == Endpoint::kEngines ? &server_.engines
                                : e == Endpoint::kOpenApi ? &server_.openapi
                                                          : &server_.health;
      return send(200, "application/json", *body, keep_alive_);
    }
    // Admission first: a full queue is told so before any parsing or validation.
    const unsigned capacity = server_.workers + server_.opt.queue;
    if (server_.admitted.fetch_add(1) >= capacity) {
      --server_.admitted;
      retry_after_ = true;
      return send_error(429, "the queue is full (" + std::to_string(capacity) + " jobs admitted: " +
                                 std::to_string(server_.workers) + " running, " + std::to_string(server_.opt.queue) +
                                 " waiting); retry after the Retry-After seconds", keep_alive_);
    }
    Job job;
    try {
      job = prepare(e, request_.body(), server_.opt.limits);
    } catch (const HttpError& x) {
      --server_.admitted;
      return send_error(x.status(), x.what(), keep_alive_);
    } catch (const std::exception& x) {
      --server_.admitted;
      return send_error(400, x.what(), keep_alive_);
    }
    const auto accept = request_[http::field::accept];
    streaming_ = reports_progress(e) && accept.find("text/event-stream") != beast::string_view::npos;
    run_job(std::move(job));
  }

  void run_job(Job job) {
    cancel_ = std::make_shared<std::atomic<bool>>(false);
    {
      std::lock_guard<std::mutex> lock(server_.jobs_mutex);
      server_.jobs.insert(cancel_);
    }
    stream_.expires_never();
    // The job may run for minutes: its time limit cancels it; 503 tells the client why.
    deadline_ = std::make_unique<asio::steady_timer>(stream_.get_executor(), millis(server_.opt.job_timeout_s));
    deadline_->async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return;
      self->timed_out_ = true;
      self->cancel_->store(true);
    });
    if (streaming_) {
      write_raw("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                "Server: capsim\r\nConnection: close\r\n\r\n");
    }
    watch_client();
    auto executor = stream_.get_executor();
    const std::weak_ptr<Session> weak = shared_from_this();
    const ProgressFn progress = [executor, weak](const nlohmann::json& p) {
      asio::post(executor, [weak, text = p.dump()] {
        if (const auto self = weak.lock()) self->on_progress(text);
      });
    };
    asio::post(*server_.pool, [self = shared_from_this(), job = std::move(job), progress, executor] {
      int status = 200;
      std::string body;
      try {
        throw_if_cancelled(self->cancel_);  // gone while it waited in the queue
        body = job(self->cancel_, self->streaming_ ? progress : ProgressFn());
      } catch (const Cancelled&) {
        status = -1;
      } catch (const HttpError& x) {
        status = x.status();
        body = x.what();
      } catch (const Error& x) {
        status = 400;
        body = x.what();
      } catch (const std::exception& x) {
        status = 500;
        body = std::string("internal error: ") + x.what();
      }
      --self->server_.admitted;
      asio::post(executor, [self, status, body = std::move(body)]() mutable { self->on_done(status, std::move(body)); });
    });
  }

  // While a job runs, a read that ends means the client went away: cancel the job. Bytes that
  // arrive (a pipelined next request) stay in the buffer for the next read.
  void watch_client() {
    if (done_) return;
    reading_ = true;
    stream_.socket().async_read_some(
        buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
          self->reading_ = false;
          if (self->done_) {
            if (!ec) self->buffer_.commit(n);
            if (self->closing_) self->drain();  // close() left the draining to this read
            return;
          }
          if (ec) {
            self->client_gone_ = true;
            self->cancel_->store(true);
            return;
          }
          self->buffer_.commit(n);
          if (self->buffer_.size() < server_buffer_cap) self->watch_client();
        });
  }
  static constexpr std::size_t server_buffer_cap = 64 * 1024;

  void on_progress(const std::string& text) {
    if (done_ || client_gone_ || closing_) return;
    if (outbox_.size() > 8) return;  // a slow reader gets fewer progress events, never a backlog
    write_raw(sse_event("progress", text));
  }

  void on_done(int status, std::string body) {
    done_ = true;
    deadline_->cancel();
    {
      std::lock_guard<std::mutex> lock(server_.jobs_mutex);
      server_.jobs.erase(cancel_);
    }
    if (client_gone_) return close();
    if (status == -1) {
      status = 503;
      body = timed_out_ ? "the job ran longer than the server's limit (" +
                              std::to_string(static_cast<int>(server_.opt.job_timeout_s)) +
                              " s, capsim serve --job-timeout) and was cancelled"
                        : "the server is stopping; the job was cancelled";
    }
    if (streaming_) {
      write_raw(status == 200 ? sse_event("result", body) : sse_event("error", error_json(status, body)));
      close_after_write_ = true;
      return;
    }
    // Stop the watch read before the answer goes out (its handler sees done_ and returns).
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
    if (status == 200) return send(200, "application/json", body, keep_alive_);
    send_error(status, body, keep_alive_);
  }

  void send_page(const std::string& path) {
    const std::string& dir = server_.opt.web_dir;
    const std::string name = path == "/" ? "index.html" : path.substr(std::string("/assets/").size());
    if (dir.empty() || !plain_name(name)) return send_error(404, path + ": no such file", keep_alive_);
    const std::string file = dir + (path == "/" ? "/" : "/assets/") + name;
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      return send_error(404, path == "/" ? "the web page is not built (npm; scripts/setup.sh builds it into " + dir + ")"
                                         : path + ": no such file", keep_alive_);
    }
    std::ostringstream text;
    text << in.rdbuf();
    send(200, content_type(name), text.str(), keep_alive_);
  }

  void send_error(int status, const std::string& message, bool keep_alive) {
    send(status, "application/json", error_json(status, message), keep_alive);
  }

  void send(int status, const std::string& type, std::string body, bool keep_alive) {
    auto res = std::make_shared<Response>(static_cast<http::status>(status), request_.version() ? request_.version() : 11);
    res->set(http::field::server, "capsim");
    res->set(http::field::content_type, type);
    if (retry_after_) res->set(http::field::retry_after, "2");
    res->keep_alive(keep_alive);
    const bool head = request_.method() == http::verb::head;
    const std::size_t size = body.size();
    res->body() = head ? std::string() : std::move(body);
    res->prepare_payload();
    if (head) res->content_length(size);
    stream_.expires_after(millis(server_.opt.read_timeout_s));
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, std::size_t) {
      if (ec || !res->keep_alive()) return self->close();
      self->reset_for_next();
      self->read_request();
    });
  }

  void reset_for_next() {
    done_ = client_gone_ = timed_out_ = streaming_ = retry_after_ = false;
    cancel_.reset();
    deadline_.reset();
  }

  // Raw writes (the SSE stream), one at a time, in order.
  void write_raw(std::string bytes) {
    outbox_.push_back(std::move(bytes));
    if (outbox_.size() == 1) write_next();
  }
  void write_next() {
    asio::async_write(stream_.socket(), asio::buffer(outbox_.front()),
                      [self = shared_from_this()](beast::error_code ec, std::size_t) {
                        self->outbox_.pop_front();
                        if (ec) {
                          self->client_gone_ = true;
                          if (self->cancel_) self->cancel_->store(true);
                          self->outbox_.clear();
                          return;
                        }
                        if (!self->outbox_.empty()) return self->write_next();
                        if (self->close_after_write_) self->close();
                      });
  }

  // A lingering close: stop sending, then read and drop what the client still sends (the rest
  // of an oversized body) until it closes or the read timeout passes, so that it reads our answer
  // instead of a connection reset.
  void close() {
    if (closing_) return;
    closing_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(millis(server_.opt.read_timeout_s));
    if (!reading_) drain();  // else the watch read's handler drains (one read at a time)
  }
  void drain() {
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(16 * 1024), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (!ec) return self->drain();
      beast::error_code ignored;
      self->stream_.socket().close(ignored);
    });
  }

  beast::tcp_stream stream_;
  Server::Impl& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  bool keep_alive_ = false;
  bool streaming_ = false;
  bool done_ = false;
  bool client_gone_ = false;
  bool timed_out_ = false;
  bool retry_after_ = false;
  bool close_after_write_ = false;
  bool closing_ = false;
  bool reading_ = false;  // the watch read of a running job is pending
  CancelFlag cancel_;
  std::unique_ptr<asio::steady_timer> deadline_;
  std::deque<std::string> outbox_;
};

}  // namespace

void Server::Impl::accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;
    if (ec) {
      // Out of file descriptors (EMFILE) an immediate retry fails at once and spins; wait a
      // little so that closing sessions can free some.
      accept_retry.expires_after(std::chrono::milliseconds(100));
      accept_retry.async_wait([this](beast::error_code) { accept(); });
      return;
    }
    if (connections.load() >= opt.max_connections) {
      beast::error_code ignored;
      socket.close(ignored);
    } else {
      std::make_shared<Session>(std::move(socket), *this)->start();
    }
    accept();
  });
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.opt = std::move(options);
  s.workers = s.opt.workers ? s.opt.workers : std::max(1u, std::thread::hardware_concurrency());
  s.pool = std::make_unique<asio::thread_pool>(s.workers);
  // The run limits (sim/core/run_limits.h) become the server's: a request past them is 422.
  const RunLimit kinds[4] = {RunLimit::kRequests, RunLimit::kUsers, RunLimit::kReplicas, RunLimit::kCards};
  const std::int64_t mine[4] = {s.opt.limits.max_requests, s.opt.limits.max_users, s.opt.limits.max_cards,
                                s.opt.limits.max_cards};
  for (int i = 0; i < 4; ++i) {
    s.saved_limits[i] = run_limit(kinds[i]);
    set_run_limit(kinds[i], mine[i]);
  }
  s.cards = answer_get(Endpoint::kCards);
  s.models = answer_get(Endpoint::kModels);
  s.engines = answer_get(Endpoint::kEngines);
  s.openapi = answer_get(Endpoint::kOpenApi);
  s.health = answer_get(Endpoint::kHealth);
  beast::error_code ec;
  const auto address = asio::ip::make_address(s.opt.bind, ec);
  if (ec) throw Error("--bind: '" + s.opt.bind + "' is not an IP address (e.g. 127.0.0.1, ::1, 0.0.0.0)");
  const tcp::endpoint at(address, s.opt.port);
  const std::string where = "--bind/--port: " + s.opt.bind + ":" + std::to_string(s.opt.port);
  s.acceptor.open(at.protocol(), ec);
  if (!ec) s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(at, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw Error(where + ": cannot listen: " + ec.message());
}

Server::~Server() {
  stop();
  impl_->pool->join();
  const RunLimit kinds[4] = {RunLimit::kRequests, RunLimit::kUsers, RunLimit::kReplicas, RunLimit::kCards};
  for (int i = 0; i < 4; ++i) set_run_limit(kinds[i], impl_->saved_limits[i]);
}

unsigned short Server::port() const { return impl_->acceptor.local_endpoint().port(); }

void Server::run(bool handle_signals) {
  Impl& s = *impl_;
  std::optional<asio::signal_set> signals;
  if (handle_signals) {
    signals.emplace(s.ioc, SIGINT, SIGTERM);
    signals->async_wait([this](beast::error_code ec, int) {
      if (!ec) stop();
    });
  }
  s.accept();
  s.ioc.run();
}

void Server::stop() {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> lock(s.jobs_mutex);
    for (const auto& f : s.jobs) f->store(true);
  }
  asio::post(s.ioc, [&s] {
    beast::error_code ignored;
    s.acceptor.close(ignored);
    s.ioc.stop();
  });
}

}  // namespace capsim::server
