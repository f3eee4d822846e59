// Cost arithmetic, each expectation worked by hand in its comment.
#include "sim/plan/costs.h"

#include <catch2/catch.hpp>
#include <cmath>

using namespace capsim;

TEST_CASE("costs: dollars and energy per million units", "[plan][costs]") {
  // $2.69/h at 1000 tokens/s: one million tokens take 1000 s = 0.2778 h -> $0.74722.
  CHECK(usd_per_million(2.69, 1000) == Approx(2.69 * 1000.0 / 3600.0));
  CHECK(usd_per_million(2.69, 1000) == Approx(0.747222).epsilon(1e-6));
  // 700 W at full power for those 1000 s: 700,000 J / 3.6e6 J/kWh = 7/36 = 0.19444 kWh.
  CHECK(kwh_per_million(700, 1.0, 1000) == Approx(7.0 / 36.0));
  // Drawing half the TDP halves it.
  CHECK(kwh_per_million(700, 0.5, 1000) == Approx(7.0 / 72.0));
  CHECK(average_watts(700, 0.25) == 175);
  // 700 W for an hour at $0.0895/kWh: 0.7 kWh x 0.0895 = $0.06265.
  CHECK(power_usd_per_hour(700, 0.0895) == Approx(0.06265));
}

TEST_CASE("costs: buy-vs-rent break-even", "[plan][costs]") {
  // H100 SXM: buy $27,500, rent $2.69/h, 700 W at $0.0895/kWh, busy half the time.
  // Each busy hour saves 2.69 - 0.06265 = $2.62735; a month has 730.5 h, half busy = 365.25 h,
  // saving $959.64 a month: 27,500 / 959.64 = 28.66 months.
  CHECK(breakeven_months(27500, 2.69, 700, 0.0895, 0.5) == Approx(28.6566).epsilon(1e-5));
  // Busy all the time it halves: 14.33 months.
  CHECK(breakeven_months(27500, 2.69, 700, 0.0895, 1.0) == Approx(14.3283).epsilon(1e-5));
  // RTX 4090: $1,599, rent $0.34/h, 450 W: saving 0.34 - 0.0403 = $0.29973/h, at 30% busy
  // 219.15 h/month -> $65.69/month -> 24.34 months.
  CHECK(breakeven_months(1599, 0.34, 450, 0.0895, 0.3) == Approx(24.343).epsilon(1e-4));
  // Rent below the electricity bill: buying never pays back.
  CHECK(std::isinf(breakeven_months(1000, 0.05, 700, 0.0895, 1.0)));
  CHECK(kHoursPerMonth == 730.5);
}
