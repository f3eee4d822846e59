// `capsim emulate` as a process, spoken to over loopback HTTP with Boost.Beast (so the server is
// tested even where node is absent; tests/emulate/client does the same with the OpenAI client):
// bad flags, a whole chat answer, a stream whose client leaves (abort, KV freed), /metrics.
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>  // before Boost 1.74's asio, whose awaitable.hpp uses std::exchange

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/emulate/emulator_process.h"
#include "tests/support/skip.h"

#ifndef CAPSIM_BINARY
#error "CAPSIM_BINARY must name the built capsim executable (the build defines it)"
#endif

namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

// Built with AddressSanitizer: GCC says so with __SANITIZE_ADDRESS__, clang with __has_feature.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CAPSIM_HAS_ASAN 1
#endif
#endif
#ifndef CAPSIM_HAS_ASAN
#define CAPSIM_HAS_ASAN 0
#endif
using nlohmann::json;

using capsim_test::connect;
using capsim_test::Emulator;
using capsim_test::metric;
using capsim_test::request;

}  // namespace

TEST_CASE("emulate server: bad flags are exit 2 naming the flag", "[emulate]") {
  const auto status_of = [](const std::string& args) {
    const std::string cmd = "'" + std::string(CAPSIM_BINARY) + "' emulate " + args + " >/dev/null 2>&1";
    const int raw = std::system(cmd.c_str());
    REQUIRE(WIFEXITED(raw));
    return WEXITSTATUS(raw);
  };
  CHECK(status_of("--host not-an-address") == 2);
  CHECK(status_of("--port 70000") == 2);
  CHECK(status_of("--time-scale 0") == 2);
  // Outside 0.001..10000 simulated time overflowed (1e300) or a deadline became infinite (1e-300):
  // on 64e18c4 both were accepted and no request was ever answered.
  CHECK(status_of("--time-scale 1e300") == 2);
  CHECK(status_of("--time-scale 1e-300") == 2);
  CHECK(status_of("--max-connections 0") == 2);
  CHECK(status_of("--model no-such-model") == 2);
}

TEST_CASE("emulate server: a chat answer, a client that leaves mid-stream, /metrics", "[emulate]") {
  // Ten times faster than real time, so the test takes well under a second.
  Emulator emu("--model llama-3.1-8b --card h100-sxm --time-scale 10 --max-model-len 8192");
  const unsigned short port = emu.port();

  auto models = request(port, http::verb::get, "/v1/models");
  REQUIRE(models.result_int() == 200);
  CHECK(json::parse(models.body())["data"][0]["max_model_len"] == 8192);

  // A whole answer: 5 tokens of filler, usage from the estimate (user "Hi": 1 + 4 + 3 = 8).
  auto chat = request(port, http::verb::post, "/v1/chat/completions",
                      R"({"model": "llama-3.1-8b", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5})");
  REQUIRE(chat.result_int() == 200);
  const json c = json::parse(chat.body());
  CHECK(c["choices"][0]["message"]["content"] == "capsim emulates the timing of");
  CHECK(c["choices"][0]["finish_reason"] == "length");
  CHECK(c["usage"]["prompt_tokens"] == 8);
  CHECK(c["usage"]["completion_tokens"] == 5);

  // Too long: 8,192 token ids with max_model_len 8,192.
  std::string ids = "[";
  for (int i = 0; i < 8192; ++i) ids += (i ? ",1" : "1");
  ids += "]";
  auto too_long = request(port, http::verb::post, "/v1/completions", R"({"prompt": )" + ids + "}");
  CHECK(too_long.result_int() == 400);
  CHECK(json::parse(too_long.body())["error"]["type"] == "BadRequestError");
  CHECK(request(port, http::verb::get, "/nowhere").result_int() == 404);
  CHECK(request(port, http::verb::get, "/v1/chat/completions").result_int() == 405);

  {
    // A stream of up to 4,000 tokens whose client leaves after its first 3 content chunks.
    net::io_context io;
    tcp::socket s = connect(io, port);
    const std::string body =
        R"({"messages": [{"role": "user", "content": "Tell me everything."}], "max_tokens": 4000, "ignore_eos": true, "stream": true})";
    const std::string req = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    net::write(s, net::buffer(req));
    std::string got;
    char buf[4096];
    const auto content_chunks = [&] {
      std::size_t n = 0;
      for (auto at = got.find("\"content\":\""); at != std::string::npos; at = got.find("\"content\":\"", at + 1)) {
        if (got.compare(at + 11, 1, "\"") != 0) ++n;  // not the role chunk's empty content
      }
      return n;
    };
    while (content_chunks() < 3) {
      boost::system::error_code ec;
      const std::size_t n = s.read_some(net::buffer(buf), ec);
      REQUIRE_FALSE(ec);
      got.append(buf, n);
    }
    CHECK(got.rfind("HTTP/1.1 200", 0) == 0);
    CHECK(got.find("text/event-stream") != std::string::npos);
    CHECK(got.find("chat.completion.chunk") != std::string::npos);
  }  // the socket closes: the client left
  // The server sees the close and aborts the request; the step that holds it ends first, then its
  // KV is freed (poll up to 10 s for both: a loaded CI machine can delay the server's threads).
  const std::string e0 = "{engine=\"0\",model_name=\"llama-3.1-8b\"}";
  std::string m;
  for (int i = 0; i < 500; ++i) {
    m = request(port, http::verb::get, "/metrics").body();
    if (m.find("finished_reason=\"abort\"} 1") != std::string::npos &&
        m.find("vllm:num_requests_running" + e0 + " 0\n") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(metric(m, "vllm:request_success_total{engine=\"0\",model_name=\"llama-3.1-8b\",finished_reason=\"abort\"}") == 1);
  CHECK(metric(m, "vllm:request_success_total{engine=\"0\",model_name=\"llama-3.1-8b\",finished_reason=\"length\"}") == 1);
  CHECK(metric(m, "vllm:num_requests_running" + e0) == 0);
  CHECK(metric(m, "vllm:kv_cache_usage_perc" + e0) == 0);
  // 5 tokens of the chat plus those the stream got before the abort: far fewer than 4,000 (at time
  // scale 10 a token takes ~0.7 ms of wall time, so 1,000 allows ~0.7 s for the server to notice
  // the close even on a loaded machine).
  CHECK(metric(m, "vllm:generation_tokens_total" + e0) < 1000);
}

// Regression: a client leaving while a chunk was being written freed that chunk under the write
// and made its completion pop an empty queue (glibc: "double free detected", the emulator died
// about one time in five). Twenty clients leave mid-stream, one after another; the emulator must
// still answer and count twenty aborts.
TEST_CASE("emulate server: clients that leave mid-write do not bring it down", "[emulate]") {
  Emulator emu("--model llama-3.1-8b --card h100-sxm --time-scale 20");
  const unsigned short port = emu.port();
  const std::string body =
      R"({"messages": [{"role": "user", "content": "Go on."}], "max_tokens": 4000, "ignore_eos": true, "stream": true})";
  const std::string req = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  for (int i = 0; i < 20; ++i) {
    net::io_context io;
    tcp::socket s = connect(io, port);
    net::write(s, net::buffer(req));
    char buf[4096];
    std::size_t got = 0;
    while (got < 2000) {  // the headers and a few chunks, then leave while more are on the way
      boost::system::error_code ec;
      got += s.read_some(net::buffer(buf), ec);
      REQUIRE_FALSE(ec);
    }
  }
  std::string m;
  for (int i = 0; i < 500; ++i) {
    m = request(port, http::verb::get, "/metrics").body();
    if (m.find("finished_reason=\"abort\"} 20") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(metric(m, "vllm:request_success_total{engine=\"0\",model_name=\"llama-3.1-8b\",finished_reason=\"abort\"}") == 20);
}

// CPU seconds (user + system) the process `pid` has used, from /proc/PID/stat.
static double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));  // after "pid (comm) "
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(f);  // utime, stime
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

TEST_CASE("emulate server: out of file descriptors it waits instead of spinning, then serves again",
          "[emulate]") {
  // 64 descriptors, 80 idle clients: accept fails with EMFILE while they stay. An immediate
  // retry used to fail again at once, a whole core busy and no request answered.
#if defined(__SANITIZE_ADDRESS__) || CAPSIM_HAS_ASAN
  // The sanitizers' runtime needs descriptors of its own (UBSan's vptr check probes memory
  // through a pipe): out of them, it reports the emulator's valid timer as an invalid object
  // and stops the process. The plain build (ctest) runs this test.
  CAPSIM_SKIP("needs a process that can run out of file descriptors; the sanitizer runtime cannot");
#endif
  Emulator emu("--model llama-3.1-8b --card h100-sxm", "ulimit -n 64; ");
  const unsigned short port = emu.port();
  std::vector<tcp::socket> idle;
  net::io_context io;
  for (int i = 0; i < 80; ++i) {
    tcp::socket s(io);
    s.connect({net::ip::address_v4::loopback(), port});  // the kernel's backlog takes them all
    idle.push_back(std::move(s));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double before = cpu_seconds(emu.pid());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double used = cpu_seconds(emu.pid()) - before;
  INFO("CPU seconds in 2 s with the descriptors used up: " << used);
  CHECK(used < 0.5);  // a spinning accept loop takes ~2 s of CPU here
  for (auto& s : idle) {
    boost::system::error_code ignored;
    s.close(ignored);
  }
  idle.clear();
  CHECK(request(port, http::verb::get, "/health").result() == http::status::ok);
}

namespace {

// Raw bytes in, the status and body out (0: closed without an answer).
std::pair<int, std::string> raw_exchange(unsigned short port, const std::string& bytes) {
  net::io_context io;
  tcp::socket s = connect(io, port);
  net::write(s, net::buffer(bytes));
  boost::beast::flat_buffer b;
  http::response_parser<http::string_body> p;
  p.body_limit(1 << 20);
  boost::system::error_code ec;
  http::read(s, b, p, ec);
  if (ec) return {0, ""};
  return {static_cast<int>(p.get().result_int()), p.get().body()};
}

std::string chat_post(const std::string& body, const std::string& headers = "Content-Type: application/json\r\n",
                      const std::string& host = "127.0.0.1") {
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: " + host + "\r\n" + headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

const std::string kHello = R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3})";

}  // namespace

TEST_CASE("emulate server: bodies past the depth limit are refused, and streams go on", "[emulate][hostile]") {
  // The size limit (413), the read timeout and the connection cap: tests/http/hostile_front_ends_test.cc.
  Emulator emu("--model llama-3.1-8b --card h100-sxm --time-scale 20 --max-body 64");
  const unsigned short port = emu.port();
  // Nested 20000 deep in a field nobody reads: refused by its depth, not parsed.
  const std::string deep = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"x\": " + std::string(20000, '[') +
                           std::string(20000, ']') + "}";
  const auto nested = raw_exchange(port, chat_post(deep));
  CHECK(nested.first == 400);
  CHECK_THAT(nested.second, Catch::Contains("nests deeper than 128 levels"));
  CHECK(raw_exchange(port, chat_post(kHello)).first == 200);
}

TEST_CASE("emulate server: pages of other sites cannot use it, --api-key guards /v1/ as vLLM's does", "[emulate][hostile]") {
  Emulator emu("--model llama-3.1-8b --card h100-sxm --time-scale 20 --api-key k3y");
  const unsigned short port = emu.port();
  const std::string key = "Content-Type: application/json\r\nAuthorization: Bearer k3y\r\n";
  CHECK(raw_exchange(port, chat_post(kHello)).first == 401);
  CHECK(raw_exchange(port, chat_post(kHello, key)).first == 200);
  CHECK(raw_exchange(port, chat_post(kHello, key, "rebound.example:8000")).first == 403);
  CHECK(raw_exchange(port, chat_post(kHello, key + "Origin: https://evil.example\r\n")).first == 403);
  CHECK(raw_exchange(port, chat_post(kHello, "Content-Type: text/plain\r\nAuthorization: Bearer k3y\r\n")).first == 415);
  CHECK(raw_exchange(port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").first == 200);
  CHECK(raw_exchange(port, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").first == 200);
  const auto bad_bytes = raw_exchange(port, "GET /\xff HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  CHECK(bad_bytes.first == 404);
}

TEST_CASE("emulate server: a stream its client does not read is given up, not held in memory", "[emulate][hostile]") {
  // 100,000 tokens of ~250 bytes each (25 MB) to a client that reads none: once 4 MiB wait
  // beyond the sockets' buffers the server treats the client as gone and aborts the request (on
  // b471ff4 every chunk was queued until the request finished, "length").
  Emulator emu("--model llama-3.1-8b --card h100-sxm --time-scale 1000");
  const unsigned short port = emu.port();
  net::io_context io;
  tcp::socket s(io);
  s.open(tcp::v4());
  s.set_option(net::socket_base::receive_buffer_size(4096));
  s.connect({net::ip::address_v4::loopback(), port});
  const std::string body =
      R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 100000, "ignore_eos": true, "stream": true})";
  net::write(s, net::buffer("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
  const std::string done = "vllm:request_success_total{engine=\"0\",model_name=\"llama-3.1-8b\",finished_reason=";
  std::string m;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
    m = request(port, http::verb::get, "/metrics").body();
    if (m.find(done + "\"abort\"} 1") != std::string::npos || m.find(done + "\"length\"} 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(metric(m, done + "\"abort\"}") == 1);
  CHECK(metric(m, done + "\"length\"}") == 0);
  // It never read a byte, yet other clients are answered.
  CHECK(request(port, http::verb::get, "/health").result() == http::status::ok);
}

TEST_CASE("emulate server: the same long prompt sent again hits the prefix cache, as on vLLM", "[emulate]") {
  // On 64e18c4 every request was unique content: three sends of one 8k-token prompt cost the
  // same and vllm:prefix_cache_hits_total stayed 0.
  Emulator emu("--model llama-3.1-8b --card h100-sxm --time-scale 20");
  const unsigned short port = emu.port();
  // 32768 characters = 8192 estimated tokens = 512 blocks of 16; a hit leaves the last token to
  // compute, so it reuses floor((8192 - 1) / 16) = 511 blocks = 8176 tokens.
  const std::string body = json{{"prompt", std::string(32768, 'x')}, {"max_tokens", 1}}.dump();
  const std::string hits = "vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"llama-3.1-8b\"}";
  const std::string queries = "vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"llama-3.1-8b\"}";
  REQUIRE(request(port, http::verb::post, "/v1/completions", body).result_int() == 200);
  CHECK(metric(request(port, http::verb::get, "/metrics").body(), hits) == 0);
  REQUIRE(request(port, http::verb::post, "/v1/completions", body).result_int() == 200);
  REQUIRE(request(port, http::verb::post, "/v1/completions", body).result_int() == 200);
  const std::string m = request(port, http::verb::get, "/metrics").body();
  CHECK(metric(m, hits) == 2 * 8176);
  CHECK(metric(m, queries) == 3 * 8192);
}

// On 64e18c4 every emulator numbered its answers chatcmpl-0000000000000000 upwards, so two behind
// one load balancer (or one restarted) gave clients the same ids; vLLM's ids are random.
TEST_CASE("emulate server: two emulator processes answer with different response ids", "[emulate]") {
  const std::string args = "--model llama-3.1-8b --card h100-sxm --time-scale 10 --max-model-len 8192 --seed 1";
  const std::string body = R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})";
  const auto first_ids = [&] {
    Emulator emu(args);
    std::vector<std::string> ids;
    for (const char* route : {"/v1/chat/completions", "/v1/completions"}) {
      const std::string b = std::string(route) == "/v1/completions" ? R"({"prompt": "Hi", "max_tokens": 2})" : body;
      auto res = request(emu.port(), http::verb::post, route, b);
      REQUIRE(res.result_int() == 200);
      ids.push_back(json::parse(res.body())["id"].get<std::string>());
    }
    return ids;
  };
  const std::vector<std::string> a = first_ids(), b = first_ids();
  INFO(a[0] << " " << b[0]);
  CHECK(std::regex_match(a[0], std::regex("chatcmpl-[0-9a-f]{32}")));
  CHECK(std::regex_match(a[1], std::regex("cmpl-[0-9a-f]{32}")));
  CHECK(a[0] != b[0]);
  CHECK(a[1] != b[1]);
  // Within one process the ids differ too, and share the process's prefix.
  CHECK(a[0].substr(9, 16) == a[1].substr(5, 16));
  CHECK(a[0].substr(9) != a[1].substr(5));
}
