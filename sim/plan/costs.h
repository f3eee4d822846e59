// Cost arithmetic on prices (docs/prices.md#arithmetic): dollars per million units of work
// (tokens, images, requests), energy per million units, and buy-vs-rent break-even.
//
// Contract: plain functions of their arguments, SI and US-dollar units as named. Arguments come
// from validated data and flags; out-of-range arguments are programming errors (assert), not
// user errors.
#pragma once

namespace capsim {

// Hours in an average month: 365.25 days x 24 h / 12.
inline constexpr double kHoursPerMonth = 730.5;

// Dollars per million units at `units_per_second` sustained on hardware costing
// `usd_per_hour`: usd_per_hour / (units_per_second x 3600) x 1e6.
// REQUIRES: usd_per_hour >= 0, units_per_second > 0.
double usd_per_million(double usd_per_hour, double units_per_second);

// Average electrical power of a card drawing `power_fraction` of its TDP, watts.
// REQUIRES: tdp_watts >= 0, 0 <= power_fraction <= 1.
double average_watts(double tdp_watts, double power_fraction);

// Energy per million units, kWh: tdp_watts x power_fraction x (1e6 / units_per_second) seconds,
// / 3.6e6 J per kWh. REQUIRES as above, units_per_second > 0.
double kwh_per_million(double tdp_watts, double power_fraction, double units_per_second);

// Electricity cost of one busy hour at full TDP, dollars: tdp_watts / 1000 x usd_per_kwh.
double power_usd_per_hour(double tdp_watts, double usd_per_kwh);

// Months after which buying a card costs less than renting it, when it is busy a fraction
// `utilisation` of the time:
//   purchase_usd / (kHoursPerMonth x utilisation x (rent_usd_per_hour - power_usd_per_hour)),
// where power_usd_per_hour = power_usd_per_hour(tdp_watts, usd_per_kwh): an owned card pays
// electricity (at TDP) for the hours it works, a rented one pays rent for the same hours.
// Idle power, cooling, hosting and the resale value are left out (docs/prices.md#break-even).
// Returns +infinity when rent <= power cost (buying never pays back).
// REQUIRES: purchase_usd >= 0, 0 < utilisation <= 1, rent >= 0, tdp_watts >= 0, usd_per_kwh >= 0.
double breakeven_months(double purchase_usd, double rent_usd_per_hour, double tdp_watts,
                        double usd_per_kwh, double utilisation);

}  // namespace capsim
