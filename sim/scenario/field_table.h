// Readers as schemas: a section of a scenario file is a table of rows, one per field, and one
// row both reads the field (type, range, where it goes in the spec) and documents it (unit,
// accepted values, default, one line). sim/scenario/scenario_fields.cc holds the tables; the
// reference in docs/data-formats.md (`capsim list scenario-fields`) and the HTTP API's schema
// of a scenario body (sim/server/openapi.cc) are written from them, so neither can drift.
//
// Contract: read_fields throws capsim::Error naming the file and dotted field, what was wrong
// and what is accepted; rows before the failing one may have been applied, so a caller drops
// the target on error. An unknown key is refused before any row is read, with every accepted
// key listed in row order; a required row missing, likewise. Rows are applied in row order.
#pragma once

#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

namespace capsim::scenario {

enum class FieldType {
  kText,          // a single value, kept as written
  kWhole,         // a whole number in [lo, hi]
  kNumber,        // a plain number (>= 0) in the row's range
  kBool,          // true or false
  kDistribution,  // a value or {dist: ..., ...}, read as the flags' text form ("lognormal:150:1200")
  kList,          // a value or a list, read as the flags' comma-separated text
  kPath,          // a file path, relative to the scenario file's folder
  kSection,       // a mapping read by its own table (`section` names it)
  kCustom,        // read by the row's setter from the node; `type_words` and `json_schema` say what
  kIgnored,       // accepted and not read (references, notes)
};

struct FieldDoc {
  const char* key;
  FieldType type;
  const char* doc;                // one line: what it means
  const char* default_text = "";  // as the docs give it ("" = not set)
  const char* unit = "";          // "GiB", "requests/s", ... ("" = none or carried by the value)
  double lo = 0;                  // kWhole: inclusive; kNumber: see lo_open, hi_open
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
  const char* range_error = nullptr;  // kNumber out of range: message after "where: "; {} = the value
  const char* accepted = "";          // values the type alone does not say (names, forms)
  const char* flag = "";              // the command-line flag that overrides it ("" = none)
  bool origin = false;                // the file's field replaces `flag` in later messages
  const char* missing = nullptr;      // required: the message after "where: " when absent
  const char* section = nullptr;      // kSection: the table's name; kCustom: a nested table it uses
  const char* type_words = nullptr;   // kCustom: the type as the docs give it
  const char* json_schema = nullptr;  // kCustom: its JSON schema (text)
};

// What a row read, as its setter takes it.
struct FieldValue {
  std::string text;     // the scalar; for kDistribution, kList, kPath the flag-form text
  double number = 0;    // kWhole, kNumber
  bool flag = false;    // kBool
  std::string where;    // "a.yaml: workload.users", for setters that check further
  YAML::Node node;      // the field's node (kSection, kCustom)
  YAML::Node parent;    // the mapping it was read from
  std::string base_dir; // the scenario file's folder (kPath; sections pass it on)
  int whole() const { return static_cast<int>(number); }
};

template <class Target>
struct Field {
  FieldDoc doc;
  void (*set)(Target&, const FieldValue&);
};
// How read_fields applies a row; a table of another row type (engine_options.h) gives its own.
template <class Target>
void apply_field(const Field<Target>& row, Target& target, const FieldValue& v) {
  row.set(target, v);
}

// A table as the docs and the API schema see it.
struct SectionDoc {
  std::string name;  // "" for the file's root, else the section ("engine", "deployment", ...)
  std::string doc;
  std::vector<FieldDoc> fields;
};

template <class Target>
std::vector<FieldDoc> docs_of(std::span<const Field<Target>> rows) {
  std::vector<FieldDoc> out;
  for (const auto& r : rows) out.push_back(r.doc);
  return out;
}

// How to read one section: messages name `prefix` + key ("a.yaml: engine."); `own_keys` are
// the caller's fields in the same mapping, accepted and left alone; `check_unknown` false when
// the caller has checked the keys itself.
struct ReadOptions {
  std::string prefix{};
  std::string base_dir{};
  std::map<std::string, std::string>* origin = nullptr;
  std::vector<std::string> own_keys{};
  bool check_unknown = true;
};

// A kWhole or kNumber row's range in words: "1..64", "(0.05, 1]", "> 0".
std::string range_words(const FieldDoc& row);
// Why `text` is refused for a kWhole or kNumber row, as the words after "where: " (not a plain
// number, negative, not whole, out of the row's range); "" when accepted. The one check of both
// read_value and the command line's flags built from rows (sim/flags/engine_flags.h).
std::string number_refusal(const FieldDoc& row, const std::string& text);

// `row`'s value in `node` (present), checked against the row's type and range.
FieldValue read_value(const FieldDoc& row, const YAML::Node& node, const YAML::Node& parent,
                      const ReadOptions& opt);
// The keys check_keys accepts for `rows` plus `own_keys`, in row order.
std::vector<std::string> accepted_keys(const std::vector<FieldDoc>& rows, const std::vector<std::string>& own_keys);
void check_required(const YAML::Node& section, const std::vector<FieldDoc>& rows, const std::string& prefix);
void check_section_keys(const YAML::Node& section, const std::string& where,
                        const std::vector<FieldDoc>& rows, const std::vector<std::string>& own_keys);

// Reads the fields of `section` present in it, in row order, into `target`: rows of any type
// with a FieldDoc `doc` that apply_field applies (read_fields for a table of Field<Target>).
template <class Target, class Row>
void read_rows(const YAML::Node& section, const std::string& where, std::span<const Row> rows, Target& target,
               const ReadOptions& opt) {
  std::vector<FieldDoc> docs;
  for (const auto& r : rows) docs.push_back(r.doc);
  if (opt.check_unknown) check_section_keys(section, where, docs, opt.own_keys);
  check_required(section, docs, opt.prefix);
  for (const auto& r : rows) {
    const YAML::Node n = section[r.doc.key];
    if (!n || r.doc.type == FieldType::kIgnored) continue;
    bool own = false;
    for (const auto& k : opt.own_keys) own = own || k == r.doc.key;
    if (own) continue;
    if (opt.origin && r.doc.origin) (*opt.origin)[r.doc.flag] = opt.prefix + r.doc.key;
    apply_field(r, target, read_value(r.doc, n, section, opt));
  }
}

template <class Target>
void read_fields(const YAML::Node& section, const std::string& where, std::span<const Field<Target>> rows,
                 Target& target, const ReadOptions& opt) {
  read_rows<Target, Field<Target>>(section, where, rows, target, opt);
}

// The tables as Markdown (docs/data-formats.md#scenario-fields; no newline at the end) and as a JSON schema of the
// root mapping (OpenAPI 3.0's subset: exclusiveMinimum is a boolean).
std::string fields_markdown(const std::vector<SectionDoc>& sections);
nlohmann::ordered_json fields_json_schema(const std::vector<SectionDoc>& sections);

}  // namespace capsim::scenario
