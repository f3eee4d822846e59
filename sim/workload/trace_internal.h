// Pieces shared by the trace readers (trace.cc: CSV formats and open_trace; trace_mooncake.cc:
// JSON lines). Not part of the public API; include sim/workload/trace.h instead.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim/workload/trace.h"

namespace capsim::trace_detail {

// Reads a text file one line at a time: strips a trailing '\r' and a leading UTF-8 byte-order
// mark, skips blank lines, counts lines (1-based, blank lines included) for messages.
class LineSource {
 public:
  explicit LineSource(std::string path);  // Error when the file is missing or unreadable
  bool next(std::string& line);           // next non-blank line; false at end of file
  std::int64_t line_no() const { return line_no_; }
  const std::string& path() const { return path_; }
  std::string here() const { return path_ + ":" + std::to_string(line_no_); }  // "path:LINE"

  // The longest line accepted: a Mooncake line of a 1M-token prompt is ~12 KB (2,000 hash ids);
  // 1 MiB bounds one line's JSON value to ~25 MB.
  static constexpr std::size_t kMaxLineBytes = std::size_t{1} << 20;

 private:
  bool read_line(std::string& line);

  std::string path_;
  std::ifstream in_;
  std::int64_t line_no_ = 0;
};

// One request as a format reader delivers it, before the common checks and time scaling.
struct RawRow {
  double offset_s = 0;    // seconds after the format's first request, unscaled
  std::string time_text;  // the timestamp as written, for messages
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  std::vector<std::uint64_t> hash_ids;
};

class RowSource {
 public:
  virtual ~RowSource() = default;
  virtual bool next(RawRow& out) = 0;  // false at end; tokens already validated (>= 1)
  virtual const LineSource& lines() const = 0;
  virtual std::string time_label() const = 0;  // "column 'TIMESTAMP'", "field 'timestamp'"
  virtual std::int64_t skipped_rows() const { return 0; }
  virtual std::string empty_detail() const { return ""; }  // appended to "path: no requests"
};

std::string_view trim(std::string_view text);
// 'text' in quotes for messages, shortened to about 60 characters.
std::string quote_text(std::string_view text);
[[noreturn]] void fail(const LineSource& src, std::string_view label, std::string_view text,
                       std::string_view what);  // "path:LINE: label: 'text' what"

// A token count: the whole (trimmed) text must be a non-negative decimal integer.
std::int64_t parse_count(const LineSource& src, std::string_view label, std::string_view text);
// Errors unless value >= 1; `what` names the token kind ("input", "output").
void require_positive(const LineSource& src, std::string_view label, std::string_view text,
                      std::int64_t value, std::string_view what);

std::unique_ptr<RowSource> make_mooncake_source(const std::string& path);

}  // namespace capsim::trace_detail
