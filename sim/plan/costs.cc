#include "sim/plan/costs.h"

#include <cassert>
#include <limits>

namespace capsim {

double usd_per_million(double usd_per_hour, double units_per_second) {
  assert(usd_per_hour >= 0 && units_per_second > 0);
  return usd_per_hour / (units_per_second * 3600.0) * 1e6;
}

double average_watts(double tdp_watts, double power_fraction) {
  assert(tdp_watts >= 0 && power_fraction >= 0 && power_fraction <= 1);
  return tdp_watts * power_fraction;
}

double kwh_per_million(double tdp_watts, double power_fraction, double units_per_second) {
  assert(units_per_second > 0);
  const double seconds = 1e6 / units_per_second;
  return average_watts(tdp_watts, power_fraction) * seconds / 3.6e6;
}

double power_usd_per_hour(double tdp_watts, double usd_per_kwh) {
  assert(tdp_watts >= 0 && usd_per_kwh >= 0);
  return tdp_watts / 1000.0 * usd_per_kwh;
}

double breakeven_months(double purchase_usd, double rent_usd_per_hour, double tdp_watts,
                        double usd_per_kwh, double utilisation) {
  assert(purchase_usd >= 0 && rent_usd_per_hour >= 0);
  assert(utilisation > 0 && utilisation <= 1);
  // Each busy hour an owner saves the rent but pays the electricity; the purchase is repaid by
  // those savings, accumulated over the busy hours of each month.
  const double saving_per_busy_hour =
      rent_usd_per_hour - power_usd_per_hour(tdp_watts, usd_per_kwh);
  if (saving_per_busy_hour <= 0) return std::numeric_limits<double>::infinity();
  return purchase_usd / (kHoursPerMonth * utilisation * saving_per_busy_hour);
}

}  // namespace capsim
