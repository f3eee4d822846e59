// Plain-text tables for the terminal: columns padded to their widest cell, numbers right-aligned.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace capsim {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  void rule() { rows_.push_back({}); }  // a separator line
  void print(std::ostream& os, const std::string& indent = "  ") const;
  const std::vector<std::string>& header() const { return header_; }
  const std::vector<std::vector<std::string>>& rows() const { return rows_; }  // {} = separator

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// `text` cut to at most `max_chars` characters at a word boundary, with " ..." where it was
// cut (a single word longer than that is cut inside it), so a cell never ends mid-number.
std::string shorten_at_word(const std::string& text, std::size_t max_chars);

// printf-style number formatting: fmt("%.2f", 3.14159) == "3.14".
std::string fmt(const char* format, double value);

}  // namespace capsim
