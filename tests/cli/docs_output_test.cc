// The docs' numbers are what the commands give now. Two markers (scripts/update_docs.py
// describes them and regenerates both):
// - `<!-- capsim-output: ARGS -->` followed by a ```text block: exactly what `capsim ARGS` prints;
// - `<!-- capsim-value: ARGS | PATH [| FORMAT] -->TEXT<!-- /capsim-value -->` inline: TEXT is the
//   value at PATH of `capsim ARGS --json -`, written as FORMAT says (the rules below are the
//   script's: `key`, `N`, `#`, `key=value` path segments; no format, a printf `%...` of one
//   number, or `time` for milliseconds written as units::format_time writes seconds).
// A doc whose output or quoted number drifts from the command it names fails here.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/core/units.h"
#include "tests/check/cli_run.h"

namespace {

struct Block {
  std::string doc, args, expected;
  int line = 0;
};

struct Value {
  std::string doc, args, path, format, quoted;
  int line = 0;
};

// Every Markdown file the markers may be in, relative to the repository root.
std::vector<std::string> doc_files() {
  std::vector<std::string> out{"README.md"};
  for (const auto& e : std::filesystem::directory_iterator(std::string(CAPSIM_DATA_DIR) + "/docs")) {
    if (e.path().extension() == ".md") out.push_back("docs/" + e.path().filename().string());
  }
  return out;
}

std::vector<std::string> lines_of(const std::string& doc) {
  std::ifstream in(std::string(CAPSIM_DATA_DIR) + "/" + doc);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

std::vector<Block> blocks(const std::string& doc, const std::vector<std::string>& lines) {
  std::vector<Block> out;
  const std::string open = "<!-- capsim-output: ", close = " -->";
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.rfind(open, 0) != 0 || l.size() < open.size() + close.size() ||
        l.compare(l.size() - close.size(), close.size(), close) != 0 || lines[i + 1] != "```text") {
      continue;
    }
    Block b{doc, l.substr(open.size(), l.size() - open.size() - close.size()), "", static_cast<int>(i + 1)};
    for (std::size_t k = i + 2; k < lines.size() && lines[k] != "```"; ++k) b.expected += lines[k] + "\n";
    out.push_back(b);
  }
  return out;
}

std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  for (std::size_t start = 0;;) {
    const std::size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + sep.size();
  }
}

std::vector<Value> values(const std::string& doc, const std::vector<std::string>& lines) {
  static const std::regex marker("<!-- capsim-value: (.*?) -->(.*?)<!-- /capsim-value -->");
  std::vector<Value> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    for (std::sregex_iterator m(lines[i].begin(), lines[i].end(), marker), end; m != end; ++m) {
      const auto parts = split((*m)[1].str(), " | ");
      Value v{doc, parts[0], parts.size() > 1 ? parts[1] : "", parts.size() > 2 ? parts[2] : "", (*m)[2].str(),
              static_cast<int>(i + 1)};
      out.push_back(v);
    }
  }
  return out;
}

// A JSON value written without a format, as the script's plain() writes it.
std::string plain(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number_float()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", v.get<double>());
    return buf;
  }
  return v.dump();
}

nlohmann::json walk(const nlohmann::json& doc, const std::string& path) {
  nlohmann::json v = doc;
  for (const std::string& seg : split(path, ".")) {
    if (seg == "#") {
      v = v.size();
    } else if (const auto eq = seg.find('='); eq != std::string::npos) {
      const std::string key = seg.substr(0, eq), want = seg.substr(eq + 1);
      nlohmann::json found;
      for (const auto& x : v) {
        if (x.contains(key) && plain(x[key]) == want) {
          found = x;
          break;
        }
      }
      if (found.is_null()) throw std::runtime_error("no element with " + seg);
      v = found;
    } else if (v.is_array()) {
      v = v.at(std::stoul(seg));
    } else {
      v = v.at(seg);
    }
  }
  return v;
}

std::string render(const nlohmann::json& v, const std::string& format) {
  if (format.empty()) return plain(v);
  if (format == "time") return capsim::units::format_time(v.get<double>() / 1e3);
  char buf[128];
  std::snprintf(buf, sizeof buf, format.c_str(), v.get<double>());
  return buf;
}

}  // namespace

TEST_CASE("docs: the value markers' rules, on a made-up answer", "[docs][cli]") {
  const auto doc = nlohmann::json::parse(R"({"options": [{"card": "t4", "usd_per_hour": 1.7612, "cards": 8,
      "best": false, "p95_ttft_ms": 2380.4}, {"card": "h100-sxm", "best": true, "p95_ttft_ms": 215.4}]})");
  CHECK(render(walk(doc, "options.0.card"), "") == "t4");
  CHECK(render(walk(doc, "options.0.cards"), "") == "8");
  CHECK(render(walk(doc, "options.0.usd_per_hour"), "%.2f") == "1.76");
  CHECK(render(walk(doc, "options.0.usd_per_hour"), "") == "1.7612");
  CHECK(render(walk(doc, "options.#"), "") == "2");
  CHECK(render(walk(doc, "options.best=true.card"), "") == "h100-sxm");
  CHECK(render(walk(doc, "options.card=t4.p95_ttft_ms"), "time") == "2.38 s");
  CHECK(render(walk(doc, "options.card=h100-sxm.p95_ttft_ms"), "time") == "215.40 ms");
  CHECK_THROWS(walk(doc, "options.card=a10.p95_ttft_ms"));
  // A quoted number that is not the command's fails: the marker's text is compared whole.
  const auto found = values("x.md", {"costs $<!-- capsim-value: plan a.yaml -q | options.0.usd_per_hour | %.2f -->1.75"
                                     "<!-- /capsim-value -->/hour on <!-- capsim-value: plan a.yaml -q | options.0.card -->"
                                     "t4<!-- /capsim-value -->"});
  REQUIRE(found.size() == 2);
  CHECK(found[0].args == "plan a.yaml -q");
  CHECK(found[0].path == "options.0.usd_per_hour");
  CHECK(found[0].format == "%.2f");
  CHECK(found[0].quoted == "1.75");
  CHECK(render(walk(doc, found[0].path), found[0].format) != found[0].quoted);
  CHECK(found[1].format.empty());
  CHECK(render(walk(doc, found[1].path), found[1].format) == found[1].quoted);
}

TEST_CASE("docs: every embedded command output is what the command prints now", "[docs][cli][slow]") {
  std::vector<Block> all;
  for (const std::string& doc : doc_files()) {
    const auto b = blocks(doc, lines_of(doc));
    all.insert(all.end(), b.begin(), b.end());
  }
  REQUIRE(all.size() >= 4);  // the docs show at least these commands' output
  for (const Block& b : all) {
    INFO(b.doc << ":" << b.line << ": capsim " << b.args << " (regenerate: python3 scripts/update_docs.py)");
    const auto r = capsim_test::run_capsim(b.args);
    std::string got = r.out;
    while (!got.empty() && got.back() == '\n') got.pop_back();
    got += "\n";
    CHECK(got == b.expected);
  }
}

TEST_CASE("docs: every number quoted in prose is what its command gives now", "[docs][cli][slow]") {
  std::vector<Value> all;
  for (const std::string& doc : doc_files()) {
    const auto v = values(doc, lines_of(doc));
    all.insert(all.end(), v.begin(), v.end());
  }
  // planning.md's and scenarios.md's quotes of plan's top option and compare's winners at least.
  REQUIRE(all.size() >= 10);
  std::map<std::string, nlohmann::json> answers;  // each command once
  for (const Value& v : all) {
    INFO(v.doc << ":" << v.line << ": capsim " << v.args << " --json - | " << v.path
                << " (regenerate: python3 scripts/update_docs.py)");
    if (!answers.count(v.args)) {
      const auto r = capsim_test::run_capsim(v.args + " --json -");
      REQUIRE(r.status <= 1);  // an answer (1: none meets the SLOs), not bad input
      answers[v.args] = nlohmann::json::parse(r.out);
    }
    CHECK(render(walk(answers[v.args], v.path), v.format) == v.quoted);
  }
}
