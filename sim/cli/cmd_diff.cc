// `capsim diff A.json B.json`: which metrics moved between two results (simulate, plan,
// capacity or compare --json), by how much, and which configuration changes likely moved them.
#include <cmath>
#include <iostream>
#include <sstream>

#include "sim/cli/commands.h"
#include "sim/report/diff.h"
#include "sim/report/json_output.h"
#include "sim/report/table.h"

namespace capsim::cli {
namespace {

struct DiffOptions {
  std::string a, b;
  double min_percent = 0;
  std::string json;
};

std::string short_number(double v) {
  const double m = std::fabs(v);
  if (v == std::floor(v) && m < 1e15) return fmt("%.0f", v);
  if (m != 0 && (m < 1e-3 || m >= 1e7)) return fmt("%.4g", v);
  if (m >= 100) return fmt("%.1f", v);
  return fmt("%.4g", v);
}

int run_diff(const DiffOptions& o) {
  const diff::Input a = diff::load_result(o.a);
  const diff::Input b = diff::load_result(o.b);
  const diff::Diff d = diff::compare(a, b, o.min_percent);
  if (o.json != "-") {
    std::ostringstream out;
    out << "capsim diff: " << a.path << " -> " << b.path << " (" << d.kind << " results)\n\n";
    const auto causes = diff::likely_causes(d);
    if (!d.configuration.empty()) {
      out << "  configuration changed (the likely reasons):\n";
      for (const auto& c : causes) out << "    " << c << "\n";
    } else if (!causes.empty()) {
      out << "  " << causes.front() << "\n";
    } else {
      out << "  identical: no metric moved and the configuration is the same\n";
    }
    if (!d.metrics.empty()) {
      out << "\n";
      TextTable t({"metric", "A", "B", "change", "change %"});
      for (const auto& m : d.metrics) {
        t.row({m.path, short_number(m.a), short_number(m.b), (m.change > 0 ? "+" : "") + short_number(m.change),
               m.change_percent ? fmt("%+.1f%%", *m.change_percent) : "-"});
      }
      t.print(out);
    }
    out << "\n  " << d.metrics.size() << " metrics moved, " << d.unchanged << " unchanged"
        << (o.min_percent > 0 ? " (or moved less than " + fmt("%g", o.min_percent) + "%)" : "") << "\n";
    if (!d.other.empty()) {
      out << "\n  other results changed:\n";
      for (const auto& f : d.other) out << "    " << f.path << ": " << f.a << " -> " << f.b << "\n";
    }
    for (const auto& e : d.only_a) out << "  only in A: " << e << "\n";
    for (const auto& e : d.only_b) out << "  only in B: " << e << "\n";
    std::cout << out.str();
  }
  if (!o.json.empty()) write_json(o.json, diff::diff_json(a, b, d));
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
