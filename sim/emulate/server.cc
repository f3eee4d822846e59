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
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <unordered_map>

#include "sim/cluster/live_simulation.h"
#include "sim/core/error.h"
#include "sim/emulate/openai_protocol.h"
#include "sim/emulate/prometheus.h"
#include "sim/emulate/request_path.h"
#include "sim/http/connection_table.h"
#include "sim/http/lingering_close.h"
#include "sim/http/listener.h"

namespace capsim::emulate {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
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

std::string sse(const json& j) { return "data: " + http::safe_dump(j) + "\n\n"; }

std::chrono::milliseconds millis(double seconds) { return std::chrono::milliseconds(static_cast<long long>(seconds * 1000)); }

// One client connection: reads requests one at a time (HTTP/1.1 keep-alive), writes responses
// through one ordered queue of byte strings (whole responses, or a chunked stream's pieces).
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Emulator& emulator) : stream_(std::move(socket)), emulator_(emulator) {}
  ~Session();
  void start();

  // A whole response; the next request is read once it is queued.
  void respond(bhttp::status status, const std::string& content_type, std::string body) {
    bhttp::response<bhttp::string_body> res{status, 11};
    res.set(bhttp::field::server, "capsim-emulate");
    res.set(bhttp::field::content_type, content_type);
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
    respond(static_cast<bhttp::status>(status), "application/json", http::safe_dump(body));
  }
  void respond_reply(const Reply& r) { respond(static_cast<bhttp::status>(r.status), r.content_type, r.body); }
  // Starts a server-sent-event stream (chunked transfer encoding, as vLLM's StreamingResponse).
  void begin_stream() {
    bhttp::response<bhttp::empty_body> res{bhttp::status::ok, 11};
    res.set(bhttp::field::server, "capsim-emulate");
    res.set(bhttp::field::content_type, "text/event-stream; charset=utf-8");
    res.keep_alive(keep_alive_);
    arrival_header(res);
    res.chunked(true);
    std::ostringstream os;
    os << res.base();
    queue(os.str());
  }
  void stream_data(const std::string& data) {
    queue(beast::buffers_to_string(bhttp::make_chunk(net::buffer(data))));
  }
  void end_stream() {
    queue(beast::buffers_to_string(bhttp::make_chunk_last()));
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

  void read();
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
  // Closes the connection; with linger_, lingers first (Session::close below).
  void close();

  // The client went away: abort what it was waiting for, drop the connection.
  void gone();

  beast::tcp_stream stream_;
  Emulator& emulator_;
  std::shared_ptr<http::ConnectionTable> table_;
  http::ConnectionTable::Id id_ = 0;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::deque<std::string> out_;
  bool writing_ = false, keep_alive_ = true, close_after_writes_ = false, closed_ = false;
  bool linger_ = false;  // close() drains what the client still sends (a refused request's rest)
  std::shared_ptr<Call> current_;
  friend class Emulator;
};

class Emulator {
 public:
  Emulator(net::io_context& io, const SimulationConfig& config, const EmulateOptions& o)
      : table(std::make_shared<http::ConnectionTable>(std::max(1u, o.max_connections))),
        io_(io),
        options_(o),
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
  void handle(const std::shared_ptr<Session>& s, bhttp::request<bhttp::string_body>& req) {
    const Front front = emulate_front(req, options_.guard);
    if (front.refusal) return s->respond_reply(*front.refusal);
    switch (front.route) {
      case Route::kHealth: return s->respond(bhttp::status::ok, "application/json", "");
      case Route::kModels:
        return s->respond_json(200, model_list(options_.served_model, live_.max_model_len(), created_));
      case Route::kMetrics:
        pump();
        return s->respond(bhttp::status::ok, "text/plain; version=0.0.4; charset=utf-8", metrics_.render(live_.replicas()));
      case Route::kCompletions:
      case Route::kChat: break;
    }
    // The body is parsed on the parse thread (a large one must not hold up the streams); its
    // arrival is now, and the call enters the simulation when the parse is back.
    const Endpoint endpoint = front.route == Route::kChat ? Endpoint::kChat : Endpoint::kCompletions;
    const SimTime arrival = sim_now();
    net::post(parse_pool_, [this, s, endpoint, arrival, body = std::move(req.body())]() mutable {
      ParseOutcome p = parse_request(endpoint, body);
      // The session's reference moves back to the I/O thread, where a session must end.
      net::post(io_, [this, s = std::move(s), endpoint, arrival, p = std::move(p)]() mutable {
        start_call(s, endpoint, std::move(p), arrival);
      });
    });
  }

  // Shared with the sessions: the last of them may go after the emulator, when the I/O context
  // that holds their handlers is destroyed.
  std::shared_ptr<http::ConnectionTable> table;
  void stop_parsing() { parse_pool_.join(); }
  std::size_t max_body_bytes() const { return options_.max_body_bytes; }
  double read_timeout_s() const { return options_.read_timeout_s; }

  void abort(const std::shared_ptr<Call>& call) {
    if (call->done) return;
    call->done = true;
    live_.abort(call->id);
    calls_.erase(call->id);
    metrics_.aborted(call->replica);
  }

 private:
  // Simulated time now: wall time since start x --time-scale (saturating: a run that outlived
  // int64 nanoseconds of simulated time stays at its end instead of wrapping).
  SimTime sim_now() const {
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double ns = wall * options_.time_scale * 1e9;
    const SimTime t = ns >= 9.2e18 ? std::numeric_limits<SimTime>::max() / 2 : from_seconds(wall * options_.time_scale);
    return std::max(live_.now(), t);
  }

  void start_call(const std::shared_ptr<Session>& s, Endpoint endpoint, ParseOutcome p, SimTime arrival) {
    if (s->closed_) return;  // the client left while its body was parsed
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
    char hex[33];
    std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(id_prefix_),
                  static_cast<unsigned long long>(call->id));
    call->ids = {std::string(endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-") + hex,
                 static_cast<std::int64_t>(std::time(nullptr)), options_.served_model};
    call->session = s;
    // Events at the arrival instant itself are run together with the arrival, as in a batch run.
    const SimTime t = arrival;
    dispatch(live_.advance_to(std::max(live_.now(), t - 1)));
    call->arrival = std::max(t, live_.now());
    Request r;
    r.id = call->id;
    r.arrival = call->arrival;
    r.prompt_tokens = call->prompt;
    r.output_tokens = call->output;
    // The prompt's content, so that repeated prompts and resent histories hit the prefix cache;
    // the answer is content of this call alone.
    r.segments = std::move(p.request->prompt_segments);
    r.segments.push_back({0x7e00000000000000ULL ^ call->id, call->output});
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
    const double wall_ns = std::ceil(static_cast<double>(*next) / options_.time_scale);
    if (!(wall_ns < 9.2e18)) return;  // past the end of representable time: never due
    const auto wall = start_ + std::chrono::nanoseconds(static_cast<std::int64_t>(wall_ns));
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

  net::io_context& io_;
  EmulateOptions options_;
  // One thread parses request bodies (parse_request); its results come back to the I/O thread in
  // the order the bodies went in.
  net::thread_pool parse_pool_{1};
  LiveSimulation live_;
  ServerMetrics metrics_;
  Rng rng_;
  net::steady_timer timer_;
  std::chrono::steady_clock::time_point start_;
  std::int64_t created_;
  std::uint64_t next_id_ = 0;
  // Response ids are this process's random 64 bits then its call counter, so that emulators behind
  // one load balancer (or restarted ones) never hand a client the same id, as vLLM's random uuids
  // do not. Drawn from std::random_device, never from rng_: the seeded simulation stays identical.
  std::uint64_t id_prefix_ = random_id_prefix();
  static std::uint64_t random_id_prefix() {
    std::random_device device;
    return (static_cast<std::uint64_t>(device()) << 32) ^ device();
  }
  std::unordered_map<std::uint64_t, std::shared_ptr<Call>> calls_;
};

Session::~Session() {
  if (table_) table_->remove(id_);
}

void Session::start() {
  const std::weak_ptr<Session> weak = shared_from_this();
  table_ = emulator_.table;
  id_ = table_->add([weak] {
    if (const auto self = weak.lock()) {
      self->closed_ = true;  // evicted while reading: nothing of ours is being written
      beast::error_code ec;
      self->stream_.socket().close(ec);
    }
  });
  read();
}

void Session::close() {
  if (closed_) return;
  closed_ = true;
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (!linger_) {
    stream_.socket().close(ec);
    return;
  }
  // A lingering close, as serve's: the client may still be sending the body we refused; read
  // and drop it until it closes or the read timeout passes, so that it reads our answer
  // instead of a connection reset. A lingering connection is the first to make room.
  table_->reading(id_, http::ConnectionTable::Clock::time_point::min());
  stream_.expires_after(millis(emulator_.read_timeout_s()));
  http::drain_then_close(shared_from_this(), stream_, buffer_);
}

void Session::read() {
  table_->reading(id_);
  parser_.emplace();
  parser_->header_limit(16 * 1024);
  parser_->body_limit(emulator_.max_body_bytes());
  stream_.expires_after(millis(emulator_.read_timeout_s()));
  bhttp::async_read(stream_, buffer_, *parser_,
                    [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
}

void Session::on_read(beast::error_code ec) {
  if (closed_) return;
  if (ec == bhttp::error::body_limit || ec == bhttp::error::header_limit ||
      (ec && ec != beast::error::timeout && ec != bhttp::error::end_of_stream && ec != net::error::eof &&
       ec != net::error::connection_reset && ec != net::error::operation_aborted && parser_ && parser_->got_some())) {
    // Told why, then closed; the rest of what it sends is read and dropped (close(), linger_).
    keep_alive_ = false;
    linger_ = true;
    stream_.expires_never();
    table_->busy(id_);
    const int status = ec == bhttp::error::body_limit ? 413 : ec == bhttp::error::header_limit ? 431 : 400;
    const std::string message =
        ec == bhttp::error::body_limit ? "request body: more than " + std::to_string(emulator_.max_body_bytes()) +
                                             " bytes (capsim emulate --max-body)"
        : ec == bhttp::error::header_limit ? std::string("request header: more than 16384 bytes")
                                           : "malformed HTTP request: " + ec.message();
    respond_reply(error_reply(ApiError{status, status == 400 ? "BadRequestError" : "RequestTooLargeError", message, std::nullopt}));
    return;
  }
  if (ec) {
    close();  // the client closed the connection, or was too slow to send its request
    return;
  }
  stream_.expires_never();  // a call may stream for minutes
  table_->busy(id_);
  bhttp::request<bhttp::string_body> req = parser_->release();
  keep_alive_ = req.keep_alive();
  try {
    emulator_.handle(shared_from_this(), req);
  } catch (const std::exception&) {
    keep_alive_ = false;
    respond_reply(error_reply(ApiError{500, "InternalServerError", "internal error", std::nullopt}));
  }
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

}  // namespace

void run_emulator(const SimulationConfig& config, const EmulateOptions& options) {
  if (!(options.time_scale >= kMinTimeScale && options.time_scale <= kMaxTimeScale)) {
    char range[96];
    std::snprintf(range, sizeof range, "%g..%g", kMinTimeScale, kMaxTimeScale);
    throw Error("--time-scale: must be a number in " + std::string(range) +
                " (simulated seconds per wall-clock second; 1 = real time)");
  }
  if (!(options.read_timeout_s >= 0.1 && options.read_timeout_s <= 3600)) {
    throw Error("--read-timeout: must be a number of seconds in 0.1..3600");
  }
  if (options.port < 0 || options.port > 65535) throw Error("--port: must be in 0..65535");
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(options.bind, ec);
  if (ec) throw Error("--bind: '" + options.bind + "' is not an IP address (e.g. 127.0.0.1, 0.0.0.0, ::1)");
  http::raise_open_file_limit();
  net::io_context io{1};
  Emulator emulator(io, config, options);
  Emulator* e = &emulator;
  auto listener = std::make_shared<http::Listener>(
      io, tcp::endpoint{address, static_cast<unsigned short>(options.port)}, *emulator.table,
      [e](tcp::socket socket) { std::make_shared<Session>(std::move(socket), *e)->start(); });
  net::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&io](beast::error_code, int) { io.stop(); });
  listener->start();
  const std::string host = address.is_v6() ? "[" + options.bind + "]" : options.bind;
  std::cout << "capsim emulate: serving " << options.served_model << " on http://" << host << ":" << listener->port()
            << " (time scale " << options.time_scale << "; Ctrl-C stops)" << std::endl;
  // A handler that throws would end run() and with it every stream: log it and go on.
  for (;;) {
    try {
      io.run();
      break;
    } catch (const std::exception& x) {
      std::fprintf(stderr, "capsim emulate: internal error in a connection handler: %s\n", x.what());
    }
  }
  listener->stop();
  emulator.stop_parsing();
}

}  // namespace capsim::emulate
