// YamlDoc's start-up shortcut (sim/core/yaml_fields.cc, lift_references): a file's one-line
// citations are lifted out of the text yaml-cpp scans and put back into the tree. Whatever the
// text, the document must be the one yaml-cpp alone reads: the same tree (emitted), the same
// references, the same error for malformed input.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "sim/core/error.h"
#include "sim/core/yaml_fields.h"

using capsim::YamlDoc;

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Both ways: "tree|refs" or "error: message".
std::string read(const std::string& text, bool lift) {
  try {
    const YamlDoc d = YamlDoc::parse(text, "f.yaml", lift);
    YAML::Emitter e;
    e << d.root();
    std::string out = std::string(e.c_str()) + "\n--refs--\n";
    for (const auto& [k, v] : d.references()) out += k + " => " + v + "\n";
    return out;
  } catch (const capsim::Error& e) {
    return std::string("error: ") + e.what();
  }
}

void same_both_ways(const std::string& text) {
  INFO(text);
  CHECK(read(text, true) == read(text, false));
}

}  // namespace

TEST_CASE("yaml references lift: every data file of the repository reads as yaml-cpp reads it", "[yaml]") {
  int files = 0, with_references = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(CAPSIM_DATA_DIR)) {
    const std::string p = e.path().string();
    if (e.path().extension() != ".yaml" || p.find("/build") != std::string::npos ||
        p.find("node_modules") != std::string::npos || p.find("/.git/") != std::string::npos) {
      continue;
    }
    const std::string text = slurp(e.path());
    ++files;
    with_references += text.find("\nreferences:") != std::string::npos;
    INFO(p);
    CHECK(read(text, true) == read(text, false));
  }
  // The catalogue's cards and engines (and more) carry references; the shortcut must be taken.
  CHECK(files > 50);
  CHECK(with_references >= 20);
}

TEST_CASE("yaml references lift: the shortcut is taken only where it reads the same", "[yaml]") {
  const std::string head = "name: x\nreferences:\n";
  // Taken: plain one-line citations, comments and blank lines between them, a key after.
  same_both_ways(head + "  a: \"Vendor datasheet, p. 3: 80 GB # not a comment\"\n\n  # note\n  b-2.x: \"y\"\nnext: {value: 1, source: a}\n");
  same_both_ways(head + "  a: \"\"\n  b: \"unicode \xc2\xb5s, tabs\tinside\"\n");
  same_both_ways(head + "  a: \"x\"");  // no final newline
  // Not taken (yaml-cpp reads these itself): escapes, quotes, multi-line values, other
  // indentation, comments after the value, duplicate keys, a column-0 comment inside the block,
  // keys yaml-cpp reads as null, flow mappings, a second references key, CRLF line ends.
  same_both_ways(head + "  a: \"with \\\"escaped\\\" quotes \\u00b5\"\n");
  same_both_ways(head + "  a: \"first line\n    second line\"\n");
  same_both_ways(head + "    a: \"four spaces\"\n");
  same_both_ways(head + "  a: \"x\" # trailing comment\n");
  same_both_ways(head + "  a: \"x\"\n  a: \"y\"\n");
  same_both_ways(head + "  a: \"x\"\n# column-0 comment\n  b: \"y\"\n");
  same_both_ways(head + "  null: \"x\"\n  b: \"y\"\n");
  same_both_ways("name: x\nreferences: {a: \"x\"}\n");
  same_both_ways(head + "  a: \"x\"\nreferences:\n  b: \"y\"\n");
  same_both_ways("name: x\r\nreferences:\r\n  a: \"x\"\r\n");
  same_both_ways(head + "  a: 'single quoted'\n  b: plain text\n");
  // Malformed input: the same error, line and column as without the shortcut.
  same_both_ways(head + "  a: \"x\"\nbad: [1, 2\n");
  same_both_ways(head + "  a: \"x\"\n  b: \"unterminated\n");
  same_both_ways(head + "  a: \"x\"\n: no key\n");
  CHECK(read(head + "  a: \"x\"\nbad: [1, 2\n", true).rfind("error: f.yaml:5:", 0) == 0);
}
