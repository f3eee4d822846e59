#include "sim/server/server.h"

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "sim/core/error.h"
#include "sim/core/run_limits.h"
#include "sim/http/connection_table.h"
#include "sim/http/lingering_close.h"
#include "sim/http/listener.h"
#include "sim/server/request_path.h"

namespace capsim::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
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
  unsigned per_client = 1;  // simulations admitted per client address
  // Jobs admitted and not yet finished, per lane (decremented on the pool's threads).
  std::atomic<unsigned> admitted{0};
  std::atomic<unsigned> light_admitted{0};
  // Simulations admitted per client address (I/O thread only).
  std::map<std::string, unsigned> admitted_by_client;
  // Answers of the GET endpoints, computed once (the catalogues never change in a process).
  std::string cards, models, engines, openapi, health;
  // Every running job's flag, so that stop() cancels them.
  std::mutex jobs_mutex;
  std::set<CancelFlag> jobs;
  // The process's run limits before the server set its own (restored when it stops).
  std::int64_t saved_limits[4] = {};
  // Before the I/O context: its pending handlers own sessions, which leave the table as they go.
  std::unique_ptr<http::ConnectionTable> table;
  asio::io_context ioc{1};
  std::shared_ptr<http::Listener> listener;
  std::unique_ptr<asio::thread_pool> light_pool;
  std::unique_ptr<asio::thread_pool> pool;

  const std::string& get_answer(Endpoint e) const {
    return e == Endpoint::kCards    ? cards
           : e == Endpoint::kModels  ? models
           : e == Endpoint::kEngines ? engines
           : e == Endpoint::kOpenApi ? openapi
                                     : health;
  }
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Server::Impl& server) : stream_(std::move(socket)), server_(server) {
    beast::error_code ec;
    const auto peer = stream_.socket().remote_endpoint(ec);
    client_ = ec ? std::string("?") : peer.address().to_string();
  }
  ~Session() {
    server_.table->remove(id_);
    release_client_slot();
  }

  void start() {
    const std::weak_ptr<Session> weak = shared_from_this();
    id_ = server_.table->add([weak] {
      if (const auto self = weak.lock()) self->evict();
    });
    read_request();
  }

 private:
  using Response = bhttp::response<bhttp::string_body>;

  // Closed to make room for a new connection (connection_table.h): only while reading.
  void evict() {
    closing_ = true;
    beast::error_code ignored;
    stream_.socket().close(ignored);
  }

  void release_client_slot() {
    if (!holds_client_slot_) return;
    holds_client_slot_ = false;
    const auto it = server_.admitted_by_client.find(client_);
    if (it != server_.admitted_by_client.end() && --it->second == 0) server_.admitted_by_client.erase(it);
  }

  void read_request() {
    server_.table->reading(id_);
    parser_.emplace();
    parser_->header_limit(16 * 1024);
    parser_->body_limit(server_.opt.limits.max_body_bytes);
    stream_.expires_after(millis(server_.opt.read_timeout_s));
    bhttp::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
        ec == asio::error::connection_reset || ec == asio::error::eof) {
      beast::error_code ignored;
      stream_.socket().close(ignored);  // nothing to answer: the client left or was too slow
      return;
    }
    if (ec == bhttp::error::body_limit) {
      return send_error(413, "request body: more than " + std::to_string(server_.opt.limits.max_body_bytes) +
                                 " bytes; the limit (capsim serve --max-body)", false);
    }
    if (ec == bhttp::error::header_limit) return send_error(431, "request header: more than 16384 bytes", false);
    if (ec) return send_error(400, std::string("malformed HTTP request: ") + ec.message(), false);
    request_ = parser_->release();
    keep_alive_ = request_.keep_alive();
    server_.table->busy(id_);
    // Nothing a request carries may escape to the I/O loop (it would stop the server).
    try {
      handle();
    } catch (const std::exception& x) {
      send_error(500, std::string("internal error: ") + x.what(), false);
    } catch (...) {
      send_error(500, "internal error", false);
    }
  }

  void handle() {
    const Front front = front_of(request_, server_.opt.guard, [this](Endpoint e) -> const std::string& {
      return server_.get_answer(e);
    });
    if (front.answer) return send(front.answer->status, front.answer->content_type, front.answer->body, keep_alive_);
    const Endpoint e = front.endpoint;
    if (e == Endpoint::kPage) {
      const std::string target(request_.target());
      return send_page(target.substr(0, target.find('?')));
    }
    // Admission first: a full lane is told so before any parsing or validation.
    light_ = e == Endpoint::kFit;
    if (light_) {
      const unsigned room = 1 + server_.opt.queue;
      if (server_.light_admitted.fetch_add(1) >= room) {
        --server_.light_admitted;
        retry_after_ = true;
        return send_error(429, "the fit lane is full (" + std::to_string(room) +
                                   " admitted); retry after the Retry-After seconds", keep_alive_);
      }
    } else {
      const unsigned capacity = server_.workers + server_.opt.queue;
      unsigned& mine = server_.admitted_by_client[client_];
      if (mine >= server_.per_client) {
        retry_after_ = true;
        return send_error(429, "this client (" + client_ + ") already has " + std::to_string(server_.per_client) +
                                   " simulations admitted, its share of the server (capsim serve --max-jobs-per-client); "
                                   "retry after the Retry-After seconds", keep_alive_);
      }
      if (server_.admitted.fetch_add(1) >= capacity) {
        --server_.admitted;
        if (mine == 0) server_.admitted_by_client.erase(client_);
        retry_after_ = true;
        return send_error(429, "the queue is full (" + std::to_string(capacity) + " jobs admitted: " +
                                   std::to_string(server_.workers) + " running, " + std::to_string(server_.opt.queue) +
                                   " waiting); retry after the Retry-After seconds", keep_alive_);
      }
      ++mine;
      holds_client_slot_ = true;
    }
    // Validation builds the scenario (and may write a pasted config.json): on the fit lane's
    // thread, so that the I/O thread never waits on it.
    const auto accept = request_[bhttp::field::accept];
    streaming_ = reports_progress(e) && accept.find("text/event-stream") != beast::string_view::npos;
    auto executor = stream_.get_executor();
    asio::post(*server_.light_pool, [self = shared_from_this(), e, body = std::move(request_.body()), executor]() mutable {
      auto prepared = std::make_shared<Prepared>(prepare_or_refuse(e, body, self->server_.opt.limits));
      // The reference moves to the I/O thread: a session must end there (its destructor leaves
      // the connection table, which only that thread touches).
      asio::post(executor, [self = std::move(self), prepared] { self->on_prepared(std::move(*prepared)); });
    });
  }

  void on_prepared(Prepared prepared) {
    if (prepared.refusal) {
      leave_lane();
      return send(prepared.refusal->status, prepared.refusal->content_type, prepared.refusal->body, keep_alive_);
    }
    run_job(std::move(prepared.job));
  }

  // The job is over (or never ran): its lane and its client have room again.
  void leave_lane() {
    if (light_) {
      --server_.light_admitted;
    } else {
      --server_.admitted;
    }
    release_client_slot();
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
    asio::thread_pool& lane = light_ ? *server_.light_pool : *server_.pool;
    asio::post(lane, [self = shared_from_this(), job = std::move(job), progress, executor]() mutable {
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
      } catch (...) {
        status = 500;
        body = "internal error";
      }
      if (self->light_) {
        --self->server_.light_admitted;
      } else {
        --self->server_.admitted;
      }
      asio::post(executor, [self = std::move(self), status, body = std::move(body)]() mutable {
        self->on_done(status, std::move(body));
      });
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
    release_client_slot();
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
    const Answer a = error_answer(status, message);
    send(a.status, a.content_type, a.body, keep_alive);
  }

  void send(int status, const std::string& type, std::string body, bool keep_alive) {
    auto res = std::make_shared<Response>(static_cast<bhttp::status>(status), request_.version() ? request_.version() : 11);
    res->set(bhttp::field::server, "capsim");
    res->set(bhttp::field::content_type, type);
    if (retry_after_) res->set(bhttp::field::retry_after, "2");
    res->keep_alive(keep_alive);
    const bool head = request_.method() == bhttp::verb::head;
    const std::size_t size = body.size();
    res->body() = head ? std::string() : std::move(body);
    res->prepare_payload();
    if (head) res->content_length(size);
    stream_.expires_after(millis(server_.opt.read_timeout_s));
    bhttp::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, std::size_t) {
      if (ec || !res->keep_alive()) return self->close();
      self->reset_for_next();
      self->read_request();
    });
  }

  void reset_for_next() {
    done_ = client_gone_ = timed_out_ = streaming_ = retry_after_ = light_ = false;
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
    // A closing connection is the first to make room for a new one.
    server_.table->reading(id_, http::ConnectionTable::Clock::time_point::min());
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(millis(server_.opt.read_timeout_s));
    if (!reading_) drain();  // else the watch read's handler drains (one read at a time)
  }
  void drain() { http::drain_then_close(shared_from_this(), stream_, buffer_); }

  beast::tcp_stream stream_;
  Server::Impl& server_;
  http::ConnectionTable::Id id_ = 0;
  std::string client_;               // the peer's address, for its share of the simulations
  bool holds_client_slot_ = false;   // counted in admitted_by_client
  bool light_ = false;               // the job runs on the fit lane
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bhttp::request<bhttp::string_body> request_;
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

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.opt = std::move(options);
  s.workers = s.opt.workers ? s.opt.workers : std::max(1u, std::thread::hardware_concurrency());
  s.per_client = s.opt.max_jobs_per_client ? s.opt.max_jobs_per_client : std::max(1u, (s.workers + s.opt.queue) / 2);
  s.pool = std::make_unique<asio::thread_pool>(s.workers);
  s.light_pool = std::make_unique<asio::thread_pool>(1);
  s.table = std::make_unique<http::ConnectionTable>(std::max(1u, s.opt.max_connections));
  http::raise_open_file_limit();
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
  Impl* impl = impl_.get();
  s.listener = std::make_shared<http::Listener>(s.ioc, tcp::endpoint(address, s.opt.port), *s.table,
                                                [impl](tcp::socket socket) {
                                                  std::make_shared<Session>(std::move(socket), *impl)->start();
                                                });
}

Server::~Server() {
  stop();
  impl_->pool->join();
  impl_->light_pool->join();
  const RunLimit kinds[4] = {RunLimit::kRequests, RunLimit::kUsers, RunLimit::kReplicas, RunLimit::kCards};
  for (int i = 0; i < 4; ++i) set_run_limit(kinds[i], impl_->saved_limits[i]);
}

unsigned short Server::port() const { return impl_->listener->port(); }

void Server::run(bool handle_signals) {
  Impl& s = *impl_;
  std::optional<asio::signal_set> signals;
  if (handle_signals) {
    signals.emplace(s.ioc, SIGINT, SIGTERM);
    signals->async_wait([this](beast::error_code ec, int) {
      if (!ec) stop();
    });
  }
  s.listener->start();
  // A handler that throws would end run() and with it the server: log it and go on (the request
  // path catches its own; this is the last line of defence).
  for (;;) {
    try {
      s.ioc.run();
      break;
    } catch (const std::exception& x) {
      std::fprintf(stderr, "capsim serve: internal error in a connection handler: %s\n", x.what());
    } catch (...) {
      std::fprintf(stderr, "capsim serve: internal error in a connection handler\n");
    }
  }
}

void Server::stop() {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> lock(s.jobs_mutex);
    for (const auto& f : s.jobs) f->store(true);
  }
  asio::post(s.ioc, [&s] {
    s.listener->stop();
    s.ioc.stop();
  });
}

}  // namespace capsim::server
