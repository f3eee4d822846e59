#include "sim/core/yaml_fields.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/input_limits.h"

namespace capsim {

YamlDoc YamlDoc::load(const std::string& path) {
  const std::string text = read_input_file(path, "YAML file", kMaxYamlBytes);
  YamlDoc doc;
  doc.path_ = path;
  try {
    doc.root_ = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(path + ":" + std::to_string(e.mark.line + 1) + ":" +
                std::to_string(e.mark.column + 1) + ": malformed YAML: " + e.msg);
  }
  if (!doc.root_.IsMap()) throw Error(path + ": expected a mapping of fields at the top level");
  if (const auto refs = doc.root_["references"]) {
    if (!refs.IsMap()) throw Error(path + ": references: expected a mapping key -> citation");
    for (const auto& kv : refs) {
      const std::string key = yaml_scalar(kv.first, path + ": references");
      doc.references_[key] = yaml_scalar(kv.second, path + ": references." + key);
    }
  }
  return doc;
}

namespace {

// Walks a dotted path without assigning YAML::Node handles (assignment in yaml-cpp rebinds the
// referenced node, so each level is a fresh copy-constructed handle).
YAML::Node find_path(const YAML::Node& node, const std::string& field, std::size_t start) {
  if (!node.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const std::size_t dot = field.find('.', start);
  const std::string key = field.substr(start, dot == std::string::npos ? dot : dot - start);
  const YAML::Node child = node[key];
  if (!child) return YAML::Node(YAML::NodeType::Undefined);
  if (dot == std::string::npos) return child;
  return find_path(child, field, dot + 1);
}

}  // namespace

YAML::Node YamlDoc::find(const std::string& field) const { return find_path(root_, field, 0); }

std::string YamlDoc::string(const std::string& field) const {
  auto v = optional_string(field);
  if (!v) throw Error(where(field) + ": missing (required)");
  return *v;
}

std::optional<std::string> YamlDoc::optional_string(const std::string& field) const {
  const YAML::Node n = find(field);
  if (!n || n.IsNull()) return std::nullopt;
  return yaml_scalar(n, where(field));
}

std::string yaml_scalar(const YAML::Node& n, const std::string& where) {
  if (!n.IsScalar()) throw Error(where + ": expected a single value");
  return n.Scalar();
}

double parse_number(const std::string& text, const std::string& where) {
  double v = 0;
  const char* b = text.data();
  const char* e = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || ptr != e || !std::isfinite(v)) {
    throw Error(where + ": '" + text + "' is not a plain number (no unit expected here)");
  }
  if (v < 0) throw Error(where + ": '" + text + "' is negative; expected a number >= 0");
  return v;
}

std::optional<double> YamlDoc::optional_quantity(const std::string& field,
                                                 std::optional<units::Kind> kind) const {
  const YAML::Node n = find(field);
  if (!n) return std::nullopt;
  if (!n.IsMap() || !n["value"]) {
    throw Error(where(field) + ": expected {value: <number" + (kind ? "><unit>" : ">") +
                ", source: <key of references>}");
  }
  const std::string src = n["source"] ? yaml_scalar(n["source"], where(field) + ".source") : "";
  if (src.empty()) throw Error(where(field) + ": missing source (every number needs one)");
  if (!references_.count(src)) {
    std::string keys;
    for (const auto& [k, _] : references_) keys += (keys.empty() ? "" : ", ") + k;
    throw Error(where(field) + ": source '" + src + "' is not a key of references (have: " +
                keys + ")");
  }
  const std::string text = yaml_scalar(n["value"], where(field) + ".value");
  if (kind) return units::parse(text, *kind, where(field));
  return parse_number(text, where(field));
}

double YamlDoc::quantity(const std::string& field, std::optional<units::Kind> kind) const {
  auto v = optional_quantity(field, kind);
  if (!v) throw Error(where(field) + ": missing (required)");
  return *v;
}

bool YamlDoc::flag(const std::string& field) const {
  const YAML::Node n = find(field);
  if (!n || !n.IsMap() || !n["value"]) {
    throw Error(where(field) + ": expected {value: true|false, source: <key of references>}");
  }
  const std::string text = yaml_scalar(n["value"], where(field) + ".value");
  if (text == "true") return true;
  if (text == "false") return false;
  throw Error(where(field) + ": '" + text + "' is not a boolean; accepted: true, false");
}

std::string YamlDoc::source_of(const std::string& field) const {
  const YAML::Node n = find(field);
  if (!n || !n.IsMap() || !n["source"]) return "";
  if (!n["source"].IsScalar()) return "";
  const auto it = references_.find(n["source"].Scalar());
  return it == references_.end() ? "" : it->second;
}

}  // namespace capsim
