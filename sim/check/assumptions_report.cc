// The reports of a check (declared in assumptions.h): a row's status, the margin text, and the
// outcome as JSON and as JUnit XML for CI (docs/ci.md). The rows themselves are made in
// assumptions_run.cc.
#include "sim/check/assumptions.h"
#include "sim/check/model_error_requirement.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "sim/scenario/catalogues.h"
#include "sim/answers/simulate_report.h"
#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/input_limits.h"
#include "sim/core/units.h"
#include "sim/core/yaml_fields.h"
#include "sim/llm/memory_plan.h"
#include "sim/plan/capacity.h"
#include "sim/plan/search.h"
#include "sim/report/table.h"

namespace capsim::check {
namespace {

std::string xml_escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\n': out += "&#10;"; break;
      case '\t': out += "&#9;"; break;
      case '\r': out += "&#13;"; break;
      default:
        if (c < 0x20) continue;  // not allowed in XML 1.0
        out += static_cast<char>(c);
    }
  }
  return out;
}

std::string seconds_text(double s) { return fmt("%.3f", s); }

std::string row_title(const Row& r) { return r.kind + (r.item.empty() ? "" : " " + r.item); }

}  // namespace

const char* row_status(const Row& r) { return r.passed ? "PASS" : r.inconclusive ? "INCONCLUSIVE" : "FAIL"; }

std::string margin_text(std::optional<double> margin) {
  if (!margin || std::isnan(*margin)) return "-";
  return (*margin >= 0 ? "+" : "") + fmt("%.1f%%", 100 * *margin);
}

nlohmann::json check_json(const CheckOutcome& c) {
  nlohmann::json j;
  j["file"] = c.file;
  j["passed"] = c.passed();
  j["tests"] = c.tests;
  j["failures"] = c.failures;
  j["inconclusive"] = c.inconclusive;
  j["seconds"] = c.seconds;
  nlohmann::json list = nlohmann::json::array();
  for (const AssertionOutcome& a : c.assertions) {
    nlohmann::json rows = nlohmann::json::array();
    for (const Row& r : a.rows) {
      const auto opt = [](std::optional<double> v) { return v && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json(); };
      rows.push_back({{"kind", r.kind}, {"item", r.item}, {"measured", opt(r.measured)}, {"limit", opt(r.limit)},
                      {"unit", r.unit}, {"margin", opt(r.margin)}, {"passed", r.passed}, {"status", row_status(r)}, {"low", opt(r.low)}, {"high", opt(r.high)},
                      {"message", r.message},
                      {"measured_text", r.measured_text}, {"limit_text", r.limit_text}, {"seconds", r.seconds}});
    }
    list.push_back({{"name", a.name}, {"description", a.description}, {"scenario", a.scenario},
                    {"passed", a.passed()}, {"seconds", a.seconds}, {"runs_extended", a.extensions},
                    {"checks", rows}});
    if (!a.model_error_json.is_null()) list.back()["model_error"] = a.model_error_json;
  }
  j["assertions"] = list;
  return j;
}

std::string junit_xml(const CheckOutcome& c) {
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  // An INCONCLUSIVE row is a JUnit <error> (the check could not decide; `check` exits 3), a FAIL
  // row a <failure>: the totals of <testsuites> and of each <testsuite> count them the same way.
  x << "<testsuites name=\"capsim check " << xml_escape(c.file) << "\" tests=\"" << c.tests << "\" failures=\""
    << c.failures << "\" errors=\"" << c.inconclusive << "\" time=\"" << seconds_text(c.seconds) << "\">\n";
  for (const AssertionOutcome& a : c.assertions) {
    int failures = 0, errors = 0;
    for (const Row& r : a.rows) {
      if (r.inconclusive) ++errors;
      else if (!r.passed) ++failures;
    }
    x << "  <testsuite name=\"" << xml_escape(a.name) << "\" tests=\"" << a.rows.size() << "\" failures=\""
      << failures << "\" errors=\"" << errors << "\" skipped=\"0\" time=\"" << seconds_text(a.seconds) << "\">\n";
    if (!a.description.empty()) {
      x << "    <properties><property name=\"description\" value=\"" << xml_escape(a.description)
        << "\"/><property name=\"scenario\" value=\"" << xml_escape(a.scenario) << "\"/></properties>\n";
    }
    for (const Row& r : a.rows) {
      x << "    <testcase name=\"" << xml_escape(row_title(r)) << "\" classname=\"capsim.check."
        << xml_escape(a.name) << "\" time=\"" << seconds_text(r.seconds) << "\"";
      if (r.passed) {
        x << "/>\n";
        continue;
      }
      const std::string msg = r.message.empty() ? "measured " + r.measured_text + ", limit " + r.limit_text : r.message;
      const char* element = r.inconclusive ? "error" : "failure";
      x << ">\n      <" << element << " message=\"" << xml_escape(msg) << "\" type=\""
        << xml_escape(r.inconclusive ? "inconclusive" : r.kind) << "\">"
        << xml_escape(a.name + ": " + row_title(r) + ": " + row_status(r) + ", measured " + r.measured_text +
                      ", limit " + r.limit_text + ", margin " + margin_text(r.margin))
        << "</" << element << ">\n    </testcase>\n";
    }
    x << "  </testsuite>\n";
  }
  x << "</testsuites>\n";
  return x.str();
}

}  // namespace capsim::check
