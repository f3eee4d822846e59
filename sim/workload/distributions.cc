#include "sim/workload/distributions.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/input_limits.h"
#include "sim/core/units.h"
#include "sim/core/yaml_fields.h"

namespace capsim {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) { out.push_back(cur); cur.clear(); } else { cur += c; }
  }
  out.push_back(cur);
  return out;
}

const char* kAccepted =
    "accepted: N, uniform:MIN:MAX, normal:MEAN:SD, lognormal:MEAN:P99, exponential:MEAN, "
    "geometric:MEAN, empirical:FILE.csv:COLUMN (or YAML {dist: ..., ...})";

// Most turns in one chat session.
constexpr double kMaxCount = 1e6;

// The largest value a distribution of `unit` may take: what the simulator's types carry.
double max_value(Distribution::Unit unit) {
  switch (unit) {
    case Distribution::Unit::kSeconds: return checked::kMaxSimSeconds;
    case Distribution::Unit::kTokens: return static_cast<double>(checked::kMaxTokens);
    case Distribution::Unit::kCount: return kMaxCount;
  }
  return kMaxCount;
}

const char* unit_word(Distribution::Unit unit) {
  switch (unit) {
    case Distribution::Unit::kSeconds: return "s";
    case Distribution::Unit::kTokens: return "tokens";
    case Distribution::Unit::kCount: return "";
  }
  return "";
}

double value_of(const std::string& text, Distribution::Unit unit, const std::string& where) {
  const double v = unit == Distribution::Unit::kSeconds ? units::parse_time(text, where)
                                                        : parse_number(text, where);
  return checked::finite_in(v, 0, max_value(unit), where, unit_word(unit));
}

std::shared_ptr<const std::vector<double>> load_column(const std::string& file,
                                                       const std::string& column,
                                                       const std::string& where) {
  std::istringstream in;
  try {
    in.str(read_input_file(file, "empirical distribution CSV", kMaxTableBytes));
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
  std::string header;
  std::getline(in, header);
  if (!header.empty() && header.back() == '\r') header.pop_back();
  const auto names = split(header, ',');
  std::size_t col = names.size();
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] != column) continue;
    // Two columns of this name: which one the file meant is unknown (the other columns are not
    // read, so their names may repeat).
    if (col != names.size()) {
      throw Error(where + ": " + file + ": column '" + column + "' appears twice in the header (columns " +
                  std::to_string(col + 1) + " and " + std::to_string(i + 1) + "); each column may be named once");
    }
    col = i;
  }
  if (col == names.size()) {
    throw Error(where + ": " + file + " has no column '" + column + "'; it has: " + header);
  }
  auto values = std::make_shared<std::vector<double>>();
  std::string line;
  std::size_t line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const auto cells = split(line, ',');
    if (col >= cells.size()) {
      throw Error(file + ":" + std::to_string(line_no) + ": column '" + column + "' is missing");
    }
    values->push_back(parse_number(cells[col], file + ":" + std::to_string(line_no) + ": column '" + column + "'"));
  }
  if (values->empty()) throw Error(where + ": " + file + " has no rows");
  return values;
}

}  // namespace

Distribution Distribution::fixed(double v, Unit unit) {
  Distribution d;
  d.kind_ = Kind::kFixed;
  d.unit_ = unit;
  d.a_ = v;
  return d;
}

Distribution Distribution::empirical(std::vector<double> values, Unit unit, const std::string& source) {
  Distribution d;
  d.kind_ = Kind::kEmpirical;
  d.unit_ = unit;
  d.values_ = std::make_shared<const std::vector<double>>(std::move(values));
  d.source_ = source;
  return d;
}

Distribution Distribution::parse(const std::string& text, Unit unit, const std::string& where) {
  const auto parts = split(text, ':');
  Distribution d;
  d.unit_ = unit;
  const std::string& k = parts[0];
  const auto need = [&](std::size_t n) {
    if (parts.size() != n) {
      throw Error(where + ": '" + text + "' has " + std::to_string(parts.size() - 1) +
                  " parameters where " + k + " takes " + std::to_string(n - 1) + "; " + kAccepted);
    }
  };
  if (parts.size() == 1) {
    d.kind_ = Kind::kFixed;
    d.a_ = value_of(text, unit, where);
  } else if (k == "fixed") {
    need(2);
    d.kind_ = Kind::kFixed;
    d.a_ = value_of(parts[1], unit, where);
  } else if (k == "uniform") {
    need(3);
    d.kind_ = Kind::kUniform;
    d.a_ = value_of(parts[1], unit, where);
    d.b_ = value_of(parts[2], unit, where);
    if (d.b_ < d.a_) throw Error(where + ": uniform max " + parts[2] + " is below min " + parts[1]);
  } else if (k == "normal") {
    need(3);
    d.kind_ = Kind::kNormal;
    d.a_ = value_of(parts[1], unit, where);
    d.b_ = value_of(parts[2], unit, where);
  } else if (k == "lognormal") {
    need(3);
    d.kind_ = Kind::kLognormal;
    d.mean_hint_ = value_of(parts[1], unit, where);
    d.p99_hint_ = value_of(parts[2], unit, where);
    try {
      const auto p = lognormal_params_from_mean_p99(d.mean_hint_, d.p99_hint_);
      d.a_ = p.mu;
      d.b_ = p.sigma;
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
  } else if (k == "exponential" || k == "exp") {
    need(2);
    d.kind_ = Kind::kExponential;
    d.a_ = value_of(parts[1], unit, where);
    if (d.a_ <= 0) throw Error(where + ": exponential mean must be > 0");
  } else if (k == "geometric") {
    need(2);
    d.kind_ = Kind::kGeometric;
    d.a_ = value_of(parts[1], unit, where);
    if (d.a_ < 1) throw Error(where + ": geometric mean must be >= 1");
  } else if (k == "empirical") {
    need(3);
    d.kind_ = Kind::kEmpirical;
    d.values_ = load_column(parts[1], parts[2], where);
    d.source_ = parts[1] + ":" + parts[2];
  } else {
    throw Error(where + ": unknown distribution '" + k + "'; " + kAccepted);
  }
  if ((d.kind_ == Kind::kFixed || d.kind_ == Kind::kUniform) && unit != Unit::kSeconds && d.a_ < 1) {
    throw Error(where + ": '" + text + "' must be at least 1");
  }
  return d;
}

double Distribution::sample(Rng& rng) const {
  double v = 0;
  switch (kind_) {
    case Kind::kFixed: v = a_; break;
    case Kind::kUniform:
      v = unit_ == Unit::kSeconds ? rng.uniform(a_, b_)
                                  : static_cast<double>(rng.uniform_int(static_cast<std::int64_t>(a_),
                                                                        static_cast<std::int64_t>(b_)));
      break;
    case Kind::kNormal: v = rng.normal(a_, b_); break;
    case Kind::kLognormal: v = rng.lognormal(a_, b_); break;
    case Kind::kExponential: v = rng.exponential(a_); break;
    case Kind::kGeometric: v = static_cast<double>(rng.geometric(a_)); break;
    case Kind::kEmpirical:
      v = (*values_)[static_cast<std::size_t>(
          rng.uniform_int(0, static_cast<std::int64_t>(values_->size()) - 1))];
      break;
  }
  // Draws are clamped to what the types carry; the parameters are already within it, so only a
  // far tail (a lognormal beyond 1e9 tokens) is ever cut.
  if (unit_ == Unit::kSeconds) return std::clamp(v, 0.0, max_value(unit_));
  return std::clamp(std::round(v), 1.0, max_value(unit_));
}

double Distribution::mean() const {
  switch (kind_) {
    case Kind::kFixed: return a_;
    case Kind::kUniform: return (a_ + b_) / 2;
    case Kind::kNormal: return a_;
    case Kind::kLognormal: return mean_hint_;
    case Kind::kExponential: return a_;
    case Kind::kGeometric: return a_;
    case Kind::kEmpirical: {
      double s = 0;
      for (double x : *values_) s += x;
      return s / static_cast<double>(values_->size());
    }
  }
  return a_;
}

std::string Distribution::describe() const {
  std::ostringstream o;
  const char* u = unit_ == Unit::kSeconds ? " s" : "";
  switch (kind_) {
    case Kind::kFixed: o << a_ << u; break;
    case Kind::kUniform: o << "uniform(" << a_ << ", " << b_ << ")" << u; break;
    case Kind::kNormal: o << "normal(mean " << a_ << ", sd " << b_ << ")" << u; break;
    case Kind::kLognormal: o << "lognormal(mean " << mean_hint_ << ", p99 " << p99_hint_ << ")" << u; break;
    case Kind::kExponential: o << "exponential(mean " << a_ << u << ")"; break;
    case Kind::kGeometric: o << "geometric(mean " << a_ << ")"; break;
    case Kind::kEmpirical: o << "empirical(" << source_ << ")"; break;
  }
  return o.str();
}

}  // namespace capsim
