// What `capsim emulate` decides about one request before it enters the simulation: the guard
// (sim/http/request_guard.h: Host, Origin, the API key, Content-Type) and the route. The server
// (server.cc) calls it on its I/O thread; the fuzz target (fuzz/fuzz_emulate_http.cc) calls it and
// the body's parsing and planning after it, through to the error body's bytes.
//
// Contract: never throws; a refusal carries vLLM's error body ({"error": {message, type, param,
// code}}) as text that is valid UTF-8 whatever the request held.
#pragma once

#include <boost/beast/http.hpp>
#include <optional>
#include <string>

#include "sim/emulate/openai_protocol.h"
#include "sim/http/request_guard.h"

namespace capsim::emulate {

enum class Route { kModels, kMetrics, kHealth, kCompletions, kChat };

struct Reply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};
// vLLM's error body for `e`, as text.
Reply error_reply(const ApiError& e);

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;

struct Front {
  std::optional<Reply> refusal;
  Route route = Route::kHealth;
};
// vLLM leaves /health and /metrics open when it has an API key, and so does this.
Front emulate_front(const HttpRequest& req, const http::GuardPolicy& policy) noexcept;

}  // namespace capsim::emulate
