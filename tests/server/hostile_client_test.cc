// capsim serve against hostile and careless clients (issue #35): bytes that are not UTF-8, pages
// of other sites (Host, Origin, Content-Type), a token, slow clients at the connection cap, and a
// heavy client beside a light one. A Server in this process on a free loopback port.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "sim/server/request_path.h"
#include "sim/server/server.h"
#include "tests/server/running_server.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;
using capsim::server::Server;
using capsim::server::ServerOptions;

using Running = capsim_test::RunningServer;

asio::io_context& client_io() {
  static asio::io_context ioc;
  return ioc;
}

tcp::socket connect(unsigned short port) {
  tcp::socket s(client_io());
  s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  return s;
}

struct Reply {
  int status = 0;
  std::string body;
  bool cors = false;  // any Access-Control-Allow-Origin header
};

Reply read_reply(tcp::socket& s) {
  beast::flat_buffer buf;
  bhttp::response_parser<bhttp::string_body> p;
  p.body_limit(64 << 20);
  beast::error_code ec;
  bhttp::read(s, buf, p, ec);
  if (ec) return {};
  const auto& r = p.get();
  return {static_cast<int>(r.result_int()), r.body(), r.find(bhttp::field::access_control_allow_origin) != r.end()};
}

// Raw bytes in, the reply out (status 0: the server closed without one).
Reply http_exchange(unsigned short port, const std::string& bytes) {
  tcp::socket s = connect(port);
  asio::write(s, asio::buffer(bytes));
  return read_reply(s);
}

std::string post_text(const std::string& target, const std::string& body, const std::string& extra_headers,
                      const std::string& host = "127.0.0.1") {
  return "POST " + target + " HTTP/1.1\r\nHost: " + host + "\r\n" + extra_headers + "Content-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}
const std::string kJson = "Content-Type: application/json\r\n";

std::string error_of(const Reply& r) { return nlohmann::json::parse(r.body)["error"].get<std::string>(); }

ServerOptions small(unsigned workers = 2, unsigned queue = 2) {
  ServerOptions o;
  o.workers = workers;
  o.queue = queue;
  o.read_timeout_s = 2;
  return o;
}

const std::string kFit = R"({"model": "llama-3.1-8b", "deployment": {"card": "h100-sxm"}})";
// A minute or more of simulation on one H100 (1.5e6 requests at 50/s).
const std::string kLong = R"({"model": "llama-3.1-8b", "workload": {"rate": 50, "requests": 1500000}})";

}  // namespace

TEST_CASE("serve: bytes that are not UTF-8 get a JSON 4xx and the server keeps serving", "[server][hostile]") {
  // On 64e18c4 the 404 message quoting the path made error_json throw on the I/O thread and the
  // process exit.
  Running srv(small());
  const Reply path = http_exchange(srv.port(), "GET /\xff HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  REQUIRE(path.status == 404);
  CHECK_THAT(error_of(path), Catch::Contains("/\xEF\xBF\xBD: no such endpoint"));
  // A body whose name holds an invalid byte: the JSON parser's message quotes it.
  const Reply body = http_exchange(srv.port(), post_text("/v1/simulate", "{\"mo\xff" "del\": 1}", kJson));
  REQUIRE(body.status == 400);
  CHECK_THAT(error_of(body), Catch::Contains("malformed JSON"));
  CHECK(http_exchange(srv.port(), "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status == 200);
}

TEST_CASE("serve: pages of other sites cannot use it (Host, Origin, Content-Type), no CORS is sent", "[server][hostile]") {
  Running srv(small());
  const std::string url = "127.0.0.1:" + std::to_string(srv.port());
  // DNS rebinding: the page's own name, now resolving to 127.0.0.1.
  const Reply rebound = http_exchange(srv.port(), "GET /v1/cards HTTP/1.1\r\nHost: attacker.example:" +
                                                 std::to_string(srv.port()) + "\r\n\r\n");
  CHECK(rebound.status == 403);
  CHECK_THAT(error_of(rebound), Catch::Contains("not an address of this server"));
  // A form or fetch() from another site: Origin names it.
  const Reply cross = http_exchange(srv.port(), post_text("/v1/fit", kFit, kJson + "Origin: https://evil.example\r\n", url));
  CHECK(cross.status == 403);
  // A "simple" request needs no preflight: text/plain is refused as not JSON.
  const Reply plain = http_exchange(srv.port(), post_text("/v1/fit", kFit, "Content-Type: text/plain\r\n", url));
  CHECK(plain.status == 415);
  CHECK_THAT(error_of(plain), Catch::Contains("application/json"));
  // The server's own page, and curl with the JSON header, go through; nothing grants CORS.
  const Reply own = http_exchange(srv.port(), post_text("/v1/fit", kFit, kJson + "Origin: http://" + url + "\r\n", url));
  CHECK(own.status == 200);
  CHECK_FALSE(own.cors);
  const Reply preflight = http_exchange(srv.port(), "OPTIONS /v1/fit HTTP/1.1\r\nHost: " + url +
                                                   "\r\nOrigin: https://evil.example\r\nAccess-Control-Request-Method: POST\r\n\r\n");
  CHECK(preflight.status >= 400);
  CHECK_FALSE(preflight.cors);
}

TEST_CASE("serve: --auth-token guards the API, /healthz stays open", "[server][hostile]") {
  ServerOptions o = small();
  o.guard.auth_token = "t0ken";
  Running srv(o);
  CHECK(http_exchange(srv.port(), post_text("/v1/fit", kFit, kJson)).status == 401);
  CHECK(http_exchange(srv.port(), post_text("/v1/fit", kFit, kJson + "Authorization: Bearer nope\r\n")).status == 401);
  CHECK(http_exchange(srv.port(), "GET /v1/cards HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status == 401);
  CHECK(http_exchange(srv.port(), post_text("/v1/fit", kFit, kJson + "Authorization: Bearer t0ken\r\n")).status == 200);
  CHECK(http_exchange(srv.port(), "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status == 200);
}

TEST_CASE("serve: fit, finetune, roofline and kernels are answered while simulations fill every worker and the queue", "[server][hostile]") {
  // One worker, no queue: on 64e18c4 the fit waited behind the simulation (429 "queue is full").
  ServerOptions o = small(1, 0);
  o.limits.max_requests = 2'000'000;
  Running srv(o);
  tcp::socket heavy = connect(srv.port());
  asio::write(heavy, asio::buffer(post_text("/v1/simulate", kLong, kJson)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // admitted and running
  const Reply another = http_exchange(srv.port(), post_text("/v1/simulate", kFit, kJson));
  CHECK(another.status == 429);
  const Reply fit = http_exchange(srv.port(), post_text("/v1/fit", kFit, kJson));
  CHECK(fit.status == 200);
  CHECK(nlohmann::json::parse(fit.body).contains("fits"));
  // finetune is arithmetic too: the light lane, not a 429 behind the simulation.
  const Reply finetune = http_exchange(
      srv.port(), post_text("/v1/finetune", R"({"model": "llama-3.1-8b", "method": "lora", "cards": ["h100-sxm"]})", kJson));
  CHECK(finetune.status == 200);
  // So are roofline and kernels.
  const Reply roofline = http_exchange(
      srv.port(), post_text("/v1/roofline", R"({"model": "llama-3.1-8b", "deployment": {"card": "h100-sxm"}})", kJson));
  CHECK(roofline.status == 200);
  const Reply kernels = http_exchange(srv.port(), post_text("/v1/kernels", R"({"card": "h100-sxm"})", kJson));
  CHECK(kernels.status == 200);
}

TEST_CASE("serve: one client address holds at most its share of the simulations", "[server][hostile]") {
  ServerOptions o = small(2, 6);
  o.max_jobs_per_client = 2;
  o.limits.max_requests = 2'000'000;
  Running srv(o);
  tcp::socket a = connect(srv.port()), b = connect(srv.port());
  asio::write(a, asio::buffer(post_text("/v1/simulate", kLong, kJson)));
  asio::write(b, asio::buffer(post_text("/v1/simulate", kLong, kJson)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Reply third = http_exchange(srv.port(), post_text("/v1/simulate", kLong, kJson));
  REQUIRE(third.status == 429);
  CHECK_THAT(error_of(third), Catch::Contains("already has 2 simulations admitted"));
  a.close();  // its job is cancelled and its slot freed
  const auto start = std::chrono::steady_clock::now();
  int status = 429;
  while (status == 429 && std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    status = http_exchange(srv.port(), post_text("/v1/simulate", R"({"model": "llama-3.1-8b", "workload": {"rate": 4, "requests": 20}})", kJson)).status;
  }
  CHECK(status == 200);
}

// Slow clients, the connection cap and oversized requests: tests/http/hostile_front_ends_test.cc,
// for serve and emulate alike.

TEST_CASE("serve request path: every refusal is a JSON answer, whatever the request held", "[server][hostile]") {
  // The function the transport and the fuzz target share (sim/server/request_path.h).
  capsim::server::HttpRequest req(bhttp::verb::get, "/\xc3\x28", 11);
  req.set(bhttp::field::host, "127.0.0.1");
  const std::string nothing;
  const auto front = capsim::server::front_of(req, {}, [&](capsim::server::Endpoint) -> const std::string& { return nothing; });
  REQUIRE(front.answer);
  CHECK(front.answer->status == 404);
  CHECK(nlohmann::json::parse(front.answer->body)["status"] == 404);
  const auto prepared = capsim::server::prepare_or_refuse(capsim::server::Endpoint::kSimulate, "{\"\xff\": 1}", {});
  REQUIRE(prepared.refusal);
  CHECK(prepared.refusal->status == 400);
  CHECK(nlohmann::json::parse(prepared.refusal->body)["status"] == 400);
}
