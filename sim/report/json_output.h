// Writing a command's JSON result: to stdout for "-", otherwise to a file that appears whole
// or not at all (written beside it, then renamed) when it is a regular file; a FIFO, a device
// (/dev/null) or another non-regular file is written in place, and a symlink is followed.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace capsim {

// Throws capsim::Error "--json: cannot write <path>: <reason>".
void write_json(const std::string& path, const nlohmann::json& value);
void write_text_file(const std::string& path, const std::string& text, const std::string& flag);

}  // namespace capsim
