// Reading capsim's YAML data files: required/optional fields with their location in messages,
// and "sourced quantities" — {value: "<number><unit>", source: <key of references>}.
//
// Contract: every accessor throws capsim::Error naming `file: path.to.field`, what was wrong and
// what is accepted. Nothing here knows what the fields mean.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/units.h"

namespace capsim {

// One YAML file, loaded with its references map (if any) for source checks.
class YamlDoc {
 public:
  // Throws capsim::Error "path: cannot read file" / "path:LINE:COL: malformed YAML: ...".
  static YamlDoc load(const std::string& path);
  // The same from text already read (`path` names it in messages). `lift_references` false
  // hands every character to yaml-cpp (the tests compare both ways).
  static YamlDoc parse(const std::string& text, const std::string& path, bool lift_references = true);

  const std::string& path() const { return path_; }
  const YAML::Node& root() const { return root_; }
  const std::map<std::string, std::string>& references() const { return references_; }

  // `field` is a dotted path from the root ("interconnect.nvlink_bandwidth").
  YAML::Node find(const std::string& field) const;  // null node when absent
  bool has(const std::string& field) const { return static_cast<bool>(find(field)); }

  std::string string(const std::string& field) const;
  std::optional<std::string> optional_string(const std::string& field) const;

  // A sourced quantity: {value, source}. The unit kind is checked; the source must be a key of
  // `references`. `kind` empty means a plain number (fraction, count).
  double quantity(const std::string& field, std::optional<units::Kind> kind) const;
  std::optional<double> optional_quantity(const std::string& field,
                                          std::optional<units::Kind> kind) const;
  bool flag(const std::string& field) const;  // sourced boolean
  std::string source_of(const std::string& field) const;  // the citation text

  std::string where(const std::string& field) const { return path_ + ": " + field; }

 private:
  std::string path_;
  YAML::Node root_;
  std::map<std::string, std::string> references_;
};

// A scalar's text; Error "where: expected a single value" for a list, mapping or null.
std::string yaml_scalar(const YAML::Node& n, const std::string& where);
// `n` must be a mapping whose field names are all among `keys`: a misspelt optional field would
// otherwise be ignored and its default used unseen. Throws "<where>: unknown field 'k'; accepted: ...".
void check_keys(const YAML::Node& n, const std::string& where, const std::vector<std::string>& keys);

// Plain-number parse with range check; for fractions, counts and flags.
double parse_number(const std::string& text, const std::string& where);

}  // namespace capsim
