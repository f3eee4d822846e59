// Finding an operator group in a step breakdown, for tests that check one group's numbers.
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "sim/cost/step_cost.h"

namespace capsim::test {

// The group named `name`; fails the test (and returns an empty group) when there is none.
inline const OperatorCost& group(const StepBreakdown& s, const std::string& name) {
  for (const auto& g : s.groups) {
    if (g.group == name) return g;
  }
  FAIL("no operator group " << name);
  static OperatorCost none;
  return none;
}

inline bool has_group(const StepBreakdown& s, const std::string& name) {
  for (const auto& g : s.groups) {
    if (g.group == name) return true;
  }
  return false;
}

}  // namespace capsim::test
