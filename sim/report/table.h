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

// printf-style number formatting: fmt("%.2f", 3.14159) == "3.14".
std::string fmt(const char* format, double value);

}  // namespace capsim
