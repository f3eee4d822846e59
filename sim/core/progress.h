// A progress line on a stream (stderr by default). On a terminal it is rewritten in place
// ("\r"), as often as it is updated; on anything else (a CI log, a pipe, a file) it is printed as
// whole lines, at most one every `interval_s` seconds, so logs neither run lines together nor
// fill up. Not thread-safe: one thread updates it.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace capsim {

class ProgressLine {
 public:
  // `terminal` -1: decided by isatty() on the stream; 0/1 force it (tests).
  explicit ProgressLine(std::FILE* out = stderr, double interval_s = 5.0, int terminal = -1);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Shows `text` now on a terminal; elsewhere only the first update and then one per interval.
  void update(const std::string& text);
  // Ends the progress: the final text as a whole line (always printed).
  void finish(const std::string& text);
  bool terminal() const { return terminal_; }

 private:
  std::FILE* out_;
  double interval_s_;
  bool terminal_;
  bool open_line_ = false;  // a terminal line without its newline yet
  bool printed_any_ = false;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace capsim
