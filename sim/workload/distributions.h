// Distributions of token counts and times used by workloads: fixed, uniform, normal,
// lognormal (by mean and p99), exponential, geometric, and empirical (a CSV column).
//
// Written as a compact flag string ("512", "uniform:100:1000", "normal:500:50",
// "lognormal:150:1200", "exponential:20s", "geometric:5", "empirical:FILE.csv:COLUMN"). Times
// carry units ("20s", "500ms"). A scenario file's YAML form ({dist: lognormal, mean: 150,
// p99: 1200}) becomes that string in sim/scenario/scenario.cc (dist_text).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/core/rng.h"

namespace capsim {

class Distribution {
 public:
  enum class Kind { kFixed, kUniform, kNormal, kLognormal, kExponential, kGeometric, kEmpirical };
  enum class Unit { kTokens, kSeconds, kCount };

  // Parses a flag string; `where` names the flag or file:field in errors.
  static Distribution parse(const std::string& text, Unit unit, const std::string& where);
  static Distribution fixed(double v, Unit unit);
  // Draws uniformly from `values` (a measured run's per-request lengths); `source` names them in
  // describe(). REQUIRES: values non-empty.
  static Distribution empirical(std::vector<double> values, Unit unit, const std::string& source);

  // A draw. Token counts and counts are rounded and at least 1; times are >= 0 seconds.
  double sample(Rng& rng) const;
  double mean() const;
  std::string describe() const;

 private:
  Kind kind_ = Kind::kFixed;
  Unit unit_ = Unit::kTokens;
  double a_ = 0, b_ = 0;  // meaning depends on kind (value; min,max; mean,sd; mu,sigma; mean)
  double mean_hint_ = 0, p99_hint_ = 0;
  std::shared_ptr<const std::vector<double>> values_;  // empirical
  std::string source_;
};

}  // namespace capsim
