// Reading whole input files (JSON and YAML documents, CSV tables) within bounds, before any
// parser sees them.
//
// Contract: read_input_file refuses files larger than its limit (Error "path: N bytes; the
// limit for WHAT is M"); parse_json refuses text nested deeper than kMaxJsonDepth before
// parsing (nlohmann's recursive dump and destruction of such values overflow the stack) and
// turns parse errors into "where:LINE: malformed JSON: ...". Both name the file.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace capsim {

// Size limits by format, from measured worst cases (docs/robustness.md): capsim's own YAML files
// are under 8 KB and its JSON results a few KB, but a parser's memory grows with the node count —
// a 16 MiB YAML flow list took yaml-cpp 113 s and 3.9 GB, 16 MiB of JSON numbers nlohmann 7 s
// and 400 MB. Tables (empirical-distribution CSVs) become one double per row.
inline constexpr std::size_t kMaxYamlBytes = std::size_t{256} << 10;
inline constexpr std::size_t kMaxJsonBytes = std::size_t{4} << 20;
inline constexpr std::size_t kMaxTableBytes = std::size_t{64} << 20;
// The deepest of capsim's own formats nests under ten levels.
inline constexpr int kMaxJsonDepth = 128;

// The whole file. `what` names the kind of file for the size message ("config.json").
std::string read_input_file(const std::string& path, std::string_view what,
                            std::size_t max_bytes = kMaxJsonBytes);

// The deepest bracket nesting of JSON text (strings and escapes skipped), and the 1-based line
// where it first exceeded `limit` (0 when it did not).
struct JsonDepth {
  int depth = 0;
  std::size_t line_over = 0;
};
JsonDepth json_depth(std::string_view text, int limit = kMaxJsonDepth);

// Error "where:LINE: JSON nested deeper than 128 levels; ..." when the text nests deeper.
void check_json_depth(std::string_view text, const std::string& where);

// Parses a whole JSON document. `where` is the file (or "file:LINE" for one line of a JSON-lines
// file); errors read "where[:LINE]: malformed JSON: ..." or "...: nested deeper than 128 levels".
nlohmann::json parse_json(std::string_view text, const std::string& where);

// "an object", "a string", ... for messages.
const char* json_type_word(const nlohmann::json& j);

}  // namespace capsim
