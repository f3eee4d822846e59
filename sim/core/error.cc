#include "sim/core/error.h"

#include <algorithm>
#include <cctype>
#include <numeric>

namespace capsim {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::vector<std::string> closest_matches(std::string_view wanted,
                                         const std::vector<std::string>& candidates,
                                         std::size_t max) {
  struct Scored {
    std::size_t score;
    std::string name;
  };
  std::vector<Scored> scored;
  std::string lower_wanted(wanted);
  std::transform(lower_wanted.begin(), lower_wanted.end(), lower_wanted.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  for (const auto& c : candidates) {
    std::string lower(c);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char ch) { return std::tolower(ch); });
    std::size_t d = edit_distance(lower_wanted, lower);
    // A candidate that contains the wanted text (or the reverse) is a strong hint.
    if (!lower_wanted.empty() && (lower.find(lower_wanted) != std::string::npos ||
                                  lower_wanted.find(lower) != std::string::npos)) {
      d = std::min<std::size_t>(d, 1);
    }
    const std::size_t limit = std::max<std::size_t>(2, lower_wanted.size() / 3);
    if (d <= limit) scored.push_back({d, c});
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const Scored& x, const Scored& y) { return x.score < y.score; });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && i < max; ++i) out.push_back(scored[i].name);
  return out;
}

std::string unknown_name_message(std::string_view what, std::string_view wanted,
                                 const std::vector<std::string>& accepted) {
  std::string msg = "unknown " + std::string(what) + " '" + std::string(wanted) + "'";
  const auto near = closest_matches(wanted, accepted);
  if (!near.empty()) {
    msg += "; did you mean: ";
    for (std::size_t i = 0; i < near.size(); ++i) msg += (i ? ", " : "") + near[i];
    msg += "?";
  }
  msg += "; accepted: ";
  for (std::size_t i = 0; i < accepted.size(); ++i) msg += (i ? ", " : "") + accepted[i];
  return msg;
}

}  // namespace capsim
