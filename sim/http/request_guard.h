// What both HTTP front ends (`capsim serve`, `capsim emulate`) check of a request before they
// route it: that it is meant for this server (Host), comes from no other web origin (Origin),
// carries JSON where JSON is expected (Content-Type) and, when the operator set one, the token
// (Authorization: Bearer). A page on any site a user opens can send requests to 127.0.0.1; these
// checks keep it from using the server (CSRF with "simple" text/plain POSTs) or reading its
// answers through a name that resolves to the loopback address (DNS rebinding).
//
// Contract: guard_request returns nothing when the request may go on, else the status (400 no
// Host on HTTP/1.1, 401 token, 403 Host or Origin, 415 Content-Type) and a message that says
// what to change. The checks read headers only, so they run before any body is looked at.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/beast/http/message.hpp>
#include <nlohmann/json.hpp>

namespace capsim::http {

struct GuardPolicy {
  // Host names accepted besides IP literals and "localhost" (`--allowed-host`): the names a
  // server bound beyond loopback is reached by.
  std::vector<std::string> allowed_hosts;
  // Required as "Authorization: Bearer TOKEN" when not empty (`--auth-token`, CAPSIM_TOKEN).
  std::string auth_token;
  // The flag names the messages cite ("capsim serve --allowed-host").
  std::string allowed_host_flag = "--allowed-host";
  std::string auth_token_flag = "--auth-token";
};

// The request's headers as the guard needs them (empty when absent).
struct RequestHeaders {
  unsigned version = 11;  // 10 or 11
  std::optional<std::string_view> host, origin, content_type, authorization;
};

// The guard's headers of a parsed request (views into it: it must outlive them).
RequestHeaders headers_of(const boost::beast::http::request_header<>& req);

struct Refusal {
  int status = 400;
  std::string message;
};

enum class Needs { kNothing = 0, kJsonBody = 1, kToken = 2, kJsonBodyAndToken = 3 };

std::optional<Refusal> guard_request(const RequestHeaders& h, const GuardPolicy& policy, Needs needs);

// Normalises the names given with `flag` (--allowed-host) to what guard_request compares:
// lower case, without a port. Throws capsim::Error naming the flag for one that is no host name.
void normalize_allowed_hosts(std::vector<std::string>& hosts, const std::string& flag);

// The host part of a Host header or Origin authority ("[::1]:8080" -> "::1", "a.b:80" -> "a.b"),
// lower-case; empty when malformed.
std::string host_name(std::string_view authority);

// JSON text that never throws on the strings it carries: bytes that are not UTF-8 (a client's
// header or a parser's message quoting one) become U+FFFD. Every error body goes through it.
std::string safe_dump(const nlohmann::json& j, int indent = -1);
std::string safe_dump(const nlohmann::ordered_json& j, int indent = -1);

}  // namespace capsim::http
