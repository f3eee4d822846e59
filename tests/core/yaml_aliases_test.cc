// YAML that cannot loop (issue #35): every reader of capsim's YAML formats goes through YamlDoc,
// which refuses anchors, aliases, merge keys and a second document from yaml-cpp's events, before
// a node tree is built or walked. Before, the duplicate-key walk followed aliases: a
// self-referencing alias looped forever and a 12-level "billion laughs" under an ignored `notes:`
// was 10^12 nodes to visit. Each case below appends one to a real file of the repository, so the
// file is otherwise accepted, and asserts the refusal at the anchor's line and column.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "sim/check/assumptions.h"
#include "sim/core/error.h"
#include "sim/core/yaml_fields.h"
#include "sim/hardware/card.h"
#include "sim/llm/engine_profile.h"
#include "sim/plan/prices.h"
#include "sim/plan/sweep.h"
#include "sim/scenario/scenario.h"
#include "tests/support/temp_dir.h"

using capsim::YamlDoc;

namespace {

std::string repository_file(const std::string& relative) {
  std::ifstream in(std::string(CAPSIM_DATA_DIR) + "/" + relative, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  REQUIRE(!s.str().empty());
  return s.str();
}

int lines_of(const std::string& text) {
  int n = 0;
  for (const char c : text) n += c == '\n';
  return n;
}

// `notes:` holding `levels` levels of ten aliases each to the level below: 10^levels leaves
// when expanded, in ~60 bytes a level.
std::string alias_bomb(int levels) {
  std::string out = "notes:\n  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < levels; ++i) {
    const std::string below = "*l" + std::to_string(i - 1);
    out += "  l" + std::to_string(i) + ": &l" + std::to_string(i) + " [" + below;
    for (int k = 1; k < 10; ++k) out += ", " + below;
    out += "]\n";
  }
  return out;
}

std::string refusal(const std::function<void(const std::string&)>& read, const std::string& path) {
  try {
    read(path);
  } catch (const capsim::Error& e) {
    return e.what();
  }
  return "(accepted)";
}

// The file `base` of the repository with a self-referencing alias, then with a 12-level alias
// bomb, under a top-level `notes:`: both refused at the first anchor, naming it.
void check_refuses_aliases(const std::string& base, const std::string& suffix,
                           const std::function<void(const std::string&)>& read) {
  const capsim_test::TempDir tmp("yaml_aliases");
  std::string text = repository_file(base);
  if (text.back() != '\n') text += '\n';
  const int notes_line = lines_of(text) + 1;

  const std::string self = tmp.write("self" + suffix, text + "notes: &a [*a]\n");
  CHECK(refusal(read, self) == self + ":" + std::to_string(notes_line) +
                                   ":8: YAML anchor '&a' is not accepted: capsim files do not use anchors, "
                                   "aliases or merge keys; write the value out in full");

  const std::string bomb = tmp.write("bomb" + suffix, text + alias_bomb(12));
  CHECK(refusal(read, bomb) == bomb + ":" + std::to_string(notes_line + 1) +
                                   ":7: YAML anchor '&l0' is not accepted: capsim files do not use anchors, "
                                   "aliases or merge keys; write the value out in full");
}

}  // namespace

TEST_CASE("yaml aliases: a scenario file refuses a self-alias and an alias bomb", "[yaml][aliases]") {
  check_refuses_aliases("workloads/chat-8b-1x-h100.yaml", ".yaml", [](const std::string& p) {
    capsim::scenario::ScenarioSpec spec;
    capsim::scenario::load_scenario_file(p, spec);
  });
}

TEST_CASE("yaml aliases: a card file refuses a self-alias and an alias bomb", "[yaml][aliases]") {
  check_refuses_aliases("calibration/cards/h100-sxm.yaml", ".yaml",
                        [](const std::string& p) { (void)capsim::CardCatalogue::load_file(p); });
}

TEST_CASE("yaml aliases: an engine file refuses a self-alias and an alias bomb", "[yaml][aliases]") {
  check_refuses_aliases("calibration/engines/vllm.yaml", ".yaml",
                        [](const std::string& p) { (void)capsim::EngineCatalogue::load_file(p); });
}

TEST_CASE("yaml aliases: a prices file refuses a self-alias and an alias bomb", "[yaml][aliases]") {
  check_refuses_aliases("calibration/prices.yaml", ".yaml",
                        [](const std::string& p) { (void)capsim::load_prices(p); });
}

TEST_CASE("yaml aliases: an assumptions file refuses a self-alias and an alias bomb", "[yaml][aliases]") {
  check_refuses_aliases("workloads/assumptions.yaml", ".yaml", [](const std::string& p) {
    (void)capsim::check::load_assumptions(p, std::string(CAPSIM_DATA_DIR) + "/calibration/prices.yaml");
  });
}

TEST_CASE("yaml aliases: a sweep file refuses a self-alias and an alias bomb", "[yaml][aliases]") {
  check_refuses_aliases("workloads/sweeps/chat-grid.yaml", ".yaml",
                        [](const std::string& p) { (void)capsim::plan::load_sweep(p); });
}

namespace {

std::string parse_error(const std::string& text, bool lift = true) {
  try {
    (void)YamlDoc::parse(text, "f.yaml", lift);
  } catch (const capsim::Error& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("yaml aliases: anchors, aliases and merge keys are refused where they are written", "[yaml][aliases]") {
  const std::string tail = " is not accepted: capsim files do not use anchors, aliases or merge keys; write ";
  // An anchor on a scalar, a mapping and a sequence, in block and flow style.
  CHECK(parse_error("a: 1\nb: &x 2\nc: *x\n") == "f.yaml:2:4: YAML anchor '&x'" + tail + "the value out in full");
  CHECK(parse_error("a: {b: &m {c: 1}}\n") == "f.yaml:1:8: YAML anchor '&m'" + tail + "the value out in full");
  CHECK(parse_error("a:\n  - &s [1, 2]\n") == "f.yaml:2:5: YAML anchor '&s'" + tail + "the value out in full");
  // An anchor on a key; an anchor after a tag (yaml-cpp marks the node at the tag).
  CHECK(parse_error("&k a: 1\n") == "f.yaml:1:1: YAML anchor '&k'" + tail + "the value out in full");
  CHECK(parse_error("a: !!str &t 1\n") == "f.yaml:1:4: YAML anchor '&t'" + tail + "the value out in full");
  // yaml-cpp 0.7 would keep `<<` as a plain key, not merge: refused, as a merge key, even
  // without an alias.
  CHECK(parse_error("a:\n  <<: {b: 1}\n  c: 2\n") == "f.yaml:2:3: YAML merge key '<<'" + tail +
                                                       "the fields out in full");
  // A file whose references block is lifted (YamlDoc's start-up shortcut) is refused alike.
  const std::string with_references = "references:\n  ds: \"a datasheet\"\nmemory: &m {value: 80GB, source: ds}\n";
  CHECK(parse_error(with_references, true) == "f.yaml:3:9: YAML anchor '&m'" + tail + "the value out in full");
  CHECK(parse_error(with_references, false) == "f.yaml:3:9: YAML anchor '&m'" + tail + "the value out in full");
}

TEST_CASE("yaml aliases: '&', '*', '<<', '---' and '...' in text, quotes and comments are accepted",
          "[yaml][aliases]") {
  // What the pre-check looks for, where it is no anchor, alias, merge key or document marker.
  const YamlDoc d = YamlDoc::parse(
      "# A & B * C --- see ...\n"
      "a: \"x & y * z << w\"\n"
      "b: 'p&q*r'\n"
      "'<<': quoted key\n"
      "c: [a<<b, 2*3, R&D]\n"
      "d: 1.5...2  # a range\n"
      "e: ---x\n"
      "references:\n"
      "  k: \"A & B, --- *\"\n",
      "f.yaml");
  CHECK(d.root()["a"].Scalar() == "x & y * z << w");
  CHECK(d.root()["b"].Scalar() == "p&q*r");
  CHECK(d.root()["<<"].Scalar() == "quoted key");
  CHECK(d.root()["c"][0].Scalar() == "a<<b");
  CHECK(d.root()["c"][1].Scalar() == "2*3");
  CHECK(d.root()["c"][2].Scalar() == "R&D");
  CHECK(d.root()["d"].Scalar() == "1.5...2");
  CHECK(d.root()["e"].Scalar() == "---x");
  CHECK(d.references().at("k") == "A & B, --- *");
}

TEST_CASE("yaml documents: a second document is refused at its start, not ignored", "[yaml][documents]") {
  // yaml-cpp's Load reads the first document only: the second one's fields were dropped unseen.
  const std::string tail = ": a second YAML document (after '---' or '...'); a capsim file holds one document";
  CHECK(parse_error("a: 1\n---\nb: 2\n") == "f.yaml:2:1" + tail);
  CHECK(parse_error("a: 1\n...\nb: 2\n") == "f.yaml:3:1" + tail);
  CHECK(parse_error("a: 1\n---\n") == "f.yaml:2:1" + tail);  // an empty second document too
  CHECK(parse_error("references:\n  ds: \"a datasheet\"\n---\nmemory: 1\n", true) == "f.yaml:3:1" + tail);
  // One document with its optional start and end markers is one document.
  const YamlDoc d = YamlDoc::parse("---\na: 1\n...\n", "f.yaml");
  CHECK(d.root()["a"].Scalar() == "1");

  // Through a reader: the second document's model would have been ignored.
  const capsim_test::TempDir tmp("yaml_documents");
  const std::string path = tmp.write("s.yaml", repository_file("workloads/chat-8b-1x-h100.yaml") +
                                                   "---\nmodel: llama-3.1-70b\n");
  const int line = lines_of(repository_file("workloads/chat-8b-1x-h100.yaml")) + 1;
  CHECK(refusal([](const std::string& p) {
          capsim::scenario::ScenarioSpec spec;
          capsim::scenario::load_scenario_file(p, spec);
        }, path) == path + ":" + std::to_string(line) + ":1" + tail);
}
