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
  // Anything that exists and is not a regular file (a FIFO, /dev/null, a terminal, a pipe or a
  // socket) is written in place, through the path as given: stat() follows every link, /proc's
  // too (/dev/stdout -> /proc/self/fd/1 -> "pipe:[...]", which names no file: only the kernel's
  // own lookup gets from the path to the pipe, so `--json /dev/stdout | jq` must open the path).
  std::error_code ec;
  const fs::file_status followed = fs::status(path, ec);
  if (fs::is_directory(followed)) throw Error(flag + ": cannot write " + path + ": is a directory");
  if (fs::exists(followed) && !fs::is_regular_file(followed)) {
    write_in_place(path, text, flag);
    return;
  }
  // A symlink to a regular file (or to none yet) is followed: the file it names is the one
  // replaced atomically (or created), the link stays.
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
