#include "sim/report/json_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>

#include "sim/core/error.h"

namespace capsim {
namespace {

namespace fs = std::filesystem;

Error cannot_write(const std::string& flag, const std::string& path, const std::string& reason) {
  return Error(flag + ": cannot write " + path + ": " + reason);
}

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
  if (fd < 0) throw cannot_write(flag, path, std::strerror(errno));
  int err = write_all(fd, text);
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) throw cannot_write(flag, path, std::strerror(err));
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
    if (errno != EEXIST) throw cannot_write(flag, shown_path, std::strerror(errno));
  }
  throw cannot_write(flag, shown_path, "no unused temporary name beside it");
}

// Where an output's text goes.
struct Destination {
  enum Kind { kStdout, kInPlace, kReplace } kind = kStdout;
  std::string where;     // the path opened (kInPlace) or renamed over (kReplace)
  bool existed = false;  // kReplace: a regular file was there
};

// The rules of the header: stdout for "-"; in place for an existing non-regular file (through
// the path as given: stat() follows every link, /proc's too: /dev/stdout -> /proc/self/fd/1 ->
// "pipe:[...]" names no file, only the kernel's own lookup gets from the path to the pipe, so
// `--json /dev/stdout | jq` must open the path); otherwise the file at the end of PATH's links,
// replaced (or created), the links kept. Throws for a directory or a link loop.
Destination destination_of(const std::string& path, const std::string& flag) {
  if (path == "-") return {Destination::kStdout, "-", false};
  std::error_code ec;
  const fs::file_status followed = fs::status(path, ec);
  if (fs::is_directory(followed)) throw cannot_write(flag, path, "is a directory");
  if (fs::exists(followed) && !fs::is_regular_file(followed)) return {Destination::kInPlace, path, true};
  fs::path target = path;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {
    // One link at a time, so a dangling link still names the file to create.
    const fs::path next = fs::read_symlink(target, ec);
    if (ec || hops == 40) {
      throw cannot_write(flag, path, ec ? ec.message() : std::string("too many levels of symbolic links"));
    }
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  const fs::file_status st = fs::status(target, ec);
  if (fs::is_directory(st)) throw cannot_write(flag, path, "is a directory");
  if (fs::exists(st) && !fs::is_regular_file(st)) return {Destination::kInPlace, target.string(), true};
  return {Destination::kReplace, target.string(), fs::exists(st)};
}

// The folder a replaced file's temporary and rename happen in.
std::string folder_of(const std::string& file) {
  const fs::path parent = fs::path(file).parent_path();
  return parent.empty() ? "." : parent.string();
}

// What identifies the file an output lands in, for finding two outputs that are one file; empty
// for a character device (a terminal, /dev/null), which several outputs may share.
std::string identity(const struct stat& st) {
  if (S_ISCHR(st.st_mode)) return "";
  return "inode " + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

// Removes, when it goes out of scope, the temporaries not renamed into place: nothing of a
// failed commit stays behind, whichever step threw.
class TemporariesGuard {
 public:
  explicit TemporariesGuard(std::vector<std::string>& paths) : paths_(paths) {}
  ~TemporariesGuard() {
    for (const std::string& p : paths_) {
      if (!p.empty()) ::unlink(p.c_str());
    }
  }
  TemporariesGuard(const TemporariesGuard&) = delete;
  TemporariesGuard& operator=(const TemporariesGuard&) = delete;

 private:
  std::vector<std::string>& paths_;
};

}  // namespace

void check_outputs(const std::vector<OutputRequest>& outputs) {
  std::map<std::string, const OutputRequest*> seen;  // identity -> the output that has it
  const OutputRequest* on_stdout = nullptr;
  for (const OutputRequest& o : outputs) {
    if (o.path.empty()) continue;
    std::string id;
    if (o.path == "-") {
      if (on_stdout) {
        throw cannot_write(o.flag, "- (stdout)", on_stdout->flag + " writes there too; each output needs a file of its own");
      }
      on_stdout = &o;
      struct stat st {};
      if (::fstat(STDOUT_FILENO, &st) == 0) id = identity(st);
    } else {
      const Destination d = destination_of(o.path, o.flag);
      if (d.kind == Destination::kInPlace) {
        if (::access(d.where.c_str(), W_OK) != 0) {
          const int err = errno;
          throw cannot_write(o.flag, o.path, std::strerror(err));
        }
        struct stat st {};
        if (::stat(d.where.c_str(), &st) == 0) id = identity(st);
      } else {
        // A rename in the folder replaces the file: the folder must be writable, the file need not be.
        const std::string folder = folder_of(d.where);
        struct stat st {};
        if (::stat(folder.c_str(), &st) != 0) {
          const int err = errno;
          throw cannot_write(o.flag, o.path,
                             err == ENOENT ? "folder " + folder + " does not exist"
                                           : "folder " + folder + ": " + std::strerror(err));
        }
        if (!S_ISDIR(st.st_mode)) throw cannot_write(o.flag, o.path, folder + " is not a folder");
        if (::access(folder.c_str(), W_OK | X_OK) != 0) {
          const int err = errno;
          throw cannot_write(o.flag, o.path, "folder " + folder + " is not writable (" + std::strerror(err) + ")");
        }
        std::error_code ec;
        if (d.existed && ::stat(d.where.c_str(), &st) == 0) {
          id = identity(st);
        } else {
          id = "new " + (fs::canonical(folder, ec) / fs::path(d.where).filename()).string();
        }
      }
    }
    if (id.empty()) continue;
    const auto [it, added] = seen.emplace(id, &o);
    if (!added) {
      const OutputRequest& first = *it->second;
      throw cannot_write(o.flag, o.path == "-" ? "- (stdout)" : o.path,
                         first.flag + " writes the same file (" + (first.path == "-" ? "stdout" : first.path) +
                             "); each output needs a file of its own");
    }
  }
}

void OutputSet::add(const std::string& flag, const std::string& path, std::string text) {
  if (path.empty()) return;
  pending_.push_back({flag, path, std::move(text)});
}

void OutputSet::add_json(const std::string& path, const nlohmann::json& value) {
  add("--json", path, value.dump(2) + "\n");
}

void OutputSet::commit() {
  // Every destination is decided before anything is written.
  std::vector<Destination> destinations;
  for (const Pending& p : pending_) destinations.push_back(destination_of(p.path, p.flag));
  std::vector<std::string> temporaries(pending_.size());
  const TemporariesGuard remove_leftovers(temporaries);

  // 1. Each replaced file's text into its temporary: where a full disk or a quota shows.
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    if (destinations[i].kind != Destination::kReplace) continue;
    const int fd = create_temporary(destinations[i].where, temporaries[i], pending_[i].flag, pending_[i].path);
    int err = write_all(fd, pending_[i].text);
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) throw cannot_write(pending_[i].flag, pending_[i].path, std::strerror(err));
  }
  // 2. The outputs that cannot wait in a temporary: stdout, FIFOs, devices.
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    if (destinations[i].kind == Destination::kStdout) {
      std::cout << pending_[i].text;
      std::cout.flush();
      // As main's check of stdout says it: the flag is not what failed, the stream is.
      if (!std::cout) throw Error(std::string("cannot write stdout: ") + std::strerror(errno));
    } else if (destinations[i].kind == Destination::kInPlace) {
      write_in_place(destinations[i].where, pending_[i].text, pending_[i].flag);
    }
  }
  // 3. Every temporary renamed into place.
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    if (temporaries[i].empty()) continue;
    if (::rename(temporaries[i].c_str(), destinations[i].where.c_str()) != 0) {
      const int err = errno;
      // The files this commit created go again; one it replaced cannot get its old text back.
      for (std::size_t j = 0; j < i; ++j) {
        if (destinations[j].kind == Destination::kReplace && !destinations[j].existed) {
          ::unlink(destinations[j].where.c_str());
        }
      }
      throw cannot_write(pending_[i].flag, pending_[i].path, std::strerror(err));
    }
    temporaries[i].clear();
  }
}

void write_text_file(const std::string& path, const std::string& text, const std::string& flag) {
  if (path.empty()) throw Error(flag + ": no file named");
  OutputSet one;
  one.add(flag, path, text);
  one.commit();
}

void write_json(const std::string& path, const nlohmann::json& value) {
  if (path.empty()) throw Error("--json: no file named");
  OutputSet one;
  one.add_json(path, value);
  one.commit();
}

}  // namespace capsim
