// The request guard both HTTP front ends run first (sim/http/request_guard.h) and the error text
// that must survive any bytes a client sends.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "sim/http/request_guard.h"

using capsim::http::GuardPolicy;
using capsim::http::guard_request;
using capsim::http::Needs;
using capsim::http::RequestHeaders;

namespace {

RequestHeaders post(std::string_view host) {
  RequestHeaders h;
  h.host = host;
  h.content_type = "application/json";
  return h;
}

}  // namespace

TEST_CASE("http guard: Host must be an IP address, localhost or an allowed name (DNS rebinding)", "[http]") {
  GuardPolicy p;
  for (const char* ok : {"127.0.0.1", "127.0.0.1:8080", "localhost:8080", "LOCALHOST", "[::1]:8080", "10.1.2.3", "::1"}) {
    INFO(ok);
    CHECK_FALSE(guard_request(post(ok), p, Needs::kJsonBody));
  }
  // A page on attacker.example whose name now resolves to 127.0.0.1 sends its own name.
  const auto rebound = guard_request(post("attacker.example:8080"), p, Needs::kJsonBody);
  REQUIRE(rebound);
  CHECK(rebound->status == 403);
  CHECK_THAT(rebound->message, Catch::Contains("'attacker.example:8080' is not an address of this server") &&
                                   Catch::Contains("--allowed-host"));
  p.allowed_hosts = {"planner.example.com"};
  CHECK_FALSE(guard_request(post("Planner.Example.com:8080"), p, Needs::kJsonBody));
  CHECK(guard_request(post("planner.example.com.evil.test"), p, Needs::kJsonBody));
  // HTTP/1.1 without Host is malformed; HTTP/1.0 never had to send one.
  RequestHeaders none = post("x");
  none.host.reset();
  CHECK(guard_request(none, p, Needs::kJsonBody)->status == 400);
  none.version = 10;
  CHECK_FALSE(guard_request(none, p, Needs::kJsonBody));
}

TEST_CASE("http guard: a request from another web page (Origin) is refused, the server's own page is not", "[http]") {
  const GuardPolicy p;
  RequestHeaders h = post("127.0.0.1:8080");
  h.origin = "http://127.0.0.1:8080";
  CHECK_FALSE(guard_request(h, p, Needs::kJsonBody));
  h.origin = "https://evil.example";
  const auto r = guard_request(h, p, Needs::kJsonBody);
  REQUIRE(r);
  CHECK(r->status == 403);
  CHECK_THAT(r->message, Catch::Contains("requests from other web pages are refused"));
  h.origin = "null";  // a sandboxed frame or a file:// page
  CHECK(guard_request(h, p, Needs::kNothing)->status == 403);
  h.origin = "http://127.0.0.1:9999";  // another port is another origin
  CHECK(guard_request(h, p, Needs::kNothing)->status == 403);
}

TEST_CASE("http guard: JSON endpoints take only application/json bodies (no 'simple' cross-site POSTs)", "[http]") {
  const GuardPolicy p;
  RequestHeaders h = post("127.0.0.1");
  h.content_type = "application/json; charset=utf-8";
  CHECK_FALSE(guard_request(h, p, Needs::kJsonBody));
  h.content_type = "Application/JSON";
  CHECK_FALSE(guard_request(h, p, Needs::kJsonBody));
  for (const char* simple : {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"}) {
    h.content_type = simple;
    const auto r = guard_request(h, p, Needs::kJsonBody);
    REQUIRE(r);
    CHECK(r->status == 415);
    CHECK_THAT(r->message, Catch::Contains("Content-Type: '" + std::string(simple) + "'") &&
                               Catch::Contains("application/json"));
  }
  h.content_type.reset();
  CHECK(guard_request(h, p, Needs::kJsonBody)->status == 415);
  CHECK_FALSE(guard_request(h, p, Needs::kNothing));  // a GET has no body to check
}

TEST_CASE("http guard: with a token set, the API needs 'Authorization: Bearer TOKEN'", "[http]") {
  GuardPolicy p;
  p.auth_token = "s3cret-token";
  p.auth_token_flag = "--auth-token";
  RequestHeaders h = post("127.0.0.1");
  const auto missing = guard_request(h, p, Needs::kJsonBodyAndToken);
  REQUIRE(missing);
  CHECK(missing->status == 401);
  CHECK_THAT(missing->message, Catch::Contains("Authorization: missing") && Catch::Contains("--auth-token"));
  for (const char* wrong : {"Bearer s3cret-toke", "Bearer s3cret-token2", "Basic s3cret-token", "s3cret-token", "Bearer "}) {
    h.authorization = wrong;
    INFO(wrong);
    CHECK(guard_request(h, p, Needs::kJsonBodyAndToken)->status == 401);
  }
  h.authorization = "Bearer s3cret-token";
  CHECK_FALSE(guard_request(h, p, Needs::kJsonBodyAndToken));
  h.authorization = "bearer  s3cret-token ";
  CHECK_FALSE(guard_request(h, p, Needs::kJsonBodyAndToken));
  h.authorization.reset();
  CHECK_FALSE(guard_request(h, p, Needs::kNothing));  // liveness and the page stay open
}

TEST_CASE("http guard: an error text carrying bytes that are not UTF-8 still serialises", "[http]") {
  // The bytes of `GET /\xff`, as a 404 message quotes the path; nlohmann's dump() throws on them.
  const nlohmann::json body{{"error", std::string("/\xff\xfe: no such endpoint")}, {"status", 404}};
  CHECK_THROWS(body.dump());
  const std::string text = capsim::http::safe_dump(body);
  const auto back = nlohmann::json::parse(text);
  CHECK(back["status"] == 404);
  CHECK(back["error"] == "/\xEF\xBF\xBD\xEF\xBF\xBD: no such endpoint");  // two U+FFFD
  // A header value quoted in a refusal is reduced to printable ASCII.
  const auto r = guard_request(post("\xff\xfe.example"), GuardPolicy{}, Needs::kNothing);
  REQUIRE(r);
  CHECK_THAT(r->message, Catch::Contains("'??.example'"));
}
