#include "sim/scenario/model_error.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/yaml_fields.h"
#include "sim/hardware/measured_kernels.h"
#include "sim/scenario/catalogues.h"

namespace capsim::scenario {
namespace {

const std::vector<std::string> kMetrics = {"ttft", "tpot", "e2e"};

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100 * fraction);
  return buf;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

// A field that must be one of `accepted`.
std::string one_of(const YAML::Node& n, const std::string& where, const std::vector<std::string>& accepted) {
  if (!n) throw Error(where + ": missing; accepted: " + joined(accepted));
  const std::string v = yaml_scalar(n, where);
  for (const auto& a : accepted)
    if (v == a) return v;
  throw Error(where + ": '" + v + "' is not accepted; accepted: " + joined(accepted));
}

// A plain number with an optional sign ("+0.0022", "-0.04"): the file writes the bias signed.
double signed_number(const std::string& text, const std::string& where) {
  const std::size_t skip = !text.empty() && text[0] == '+' ? 1 : 0;
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data() + skip, text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || skip == text.size())
    throw Error(where + ": '" + text + "' is not a plain number; accepted: a fraction, e.g. 0.14 or -0.02");
  return v;
}

double fraction_field(const YAML::Node& n, const std::string& where, bool signed_value) {
  if (!n) throw Error(where + ": missing; accepted: a fraction (0.14 = 14%)");
  const double v = signed_number(yaml_scalar(n, where), where);
  if (!std::isfinite(v) || (!signed_value && v < 0) || std::fabs(v) > 10)
    throw Error(where + ": " + yaml_scalar(n, where) + " is out of range; accepted: a fraction" +
                (signed_value ? " between -10 and 10" : " from 0 to 10"));
  return v;
}

int count_field(const YAML::Node& n, const std::string& where, int least) {
  if (!n) throw Error(where + ": missing; accepted: a whole number >= " + std::to_string(least));
  const double v = parse_number(yaml_scalar(n, where), where);
  if (v != std::floor(v) || v < least || v > 1e9)
    throw Error(where + ": " + yaml_scalar(n, where) + " is not accepted; accepted: a whole number >= " +
                std::to_string(least));
  return static_cast<int>(v);
}

std::string class_text(const std::string& level, const std::string& any, const std::string& value) {
  return level == "any" ? any : value;
}

}  // namespace

std::string ErrorClass::label() const {
  const std::string card = cost_source == "measured" ? "cards with kernel tables"
                           : cost_source == "roofline" ? "cards without kernel tables" : "any card";
  return card + ", " + class_text(engine, "any engine", engine) + ", " +
         class_text(architecture, "any model", architecture == "moe" ? "MoE" : architecture);
}

ErrorClass error_class(const Deployment& d) {
  const bool measured = d.card.measured_kernels && !d.card.measured_kernels->empty();
  return {measured ? "measured" : "roofline", d.engine.name, d.model.is_moe() ? "moe" : "dense"};
}

std::string ModelError::text() const {
  std::string s = "+-" + percent(stat.p90) + " (p90, " + std::to_string(stat.runs) + " runs out of fold";
  if (fallback()) s += "; too few for this class, pooled over " + used.label();
  return s + ")";
}

ModelErrorTable ModelErrorTable::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot read file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

ModelErrorTable ModelErrorTable::parse(const std::string& text, const std::string& path) {
  const YamlDoc doc = YamlDoc::parse(text, path);
  const YAML::Node& root = doc.root();
  if (!root.IsMap()) throw Error(path + ": expected a mapping with generated_by, date, min_runs, classes");
  check_keys(root, path, {"generated_by", "date", "sources", "not_scored", "min_runs", "fallback", "classes"});
  ModelErrorTable t;
  t.path_ = path;
  t.date_ = doc.string("date");
  doc.string("generated_by");
  t.min_runs_ = count_field(root["min_runs"], doc.where("min_runs"), 1);
  const YAML::Node classes = root["classes"];
  if (!classes || !classes.IsSequence() || classes.size() == 0)
    throw Error(doc.where("classes") + ": expected a list of classes (cost_source, engine, architecture, "
                                       "ttft/tpot/e2e: {runs, p50, p90, bias})");
  for (std::size_t i = 0; i < classes.size(); ++i) {
    const YAML::Node c = classes[i];
    const std::string where = doc.where("classes[" + std::to_string(i) + "]");
    if (!c.IsMap()) throw Error(where + ": expected a mapping");
    check_keys(c, where, {"cost_source", "engine", "architecture", "ttft", "tpot", "e2e"});
    Row row;
    row.cls.cost_source = one_of(c["cost_source"], where + ".cost_source", {"measured", "roofline", "any"});
    if (!c["engine"]) throw Error(where + ".engine: missing; accepted: an engine profile's name or any");
    row.cls.engine = yaml_scalar(c["engine"], where + ".engine");
    row.cls.architecture = one_of(c["architecture"], where + ".architecture", {"dense", "moe", "any"});
    for (const auto& m : kMetrics) {
      const YAML::Node s = c[m];
      if (!s) continue;
      const std::string w = where + "." + m;
      if (!s.IsMap()) throw Error(w + ": expected {runs, p50, p90, bias}");
      check_keys(s, w, {"runs", "p50", "p90", "bias"});
      ModelErrorStat stat;
      stat.runs = count_field(s["runs"], w + ".runs", 1);
      stat.p50 = fraction_field(s["p50"], w + ".p50", false);
      stat.p90 = fraction_field(s["p90"], w + ".p90", false);
      stat.bias = fraction_field(s["bias"], w + ".bias", true);
      if (stat.p90 < stat.p50)
        throw Error(w + ".p90: " + yaml_scalar(s["p90"], w) + " is below p50 (" + yaml_scalar(s["p50"], w) + "); accepted: p90 >= p50");
      row.metrics[m] = stat;
    }
    for (const auto& other : t.rows_)
      if (other.cls.label() == row.cls.label()) throw Error(where + ": a second class " + row.cls.label());
    t.rows_.push_back(std::move(row));
  }
  return t;
}

std::optional<ModelError> ModelErrorTable::find(const ErrorClass& c, const std::string& metric) const {
  const ErrorClass levels[] = {c, {c.cost_source, c.engine, "any"}, {c.cost_source, "any", "any"}, {"any", "any", "any"}};
  for (const auto& level : levels) {
    for (const auto& row : rows_) {
      if (row.cls.cost_source != level.cost_source || row.cls.engine != level.engine ||
          row.cls.architecture != level.architecture)
        continue;
      const auto it = row.metrics.find(metric);
      if (it != row.metrics.end() && it->second.runs >= min_runs_) return ModelError{metric, c, level, it->second};
    }
  }
  return std::nullopt;
}

const ModelErrorTable* model_errors() {
  static const std::unique_ptr<const ModelErrorTable> table = []() -> std::unique_ptr<const ModelErrorTable> {
    const std::string path = data_dir() + "/calibration/model-error.yaml";
    if (!std::filesystem::exists(path)) return nullptr;
    return std::make_unique<const ModelErrorTable>(ModelErrorTable::load(path));
  }();
  return table.get();
}

std::optional<std::string> error_metric_of_slo(const std::string& slo_metric) {
  if (slo_metric == "ttft") return "ttft";
  if (slo_metric == "tpot" || slo_metric == "itl") return "tpot";
  if (slo_metric == "e2el") return "e2e";
  return std::nullopt;
}

std::vector<ModelError> model_errors_for(const Deployment& d) {
  std::vector<ModelError> out;
  const ModelErrorTable* t = model_errors();
  if (!t) return out;
  const ErrorClass c = error_class(d);
  for (const auto& m : kMetrics)
    if (auto e = t->find(c, m)) out.push_back(*e);
  return out;
}

std::string model_error_line(const Deployment& d) {
  const ModelErrorTable* t = model_errors();
  const ErrorClass c = error_class(d);
  if (!t) return "model error for " + c.label() + ": unknown (no calibration/model-error.yaml in the data root " + data_dir() + ")";
  std::string s = "model error for " + c.label() + " (p90 of |error| out of fold):";
  bool first = true;
  for (const auto& e : model_errors_for(d)) {
    s += std::string(first ? " " : ", ") + upper(e.metric) + " +-" + percent(e.stat.p90) + " (" +
         std::to_string(e.stat.runs) + " runs" + (e.fallback() ? ", pooled over " + e.used.label() : "") + ")";
    first = false;
  }
  if (first) s += " none scored";
  return s + "; calibration/model-error.yaml of " + t->date();
}

}  // namespace capsim::scenario
