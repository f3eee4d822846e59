#include "sim/server/server.h"

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "sim/core/error.h"
#include "sim/core/run_limits.h"
#include "sim/core/threads.h"
#include "sim/http/server.h"
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
// HTTP server (its listener is the I/O context's), then the I/O context (its pending handlers
// own calls, which touch the counters), then the rest.
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
  std::string cards, models, engines, serving, links, openapi, health;
  // Every running job's flag, so that stop() cancels them.
  std::mutex jobs_mutex;
  std::set<CancelFlag> jobs;
  // The process's run limits before the server set its own (restored when it stops).
  std::int64_t saved_limits[4] = {};
  asio::io_context ioc{1};
  std::unique_ptr<http::Server> http;
  std::unique_ptr<asio::thread_pool> light_pool;
  std::unique_ptr<asio::thread_pool> pool;

  const std::string& get_answer(Endpoint e) const {
    return e == Endpoint::kCards    ? cards
           : e == Endpoint::kModels  ? models
           : e == Endpoint::kEngines ? engines
           : e == Endpoint::kServing ? serving
           : e == Endpoint::kLinks   ? links
           : e == Endpoint::kOpenApi ? openapi
                                     : health;
  }
};

namespace {

http::Response response(const http::Request& req, int status, const std::string& type, std::string body,
                        bool keep_alive, bool retry_after = false) {
  http::Response res(static_cast<bhttp::status>(status), req.version() ? req.version() : 11);
  res.set(bhttp::field::server, "capsim");
  res.set(bhttp::field::content_type, type);
  if (retry_after) res.set(bhttp::field::retry_after, "2");
  res.keep_alive(keep_alive);
  const bool head = req.method() == bhttp::verb::head;
  const std::size_t size = body.size();
  res.body() = head ? std::string() : std::move(body);
  res.prepare_payload();
  if (head) res.content_length(size);
  return res;
}

http::Response error_response(const http::Request& req, int status, const std::string& message, bool keep_alive,
                              bool retry_after = false) {
  const Answer a = error_answer(status, message);
  return response(req, a.status, a.content_type, a.body, keep_alive, retry_after);
}

// One request's answer: the routes, the lanes, the job and its progress. Ends on the I/O thread
// (its destructor gives back the client's share, which only that thread touches).
class Call : public std::enable_shared_from_this<Call> {
 public:
  Call(std::shared_ptr<http::Exchange> ex, Server::Impl& server) : ex_(std::move(ex)), server_(server) {}
  ~Call() { release_client_slot(); }

  void handle() {
    const http::Request& req = ex_->request();
    const Front front = front_of(req, server_.opt.guard, [this](Endpoint e) -> const std::string& {
      return server_.get_answer(e);
    });
    if (front.answer) return send(front.answer->status, front.answer->content_type, front.answer->body);
    const Endpoint e = front.endpoint;
    if (e == Endpoint::kPage) {
      const std::string target(req.target());
      return send_page(target.substr(0, target.find('?')));
    }
    // Admission first: a full lane is told so before any parsing or validation.
    // fit, finetune, calibrate, roofline, kernels and diff are arithmetic on one model, profile,
    // table or pair of results (milliseconds: a roofline step of a million sequences takes 8 ms):
    // they take the light lane, so a full simulation lane never delays them.
    light_ = e == Endpoint::kFit || e == Endpoint::kFinetune || e == Endpoint::kCalibrate || e == Endpoint::kRoofline ||
             e == Endpoint::kKernels || e == Endpoint::kDiff;
    const std::string& client = ex_->client();
    if (light_) {
      const unsigned room = 1 + server_.opt.queue;
      if (server_.light_admitted.fetch_add(1) >= room) {
        --server_.light_admitted;
        return send_error(429, "the light lane (fit, finetune, calibrate, roofline, kernels, diff) is full (" + std::to_string(room) +
                                   " admitted); retry after the Retry-After seconds", true);
      }
    } else {
      const unsigned capacity = server_.workers + server_.opt.queue;
      unsigned& mine = server_.admitted_by_client[client];
      if (mine >= server_.per_client) {
        return send_error(429, "this client (" + client + ") already has " + std::to_string(server_.per_client) +
                                   " simulations admitted, its share of the server (capsim serve --max-jobs-per-client); "
                                   "retry after the Retry-After seconds", true);
      }
      if (server_.admitted.fetch_add(1) >= capacity) {
        --server_.admitted;
        if (mine == 0) server_.admitted_by_client.erase(client);
        return send_error(429, "the queue is full (" + std::to_string(capacity) + " jobs admitted: " +
                                   std::to_string(server_.workers) + " running, " + std::to_string(server_.opt.queue) +
                                   " waiting); retry after the Retry-After seconds", true);
      }
      ++mine;
      holds_client_slot_ = true;
    }
    // Validation builds the scenario: on the light lane's thread, so that the I/O thread never
    // waits on it.
    const auto accept = req[bhttp::field::accept];
    streaming_ = reports_progress(e) && accept.find("text/event-stream") != beast::string_view::npos;
    auto executor = ex_->executor();
    asio::post(*server_.light_pool, [self = shared_from_this(), e, body = std::move(ex_->request().body()), executor]() mutable {
      auto prepared = std::make_shared<Prepared>(prepare_or_refuse(e, body, self->server_.opt.limits));
      // The reference moves to the I/O thread: a call must end there.
      asio::post(executor, [self = std::move(self), prepared] { self->on_prepared(std::move(*prepared)); });
    });
  }

 private:
  void release_client_slot() {
    if (!holds_client_slot_) return;
    holds_client_slot_ = false;
    const auto it = server_.admitted_by_client.find(ex_->client());
    if (it != server_.admitted_by_client.end() && --it->second == 0) server_.admitted_by_client.erase(it);
  }

  void on_prepared(Prepared prepared) {
    if (prepared.refusal) {
      leave_lane();
      return send(prepared.refusal->status, prepared.refusal->content_type, prepared.refusal->body);
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
    // The job may run for minutes: its time limit cancels it; 503 tells the client why.
    deadline_ = std::make_unique<asio::steady_timer>(ex_->executor(), millis(server_.opt.job_timeout_s));
    deadline_->async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return;
      self->timed_out_ = true;
      self->cancel_->store(true);
    });
    if (streaming_) {
      ex_->write("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                 "Server: capsim\r\nConnection: close\r\n\r\n");
    }
    // A client that goes away cancels its job.
    const CancelFlag cancel = cancel_;
    ex_->watch([cancel] { cancel->store(true); });
    auto executor = ex_->executor();
    const std::weak_ptr<Call> weak = shared_from_this();
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

  void on_progress(const std::string& text) {
    if (done_ || ex_->gone()) return;
    if (ex_->queued() > 8) return;  // a slow reader gets fewer progress events, never a backlog
    ex_->write(sse_event("progress", text));
  }

  void on_done(int status, std::string body) {
    done_ = true;
    release_client_slot();
    deadline_->cancel();
    {
      std::lock_guard<std::mutex> lock(server_.jobs_mutex);
      server_.jobs.erase(cancel_);
    }
    if (ex_->gone()) return;
    if (status == -1) {
      status = 503;
      body = timed_out_ ? "the job ran longer than the server's limit (" +
                              std::to_string(static_cast<int>(server_.opt.job_timeout_s)) +
                              " s, capsim serve --job-timeout) and was cancelled"
                        : "the server is stopping; the job was cancelled";
    }
    if (streaming_) {
      ex_->write(status == 200 ? sse_event("result", body) : sse_event("error", error_json(status, body)));
      return ex_->finish(false);
    }
    if (status == 200) return send(200, "application/json", body);
    send_error(status, body);
  }

  void send_page(const std::string& path) {
    const std::string& dir = server_.opt.web_dir;
    const std::string name = path == "/" ? "index.html" : path.substr(std::string("/assets/").size());
    if (dir.empty() || !plain_name(name)) return send_error(404, path + ": no such file");
    const std::string file = dir + (path == "/" ? "/" : "/assets/") + name;
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      return send_error(404, path == "/" ? "the web page is not built (npm; scripts/setup.sh builds it into " + dir + ")"
                                         : path + ": no such file");
    }
    std::ostringstream text;
    text << in.rdbuf();
    send(200, content_type(name), text.str());
  }

  void send_error(int status, const std::string& message, bool retry_after = false) {
    ex_->respond(error_response(ex_->request(), status, message, ex_->keep_alive(), retry_after));
  }

  void send(int status, const std::string& type, std::string body) {
    ex_->respond(response(ex_->request(), status, type, std::move(body), ex_->keep_alive()));
  }

  std::shared_ptr<http::Exchange> ex_;
  Server::Impl& server_;
  bool holds_client_slot_ = false;  // counted in admitted_by_client
  bool light_ = false;              // the job runs on the light lane (fit, finetune, calibrate)
  bool streaming_ = false;
  bool done_ = false;
  bool timed_out_ = false;
  CancelFlag cancel_;
  std::unique_ptr<asio::steady_timer> deadline_;
};

}  // namespace

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.opt = std::move(options);
  s.workers = s.opt.workers ? s.opt.workers : default_threads();
  s.per_client = s.opt.max_jobs_per_client ? s.opt.max_jobs_per_client : std::max(1u, (s.workers + s.opt.queue) / 2);
  s.pool = std::make_unique<asio::thread_pool>(s.workers);
  s.light_pool = std::make_unique<asio::thread_pool>(1);
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
  s.serving = answer_get(Endpoint::kServing);
  s.links = answer_get(Endpoint::kLinks);
  s.openapi = answer_get(Endpoint::kOpenApi);
  s.health = answer_get(Endpoint::kHealth);
  beast::error_code ec;
  const auto address = asio::ip::make_address(s.opt.bind, ec);
  if (ec) throw Error("--bind: '" + s.opt.bind + "' is not an IP address (e.g. 127.0.0.1, ::1, 0.0.0.0)");
  Impl* impl = impl_.get();
  http::ServerLimits limits;
  limits.read_timeout_s = s.opt.read_timeout_s;
  limits.max_connections = s.opt.max_connections;
  limits.max_body_bytes = s.opt.limits.max_body_bytes;
  http::Routes routes;
  routes.handle = [impl](const std::shared_ptr<http::Exchange>& ex) { std::make_shared<Call>(ex, *impl)->handle(); };
  routes.unreadable = [max_body = limits.max_body_bytes, max_header = limits.max_header_bytes](http::Unreadable why,
                                                                                                 const std::string& detail) {
    const http::Request none;
    switch (why) {
      case http::Unreadable::kBodyTooLarge:
        return error_response(none, 413, "request body: more than " + std::to_string(max_body) +
                                             " bytes; the limit (capsim serve --max-body)", false);
      case http::Unreadable::kHeaderTooLarge:
        return error_response(none, 431, "request header: more than " + std::to_string(max_header) + " bytes", false);
      case http::Unreadable::kMalformed: break;
    }
    return error_response(none, 400, "malformed HTTP request: " + detail, false);
  };
  routes.internal_error = [](const std::string& what) {
    return error_response(http::Request(), 500, "internal error: " + what, false);
  };
  s.http = std::make_unique<http::Server>(s.ioc, tcp::endpoint(address, s.opt.port), limits, std::move(routes));
}

Server::~Server() {
  stop();
  impl_->pool->join();
  impl_->light_pool->join();
  const RunLimit kinds[4] = {RunLimit::kRequests, RunLimit::kUsers, RunLimit::kReplicas, RunLimit::kCards};
  for (int i = 0; i < 4; ++i) set_run_limit(kinds[i], impl_->saved_limits[i]);
}

unsigned short Server::port() const { return impl_->http->port(); }

void Server::run(bool handle_signals) {
  Impl& s = *impl_;
  s.http->start();
  http::run_until_stopped(s.ioc, "capsim serve", handle_signals ? std::function<void()>([this] { stop(); }) : nullptr);
}

void Server::stop() {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> lock(s.jobs_mutex);
    for (const auto& f : s.jobs) f->store(true);
  }
  asio::post(s.ioc, [&s] {
    s.http->stop();
    s.ioc.stop();
  });
}

}  // namespace capsim::server
