// `capsim roofline`: one engine step's time, operator group by operator group, with its bound.
#include <iostream>

#include "sim/answers/roofline_answer.h"
#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/report/json_output.h"

namespace capsim::cli {
namespace {

struct RooflineOptions {
  answers::RooflineRequest request;
  std::string json;
};

int run_roofline(const RooflineOptions& o) {
  const answers::RooflineAnswer a = answers::answer_roofline(o.request);
  if (o.json != "-") std::cout << a.text;
  if (!o.json.empty()) write_json(o.json, a.json);
  return 0;
}

}  // namespace

void add_roofline_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<RooflineOptions>();
  CLI::App* cmd = app.add_subcommand(
      "roofline", "one engine step's time by operator group, with bound, MFU and MBU");
  cmd->footer(
      "examples:\n"
      "  capsim roofline --model llama-3.1-8b --card h100-sxm --batch 1 --context 1024\n"
      "  capsim roofline --model llama-3.1-70b --card h100-sxm --tp 4 --batch 64 --context 2048\n"
      "  capsim roofline --model mistral-7b --card rtx-4090 --batch 8 --context 512 --prefill 2048\n"
      "  capsim roofline --model llama-3.1-405b --card h100-sxm --tp 8 --pp 2 --batch 64 --context 2048\n"
      "  capsim roofline --model deepseek-v3 --card h200 --dp 8 --enable-expert-parallel --batch 64");
  add_deployment_flags(*cmd, opts->request.deployment, false);
  cmd->add_option("--batch,-b", opts->request.batch, "decode sequences in the step")
      ->capture_default_str()->check(CLI::Range(0LL, answers::kRooflineMaxBatch));
  cmd->add_option("--context,-l", opts->request.context, "context length of each decode sequence (tokens)")
      ->capture_default_str()->check(CLI::Range(1LL, answers::kRooflineMaxTokens));
  cmd->add_option("--prefill,-p", opts->request.prefill, "tokens of one prefill chunk in the same step")
      ->capture_default_str()->check(CLI::Range(0LL, answers::kRooflineMaxTokens));
  cmd->add_option("--prefill-cached", opts->request.prefill_cached,
                  "tokens already cached before that chunk (prefix hits, earlier chunks)")
      ->capture_default_str()->check(CLI::Range(0LL, answers::kRooflineMaxTokens));
  cmd->add_option("--json", opts->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->callback([opts, &exit_code] { exit_code = run_roofline(*opts); });
}

}  // namespace capsim::cli
