// capsim serve over real loopback sockets (sim/server/, docs/server.md): a Server in this process
// on a free port, driven by a plain HTTP/1.1 client. Answers are compared byte for byte with
// what the built capsim prints for the same command with --json -.
#include <sys/wait.h>

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "sim/server/server.h"
#include "tests/server/running_server.h"

#if !defined(CAPSIM_BINARY) || !defined(CAPSIM_DATA_DIR)
#error "CAPSIM_BINARY and CAPSIM_DATA_DIR must name the built capsim and the source tree (the build defines them)"
#endif

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using capsim::server::Server;
using capsim::server::ServerOptions;

using Running = capsim_test::RunningServer;

struct Reply {
  int status = 0;
  std::string body;
  std::string retry_after;
  std::string content_type;
};

tcp::socket connect(unsigned short port) {
  static asio::io_context ioc;
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  return s;
}

Reply read_reply(tcp::socket& s) {
  beast::flat_buffer buf;
  http::response_parser<http::string_body> p;
  p.body_limit(64 << 20);
  http::read(s, buf, p);
  const auto& r = p.get();
  return {static_cast<int>(r.result_int()), r.body(), std::string(r[http::field::retry_after]), std::string(r[http::field::content_type])};
}

Reply request(unsigned short port, http::verb verb, const std::string& target, const std::string& body = "") {
  tcp::socket s = connect(port);
  http::request<http::string_body> req(verb, target, 11);
  req.set(http::field::host, "127.0.0.1");
  if (verb == http::verb::post) req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  http::write(s, req);
  return read_reply(s);
}

Reply get(unsigned short port, const std::string& target) { return request(port, http::verb::get, target); }
Reply post(unsigned short port, const std::string& target, const std::string& body) {
  return request(port, http::verb::post, target, body);
}

// stdout of `capsim ARGS` (the built binary, the source tree's data).
std::string capsim_stdout(const std::string& args) {
  const std::string cmd = "env -u CAPSIM_DATA_DIR '" + std::string(CAPSIM_BINARY) + "' " + args + " 2>/dev/null";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  ::pclose(pipe);
  return out;
}

ServerOptions small(unsigned workers = 2, unsigned queue = 2) {
  ServerOptions o;
  o.workers = workers;
  o.queue = queue;
  o.read_timeout_s = 2;
  return o;
}

}  // namespace

TEST_CASE("server: GET answers are the catalogue listings as `capsim list --json -` prints them", "[server]") {
  Running srv(small());
  const Reply health = get(srv.port(), "/healthz");
  CHECK(health.status == 200);
  CHECK(nlohmann::json::parse(health.body) == nlohmann::json{{"status", "ok"}});
  for (const char* what : {"cards", "models", "engines", "serving", "links"}) {
    INFO(what);
    const Reply r = get(srv.port(), std::string("/v1/") + what);
    CHECK(r.status == 200);
    CHECK(r.content_type == "application/json");
    CHECK(r.body == capsim_stdout(std::string("list ") + what + " --json -"));
  }
  const Reply api = get(srv.port(), "/openapi.json");
  REQUIRE(api.status == 200);
  const auto doc = nlohmann::json::parse(api.body);
  CHECK(doc["openapi"] == "3.0.3");
  for (const char* p : {"/v1/fit", "/v1/simulate", "/v1/plan", "/v1/capacity", "/v1/compare", "/v1/check",
                        "/v1/batch-serve", "/v1/finetune", "/v1/calibrate", "/v1/calibrate/runs", "/v1/roofline",
                        "/v1/kernels", "/v1/diff", "/v1/sweep"}) {
    INFO(p);
    CHECK(capsim::server::route("POST", p) != capsim::server::Endpoint::kHealth);
    CHECK(doc["paths"].contains(p));
    CHECK(doc["paths"][p].contains("post"));
  }
  // Every body schema the paths refer to is there.
  for (const auto& [path, item] : doc["paths"].items()) {
    if (!item.contains("post") || !item["post"].contains("requestBody")) continue;
    const auto& body = item["post"]["requestBody"];
    if (!body.contains("$ref")) continue;
    const std::string ref = body["$ref"];
    INFO(path << " -> " << ref);
    CHECK(doc["components"]["requestBodies"].contains(ref.substr(ref.rfind('/') + 1)));
  }
}

TEST_CASE("server: POST /v1/simulate and /v1/fit answer exactly what the commands print with --json -", "[server]") {
  Running srv(small());
  // The same scenario as a body and as flags: 300 requests at 4/s, 512 in and 128 out (defaults).
  const Reply sim = post(srv.port(), "/v1/simulate",
                         R"({"model": "llama-3.1-8b", "deployment": {"card": "rtx-4090"},
                             "workload": {"rate": 4, "requests": 300}, "slo": {"ttft_p95": "1s"}, "seed": 7})");
  REQUIRE(sim.status == 200);
  CHECK(sim.body == capsim_stdout("simulate --model llama-3.1-8b --card rtx-4090 --rate 4 --requests 300 "
                                  "--slo 'ttft_p95<=1s' --seed 7 --json -"));
  CHECK(nlohmann::json::parse(sim.body)["completed"] == 300);

  const Reply fit = post(srv.port(), "/v1/fit", R"({"model": "llama-3.1-70b", "deployment": {"card": "rtx-4090"}})");
  REQUIRE(fit.status == 200);
  CHECK(fit.body == capsim_stdout("fit --model llama-3.1-70b --card rtx-4090 --json -"));
  // 70B in bf16 is ~141 GB of weights: it cannot fit on one 24 GB card, and the answer says what would.
  const auto f = nlohmann::json::parse(fit.body);
  CHECK(f["fits"] == false);
  CHECK(!f["alternatives"].empty());

  // A pasted config.json is the same model as the catalogue's: the same memory plan on an L4
  // (only the name differs: the answer names it by a hash of its text).
  std::ifstream in(std::string(CAPSIM_DATA_DIR) + "/models/llama-3.1-8b/config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  const Reply pasted = post(srv.port(), "/v1/fit", nlohmann::json{{"model_config", config}, {"deployment", {{"card", "l4"}}}}.dump());
  const Reply named = post(srv.port(), "/v1/fit", R"({"model": "llama-3.1-8b", "deployment": {"card": "l4"}})");
  REQUIRE(pasted.status == 200);
  REQUIRE(named.status == 200);
  const auto p = nlohmann::json::parse(pasted.body), n = nlohmann::json::parse(named.body);
  CHECK(p["kv_tokens"] == n["kv_tokens"]);
  CHECK(p["weight_bytes_total"] == n["weight_bytes_total"]);
  CHECK(p["per_gpu"] == n["per_gpu"]);
  CHECK(p["model"] != n["model"]);
  // Held in memory, nothing written to disk: the same paste is answered byte for byte the same
  // (on b471ff4 each answer named the temporary file it was written to, /tmp/capsim-serve-XXXXXX).
  CHECK_THAT(p["model"].get<std::string>(), Catch::Matches("model_config:[0-9a-f]{16}"));
  const Reply again = post(srv.port(), "/v1/fit", nlohmann::json{{"model_config", config}, {"deployment", {{"card", "l4"}}}}.dump());
  CHECK(again.body == pasted.body);
  // A pasted config that is not one is refused naming the field it came in.
  const Reply broken = post(srv.port(), "/v1/fit", R"({"model_config": {"model_type": "llama"}, "deployment": {"card": "l4"}})");
  CHECK(broken.status == 400);
  CHECK_THAT(broken.body, Catch::Contains("model_config: missing field 'hidden_size'"));
  const Reply both = post(srv.port(), "/v1/fit", nlohmann::json{{"model", "phi-2"}, {"model_config", config}}.dump());
  CHECK(both.status == 400);
}

TEST_CASE("server: POST /v1/simulate with simulate.replications answers what simulate --replications prints",
          "[server][replications]") {
  Running srv(small());
  const Reply sim = post(srv.port(), "/v1/simulate",
                         R"({"model": "llama-3.1-8b", "deployment": {"card": "rtx-4090"},
                             "workload": {"rate": 4, "requests": 300}, "slo": {"ttft_p95": "1s"}, "seed": 7,
                             "simulate": {"replications": 3}})");
  REQUIRE(sim.status == 200);
  CHECK(sim.body == capsim_stdout("simulate --model llama-3.1-8b --card rtx-4090 --rate 4 --requests 300 "
                                  "--slo 'ttft_p95<=1s' --seed 7 --replications 3 --json -"));
  CHECK(nlohmann::json::parse(sim.body)["capsim"]["over_seeds"]["seeds"] == nlohmann::json::array({7, 8, 9}));
  const Reply zero = post(srv.port(), "/v1/simulate", R"({"model": "llama-3.1-8b", "simulate": {"replications": 0}})");
  CHECK(zero.status == 400);
  CHECK_THAT(zero.body, Catch::Contains("simulate.replications"));
  const Reply other = post(srv.port(), "/v1/simulate", R"({"model": "llama-3.1-8b", "simulate": {"seeds": 2}})");
  CHECK(other.status == 400);
  CHECK_THAT(other.body, Catch::Contains("unknown field 'seeds'; accepted: replications"));
}

TEST_CASE("server: bad requests get a clear 4xx and the server keeps serving", "[server]") {
  ServerOptions o = small();
  o.limits.max_body_bytes = 4096;
  Running srv(o);
  const auto error_of = [](const Reply& r) { return nlohmann::json::parse(r.body)["error"].get<std::string>(); };

  const Reply unknown_model = post(srv.port(), "/v1/simulate", R"({"model": "llama-9"})");
  CHECK(unknown_model.status == 400);
  CHECK_THAT(error_of(unknown_model), Catch::Contains("model: 'llama-9' is not in the catalogue"));

  const Reply malformed = post(srv.port(), "/v1/simulate", R"({"model": )");
  CHECK(malformed.status == 400);
  CHECK_THAT(error_of(malformed), Catch::Contains("malformed JSON"));

  const Reply field = post(srv.port(), "/v1/simulate", R"({"model": "llama-3.1-8b", "workload": {"rate": 2, "requets": 9}})");
  CHECK(field.status == 400);
  CHECK_THAT(error_of(field), Catch::Contains("unknown field 'requets'"));

  const Reply file = post(srv.port(), "/v1/simulate", R"({"model": "llama-3.1-8b", "deployment": {"card": "/etc/passwd.yaml"}})");
  CHECK(file.status == 400);
  CHECK_THAT(error_of(file), Catch::Contains("not file paths"));

  const Reply not_found = get(srv.port(), "/v2/cards");
  CHECK(not_found.status == 404);
  const Reply method = get(srv.port(), "/v1/simulate");
  CHECK(method.status == 405);
  CHECK_THAT(error_of(method), Catch::Contains("accepted: POST"));

  const Reply big = post(srv.port(), "/v1/simulate", "{\"name\": \"" + std::string(5000, 'x') + "\"}");
  CHECK(big.status == 413);

  // 1e7 requests is past the server's default run limit (2e5): refused before it starts.
  const Reply large = post(srv.port(), "/v1/simulate", R"({"model": "llama-3.1-8b", "workload": {"rate": 5, "requests": 10000000}})");
  CHECK(large.status == 422);
  CHECK_THAT(error_of(large), Catch::Contains("at most 200000 requests"));
  const Reply long_run = post(srv.port(), "/v1/simulate", R"({"model": "llama-3.1-8b", "workload": {"rate": 1, "duration": "30h"}})");
  CHECK(long_run.status == 422);

  {  // Not HTTP at all.
    tcp::socket s = connect(srv.port());
    asio::write(s, asio::buffer(std::string("HELLO there\r\n\r\n")));
    CHECK(read_reply(s).status == 400);
  }
  {  // A slow client: half a request line, then nothing. The server closes after its read timeout (2 s).
    tcp::socket s = connect(srv.port());
    asio::write(s, asio::buffer(std::string("GET /healthz HT")));
    const auto start = std::chrono::steady_clock::now();
    char c;
    beast::error_code ec;
    s.read_some(asio::buffer(&c, 1), ec);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(ec);  // closed, no answer
    CHECK(waited >= 1.5);
    CHECK(waited < 10);
  }
  CHECK(get(srv.port(), "/healthz").status == 200);
}

TEST_CASE("server: a full queue answers 429 with Retry-After, and a client that goes away cancels its job", "[server]") {
  // One worker, no queue: one job at a time. The long job (1.5e6 requests at 50/s on one H100:
  // a minute or more of simulation) holds the worker until its client disconnects.
  ServerOptions o = small(1, 0);
  o.limits.max_requests = 2'000'000;
  o.max_jobs_per_client = 4;  // the queue's room binds first here (the client's share has its own test)
  Running srv(o);
  const std::string long_job = R"({"model": "llama-3.1-8b", "workload": {"rate": 50, "requests": 1500000}})";
  const std::string short_job = R"({"model": "llama-3.1-8b", "workload": {"rate": 4, "requests": 50}})";
  {
    tcp::socket s = connect(srv.port());
    http::request<http::string_body> req(http::verb::post, "/v1/simulate", 11);
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.body() = long_job;
    req.prepare_payload();
    http::write(s, req);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // admitted and running
    const Reply busy = post(srv.port(), "/v1/simulate", short_job);
    CHECK(busy.status == 429);
    CHECK(busy.retry_after == "2");
    CHECK_THAT(nlohmann::json::parse(busy.body)["error"].get<std::string>(), Catch::Contains("queue is full"));
    // GETs are not queued.
    CHECK(get(srv.port(), "/healthz").status == 200);
  }  // the client closes its connection: the server cancels the long job
  const auto start = std::chrono::steady_clock::now();
  Reply after;
  do {
    after = post(srv.port(), "/v1/simulate", short_job);
    if (after.status == 429) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (after.status == 429 && std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(after.status == 200);
  // Without cancellation the worker stays busy for the whole long run (a minute or more).
  CHECK(waited < 15);
}

TEST_CASE("server: plan streams progress events, then the result `capsim plan --json -` prints", "[server]") {
  Running srv(small());
  tcp::socket s = connect(srv.port());
  http::request<http::string_body> req(http::verb::post, "/v1/plan", 11);
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "text/event-stream");
  req.body() = R"({"model": "llama-3.1-8b", "workload": {"rate": 2, "duration": "2min"}, "slo": {"ttft_p95": "1s"},
                   "plan": {"cards": ["rtx-4090", "l4"], "tp": [1], "search_duration": "1min"}})";
  req.prepare_payload();
  http::write(s, req);
  // The stream: a header, then events until the server closes the connection.
  std::string all;
  beast::error_code ec;
  char buf[8192];
  for (;;) {
    const std::size_t n = s.read_some(asio::buffer(buf), ec);
    all.append(buf, n);
    if (ec) break;
  }
  REQUIRE(all.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK_THAT(all, Catch::Contains("Content-Type: text/event-stream"));
  CHECK_THAT(all, Catch::Contains("event: progress\ndata: {\"done\":"));
  const auto at = all.find("event: result\n");
  REQUIRE(at != std::string::npos);
  // SSE data lines joined by '\n' are the JSON text (its final newline is the event's end).
  std::string json;
  std::size_t pos = at + std::string("event: result\n").size();
  while (all.compare(pos, 6, "data: ") == 0) {
    const auto end = all.find('\n', pos);
    json += all.substr(pos + 6, end - pos - 6) + "\n";
    pos = end + 1;
  }
  CHECK(json == capsim_stdout("plan --model llama-3.1-8b --rate 2 --duration 2min --slo 'ttft_p95<=1s' "
                              "--cards rtx-4090,l4 --tp 1 --search-duration 1min --json -"));
  CHECK(nlohmann::json::parse(json)["options"].size() >= 1);
}

TEST_CASE("server: capacity and compare answer exactly what the commands print, check answers its JSON", "[server]") {
  Running srv(small());
  const Reply cap = post(srv.port(), "/v1/capacity",
                         R"({"model": "llama-3.1-8b", "deployment": {"card": "l4"}, "workload": {"rate": 1, "duration": "2min"},
                             "slo": {"ttft_p95": "1s"}, "capacity": {"points": 4}})");
  REQUIRE(cap.status == 200);
  CHECK(cap.body == capsim_stdout("capacity --model llama-3.1-8b --card l4 --rate 1 --duration 2min "
                                  "--slo 'ttft_p95<=1s' --points 4 --json -"));
  CHECK(nlohmann::json::parse(cap.body)["curve"].size() == 4);
  // Over seeds, as `capacity --replications 2`: the API could not ask for it before.
  const Reply seeds = post(srv.port(), "/v1/capacity",
                           R"({"model": "llama-3.1-8b", "deployment": {"card": "l4"}, "workload": {"rate": 1, "duration": "2min"},
                               "slo": {"ttft_p95": "1s"}, "capacity": {"points": 3, "replications": 2}})");
  REQUIRE(seeds.status == 200);
  CHECK(seeds.body == capsim_stdout("capacity --model llama-3.1-8b --card l4 --rate 1 --duration 2min "
                                    "--slo 'ttft_p95<=1s' --points 3 --replications 2 --json -"));
  CHECK(nlohmann::json::parse(seeds.body)["replications"] == 2);
  CHECK(post(srv.port(), "/v1/capacity",
             R"({"model": "llama-3.1-8b", "deployment": {"card": "l4"}, "workload": {"rate": 1, "duration": "2min"},
                 "slo": {"ttft_p95": "1s"}, "capacity": {"replications": 11}})").status == 400);

  const Reply cmp = post(srv.port(), "/v1/compare",
                         R"({"model": "llama-3.1-8b", "workload": {"rate": 2, "duration": "2min"}, "slo": {"ttft_p95": "1s"},
                             "compare": {"deployments": ["2x rtx-4090", "1x h100-sxm"]}})");
  REQUIRE(cmp.status == 200);
  CHECK(cmp.body == capsim_stdout("compare --model llama-3.1-8b --rate 2 --duration 2min --slo 'ttft_p95<=1s' "
                                  "--deployment '2x rtx-4090' --deployment '1x h100-sxm' --json -"));

  // Llama-3.1-8B in bf16 (~16 GB of weights) fits in an H100's 80 GB at an 8192-token context, and
  // one H100 rents for less than $4/hour (calibration/prices.yaml: $2.69).
  const Reply chk = post(srv.port(), "/v1/check",
                         R"({"assertions": [{"name": "small", "model": "llama-3.1-8b", "deployment": {"card": "h100-sxm"},
                             "workload": {"rate": 2, "requests": 200},
                             "expect": {"fits_in_memory": {"context": 8192}, "max_cost_usd_per_hour": 4}}]})");
  REQUIRE(chk.status == 200);
  const auto c = nlohmann::json::parse(chk.body);
  CHECK(c["passed"] == true);
  CHECK(c["tests"] == 2);
  CHECK(c["file"] == "request body");
  const Reply file = post(srv.port(), "/v1/check", R"({"assertions": [{"name": "x", "scenario": "chat-8b-1x-h100.yaml", "expect": {"slo": true}}]})");
  CHECK(file.status == 400);
  CHECK_THAT(nlohmann::json::parse(file.body)["error"].get<std::string>(), Catch::Contains("reads no files"));
}

TEST_CASE("server: a job past --job-timeout is cancelled and answered 503", "[server]") {
  ServerOptions o = small(1, 0);
  o.job_timeout_s = 0.5;
  o.limits.max_requests = 2'000'000;
  Running srv(o);
  // The minute-long run of the queue test: stopped at 0.5 s.
  const auto start = std::chrono::steady_clock::now();
  const Reply r = post(srv.port(), "/v1/simulate", R"({"model": "llama-3.1-8b", "workload": {"rate": 50, "requests": 1500000}})");
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(r.status == 503);
  CHECK_THAT(nlohmann::json::parse(r.body)["error"].get<std::string>(), Catch::Contains("ran longer than the server's limit"));
  CHECK(waited < 10);
  CHECK(post(srv.port(), "/v1/simulate", R"({"model": "llama-3.1-8b", "workload": {"rate": 4, "requests": 20}})").status == 200);
}
