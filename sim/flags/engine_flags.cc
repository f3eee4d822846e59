#include "sim/flags/engine_flags.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <string>

#include "sim/core/error.h"

namespace capsim::flags {
namespace {

using scenario::EngineOption;
using scenario::FieldType;

// The row's check. Its description is what --help shows after the type: "INT in [1 - 4096]" (as
// CLI11's Range writes it), "FLOAT in (0.05, 1]". A whole number is passed on in plain digits, so
// that "1e3" is read as the scenario file reads it. A NaN or an infinity is left to
// refuse_non_finite (sim/cli/common.h), which names it as such on every FLOAT flag.
CLI::Validator check_of(const EngineOption& row) {
  const bool whole = row.doc.type == FieldType::kWhole;
  const std::string description =
      whole ? "INT in [" + std::to_string(static_cast<long long>(row.doc.lo)) + " - " +
                  std::to_string(static_cast<long long>(row.doc.hi)) + "]"
            : "FLOAT in " + scenario::range_words(row.doc);
  return CLI::Validator(
      [&row, whole](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        const bool parsed = end != text.c_str() && *end == '\0';
        if (!whole && parsed && !std::isfinite(v)) return "";
        std::string why = scenario::engine_option_refusal(row, text);
        if (why.empty() && whole) text = std::to_string(static_cast<long long>(v));
        return why;
      },
      description);
}

}  // namespace

std::vector<EngineFlag> add_engine_flags(CLI::App& cmd, EngineFlagSet set, scenario::DeploymentSpec& deployment,
                                         scenario::ScenarioSpec* scenario) {
  std::vector<EngineFlag> flags;
  std::set<std::string> added;
  for (const EngineOption& row : scenario::engine_options()) {
    if (set == EngineFlagSet::kSchedulerLimits && !row.scheduler_limit) continue;
    if (!added.insert(row.doc.flag).second) continue;
    CLI::Option* o = std::visit(
        [&](auto m) -> CLI::Option* {
          if constexpr (requires { deployment.*m; }) {
            return cmd.add_option(row.doc.flag, deployment.*m, row.help);
          } else {
            if (!scenario) throw Error(std::string(row.doc.flag) + ": a scenario's flag, added without a scenario");
            return cmd.add_option(row.doc.flag, scenario->*m, row.help);
          }
        },
        row.member);
    // A transform, not a check: CLI11 hands checks a copy, and this one rewrites whole numbers.
    if (row.doc.type == FieldType::kWhole || row.doc.type == FieldType::kNumber) o->transform(check_of(row));
    flags.push_back({&row, o});
  }
  return flags;
}

}  // namespace capsim::flags
