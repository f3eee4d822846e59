// Writing a command's output files (--json, --report, --plot, --junit, --csv, --out): to stdout
// for "-", otherwise to a file that appears whole or not at all when it is a regular file
// (written to a temporary of its own beside it, with a name nobody can predict or plant a link
// under, then renamed); a FIFO, a device (/dev/null) or another non-regular file is written in
// place, and a symlink at PATH is followed. A command's outputs are checked before it works
// (check_outputs) and written together (OutputSet): all of them, or none.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace capsim {

// One output file a command was asked for: the flag that names it (in messages) and its path
// ("-" = stdout).
struct OutputRequest {
  std::string flag;
  std::string path;
};

// Refuses outputs that could not be written, so that a command finds out before its work, not
// after: a directory; a new file whose folder is missing, not a folder or not writable; a
// regular file whose folder is not writable (it is replaced by a rename there); a FIFO or device
// that is not writable; two outputs that are one file (compared after following links, so
// `a.json`, `./a.json` and a link to it are one; `-` is whatever stdout is; a character device
// such as /dev/null may take several) or `-` twice. Requests with an empty path (flag not
// given) are skipped. Throws Error "<flag>: cannot write <path>: <reason>".
void check_outputs(const std::vector<OutputRequest>& outputs);

// A command's outputs, written all or nothing by commit(): every regular file first goes to its
// temporary; only when all of those and every in-place output (stdout, a FIFO, a device) are
// written are the temporaries renamed into place. A failure before the renames leaves no file
// created or changed (the in-place outputs already written excepted: a stream cannot be taken
// back). A rename fails only when the folder changed under the run (its temporary is already
// there); then the outputs not yet renamed are dropped and the new files already renamed are
// removed, but a file already replaced keeps its new text.
class OutputSet {
 public:
  // Queues `text` for `path`, named `flag` in messages; an empty path (flag not given) is skipped.
  void add(const std::string& flag, const std::string& path, std::string text);
  // Queues `value` as --json writes it: indented by 2, a newline at the end.
  void add_json(const std::string& path, const nlohmann::json& value);
  // Writes everything queued. Throws Error "<flag>: cannot write <path>: <reason>".
  void commit();

 private:
  struct Pending {
    std::string flag, path, text;
  };
  std::vector<Pending> pending_;
};

// One output alone: an OutputSet of one. Throws Error "<flag>: cannot write <path>: <reason>".
void write_text_file(const std::string& path, const std::string& text, const std::string& flag);
void write_json(const std::string& path, const nlohmann::json& value);

}  // namespace capsim
