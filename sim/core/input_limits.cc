#include "sim/core/input_limits.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/core/error.h"

namespace capsim {

std::string read_input_file(const std::string& path, std::string_view what,
                            std::size_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw Error(path + ": cannot read file");
  if (fs::is_directory(st)) throw Error(path + ": is a directory, not a " + std::string(what));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read file");
  // Read at most one byte over the limit: works for pipes and /dev files, whose size is unknown.
  std::string text;
  char buf[1 << 16];
  while (in && text.size() <= max_bytes) {
    in.read(buf, sizeof buf);
    text.append(buf, static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw Error(path + ": read error");
  if (text.size() > max_bytes) {
    throw Error(path + ": larger than " + std::to_string(max_bytes) + " bytes, the limit for a " +
                std::string(what));
  }
  return text;
}

JsonDepth json_depth(std::string_view text, int limit) {
  JsonDepth out;
  int depth = 0;
  std::size_t line = 1;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++depth;
      out.depth = std::max(out.depth, depth);
      if (depth > limit && out.line_over == 0) out.line_over = line;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return out;
}

void check_json_depth(std::string_view text, const std::string& where) {
  const JsonDepth d = json_depth(text);
  if (d.line_over) {
    throw Error(where + ":" + std::to_string(d.line_over) + ": JSON nested deeper than " +
                std::to_string(kMaxJsonDepth) + " levels; capsim's JSON inputs nest a few levels");
  }
}

nlohmann::json parse_json(std::string_view text, const std::string& where) {
  check_json_depth(text, where);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    const std::size_t upto = std::min<std::size_t>(e.byte, text.size());
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(upto), '\n');
    throw Error(where + ":" + std::to_string(line) + ": malformed JSON: " + e.what());
  } catch (const nlohmann::json::exception& e) {
    // A number beyond double's range (out_of_range 406, "number overflow") has no position.
    throw Error(where + ": malformed JSON: " + e.what());
  }
}

const char* json_type_word(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::binary: return "binary data";
    case nlohmann::json::value_t::discarded: return "nothing";
    default: return "a number";
  }
}

}  // namespace capsim
