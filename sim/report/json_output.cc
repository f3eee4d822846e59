#include "sim/report/json_output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "sim/core/error.h"

namespace capsim {

void write_text_file(const std::string& path, const std::string& text, const std::string& flag) {
  if (path == "-") {
    std::cout << text;
    std::cout.flush();
    return;
  }
  const std::string tmp = path + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(flag + ": cannot write " + path + ": " + std::strerror(errno));
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error(flag + ": cannot write " + path + ": write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw Error(flag + ": cannot write " + path + ": " + ec.message());
  }
}

void write_json(const std::string& path, const nlohmann::json& value) {
  write_text_file(path, value.dump(2) + "\n", "--json");
}

}  // namespace capsim
