// `capsim serve`: the HTTP API and the web planner page (sim/server/, docs/server.md).
#include <cstdlib>
#include <iostream>

#include "sim/http/request_guard.h"
#include "sim/plan/sweep.h"
#include "sim/server/serve_command.h"
#include "sim/server/server.h"

namespace capsim::server {
namespace {

struct ServeOptions {
  ServerOptions server;
  double max_body_kib = 1024;
};

int run_serve(ServeOptions o) {
  ServerOptions& s = o.server;
  s.limits.max_body_bytes = static_cast<std::size_t>(o.max_body_kib * 1024);
  if (s.web_dir.empty()) s.web_dir = CAPSIM_WEB_DIR;
  if (s.guard.auth_token.empty()) {
    if (const char* token = std::getenv("CAPSIM_TOKEN")) s.guard.auth_token = token;
  }
  http::normalize_allowed_hosts(s.guard.allowed_hosts, "--allowed-host");
  s.guard.allowed_host_flag = "capsim serve --allowed-host";
  s.guard.auth_token_flag = "capsim serve --auth-token or $CAPSIM_TOKEN";
  Server srv(s);
  const bool loopback = s.bind.rfind("127.", 0) == 0 || s.bind == "::1" || s.bind == "localhost";
  if (!loopback && s.guard.auth_token.empty()) {
    std::cerr << "capsim serve: warning: listening on " << s.bind
              << " without a token: anyone who reaches this address can run jobs (--auth-token or $CAPSIM_TOKEN)"
              << std::endl;
  }
  std::cout << "capsim serve: listening on http://" << (s.bind.find(':') != std::string::npos ? "[" + s.bind + "]" : s.bind)
            << ":" << srv.port() << "/ (the planner page; API under /v1/, /openapi.json; Ctrl-C stops)"
            << std::endl;
  srv.run();
  std::cout << "capsim serve: stopped" << std::endl;
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "serve the HTTP API and the web planner page");
  cmd->footer(
      "examples:\n"
      "  capsim serve                                  # http://127.0.0.1:8080/\n"
      "  capsim serve --port 9000 --workers 2 --queue 4\n"
      "  capsim serve --bind 0.0.0.0 --allowed-host planner.example.com --auth-token \"$(openssl rand -hex 16)\"\n"
      "  curl -s localhost:8080/v1/simulate -H 'Content-Type: application/json' -d '{\"model\": \"llama-3.1-8b\",\n"
      "       \"deployment\": {\"card\": \"h100-sxm\"}, \"workload\": {\"rate\": 5, \"requests\": 500}}'\n"
      "answers are exactly what the commands print with --json -; docs/server.md lists the endpoints.\n"
      "POST bodies must be sent as Content-Type: application/json; requests whose Host is not an IP address,\n"
      "localhost or an --allowed-host name, and requests from other web pages (Origin), are refused (403).");
  ServerOptions& s = o->server;
  cmd->add_option("--bind", s.bind, "address to listen on (loopback by default; 0.0.0.0 for every interface)")
      ->capture_default_str();
  cmd->add_option("--port", s.port, "TCP port (0: any free port, printed at start)")->capture_default_str();
  cmd->add_option("--workers", s.workers, "simulation threads (default: the CPUs this process may use)")->check(CLI::Range(0, 1024));
  cmd->add_option("--queue", s.queue, "jobs admitted beyond the workers; more get 429 with Retry-After")
      ->capture_default_str()->check(CLI::Range(0, 100000));
  cmd->add_option("--job-timeout", s.job_timeout_s, "seconds a job may run before it is cancelled (503)")
      ->capture_default_str()->check(CLI::Range(1.0, 86400.0));
  cmd->add_option("--read-timeout", s.read_timeout_s, "seconds a request's header and body may take to arrive")
      ->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--max-body", o->max_body_kib, "largest request body, KiB (413 beyond)")
      ->capture_default_str()->check(CLI::Range(1.0, 65536.0));
  cmd->add_option("--max-requests", s.limits.max_requests, "most simulated requests one run may ask for (422 beyond)")
      ->capture_default_str()->check(CLI::Range(1LL, 2'000'000LL));
  cmd->add_option("--max-duration", s.limits.max_duration_s, "most simulated seconds one run may ask for (422 beyond)")
      ->capture_default_str()->check(CLI::Range(1.0, 86400.0 * 7));
  cmd->add_option("--max-users", s.limits.max_users, "most users or concurrency one run may ask for (422 beyond)")
      ->capture_default_str()->check(CLI::Range(1, 1'000'000));
  cmd->add_option("--max-cards", s.limits.max_cards, "most cards (replicas x TP) one deployment may ask for (422 beyond)")
      ->capture_default_str()->check(CLI::Range(1, 8192));
  cmd->add_option("--max-sweep-runs", s.limits.max_sweep_runs, "most runs one POST /v1/sweep grid may have (422 beyond)")
      ->capture_default_str()->check(CLI::Range(1, static_cast<int>(plan::kMaxSweepRuns)));
  cmd->add_option("--max-connections", s.max_connections,
                  "open connections; at the cap a new one replaces the one waiting longest for its request")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--max-jobs-per-client", s.max_jobs_per_client,
                  "simulations one client address may have admitted at once (default: half of workers + queue)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--allowed-host", s.guard.allowed_hosts,
                  "a host name clients may reach the server by (repeatable; IP addresses and localhost always are)");
  cmd->add_option("--auth-token", s.guard.auth_token,
                  "require 'Authorization: Bearer TOKEN' on the API (default: $CAPSIM_TOKEN; /healthz and the page stay open)");
  cmd->add_option("--web-dir", s.web_dir, "the built planner page (default: the build's web/ folder)");
  cmd->callback([o, &exit_code] { exit_code = run_serve(*o); });
}

}  // namespace capsim::server
