// `capsim diff A.json B.json`: which metrics moved between two results (simulate, plan,
// capacity or compare --json), by how much, and which configuration changes likely moved them.
#include <iostream>

#include "sim/answers/diff_answer.h"
#include "sim/cli/commands.h"
#include "sim/report/json_output.h"

namespace capsim::cli {
namespace {

struct DiffOptions {
  std::string a, b;
  double min_percent = 0;
  std::string json;
};

int run_diff(const DiffOptions& o) {
  const diff::Input a = diff::load_result(o.a);
  const diff::Input b = diff::load_result(o.b);
  const answers::DiffAnswer d = answers::answer_diff(a, b, o.min_percent);
  if (o.json != "-") std::cout << d.text;
  if (!o.json.empty()) write_json(o.json, d.json);
  return 0;
}

}  // namespace

void add_diff_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<DiffOptions>();
  CLI::App* cmd = app.add_subcommand(
      "diff", "what moved between two --json results (simulate, plan, capacity, compare), and why");
  cmd->footer(
      "examples:\n"
      "  capsim simulate workloads/chat-8b-1x-h100.yaml --json before.json\n"
      "  capsim simulate workloads/chat-8b-1x-h100.yaml --card a100-80gb-sxm --json after.json\n"
      "  capsim diff before.json after.json\n"
      "exit status: 0 compared (whatever moved), 2 bad input");
  cmd->add_option("a", o->a, "the first result (JSON of capsim simulate/plan/capacity/compare --json)")->required();
  cmd->add_option("b", o->b, "the second result, of the same command")->required();
  cmd->add_option("--min-change", o->min_percent, "hide metrics that moved less than this many percent")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--json", o->json, "also write the differences as JSON to FILE ('-' = stdout only)");
  cmd->callback([o, &exit_code] { exit_code = run_diff(*o); });
}

}  // namespace capsim::cli
