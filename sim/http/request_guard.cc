#include "sim/http/request_guard.h"

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <cctype>

#include "sim/core/error.h"

namespace capsim::http {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_ip_literal(const std::string& host) {
  boost::system::error_code ec;
  (void)boost::asio::ip::make_address(host, ec);
  return !ec;
}

// Compares without an early exit on the first differing byte, so the time an answer takes says
// nothing about how much of a guessed token was right.
bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

// A quoted header value for a message: printable ASCII as is, anything else as '?', at most 80.
std::string quoted(std::string_view v) {
  std::string out = "'";
  for (std::size_t i = 0; i < v.size() && i < 80; ++i) {
    const unsigned char c = static_cast<unsigned char>(v[i]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  return out + (v.size() > 80 ? "...'" : "'");
}

}  // namespace

RequestHeaders headers_of(const boost::beast::http::request_header<>& req) {
  namespace bhttp = boost::beast::http;
  const auto header = [&](bhttp::field f) -> std::optional<std::string_view> {
    const auto it = req.find(f);
    if (it == req.end()) return std::nullopt;
    return std::string_view(it->value().data(), it->value().size());
  };
  RequestHeaders h;
  h.version = req.version();
  h.host = header(bhttp::field::host);
  h.origin = header(bhttp::field::origin);
  h.content_type = header(bhttp::field::content_type);
  h.authorization = header(bhttp::field::authorization);
  return h;
}

void normalize_allowed_hosts(std::vector<std::string>& hosts, const std::string& flag) {
  for (std::string& h : hosts) {
    const std::string name = host_name(h);
    if (name.empty()) throw Error(flag + ": '" + h + "' is not a host name (e.g. planner.example.com)");
    h = name;
  }
}

std::string host_name(std::string_view authority) {
  authority = trim(authority);
  if (authority.empty()) return "";
  if (authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return "";
    const std::string_view rest = authority.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return "";
    return lower(authority.substr(1, close - 1));
  }
  const std::size_t colon = authority.find(':');
  if (colon != std::string_view::npos && authority.find(':', colon + 1) != std::string_view::npos) {
    return lower(authority);  // a bare IPv6 literal, as some clients send it
  }
  return lower(authority.substr(0, colon));
}

std::optional<Refusal> guard_request(const RequestHeaders& h, const GuardPolicy& policy, Needs needs) {
  // Host: HTTP/1.1 requires it; its name must be this server's (an IP literal, localhost, or a
  // name the operator allowed). A page that rebinds its own domain to 127.0.0.1 sends its domain.
  if (!h.host) {
    if (h.version >= 11) return Refusal{400, "Host: missing; HTTP/1.1 requests must name the server they are for"};
  } else {
    const std::string name = host_name(*h.host);
    const bool known = !name.empty() &&
                       (name == "localhost" || is_ip_literal(name) ||
                        std::find(policy.allowed_hosts.begin(), policy.allowed_hosts.end(), name) != policy.allowed_hosts.end());
    if (!known) {
      return Refusal{403, "Host: " + quoted(*h.host) + " is not an address of this server; accepted: IP addresses, " +
                              "localhost" + (policy.allowed_hosts.empty() ? std::string() : ", the names given with " + policy.allowed_host_flag) +
                              " (start the server with " + policy.allowed_host_flag + " NAME to accept a name; this guards against DNS rebinding)"};
    }
  }
  // Origin: a browser names the page that sent the request. Only the server's own page (same
  // host and port as the Host header) may use it; no CORS header is ever sent either.
  if (h.origin) {
    const std::string_view origin = trim(*h.origin);
    const std::size_t scheme = origin.find("://");
    const std::string authority = scheme == std::string_view::npos ? std::string() : lower(origin.substr(scheme + 3));
    if (authority.empty() || !h.host || authority != lower(trim(*h.host))) {
      return Refusal{403, "Origin: " + quoted(origin) + ": requests from other web pages are refused (the server's own page is " +
                              (h.host ? "http://" + std::string(trim(*h.host)) : std::string("its address")) + ")"};
    }
  }
  if ((static_cast<int>(needs) & static_cast<int>(Needs::kToken)) && !policy.auth_token.empty()) {
    const std::string_view given = h.authorization ? trim(*h.authorization) : std::string_view();
    const std::string_view prefix = "Bearer ";
    const bool bearer = given.size() > prefix.size() && lower(given.substr(0, prefix.size())) == "bearer ";
    if (!bearer || !same_secret(trim(given.substr(prefix.size())), policy.auth_token)) {
      return Refusal{401, std::string(h.authorization ? "Authorization: wrong token" : "Authorization: missing") +
                              "; this server requires 'Authorization: Bearer TOKEN' (the token its operator set with " +
                              policy.auth_token_flag + ")"};
    }
  }
  if (static_cast<int>(needs) & static_cast<int>(Needs::kJsonBody)) {
    const std::string type = h.content_type ? lower(trim(h.content_type->substr(0, h.content_type->find(';')))) : "";
    if (type != "application/json") {
      return Refusal{415, "Content-Type: " + (h.content_type ? quoted(*h.content_type) : std::string("missing")) +
                              "; the body must be JSON sent as 'Content-Type: application/json' (with curl: -H 'Content-Type: application/json')"};
    }
  }
  return std::nullopt;
}

std::string safe_dump(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}
std::string safe_dump(const nlohmann::ordered_json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace capsim::http
