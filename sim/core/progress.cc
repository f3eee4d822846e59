#include "sim/core/progress.h"

#include <unistd.h>

namespace capsim {

ProgressLine::ProgressLine(std::FILE* out, double interval_s, int terminal)
    : out_(out), interval_s_(interval_s),
      terminal_(terminal < 0 ? isatty(fileno(out)) != 0 : terminal != 0) {}

ProgressLine::~ProgressLine() {
  if (open_line_) std::fputc('\n', out_);
}

void ProgressLine::update(const std::string& text) {
  const auto now = std::chrono::steady_clock::now();
  if (terminal_) {
    std::fprintf(out_, "\r%s\033[K", text.c_str());  // clear what a longer line left behind
    open_line_ = true;
  } else {
    if (printed_any_ && std::chrono::duration<double>(now - last_).count() < interval_s_) return;
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
  printed_any_ = true;
  last_ = now;
}

void ProgressLine::finish(const std::string& text) {
  if (terminal_) {
    std::fprintf(out_, "\r%s\033[K\n", text.c_str());
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  open_line_ = false;
  std::fflush(out_);
}

}  // namespace capsim
