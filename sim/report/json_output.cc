#include "sim/report/json_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>

#include "sim/core/error.h"

namespace capsim {
namespace {

namespace fs = std::filesystem;

// Writes all of `text` to `fd` (write(2) may write less than asked, or be interrupted); returns
// 0, or the errno of the failed write.
int write_all(int fd, const std::string& text) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return 0;
}

// Writes `text` to `path` as it is (no temporary, no rename): for FIFOs, devices and other
// non-regular files, which a rename would replace rather than write.
void write_in_place(const std::string& path, const std::string& text, const std::string& flag) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw Error(flag + ": cannot write " + path + ": " + std::strerror(errno));
  int err = write_all(fd, text);
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) throw Error(flag + ": cannot write " + path + ": " + std::strerror(err));
}

// A new file beside `final_path` with a name nobody can predict, created by this call
// (O_CREAT|O_EXCL: never an existing file, and never through a symlink planted under the name,
// which O_EXCL refuses as it would a file; O_NOFOLLOW says so again). Its mode is 0666 less the
// umask, as a file opened for writing the ordinary way gets (mkstemp's 0600 would make every
// output private to its writer, unlike before). Returns the descriptor; sets `tmp_path`.
int create_temporary(const std::string& final_path, std::string& tmp_path, const std::string& flag,
                     const std::string& shown_path) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::random_device entropy;
  std::mt19937_64 pick((static_cast<std::uint64_t>(entropy()) << 32) ^ entropy() ^
                       static_cast<std::uint64_t>(::getpid()));
  std::uniform_int_distribution<std::size_t> letter(0, sizeof kAlphabet - 2);
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string suffix(10, ' ');
    for (char& c : suffix) c = kAlphabet[letter(pick)];
    tmp_path = final_path + "." + suffix + ".partial";
    const int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    if (errno != EEXIST) throw Error(flag + ": cannot write " + shown_path + ": " + std::strerror(errno));
  }
  throw Error(flag + ": cannot write " + shown_path + ": no unused temporary name beside it");
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
  // A regular file (or none yet) appears whole or not at all: written to a temporary of its own
  // beside it, then renamed over it.
  const std::string final_path = target.string();
  std::string tmp;
  const int fd = create_temporary(final_path, tmp, flag, path);
  int err = write_all(fd, text);
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), final_path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw Error(flag + ": cannot write " + path + ": " + std::strerror(err));
  }
}

void write_json(const std::string& path, const nlohmann::json& value) {
  write_text_file(path, value.dump(2) + "\n", "--json");
}

}  // namespace capsim
