#include "sim/emulate/server.h"

#include <utility>  // before Boost 1.74's asio, whose awaitable.hpp uses std::exchange

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
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
#include "sim/http/server.h"

namespace capsim::emulate {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::ordered_json;

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
  std::weak_ptr<http::Exchange> session;
  bool done = false;
};

std::string sse(const json& j) { return "data: " + http::safe_dump(j) + "\n\n"; }

// x-capsim-arrival-s: the simulated time (seconds since the emulator started) at which the
// request being answered entered the simulation, so that a client can replay exactly the
// arrivals the emulator saw with `capsim simulate --trace` (docs/emulate.md).
template <class Message>
void arrival_header(Message& res, const Call* call) {
  if (!call) return;
  char text[32];
  std::snprintf(text, sizeof text, "%.9f", to_seconds(call->arrival));
  res.set("x-capsim-arrival-s", text);
}

// A whole response to the request of `call` (none: refused before it entered the simulation).
http::Response response(bhttp::status status, const std::string& content_type, std::string body, bool keep_alive,
                        const Call* call = nullptr) {
  http::Response res{status, 11};
  res.set(bhttp::field::server, "capsim-emulate");
  res.set(bhttp::field::content_type, content_type);
  res.keep_alive(keep_alive);
  arrival_header(res, call);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

void respond(http::Exchange& ex, bhttp::status status, const std::string& content_type, std::string body,
             const Call* call = nullptr) {
  ex.respond(response(status, content_type, std::move(body), ex.keep_alive(), call));
}
void respond_json(http::Exchange& ex, int status, const json& body, const Call* call = nullptr) {
  respond(ex, static_cast<bhttp::status>(status), "application/json", http::safe_dump(body), call);
}
http::Response reply_response(const Reply& r, bool keep_alive) {
  return response(static_cast<bhttp::status>(r.status), r.content_type, r.body, keep_alive);
}
// Starts a server-sent-event stream (chunked transfer encoding, as vLLM's StreamingResponse).
void begin_stream(http::Exchange& ex, const Call& call) {
  bhttp::response<bhttp::empty_body> res{bhttp::status::ok, 11};
  res.set(bhttp::field::server, "capsim-emulate");
  res.set(bhttp::field::content_type, "text/event-stream; charset=utf-8");
  res.keep_alive(ex.keep_alive());
  arrival_header(res, &call);
  res.chunked(true);
  std::ostringstream os;
  os << res.base();
  ex.write(os.str());
}
void stream_data(http::Exchange& ex, const std::string& data) {
  ex.write(beast::buffers_to_string(bhttp::make_chunk(net::buffer(data))));
}
void end_stream(http::Exchange& ex) {
  ex.write(beast::buffers_to_string(bhttp::make_chunk_last()));
  ex.finish(ex.keep_alive());
}

class Emulator {
 public:
  Emulator(net::io_context& io, const SimulationConfig& config, const EmulateOptions& o)
      : io_(io),
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

  // Routes one request.
  void handle(const std::shared_ptr<http::Exchange>& ex) {
    http::Request& req = ex->request();
    const Front front = emulate_front(req, options_.guard);
    if (front.refusal) return ex->respond(reply_response(*front.refusal, ex->keep_alive()));
    switch (front.route) {
      case Route::kHealth: return respond(*ex, bhttp::status::ok, "application/json", "");
      case Route::kModels:
        return respond_json(*ex, 200, model_list(options_.served_model, live_.max_model_len(), created_));
      case Route::kMetrics:
        pump();
        return respond(*ex, bhttp::status::ok, "text/plain; version=0.0.4; charset=utf-8", metrics_.render(live_.replicas()));
      case Route::kCompletions:
      case Route::kChat: break;
    }
    // The body is parsed on the parse thread (a large one must not hold up the streams); its
    // arrival is now, and the call enters the simulation when the parse is back.
    const Endpoint endpoint = front.route == Route::kChat ? Endpoint::kChat : Endpoint::kCompletions;
    const SimTime arrival = sim_now();
    net::post(parse_pool_, [this, ex, endpoint, arrival, body = std::move(req.body())]() mutable {
      ParseOutcome p = parse_request(endpoint, body);
      // The exchange's reference moves back to the I/O thread, where a connection must end.
      net::post(io_, [this, ex = std::move(ex), endpoint, arrival, p = std::move(p)]() mutable {
        start_call(ex, endpoint, std::move(p), arrival);
      });
    });
  }

  void stop_parsing() { parse_pool_.join(); }

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

  void start_call(const std::shared_ptr<http::Exchange>& ex, Endpoint endpoint, ParseOutcome p, SimTime arrival) {
    if (ex->gone()) return;  // the client left while its body was parsed
    if (p.error) return respond_json(*ex, p.error->status, error_body(*p.error));
    PlanOutcome plan = plan_request(*p.request, options_.served_model, live_.max_model_len(), options_.output_lengths, rng_);
    if (plan.error) return respond_json(*ex, plan.error->status, error_body(*plan.error));
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
    call->session = ex;
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
    if (call->stream) begin_stream(*ex, *call);
    // A client that closes its connection aborts its call (its KV is freed).
    ex->watch([this, call] { abort(call); });
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
      const std::shared_ptr<http::Exchange> s = call->session.lock();
      call->replica = e.replica;
      switch (e.kind) {
        case LiveEvent::kToken: on_token(*call, s.get(), e); break;
        case LiveEvent::kFinished: on_finished(*call, s.get()); break;
        case LiveEvent::kRejected: on_rejected(*call, s.get()); break;
      }
    }
  }

  void on_token(Call& c, http::Exchange* s, const LiveEvent& e) {
    if (c.first < 0) {
      c.first = e.time;
      metrics_.first_token(e.replica, to_seconds(e.time - c.arrival), c.prompt);
      if (s && c.stream && c.endpoint == Endpoint::kChat) stream_data(*s, sse(role_chunk(c.ids)));
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
    if (s) stream_data(*s, sse(token_chunk(c.endpoint, c.ids, text, last ? std::optional(c.finish_reason) : std::nullopt)));
  }

  void on_finished(Call& c, http::Exchange* s) {
    c.done = true;
    const double e2e = to_seconds(c.last - c.arrival), ttft = to_seconds(c.first - c.arrival);
    metrics_.finished(c.replica, c.finish_reason, e2e, c.tokens > 1 ? (e2e - ttft) / static_cast<double>(c.tokens - 1) : 0,
                      c.tokens);
    if (s) {
      if (c.stream) {
        std::string tail;
        if (c.include_usage) tail += sse(usage_chunk(c.endpoint, c.ids, c.prompt, c.tokens));
        tail += "data: [DONE]\n\n";
        stream_data(*s, tail);
        end_stream(*s);
      } else {
        respond_json(*s, 200, full_response(c.endpoint, c.ids, c.text, c.finish_reason, c.prompt, c.tokens), &c);
      }
    }
    calls_.erase(c.id);
  }

  // The cluster refused it (longer than a replica's max_model_len): plan_request checks the
  // smallest max_model_len first, so this is a backstop.
  void on_rejected(Call& c, http::Exchange* s) {
    c.done = true;
    const ApiError e{400, "BadRequestError",
                     "This model's maximum context length is " + std::to_string(live_.max_model_len()) +
                         " tokens. However, you requested " + std::to_string(c.prompt + c.output) + " tokens.",
                     std::nullopt};
    if (s) {
      if (c.stream) {
        stream_data(*s, sse(error_body(e)) + "data: [DONE]\n\n");
        end_stream(*s);
      } else {
        respond_json(*s, 400, error_body(e), &c);
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
  net::io_context io{1};
  Emulator emulator(io, config, options);
  Emulator* e = &emulator;
  http::ServerLimits limits;
  limits.read_timeout_s = options.read_timeout_s;
  limits.max_connections = options.max_connections;
  limits.max_body_bytes = options.max_body_bytes;
  http::Routes routes;
  routes.handle = [e](const std::shared_ptr<http::Exchange>& ex) { e->handle(ex); };
  routes.unreadable = [limits](http::Unreadable why, const std::string& detail) {
    const int status = why == http::Unreadable::kBodyTooLarge ? 413 : why == http::Unreadable::kHeaderTooLarge ? 431 : 400;
    const std::string message =
        why == http::Unreadable::kBodyTooLarge
            ? "request body: more than " + std::to_string(limits.max_body_bytes) + " bytes (capsim emulate --max-body)"
        : why == http::Unreadable::kHeaderTooLarge
            ? "request header: more than " + std::to_string(limits.max_header_bytes) + " bytes"
            : "malformed HTTP request: " + detail;
    return reply_response(
        error_reply(ApiError{status, status == 400 ? "BadRequestError" : "RequestTooLargeError", message, std::nullopt}),
        false);
  };
  routes.internal_error = [](const std::string&) {
    return reply_response(error_reply(ApiError{500, "InternalServerError", "internal error", std::nullopt}), false);
  };
  http::Server server(io, tcp::endpoint{address, static_cast<unsigned short>(options.port)}, limits, std::move(routes));
  server.start();
  const std::string host = address.is_v6() ? "[" + options.bind + "]" : options.bind;
  std::cout << "capsim emulate: serving " << options.served_model << " on http://" << host << ":" << server.port()
            << " (time scale " << options.time_scale << "; Ctrl-C stops)" << std::endl;
  http::run_until_stopped(io, "capsim emulate", [&] {
    server.stop();
    io.stop();
  });
  emulator.stop_parsing();
}

}  // namespace capsim::emulate
