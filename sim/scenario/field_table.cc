#include "sim/scenario/field_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "sim/core/error.h"
#include "sim/core/yaml_fields.h"

namespace capsim::scenario {
namespace {

std::string whole_text(double v) { return std::to_string(static_cast<long long>(v)); }

// As the messages write bounds: whole numbers in full ("1000000"), others as %g.
std::string number_text(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return whole_text(v);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

bool in_range(const FieldDoc& r, double v) {
  return (r.lo_open ? v > r.lo : v >= r.lo) && (r.hi_open ? v < r.hi : v <= r.hi);
}

// "5" or {dist:...} given as YAML -> the flag-string form Distribution::parse takes, so files and
// flags share one parser.
std::string dist_text(const YAML::Node& n, const std::string& where) {
  if (n.IsScalar()) return n.Scalar();
  if (!n.IsMap() || !n["dist"]) throw Error(where + ": expected a value or {dist: ..., ...}");
  const std::string k = yaml_scalar(n["dist"], where + ".dist");
  const auto f = [&](const char* key) {
    if (!n[key]) throw Error(where + "." + key + ": missing (" + k + " needs it)");
    return yaml_scalar(n[key], where + "." + key);
  };
  if (k == "fixed") return "fixed:" + f("value");
  if (k == "uniform") return "uniform:" + f("min") + ":" + f("max");
  if (k == "normal") return "normal:" + f("mean") + ":" + f("sd");
  if (k == "lognormal") return "lognormal:" + f("mean") + ":" + f("p99");
  if (k == "exponential") return "exponential:" + f("mean");
  if (k == "geometric") return "geometric:" + f("mean");
  if (k == "empirical") return "empirical:" + f("file") + ":" + f("column");
  throw Error(where + ".dist: unknown distribution '" + k +
              "'; accepted: fixed, uniform, normal, lognormal, exponential, geometric, empirical");
}

// A value or a list of values as the flags' comma-separated text ("0.9,0.8", "q_proj,v_proj").
std::string comma_list(const YAML::Node& n, const std::string& where) {
  if (!n.IsSequence()) return yaml_scalar(n, where);
  std::string text;
  for (std::size_t i = 0; i < n.size(); ++i) {
    text += (i ? "," : "") + yaml_scalar(n[i], where + "[" + std::to_string(i) + "]");
  }
  return text;
}

}  // namespace

std::string range_words(const FieldDoc& r) {
  if (r.type == FieldType::kWhole) return whole_text(r.lo) + ".." + whole_text(r.hi);
  if (std::isinf(r.hi)) return (r.lo_open ? "> " : ">= ") + number_text(r.lo);
  return (r.lo_open ? "(" : "[") + number_text(r.lo) + ", " + number_text(r.hi) + (r.hi_open ? ")" : "]");
}

std::string number_refusal(const FieldDoc& row, const std::string& text) {
  double v = 0;
  try {
    v = parse_number(text, "");
  } catch (const Error& e) {
    return std::string(e.what()).substr(2);  // parse_number's words after the empty "where: "
  }
  if (row.type == FieldType::kWhole) {
    if (v != std::floor(v) || v < row.lo || v > row.hi) {
      return "'" + text + "' is not a whole number in " + whole_text(row.lo) + ".." + whole_text(row.hi);
    }
    return "";
  }
  if (row.type == FieldType::kNumber && !in_range(row, v)) {
    std::string message = row.range_error ? row.range_error : "must be in " + range_words(row);
    if (const auto at = message.find("{}"); at != std::string::npos) message.replace(at, 2, text);
    return message;
  }
  return "";
}

FieldValue read_value(const FieldDoc& row, const YAML::Node& n, const YAML::Node& parent, const ReadOptions& opt) {
  FieldValue v;
  v.where = opt.prefix + row.key;
  v.node = n;
  v.parent = parent;
  v.base_dir = opt.base_dir;
  switch (row.type) {
    case FieldType::kText: v.text = yaml_scalar(n, v.where); break;
    case FieldType::kWhole:
    case FieldType::kNumber: {
      const std::string t = yaml_scalar(n, v.where);
      if (const std::string why = number_refusal(row, t); !why.empty()) throw Error(v.where + ": " + why);
      v.number = parse_number(t, v.where);
      if (row.type == FieldType::kNumber) v.text = t;
      break;
    }
    case FieldType::kBool:
      v.text = yaml_scalar(n, v.where);
      if (v.text != "true" && v.text != "false") throw Error(v.where + ": '" + v.text + "'; accepted: true, false");
      v.flag = v.text == "true";
      break;
    case FieldType::kDistribution: v.text = dist_text(n, v.where); break;
    case FieldType::kList: v.text = comma_list(n, v.where); break;
    case FieldType::kPath: {
      // Relative to the scenario file, so scenarios run from anywhere.
      std::filesystem::path t = yaml_scalar(n, v.where);
      if (t.is_relative()) t = std::filesystem::path(opt.base_dir) / t;
      v.text = t.lexically_normal().string();
      break;
    }
    case FieldType::kSection:
    case FieldType::kCustom:
    case FieldType::kIgnored: break;
  }
  return v;
}

std::vector<std::string> accepted_keys(const std::vector<FieldDoc>& rows, const std::vector<std::string>& own_keys) {
  std::vector<std::string> keys;
  for (const auto& r : rows) keys.push_back(r.key);
  for (const auto& k : own_keys) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  return keys;
}

void check_section_keys(const YAML::Node& section, const std::string& where, const std::vector<FieldDoc>& rows,
                        const std::vector<std::string>& own_keys) {
  check_keys(section, where, accepted_keys(rows, own_keys));
}

void check_required(const YAML::Node& section, const std::vector<FieldDoc>& rows, const std::string& prefix) {
  for (const auto& r : rows) {
    if (r.missing && !section[r.key]) throw Error(prefix + r.key + ": " + r.missing);
  }
}

namespace {

std::string type_words(const FieldDoc& r) {
  std::string t;
  switch (r.type) {
    case FieldType::kText: t = "text"; break;
    case FieldType::kWhole: t = "whole number"; break;
    case FieldType::kNumber: t = "number"; break;
    case FieldType::kBool: t = "true/false"; break;
    case FieldType::kDistribution: t = "distribution"; break;
    case FieldType::kList: t = "value or list"; break;
    case FieldType::kPath: t = "path"; break;
    case FieldType::kSection: t = "mapping"; break;
    case FieldType::kCustom: t = r.type_words ? r.type_words : "see meaning"; break;
    case FieldType::kIgnored: t = "any (not read)"; break;
  }
  if (*r.unit) t += std::string(", ") + r.unit;
  return t;
}

std::string accepted_words(const FieldDoc& r) {
  std::string a;
  if (r.type == FieldType::kWhole || (r.type == FieldType::kNumber && (r.lo != 0 || r.lo_open || !std::isinf(r.hi)))) {
    a = range_words(r);
  }
  if (r.type == FieldType::kBool) a = "true, false";
  if ((r.type == FieldType::kSection || r.type == FieldType::kCustom) && r.section) {
    a = std::string("fields of `") + r.section + "` below";
  }
  if (*r.accepted) a += (a.empty() ? "" : "; ") + std::string(r.accepted);
  return a;
}

std::string cell(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string fields_markdown(const std::vector<SectionDoc>& sections) {
  std::string md;
  for (const auto& s : sections) {
    if (!md.empty()) md += "\n\n";
    md += s.name.empty() ? std::string("**The file's top level**") : "**`" + s.name + "`**";
    md += ": " + s.doc + "\n\n";
    md += "| field | type | accepted | default | flag | meaning |\n|---|---|---|---|---|---|";
    for (const auto& r : s.fields) {
      const std::string def = r.missing ? "required" : r.default_text;
      md += "\n| `" + std::string(r.key) + "` | " + cell(type_words(r)) + " | " + cell(accepted_words(r)) + " | " +
            cell(def) + " | " + (*r.flag ? "`" + std::string(r.flag) + "`" : "") + " | " + cell(r.doc) + " |";
    }
  }
  return md;
}

namespace {

using ojson = nlohmann::ordered_json;

const SectionDoc& section_named(const std::vector<SectionDoc>& sections, const std::string& name) {
  for (const auto& s : sections) {
    if (s.name == name) return s;
  }
  throw Error("scenario fields: no table named '" + name + "'");
}

ojson section_schema(const std::vector<SectionDoc>& sections, const SectionDoc& s);

// Replaces every {"$section": NAME} in a row's hand-written schema with that table's schema.
void expand_sections(const std::vector<SectionDoc>& sections, ojson& j) {
  if (j.is_object() && j.contains("$section")) {
    j = section_schema(sections, section_named(sections, j["$section"].get<std::string>()));
    return;
  }
  if (j.is_structured()) {
    for (auto& x : j) expand_sections(sections, x);
  }
}

ojson field_schema(const std::vector<SectionDoc>& sections, const FieldDoc& r) {
  ojson j;
  switch (r.type) {
    case FieldType::kText:
    case FieldType::kPath: j["type"] = "string"; break;
    case FieldType::kWhole:
      j["type"] = "integer";
      j["minimum"] = static_cast<long long>(r.lo);
      j["maximum"] = static_cast<long long>(r.hi);
      break;
    case FieldType::kNumber:
      j["type"] = "number";
      j["minimum"] = r.lo;
      if (r.lo_open) j["exclusiveMinimum"] = true;
      if (!std::isinf(r.hi)) j["maximum"] = r.hi;
      if (r.hi_open) j["exclusiveMaximum"] = true;
      break;
    case FieldType::kBool: j["type"] = "boolean"; break;
    case FieldType::kDistribution:
      j["oneOf"] = ojson::array({{{"type", "number"}}, {{"type", "string"}},
                                 {{"type", "object"}, {"required", {"dist"}},
                                  {"properties", {{"dist", {{"type", "string"},
                                                            {"enum", {"fixed", "uniform", "normal", "lognormal",
                                                                      "exponential", "geometric", "empirical"}}}}}}}});
      break;
    case FieldType::kList:
      j["oneOf"] = ojson::array({{{"type", "string"}}, {{"type", "number"}},
                                 {{"type", "array"}, {"items", {{"oneOf", {{{"type", "string"}}, {{"type", "number"}}}}}}}});
      break;
    case FieldType::kSection: j = section_schema(sections, section_named(sections, r.section)); break;
    case FieldType::kCustom:
      j = ojson::parse(r.json_schema);
      expand_sections(sections, j);
      break;
    case FieldType::kIgnored: break;
  }
  std::string d = r.doc;
  if (const std::string a = accepted_words(r); !a.empty() && !r.section) d += ". Accepted: " + a;
  if (*r.unit) d += ". Unit: " + std::string(r.unit);
  if (*r.default_text) d += ". Default: " + std::string(r.default_text);
  if (*r.flag) d += ". Flag: " + std::string(r.flag);
  j["description"] = d;
  return j;
}

ojson section_schema(const std::vector<SectionDoc>& sections, const SectionDoc& s) {
  ojson j;
  j["type"] = "object";
  j["description"] = s.doc;
  ojson props = ojson::object();
  ojson required = ojson::array();
  for (const auto& r : s.fields) {
    props[r.key] = field_schema(sections, r);
    if (r.missing) required.push_back(r.key);
  }
  j["properties"] = props;
  if (!required.empty()) j["required"] = required;
  j["additionalProperties"] = false;
  return j;
}

}  // namespace

nlohmann::ordered_json fields_json_schema(const std::vector<SectionDoc>& sections) {
  return section_schema(sections, section_named(sections, ""));
}

}  // namespace capsim::scenario
