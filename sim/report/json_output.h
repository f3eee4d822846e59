// Writing a command's JSON result: to stdout for "-", otherwise to a file that appears whole
// or not at all when it is a regular file (written to a temporary of its own beside it, with a
// name nobody can predict or plant a link under, then renamed); a FIFO, a device (/dev/null) or
// another non-regular file is written in place, and a symlink at PATH is followed.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace capsim {

// Throws capsim::Error "--json: cannot write <path>: <reason>".
void write_json(const std::string& path, const nlohmann::json& value);
void write_text_file(const std::string& path, const std::string& text, const std::string& flag);

}  // namespace capsim
