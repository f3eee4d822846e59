#include "sim/report/table.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace capsim {
namespace {

bool numeric(const std::string& s) {
  return !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) ||
                        ((s[0] == '-' || s[0] == '+' || s[0] == '.') && s.size() > 1 &&
                         std::isdigit(static_cast<unsigned char>(s[1]))));
}

}  // namespace

std::string shorten_at_word(const std::string& text, std::size_t max_chars) {
  if (text.size() <= max_chars) return text;
  const std::string more = " ...";
  if (max_chars <= more.size()) return text.substr(0, max_chars);
  const std::size_t room = max_chars - more.size();
  // The last space at or before `room`: the words before it stay whole.
  std::size_t cut = text.rfind(' ', room);
  while (cut != std::string::npos && cut > 0 && text[cut - 1] == ' ') --cut;
  if (cut == std::string::npos || cut == 0) cut = room;
  std::string out = text.substr(0, cut);
  while (!out.empty() && (out.back() == ',' || out.back() == ':' || out.back() == ';')) out.pop_back();
  return out + more;
}

std::string fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

void TextTable::print(std::ostream& os, const std::string& indent) const {
  std::vector<std::size_t> width(header_.size(), 0);
  for (std::size_t i = 0; i < header_.size(); ++i) width[i] = header_[i].size();
  for (const auto& r : rows_) {
    for (std::size_t i = 0; i < r.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], r[i].size());
    }
  }
  const auto line = [&](const std::vector<std::string>& cells, bool is_header) {
    os << indent;
    for (std::size_t i = 0; i < width.size(); ++i) {
      const std::string c = i < cells.size() ? cells[i] : "";
      const std::size_t pad = width[i] - std::min(width[i], c.size());
      const bool right = !is_header && i > 0 && numeric(c);
      if (right) os << std::string(pad, ' ') << c; else os << c << std::string(pad, ' ');
      if (i + 1 < width.size()) os << "  ";
    }
    os << "\n";
  };
  std::size_t total = 0;
  for (auto w : width) total += w + 2;
  line(header_, true);
  os << indent << std::string(total > 2 ? total - 2 : 0, '-') << "\n";
  for (const auto& r : rows_) {
    if (r.empty()) {
      os << indent << std::string(total > 2 ? total - 2 : 0, '-') << "\n";
    } else {
      line(r, false);
    }
  }
}

}  // namespace capsim
