// What `capsim serve` decides about one request before anything runs: the guard (Host, Origin,
// token, Content-Type: sim/http/request_guard.h), the route, the answers of the GET endpoints,
// and a POST body's validation into a job. The transport (server.cc) calls these on its I/O
// thread; the fuzz target (fuzz/fuzz_http.cc) calls the same, through to the error body's bytes.
//
// Contract: neither function throws; every refusal is an Answer whose body is error_json's
// {"error": ..., "status": ...}, whatever bytes the request carried.
#pragma once

#include <boost/beast/http.hpp>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "sim/http/request_guard.h"
#include "sim/server/api.h"

namespace capsim::server {

struct Answer {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};
Answer error_answer(int status, const std::string& message);

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
// The text of a GET endpoint (cached by the transport: the catalogues never change in a process).
using GetAnswers = std::function<const std::string&(Endpoint)>;

struct Front {
  std::optional<Answer> answer;          // answered now: a refusal or a GET endpoint
  Endpoint endpoint = Endpoint::kHealth;  // otherwise: kPage (a file of the page) or a POST endpoint
};
Front front_of(const HttpRequest& req, const http::GuardPolicy& policy, const GetAnswers& get) noexcept;

struct Prepared {
  Job job;                        // set when the body is a valid request
  std::optional<Answer> refusal;  // otherwise
};
Prepared prepare_or_refuse(Endpoint e, std::string_view body, const Limits& limits) noexcept;

}  // namespace capsim::server
