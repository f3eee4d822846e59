#include "sim/workload/trace.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/workload/trace_internal.h"

namespace capsim {

TraceReader::~TraceReader() = default;

namespace trace_detail {

// ---------------------------------------------------------------------------------------------
// Shared helpers

LineSource::LineSource(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  const auto status = std::filesystem::status(path_, ec);
  if (!std::filesystem::exists(status)) throw Error(path_ + ": no such trace file");
  if (std::filesystem::is_directory(status)) {
    throw Error(path_ + ": is a directory, not a trace file");
  }
  in_.open(path_, std::ios::binary);
  if (!in_) throw Error(path_ + ": cannot open the trace file for reading");
}

// std::getline would hold a whole newline-free file in memory; lines are read with a bound.
bool LineSource::read_line(std::string& line) {
  line.clear();
  std::streambuf* buf = in_.rdbuf();
  bool any = false;
  for (;;) {
    const int c = buf->sbumpc();
    if (c == std::char_traits<char>::eof()) return any;
    any = true;
    if (c == '\n') return true;
    if (line.size() >= kMaxLineBytes) {
      throw Error(path_ + ":" + std::to_string(line_no_ + 1) + ": line longer than " +
                  std::to_string(kMaxLineBytes >> 20) +
                  " MiB; a trace has one request per line (is this a trace file?)");
    }
    line.push_back(static_cast<char>(c));
  }
}

bool LineSource::next(std::string& line) {
  while (read_line(line)) {
    ++line_no_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_no_ == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
    if (!trim(line).empty()) return true;
  }
  if (in_.bad()) throw Error(path_ + ":" + std::to_string(line_no_ + 1) + ": read error");
  return false;
}

std::string_view trim(std::string_view text) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return text;
}

std::string quote_text(std::string_view text) {
  constexpr std::size_t kMax = 60;
  if (text.size() > kMax) return "'" + std::string(text.substr(0, kMax)) + "...'";
  return "'" + std::string(text) + "'";
}

void fail(const LineSource& src, std::string_view label, std::string_view text,
          std::string_view what) {
  throw Error(src.here() + ": " + std::string(label) + ": " + quote_text(text) + " " +
              std::string(what));
}

std::int64_t parse_count(const LineSource& src, std::string_view label, std::string_view text) {
  const std::string_view t = trim(text);
  std::int64_t value = 0;
  const char* end = t.data() + t.size();
  const auto [ptr, ec] = std::from_chars(t.data(), end, value);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && value > checked::kMaxTokens)) {
    fail(src, label, text,
         "is out of range (at most " + std::to_string(checked::kMaxTokens) + " tokens)");
  }
  if (t.empty() || ec != std::errc() || ptr != end || value < 0) {
    fail(src, label, text, "is not a non-negative integer");
  }
  return value;
}

void require_positive(const LineSource& src, std::string_view label, std::string_view text,
                      std::int64_t value, std::string_view what) {
  if (value < 1) {
    fail(src, label, text,
         "must be at least 1 (every request has at least one " + std::string(what) + " token)");
  }
}

namespace {

// A finite, non-negative decimal number (seconds), e.g. "5", "12.25", "1e3".
double parse_seconds(const LineSource& src, std::string_view label, std::string_view text) {
  const std::string_view t = trim(text);
  double value = 0;
  const char* end = t.data() + t.size();
  const auto [ptr, ec] = std::from_chars(t.data(), end, value);
  if (t.empty() || ec != std::errc() || ptr != end || !std::isfinite(value) || value < 0) {
    fail(src, label, text, "is not a non-negative number of seconds");
  }
  return value;
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Splits one CSV line. Fields may be double-quoted (holding commas, "" for a quote); a quoted
// field cannot span lines. Returns false on an unterminated quote.
bool split_csv(std::string_view line, std::vector<std::string>& fields) {
  fields.clear();
  std::string field;
  std::size_t i = 0;
  while (true) {
    field.clear();
    // A quote opens a quoted field only at its start (after optional spaces).
    std::size_t j = i;
    while (j < line.size() && (line[j] == ' ' || line[j] == '\t')) ++j;
    if (j < line.size() && line[j] == '"') {
      i = j + 1;
      bool closed = false;
      while (i < line.size()) {
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          closed = true;
          ++i;
          break;
        }
        field += line[i++];
      }
      if (!closed) return false;
      // Text between the closing quote and the comma (normally only spaces) is kept.
      while (i < line.size() && line[i] != ',') field += line[i++];
    } else {
      while (i < line.size() && line[i] != ',') field += line[i++];
    }
    fields.push_back(field);
    if (i >= line.size()) return true;
    ++i;  // the comma
  }
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);                 // [0, 399]
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;  // [0, 365]
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;            // [0, 146096]
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

unsigned days_in_month(std::int64_t y, unsigned m) {
  static constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

// "YYYY-MM-DD HH:MM:SS[.f]" with 1 to 7 fractional digits -> 100 ns ticks since 1970-01-01.
// False when the text is not such a timestamp or names an impossible date or time.
bool parse_wall_clock(std::string_view s, std::int64_t& ticks) {
  const auto digits = [&](std::size_t pos, std::size_t n, unsigned& out) {
    out = 0;
    for (std::size_t k = pos; k < pos + n; ++k) {
      if (k >= s.size() || s[k] < '0' || s[k] > '9') return false;
      out = out * 10 + static_cast<unsigned>(s[k] - '0');
    }
    return true;
  };
  unsigned y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (s.size() < 19 || !digits(0, 4, y) || s[4] != '-' || !digits(5, 2, mo) || s[7] != '-' ||
      !digits(8, 2, d) || (s[10] != ' ' && s[10] != 'T') || !digits(11, 2, h) || s[13] != ':' ||
      !digits(14, 2, mi) || s[16] != ':' || !digits(17, 2, sec)) {
    return false;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 59) {
    return false;
  }
  std::int64_t frac = 0;  // in 100 ns ticks
  if (s.size() > 19) {
    const std::size_t n = s.size() - 20;
    unsigned f = 0;
    if (s[19] != '.' || n < 1 || n > 7 || !digits(20, n, f)) return false;
    frac = f;
    for (std::size_t k = n; k < 7; ++k) frac *= 10;
  }
  const std::int64_t seconds =
      days_from_civil(y, mo, d) * 86400 + static_cast<std::int64_t>(h) * 3600 + mi * 60 + sec;
  ticks = seconds * 10'000'000 + frac;
  return true;
}

// A CSV file whose header names the columns a format needs.
class CsvTable {
 public:
  CsvTable(const std::string& path, std::string_view format,
           const std::vector<std::string>& required)
      : src_(path) {
    std::string header;
    if (!src_.next(header)) throw Error(path + ": no requests");
    if (!split_csv(header, fields_)) throw Error(src_.here() + ": unterminated quoted field");
    refuse_repeated_columns();
    std::string expected;
    for (std::size_t k = 0; k < required.size(); ++k) expected += (k ? ", " : "") + required[k];
    for (const auto& name : required) {
      const std::string want = lower(name);
      std::size_t found = fields_.size();
      for (std::size_t k = 0; k < fields_.size(); ++k) {
        if (lower(trim(fields_[k])) == want) {
          found = k;
          break;
        }
      }
      if (found == fields_.size()) {
        std::string has;
        for (std::size_t k = 0; k < fields_.size(); ++k) {
          has += (k ? ", " : "") + std::string(trim(fields_[k]));
        }
        throw Error(src_.here() + ": missing column '" + name + "'; the header has: " + has +
                    "; the " + std::string(format) + " format needs columns " + expected);
      }
      index_.push_back(found);
      labels_.push_back("column '" + name + "'");
    }
    width_ = fields_.size();
  }

  bool next_row() {
    if (!src_.next(line_)) return false;
    if (!split_csv(line_, fields_)) throw Error(src_.here() + ": unterminated quoted field");
    return true;
  }
  // The k-th required column of the current row.
  std::string_view field(std::size_t k) const {
    if (index_[k] >= fields_.size()) {
      throw Error(src_.here() + ": " + labels_[k] + ": missing (the row has " +
                  std::to_string(fields_.size()) + " fields, the header " +
                  std::to_string(width_) + ")");
    }
    return fields_[index_[k]];
  }
  const std::string& label(std::size_t k) const { return labels_[k]; }
  const LineSource& lines() const { return src_; }

 private:
  // A column named twice (as matched: trimmed, any case) would be read from its first
  // occurrence and the other ignored unseen; which one the file meant is unknown. Unnamed
  // columns (a trailing comma) are not names and may repeat.
  void refuse_repeated_columns() const {
    std::map<std::string, std::size_t> first;
    for (std::size_t k = 0; k < fields_.size(); ++k) {
      const std::string name(trim(fields_[k]));
      if (name.empty()) continue;
      const auto [at, added] = first.emplace(lower(name), k);
      if (!added) {
        throw Error(src_.here() + ": column '" + name + "' appears twice in the header (columns " +
                    std::to_string(at->second + 1) + " and " + std::to_string(k + 1) +
                    "); each column may be named once");
      }
    }
  }

  LineSource src_;
  std::string line_;
  std::vector<std::string> fields_;
  std::vector<std::size_t> index_;
  std::vector<std::string> labels_;
  std::size_t width_ = 0;
};

class AzureSource final : public RowSource {
 public:
  explicit AzureSource(const std::string& path)
      : table_(path, "azure", {"TIMESTAMP", "ContextTokens", "GeneratedTokens"}) {}

  bool next(RawRow& out) override {
    if (!table_.next_row()) return false;
    const std::string_view time = trim(table_.field(0));
    std::int64_t ticks = 0;
    if (!parse_wall_clock(time, ticks)) {
      fail(table_.lines(), table_.label(0), table_.field(0),
           "is not a timestamp like '2023-11-16 18:15:46.6805900' (YYYY-MM-DD HH:MM:SS, up to 7 "
           "fractional digits)");
    }
    if (first_) {
      first_ticks_ = ticks;
      first_ = false;
    }
    out.offset_s = static_cast<double>(ticks - first_ticks_) / 1e7;
    out.time_text.assign(time);
    read_tokens(out);
    out.hash_ids.clear();
    return true;
  }
  const LineSource& lines() const override { return table_.lines(); }
  std::string time_label() const override { return table_.label(0); }

 private:
  void read_tokens(RawRow& out) const {
    const LineSource& src = table_.lines();
    out.input_tokens = parse_count(src, table_.label(1), table_.field(1));
    out.output_tokens = parse_count(src, table_.label(2), table_.field(2));
    require_positive(src, table_.label(1), table_.field(1), out.input_tokens, "input");
    require_positive(src, table_.label(2), table_.field(2), out.output_tokens, "output");
  }

  CsvTable table_;
  bool first_ = true;
  std::int64_t first_ticks_ = 0;
};

class BurstGptSource final : public RowSource {
 public:
  explicit BurstGptSource(const std::string& path)
      : table_(path, "burstgpt", {"Timestamp", "Request tokens", "Response tokens"}) {}

  bool next(RawRow& out) override {
    const LineSource& src = table_.lines();
    while (table_.next_row()) {
      const double t = parse_seconds(src, table_.label(0), table_.field(0));
      const std::int64_t in = parse_count(src, table_.label(1), table_.field(1));
      const std::int64_t gen = parse_count(src, table_.label(2), table_.field(2));
      if (gen == 0) {  // a failed request: no response was produced
        ++skipped_;
        continue;
      }
      require_positive(src, table_.label(1), table_.field(1), in, "input");
      if (first_) {
        first_t_ = t;
        first_ = false;
      }
      out.offset_s = t - first_t_;
      out.time_text.assign(trim(table_.field(0)));
      out.input_tokens = in;
      out.output_tokens = gen;
      out.hash_ids.clear();
      return true;
    }
    return false;
  }
  const LineSource& lines() const override { return table_.lines(); }
  std::string time_label() const override { return table_.label(0); }
  std::int64_t skipped_rows() const override { return skipped_; }
  std::string empty_detail() const override {
    if (skipped_ == 0) return "";
    return " (all " + std::to_string(skipped_) +
           " rows have Response tokens 0, i.e. failed requests, which are skipped)";
  }

 private:
  CsvTable table_;
  bool first_ = true;
  double first_t_ = 0;
  std::int64_t skipped_ = 0;
};

class PlainCsvSource final : public RowSource {
 public:
  explicit PlainCsvSource(const std::string& path)
      : table_(path, "csv", {"arrival_s", "input_tokens", "output_tokens"}) {}

  bool next(RawRow& out) override {
    if (!table_.next_row()) return false;
    const LineSource& src = table_.lines();
    const double t = parse_seconds(src, table_.label(0), table_.field(0));
    out.input_tokens = parse_count(src, table_.label(1), table_.field(1));
    out.output_tokens = parse_count(src, table_.label(2), table_.field(2));
    require_positive(src, table_.label(1), table_.field(1), out.input_tokens, "input");
    require_positive(src, table_.label(2), table_.field(2), out.output_tokens, "output");
    if (first_) {
      first_t_ = t;
      first_ = false;
    }
    out.offset_s = t - first_t_;
    out.time_text.assign(trim(table_.field(0)));
    out.hash_ids.clear();
    return true;
  }
  const LineSource& lines() const override { return table_.lines(); }
  std::string time_label() const override { return table_.label(0); }

 private:
  CsvTable table_;
  bool first_ = true;
  double first_t_ = 0;
};

// The format-independent part: ordering check, rebasing is done by the sources, scaling here.
class ScaledReader final : public TraceReader {
 public:
  ScaledReader(std::unique_ptr<RowSource> source, double time_scale)
      : src_(std::move(source)), scale_(time_scale) {
    if (!read_checked()) {
      throw Error(src_->lines().path() + ": no requests" + src_->empty_detail());
    }
    pending_ = true;
  }

  bool next(TraceRecord& out) override {
    if (pending_) {
      pending_ = false;
    } else if (!read_checked()) {
      return false;
    }
    out.arrival_s = row_.offset_s * scale_;
    if (!(out.arrival_s <= checked::kMaxSimSeconds)) {
      throw Error(src_->lines().here() + ": " + src_->time_label() + ": " +
                  quote_text(row_.time_text) + " is " + checked::show(out.arrival_s) +
                  " s after the first request (time scale applied); at most " +
                  checked::show(checked::kMaxSimSeconds) + " s can be simulated");
    }
    out.input_tokens = row_.input_tokens;
    out.output_tokens = row_.output_tokens;
    out.hash_ids.swap(row_.hash_ids);
    return true;
  }
  std::int64_t skipped_rows() const override { return src_->skipped_rows(); }

 private:
  bool read_checked() {
    if (!src_->next(row_)) return false;
    if (have_prev_ && row_.offset_s < prev_offset_) {
      throw Error(src_->lines().here() + ": " + src_->time_label() + ": " +
                  quote_text(row_.time_text) + " is earlier than " + quote_text(prev_text_) +
                  " on line " + std::to_string(prev_line_) +
                  "; requests must be in non-decreasing time order");
    }
    have_prev_ = true;
    prev_offset_ = row_.offset_s;
    prev_text_ = row_.time_text;
    prev_line_ = src_->lines().line_no();
    return true;
  }

  std::unique_ptr<RowSource> src_;
  double scale_;
  RawRow row_;
  bool pending_ = false;
  bool have_prev_ = false;
  double prev_offset_ = 0;
  std::string prev_text_;
  std::int64_t prev_line_ = 0;
};

const std::vector<std::string>& format_names() {
  static const std::vector<std::string> kNames = {"azure", "mooncake", "burstgpt", "csv"};
  return kNames;
}

}  // namespace
}  // namespace trace_detail

TraceFormat parse_trace_format(const std::string& name) {
  const std::string n = trace_detail::lower(trace_detail::trim(name));
  if (n == "azure") return TraceFormat::kAzure;
  if (n == "mooncake") return TraceFormat::kMooncake;
  if (n == "burstgpt") return TraceFormat::kBurstGpt;
  if (n == "csv") return TraceFormat::kPlainCsv;
  throw Error(unknown_name_message("trace format", name, trace_detail::format_names()));
}

std::string trace_format_name(TraceFormat format) {
  switch (format) {
    case TraceFormat::kAzure: return "azure";
    case TraceFormat::kMooncake: return "mooncake";
    case TraceFormat::kBurstGpt: return "burstgpt";
    case TraceFormat::kPlainCsv: return "csv";
  }
  return "unknown";
}

TraceFormat detect_trace_format(const std::string& path) {
  using namespace trace_detail;
  LineSource src(path);
  std::string line;
  if (!src.next(line)) throw Error(path + ": no requests");
  if (trim(line).front() == '{') return TraceFormat::kMooncake;
  std::vector<std::string> fields;
  if (split_csv(line, fields)) {
    const auto has = [&](std::string_view name) {
      return std::any_of(fields.begin(), fields.end(),
                         [&](const std::string& f) { return lower(trim(f)) == name; });
    };
    if (has("timestamp") && has("contexttokens") && has("generatedtokens")) {
      return TraceFormat::kAzure;
    }
    if (has("timestamp") && has("request tokens") && has("response tokens")) {
      return TraceFormat::kBurstGpt;
    }
    if (has("arrival_s") && has("input_tokens") && has("output_tokens")) {
      return TraceFormat::kPlainCsv;
    }
  }
  throw Error(src.here() + ": cannot tell the trace format from the first line " +
              quote_text(line) +
              "; accepted: azure (header TIMESTAMP,ContextTokens,GeneratedTokens), mooncake "
              "(JSON lines with timestamp, input_length, output_length, hash_ids), burstgpt "
              "(header Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type), "
              "csv (header arrival_s,input_tokens,output_tokens); or name the format");
}

std::unique_ptr<TraceReader> open_trace(const std::string& path,
                                        std::optional<TraceFormat> format, double time_scale) {
  using namespace trace_detail;
  if (!(time_scale > 0) || !std::isfinite(time_scale)) {
    std::ostringstream text;
    text << time_scale;
    throw Error(path + ": time scale '" + text.str() +
                "' must be a positive number (it multiplies the gaps between arrivals; 0.5 "
                "replays twice as fast)");
  }
  const TraceFormat f = format ? *format : detect_trace_format(path);
  std::unique_ptr<RowSource> source;
  switch (f) {
    case TraceFormat::kAzure: source = std::make_unique<AzureSource>(path); break;
    case TraceFormat::kMooncake: source = make_mooncake_source(path); break;
    case TraceFormat::kBurstGpt: source = std::make_unique<BurstGptSource>(path); break;
    case TraceFormat::kPlainCsv: source = std::make_unique<PlainCsvSource>(path); break;
  }
  return std::make_unique<ScaledReader>(std::move(source), time_scale);
}

}  // namespace capsim
