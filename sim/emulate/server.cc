#include "sim/emulate/server.h"

#include <utility>  // before Boost 1.74's asio, whose awaitable.hpp uses std::exchange

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <deque>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "sim/cluster/live_simulation.h"
#include "sim/core/error.h"
#include "sim/emulate/openai_protocol.h"
#include "sim/emulate/prometheus.h"

namespace capsim::emulate {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::ordered_json;

class Emulator;
class Session;

// One request in the simulation, from its arrival to its last token (or its client leaving).
struct Call {
  std::uint64_t id = 0;
  Endpoint endpoint = Endpoint::kChat;
  bool stream = false, include_usage = false;
  std::int64_t prompt = 0, output = 0, tokens = 0;
  std::string finish_reason;
  ResponseIds ids;
  SimTime arrival = 0, first = -1, last = -1;
  std::uint32_t replica = 0;
  std::string text;  // non-streaming: the answer so far
  std::weak_ptr<Session> session;
  bool done = false;
};

std::string sse(const json& j) { return "data: " + j.dump() + "\n\n"; }

// One client connection: reads requests one at a time (HTTP/1.1 keep-alive), writes responses
// through one ordered queue of byte strings (whole responses, or a chunked stream's pieces).
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Emulator& emulator) : stream_(std::move(socket)), emulator_(emulator) {}
  void start() { read(); }

  // A whole response; the next request is read once it is queued.
  void respond(http::status status, const std::string& content_type, std::string body) {
    http::response<http::string_body> res{status, 11};
    res.set(http::field::server, "capsim-emulate");
    res.set(http::field::content_type, content_type);
    res.keep_alive(keep_alive_);
    arrival_header(res);
    res.body() = std::move(body);
    res.prepare_payload();
    std::ostringstream os;
    os << res;
    queue(os.str());
    next_request();
  }
  void respond_json(int status, const json& body) {
    respond(static_cast<http::status>(status), "application/json", body.dump());
  }
  // Starts a server-sent-event stream (chunked transfer encoding, as vLLM's StreamingResponse).
  void begin_stream() {
    http::response<http::empty_body> res{http::status::ok, 11};
    res.set(http::field::server, "capsim-emulate");
    res.set(http::field::content_type, "text/event-stream; charset=utf-8");
    res.keep_alive(keep_alive_);
    arrival_header(res);
    res.chunked(true);
    std::ostringstream os;
    os << res.base();
    queue(os.str());
  }
  void stream_data(const std::string& data) {
    queue(beast::buffers_to_string(http::make_chunk(net::buffer(data))));
  }
  void end_stream() {
    queue(beast::buffers_to_string(http::make_chunk_last()));
    next_request();
  }
  // Watches the socket while `call` runs: the client closing it aborts the call.
  void watch(const std::shared_ptr<Call>& call);

 private:
  // x-capsim-arrival-s: the simulated time (seconds since the emulator started) at which the
  // request being answered entered the simulation, so that a client can replay exactly the
  // arrivals the emulator saw with `capsim simulate --trace` (docs/emulate.md).
  template <class Message>
  void arrival_header(Message& res) const {
    if (!current_) return;
    char text[32];
    std::snprintf(text, sizeof text, "%.9f", to_seconds(current_->arrival));
    res.set("x-capsim-arrival-s", text);
  }

  void read() {
    parser_.emplace();
    parser_->body_limit(64 * 1024 * 1024);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }
  void on_read(beast::error_code ec);
  void next_request() {
    current_.reset();
    if (!keep_alive_) {
      close_after_writes_ = true;
      if (!writing_) close();
      return;
    }
    read();
  }
  void queue(std::string bytes) {
    if (closed_) return;
    out_.push_back(std::move(bytes));
    if (!writing_) write_next();
  }
  void write_next() {
    if (out_.empty()) {
      writing_ = false;
      if (close_after_writes_) close();
      return;
    }
    writing_ = true;
    // out_.front() must outlive the write: nothing else removes it while writing_ is set
    // (gone() leaves it to this handler), so a client that leaves mid-write cannot free it under
    // the write or make this handler pop an empty queue.
    net::async_write(stream_, net::buffer(out_.front()),
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       self->writing_ = false;
                       if (self->closed_) {
                         self->out_.clear();
                         return;
                       }
                       if (ec) {
                         self->gone();
                         return;
                       }
                       self->out_.pop_front();
                       self->write_next();
                     });
  }
  void close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.socket().close(ec);
  }
  // The client went away: abort what it was waiting for, drop the connection.
  void gone();

  beast::tcp_stream stream_;
  Emulator& emulator_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<std::string> out_;
  bool writing_ = false, keep_alive_ = true, close_after_writes_ = false, closed_ = false;
  std::shared_ptr<Call> current_;
  friend class Emulator;
};

class Emulator {
 public:
  Emulator(net::io_context& io, const SimulationConfig& config, const EmulateOptions& o)
      : options_(o),
        live_(config),
        metrics_(o.served_model, config_replicas(config)),
        rng_(o.seed),
        timer_(io),
        start_(std::chrono::steady_clock::now()),
        created_(static_cast<std::int64_t>(std::time(nullptr))) {}

  static std::size_t config_replicas(const SimulationConfig& c) {
    std::size_t n = 0;
    for (const ReplicaGroup& g : c.groups) n += static_cast<std::size_t>(g.replicas);
    return n;
  }

  // Routes one request of `s`.
  void handle(const std::shared_ptr<Session>& s, const http::request<http::string_body>& req) {
    const std::string target(req.target());
    const std::string path = target.substr(0, target.find('?'));
    const bool get = req.method() == http::verb::get, post = req.method() == http::verb::post;
    if (path == "/v1/models" || path == "/metrics" || path == "/health") {
      if (!get) return s->respond_json(405, json{{"detail", "Method Not Allowed"}});
      if (path == "/health") return s->respond(http::status::ok, "application/json", "");
      if (path == "/v1/models") return s->respond_json(200, model_list(options_.served_model, live_.max_model_len(), created_));
      pump();
      return s->respond(http::status::ok, "text/plain; version=0.0.4; charset=utf-8", metrics_.render(live_.replicas()));
    }
    if (path == "/v1/completions" || path == "/v1/chat/completions") {
      if (!post) return s->respond_json(405, json{{"detail", "Method Not Allowed"}});
      return start_call(s, path == "/v1/chat/completions" ? Endpoint::kChat : Endpoint::kCompletions, req.body());
    }
    s->respond_json(404, json{{"detail", "Not Found"}});
  }

  void abort(const std::shared_ptr<Call>& call) {
    if (call->done) return;
    call->done = true;
    live_.abort(call->id);
    calls_.erase(call->id);
    metrics_.aborted(call->replica);
  }

 private:
  // Simulated time now: wall time since start x --time-scale.
  SimTime sim_now() const {
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    return std::max(live_.now(), from_seconds(wall * options_.time_scale));
  }

  void start_call(const std::shared_ptr<Session>& s, Endpoint endpoint, const std::string& body) {
    ParseOutcome p = parse_request(endpoint, body);
    if (p.error) return s->respond_json(p.error->status, error_body(*p.error));
    PlanOutcome plan = plan_request(*p.request, options_.served_model, live_.max_model_len(), options_.output_lengths, rng_);
    if (plan.error) return s->respond_json(plan.error->status, error_body(*plan.error));
    auto call = std::make_shared<Call>();
    call->id = next_id_++;
    call->endpoint = endpoint;
    call->stream = p.request->stream;
    call->include_usage = p.request->include_usage;
    call->prompt = p.request->prompt_tokens;
    call->output = plan.plan->output_tokens;
    call->finish_reason = plan.plan->finish_reason;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(call->id));
    call->ids = {std::string(endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-") + hex,
                 static_cast<std::int64_t>(std::time(nullptr)), options_.served_model};
    call->session = s;
    // Events at the arrival instant itself are run together with the arrival, as in a batch run.
    const SimTime t = sim_now();
    dispatch(live_.advance_to(std::max(live_.now(), t - 1)));
    call->arrival = std::max(t, live_.now());
    Request r;
    r.id = call->id;
    r.arrival = call->arrival;
    r.prompt_tokens = call->prompt;
    r.output_tokens = call->output;
    live_.submit(std::move(r));
    calls_[call->id] = call;
    s->current_ = call;
    if (call->stream) s->begin_stream();
    s->watch(call);
    pump();
  }

  // Advances the simulation to now, hands out the events, and sets the timer for the next one.
  void pump() {
    dispatch(live_.advance_to(sim_now()));
    const std::optional<SimTime> next = live_.next_time();
    if (!next) return;
    const auto wall = start_ + std::chrono::nanoseconds(static_cast<std::int64_t>(
                                   std::ceil(static_cast<double>(*next) / options_.time_scale)));
    timer_.expires_at(wall);
    timer_.async_wait([this](beast::error_code ec) {
      if (!ec) pump();
    });
  }

  void dispatch(const std::vector<LiveEvent>& events) {
    for (const LiveEvent& e : events) {
      const auto it = calls_.find(e.id);
      if (it == calls_.end()) continue;
      const std::shared_ptr<Call> call = it->second;
      const std::shared_ptr<Session> s = call->session.lock();
      call->replica = e.replica;
      switch (e.kind) {
        case LiveEvent::kToken: on_token(*call, s.get(), e); break;
        case LiveEvent::kFinished: on_finished(*call, s.get()); break;
        case LiveEvent::kRejected: on_rejected(*call, s.get()); break;
      }
    }
  }

  void on_token(Call& c, Session* s, const LiveEvent& e) {
    if (c.first < 0) {
      c.first = e.time;
      metrics_.first_token(e.replica, to_seconds(e.time - c.arrival), c.prompt);
      if (s && c.stream && c.endpoint == Endpoint::kChat) s->stream_data(sse(role_chunk(c.ids)));
    } else {
      metrics_.next_token(e.replica, to_seconds(e.time - c.last));
    }
    c.last = e.time;
    // One event may carry several tokens (speculative decoding emits the accepted drafts with
    // the target's token as one chunk): the chunk holds every token since the last event.
    std::string text;
    for (std::int64_t i = c.tokens; i < e.generated; ++i) text += filler_token(i);
    c.tokens = e.generated;
    if (!c.stream) {
      c.text += text;
      return;
    }
    const bool last = e.generated >= c.output;
    if (s) s->stream_data(sse(token_chunk(c.endpoint, c.ids, text, last ? std::optional(c.finish_reason) : std::nullopt)));
  }

  void on_finished(Call& c, Session* s) {
    c.done = true;
    const double e2e = to_seconds(c.last - c.arrival), ttft = to_seconds(c.first - c.arrival);
    metrics_.finished(c.replica, c.finish_reason, e2e, c.tokens > 1 ? (e2e - ttft) / static_cast<double>(c.tokens - 1) : 0,
                      c.tokens);
    if (s) {
      if (c.stream) {
        std::string tail;
        if (c.include_usage) tail += sse(usage_chunk(c.endpoint, c.ids, c.prompt, c.tokens));
        tail += "data: [DONE]\n\n";
        s->stream_data(tail);
        s->end_stream();
      } else {
        s->respond_json(200, full_response(c.endpoint, c.ids, c.text, c.finish_reason, c.prompt, c.tokens));
      }
    }
    calls_.erase(c.id);
  }

  // The cluster refused it (longer than a replica's max_model_len): plan_request checks the
  // smallest max_model_len first, so this is a backstop.
  void on_rejected(Call& c, Session* s) {
    c.done = true;
    const ApiError e{400, "BadRequestError",
                     "This model's maximum context length is " + std::to_string(live_.max_model_len()) +
                         " tokens. However, you requested " + std::to_string(c.prompt + c.output) + " tokens.",
                     std::nullopt};
    if (s) {
      if (c.stream) {
        s->stream_data(sse(error_body(e)) + "data: [DONE]\n\n");
        s->end_stream();
      } else {
        s->respond_json(400, error_body(e));
      }
    }
    calls_.erase(c.id);
  }

  EmulateOptions options_;
  LiveSimulation live_;
  ServerMetrics metrics_;
  Rng rng_;
  net::steady_timer timer_;
  std::chrono::steady_clock::time_point start_;
  std::int64_t created_;
  std::uint64_t next_id_ = 0;
  std::unordered_map<std::uint64_t, std::shared_ptr<Call>> calls_;
};

void Session::on_read(beast::error_code ec) {
  if (ec) {
    close();  // the client closed the connection (or sent something that is not HTTP)
    return;
  }
  http::request<http::string_body> req = parser_->release();
  keep_alive_ = req.keep_alive();
  emulator_.handle(shared_from_this(), req);
}

void Session::watch(const std::shared_ptr<Call>& call) {
  stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), call](beast::error_code ec) {
    if (call->done) return;
    beast::error_code aec;
    const std::size_t n = self->stream_.socket().available(aec);
    // Readable with nothing to read: the peer closed (or reset) the connection. Readable with
    // data: a pipelined request, read once this response is done.
    if (ec || aec || n == 0) self->gone();
  });
}

void Session::gone() {
  if (current_) emulator_.abort(current_);
  current_.reset();
  if (!writing_) out_.clear();  // else the write in flight still reads out_.front(); its handler clears
  close();
}

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(net::io_context& io, tcp::endpoint at, Emulator& e) : acceptor_(io), retry_(io), emulator_(e) {
    beast::error_code ec;
    acceptor_.open(at.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(at, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      throw Error("--bind/--port: cannot listen on " + at.address().to_string() + ":" + std::to_string(at.port()) +
                  ": " + ec.message());
    }
  }
  unsigned short port() const { return acceptor_.local_endpoint().port(); }
  void accept() {
    acceptor_.async_accept([self = shared_from_this()](beast::error_code ec, tcp::socket s) {
      if (!self->acceptor_.is_open()) return;
      if (ec) {
        // Out of file descriptors (EMFILE), the pending connection stays queued and an
        // immediate retry fails again at once: a busy loop that starves the sessions that
        // would free descriptors. Wait a little before accepting again.
        self->retry_.expires_after(std::chrono::milliseconds(100));
        self->retry_.async_wait([self](beast::error_code) { self->accept(); });
        return;
      }
      s.set_option(tcp::no_delay(true), ec);
      std::make_shared<Session>(std::move(s), self->emulator_)->start();
      self->accept();
    });
  }

 private:
  tcp::acceptor acceptor_;
  net::steady_timer retry_;
  Emulator& emulator_;
};

}  // namespace

void run_emulator(const SimulationConfig& config, const EmulateOptions& options) {
  if (!(options.time_scale > 0) || !std::isfinite(options.time_scale)) {
    throw Error("--time-scale: must be a number > 0 (simulated seconds per wall-clock second)");
  }
  if (options.port < 0 || options.port > 65535) throw Error("--port: must be in 0..65535");
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(options.bind, ec);
  if (ec) throw Error("--bind: '" + options.bind + "' is not an IP address (e.g. 127.0.0.1, 0.0.0.0, ::1)");
  net::io_context io{1};
  Emulator emulator(io, config, options);
  auto listener = std::make_shared<Listener>(io, tcp::endpoint{address, static_cast<unsigned short>(options.port)}, emulator);
  net::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&io](beast::error_code, int) { io.stop(); });
  listener->accept();
  const std::string host = address.is_v6() ? "[" + options.bind + "]" : options.bind;
  std::cout << "capsim emulate: serving " << options.served_model << " on http://" << host << ":" << listener->port()
            << " (time scale " << options.time_scale << "; Ctrl-C stops)" << std::endl;
  io.run();
}

}  // namespace capsim::emulate
