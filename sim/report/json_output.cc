#include "sim/report/json_output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "sim/core/error.h"

namespace capsim {
namespace {

namespace fs = std::filesystem;

// Writes `text` to `path` as it is (no temporary, no rename): for FIFOs, devices and other
// non-regular files, which a rename would replace rather than write.
void write_in_place(const std::string& path, const std::string& text, const std::string& flag) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(flag + ": cannot write " + path + ": " + std::strerror(errno));
  out << text;
  out.flush();
  if (!out) throw Error(flag + ": cannot write " + path + ": write failed");
}

}  // namespace

void write_text_file(const std::string& path, const std::string& text, const std::string& flag) {
  if (path == "-") {
    std::cout << text;
    std::cout.flush();
    return;
  }
  // A symlink is followed: the file it names is the one written (and replaced atomically when it
  // is a regular file), the link stays. Anything that exists and is not a regular file (a FIFO,
  // /dev/null, a terminal) is written in place.
  std::error_code ec;
  fs::path target = path;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {
    // One link at a time, so a dangling link still names the file to create.
    const fs::path next = fs::read_symlink(target, ec);
    if (ec || hops == 40) {
      throw Error(flag + ": cannot write " + path + ": " +
                  (ec ? ec.message() : std::string("too many levels of symbolic links")));
    }
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  const fs::file_status st = fs::status(target, ec);
  if (fs::is_directory(st)) throw Error(flag + ": cannot write " + path + ": is a directory");
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    write_in_place(target.string(), text, flag);
    return;
  }
  // A regular file (or none yet) appears whole or not at all: written beside it, then renamed.
  const std::string final_path = target.string();
  const std::string tmp = final_path + ".partial";
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
  fs::rename(tmp, final_path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw Error(flag + ": cannot write " + path + ": " + ec.message());
  }
}

void write_json(const std::string& path, const nlohmann::json& value) {
  write_text_file(path, value.dump(2) + "\n", "--json");
}

}  // namespace capsim
