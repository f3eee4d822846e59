#include "sim/core/yaml_fields.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include "sim/core/error.h"
#include "sim/core/input_limits.h"

namespace capsim {

namespace {

// yaml-cpp's scanner spends ~1,100 instructions per character; a card or engine file is mostly
// its `references:` block of long one-line citations (the engine profile: 4 of its 6 KB), read
// on every run's start-up. When that block is nothing but `  key: "text"` lines (text without
// `"` or `\`, so yaml-cpp's value is the text as written) and comment or blank lines, each
// citation is lifted out and yaml-cpp reads `  key: ""` in its place: the same lines, keys and
// columns, so every other node and every error mark is as before. The caller checks that
// yaml-cpp saw exactly these keys, in this order, as the references mapping, and puts the
// texts back into the tree; anything else is parsed again from the original text.
struct LiftedReferences {
  std::string text;                                          // what yaml-cpp reads
  std::vector<std::pair<std::string, std::string>> entries;  // in file order
};

bool is_key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.';
}

// Splits `line` as `  key: "value"` (exactly two spaces, a key of [A-Za-z0-9_.-] not starting
// with '-' or '.', one space, a double-quoted value without '"', '\' or control characters).
bool split_reference(std::string_view line, std::string_view& key, std::string_view& value) {
  if (line.size() < 7 || line[0] != ' ' || line[1] != ' ' || !is_key_char(line[2]) || line[2] == '-' ||
      line[2] == '.') {
    return false;
  }
  std::size_t i = 2;
  while (i < line.size() && is_key_char(line[i])) ++i;
  if (line.substr(i, 3) != ": \"" || line.back() != '"' || line.size() < i + 4) return false;
  key = line.substr(2, i - 2);
  value = line.substr(i + 3, line.size() - i - 4);
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\' || u < 0x20 || u == 0x7f) return false;
  }
  return true;
}

// Empty `entries` when the file has no such block (or one the fast path does not take).
LiftedReferences lift_references(const std::string& text) {
  LiftedReferences out;
  std::size_t block = std::string::npos;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t eol = std::min(text.find('\n', pos), text.size());
    const std::string_view line(text.data() + pos, eol - pos);
    if (line.rfind("references:", 0) == 0 && line.find_first_not_of(' ', 11) == std::string_view::npos) {
      if (block != std::string::npos) return {};  // a second top-level `references:`
      block = eol + 1;
    }
    pos = eol + 1;
  }
  if (block == std::string::npos || block > text.size()) return {};
  out.text.reserve(text.size());
  out.text.append(text, 0, block);
  std::size_t pos = block;
  for (; pos < text.size();) {
    const std::size_t eol = std::min(text.find('\n', pos), text.size());
    std::string_view line(text.data() + pos, eol - pos);
    if (!line.empty() && line.back() == '\r') return {};
    const std::size_t first = line.find_first_not_of(' ');
    if (first == std::string_view::npos || line[first] == '#') {
      if (first == 0) break;  // a column-0 comment: the block's end is decided by the next key
      out.text.append(line);
    } else if (first == 0) {
      break;  // the next top-level key
    } else {
      std::string_view key, value;
      if (!split_reference(line, key, value)) return {};
      out.entries.emplace_back(std::string(key), std::string(value));
      out.text.append("  ").append(key).append(": \"\"");
    }
    if (eol < text.size()) out.text.push_back('\n');
    pos = eol + 1;
  }
  if (pos < text.size()) out.text.append(text, pos, std::string::npos);
  if (out.entries.empty()) return {};
  return out;
}

// Refuses, from yaml-cpp's events and before any node tree exists, what capsim's formats never
// use and what would let a few hundred bytes cost hours: an alias is a reference that every walk
// of the tree follows again (`a: &a [*a]` is a cycle; twelve levels of ten aliases each under an
// ignored `notes:` are 10^12 nodes to the duplicate-key check), so anchors, aliases and merge
// keys (`<<`, which yaml-cpp 0.7 keeps as a plain key) are refused at their line and column, as
// is a second document, which YAML::Load would drop unread. The handler throws on the first such
// event, so the parse stops there. Malformed YAML escapes as YAML::Exception, for the caller to
// report.
class OneDocumentWithoutAliases final : public YAML::EventHandler {
 public:
  OneDocumentWithoutAliases(const std::string& text, const std::string& path) : text_(text), path_(path) {}

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ > 1) {
      refuse(mark, "a second YAML document (after '---' or '...'); a capsim file holds one document");
    }
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    check_anchor(mark, anchor);
    end_node();
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    refuse(mark, "YAML alias " + name_at(mark, '*') + "is not accepted: capsim files do not use anchors, "
                 "aliases or merge keys; write the value out in full");
  }
  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    check_anchor(mark, anchor);
    // Only a plain `<<` is a merge key; a quoted "<<" is the string.
    if (tag == "?" && value == "<<" && at_key()) {
      refuse(mark, "YAML merge key '<<' is not accepted: capsim files do not use anchors, aliases or "
                   "merge keys; write the fields out in full");
    }
    end_node();
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    check_anchor(mark, anchor);
    open_.push_back({false, false});
  }
  void OnSequenceEnd() override {
    open_.pop_back();
    end_node();
  }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    check_anchor(mark, anchor);
    open_.push_back({true, true});
  }
  void OnMapEnd() override {
    open_.pop_back();
    end_node();
  }

 private:
  struct Open {
    bool is_map;
    bool at_key;  // in a map: the next node is a key
  };

  bool at_key() const { return !open_.empty() && open_.back().is_map && open_.back().at_key; }
  // A finished node in a map turns key into value and value into the next key.
  void end_node() {
    if (!open_.empty() && open_.back().is_map) open_.back().at_key = !open_.back().at_key;
  }
  void check_anchor(const YAML::Mark& mark, YAML::anchor_t anchor) const {
    if (anchor == YAML::NullAnchor) return;
    refuse(mark, "YAML anchor " + name_at(mark, '&') + "is not accepted: capsim files do not use anchors, "
                 "aliases or merge keys; write the value out in full");
  }
  // "'&name' " as written: the first `sigil` from `mark` on its line (yaml-cpp marks an anchored
  // node at its properties, a tag before the anchor included), or "" when there is none there
  // (a byte-order mark shifts positions; the line and column stay right).
  std::string name_at(const YAML::Mark& mark, char sigil) const {
    if (mark.pos < 0 || static_cast<std::size_t>(mark.pos) >= text_.size()) return "";
    const std::size_t at = text_.find_first_of(std::string{sigil, '\n'}, static_cast<std::size_t>(mark.pos));
    if (at == std::string::npos || text_[at] != sigil) return "";
    const std::size_t end = text_.find_first_of(" \t\r\n,[]{}", at);
    const std::size_t length = std::min<std::size_t>((end == std::string::npos ? text_.size() : end) - at, 64);
    std::string out = "'";  // appends, not `a + b`: GCC 12 warns falsely (-Wrestrict) on that chain
    out.append(text_, at, length);
    out += "' ";
    return out;
  }
  [[noreturn]] void refuse(const YAML::Mark& mark, const std::string& what) const {
    throw Error(path_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) + ": " + what);
  }

  const std::string& text_;
  const std::string& path_;
  int documents_ = 0;
  std::vector<Open> open_;
};

// Throws capsim::Error for an anchor, alias, merge key or second document in `text`; lets
// YAML::Exception (malformed YAML) through. yaml-cpp makes an anchor only from '&', an alias only
// from '*', a merge key only from "<<", and starts or ends a document only at "---" or "...":
// text with none of them skips this second parse, which costs about what loading the file does
// (yaml-cpp's scanner dominates both).
void refuse_aliases_and_documents(const std::string& text, const std::string& path) {
  if (text.find_first_of("&*") == std::string::npos && text.find("<<") == std::string::npos &&
      text.find("---") == std::string::npos && text.find("...") == std::string::npos) {
    return;
  }
  std::istringstream in(text);
  YAML::Parser parser(in);
  OneDocumentWithoutAliases guard(text, path);
  while (parser.HandleNextDocument(guard)) {
  }
}

YAML::Node load_yaml(const std::string& text, const std::string& path) {
  try {
    refuse_aliases_and_documents(text, path);
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                ": malformed YAML: " + e.msg);
  }
}

// Whether `root`'s references mapping is exactly `entries`' keys in order, each value empty.
bool took_lifted(const YAML::Node& root, const LiftedReferences& lifted) {
  if (!root.IsMap()) return false;
  const YAML::Node refs = root["references"];
  if (!refs || !refs.IsMap() || refs.size() != lifted.entries.size()) return false;
  std::size_t i = 0;
  for (const auto& kv : refs) {
    if (!kv.first.IsScalar() || !kv.second.IsScalar() || kv.first.Scalar() != lifted.entries[i].first ||
        !kv.second.Scalar().empty() || kv.second.Tag() != "!") {
      return false;
    }
    ++i;
  }
  return true;
}

// yaml-cpp keeps both entries of a repeated key and a lookup finds the first, so a second
// `model:` would be ignored without a word: refused here, for every file capsim reads as YAML.
void refuse_duplicate_keys(const YAML::Node& root, const std::string& path) {
  std::vector<YAML::Node> pending{root};
  while (!pending.empty()) {
    const YAML::Node node = pending.back();
    pending.pop_back();
    if (node.IsSequence()) {
      for (const auto& child : node) pending.push_back(child);
    } else if (node.IsMap()) {
      std::set<std::string> seen;
      for (const auto& kv : node) {
        if (kv.first.IsScalar() && !seen.insert(kv.first.Scalar()).second) {
          const YAML::Mark m = kv.first.Mark();
          throw Error(path + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1) +
                      ": duplicate key '" + kv.first.Scalar() + "'; each key may appear once in a mapping");
        }
        pending.push_back(kv.second);
      }
    }
  }
}

}  // namespace

YamlDoc YamlDoc::load(const std::string& path) {
  return parse(read_input_file(path, "YAML file", kMaxYamlBytes), path);
}

YamlDoc YamlDoc::parse(const std::string& text, const std::string& path, bool lift) {
  YamlDoc doc;
  doc.path_ = path;
  LiftedReferences lifted;
  if (lift) lifted = lift_references(text);
  if (!lifted.entries.empty()) {
    YAML::Node root;
    try {
      // The lifted text differs from the original only inside plain quoted citations, so an
      // anchor, alias, merge key or document marker refused here is at the same line and column there.
      refuse_aliases_and_documents(lifted.text, path);
      root = YAML::Load(lifted.text);
    } catch (const YAML::Exception&) {
      root = YAML::Node();  // reported from the original text below
    }
    if (took_lifted(root, lifted)) {
      std::size_t i = 0;
      for (auto kv : root["references"]) kv.second = lifted.entries[i++].second;
      doc.root_ = root;
    } else {
      doc.root_ = load_yaml(text, path);
    }
  } else {
    doc.root_ = load_yaml(text, path);
  }
  if (!doc.root_.IsMap()) throw Error(path + ": expected a mapping of fields at the top level");
  refuse_duplicate_keys(doc.root_, path);
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

void check_keys(const YAML::Node& n, const std::string& where, const std::vector<std::string>& keys) {
  std::string list;
  for (const auto& x : keys) list += (list.empty() ? "" : ", ") + x;
  if (!n.IsMap()) throw Error(where + ": expected a mapping with fields among: " + list);
  for (const auto& kv : n) {
    if (!kv.first.IsScalar()) throw Error(where + ": a field name is not a plain word; accepted: " + list);
    const std::string& k = kv.first.Scalar();
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
      throw Error(where + ": unknown field '" + k + "'; accepted: " + list);
    }
  }
}

}  // namespace capsim
