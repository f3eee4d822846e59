#include "sim/answers/diff_answer.h"

#include <cmath>
#include <sstream>

#include "sim/core/error.h"
#include "sim/report/table.h"

namespace capsim::answers {
namespace {

std::string short_number(double v) {
  const double m = std::fabs(v);
  if (v == std::floor(v) && m < 1e15) return fmt("%.0f", v);
  if (m != 0 && (m < 1e-3 || m >= 1e7)) return fmt("%.4g", v);
  if (m >= 100) return fmt("%.1f", v);
  return fmt("%.4g", v);
}

std::string text_of(const diff::Input& a, const diff::Input& b, const diff::Diff& d, double min_percent) {
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
      std::string change = m.change > 0 ? "+" : "";
      change += short_number(m.change);
      t.row({m.path, short_number(m.a), short_number(m.b), change,
             m.change_percent ? fmt("%+.1f%%", *m.change_percent) : "-"});
    }
    t.print(out);
  }
  out << "\n  " << d.metrics.size() << " metrics moved, " << d.unchanged << " unchanged"
      << (min_percent > 0 ? " (or moved less than " + fmt("%g", min_percent) + "%)" : "") << "\n";
  if (!d.other.empty()) {
    out << "\n  other results changed:\n";
    for (const auto& f : d.other) out << "    " << f.path << ": " << f.a << " -> " << f.b << "\n";
  }
  for (const auto& e : d.only_a) out << "  only in A: " << e << "\n";
  for (const auto& e : d.only_b) out << "  only in B: " << e << "\n";
  return out.str();
}

}  // namespace

DiffAnswer answer_diff(const diff::Input& a, const diff::Input& b, double min_percent) {
  if (!std::isfinite(min_percent) || min_percent < 0) {
    throw Error("--min-change: " + fmt("%g", min_percent) + " is not a percentage >= 0");
  }
  const diff::Diff d = diff::compare(a, b, min_percent);
  DiffAnswer r;
  r.json = diff::diff_json(a, b, d);
  r.text = text_of(a, b, d, min_percent);
  return r;
}

}  // namespace capsim::answers
