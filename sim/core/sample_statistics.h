// The pieces of Samples' statistics (stats.h) that code computing the same numbers without a
// Samples shares with it, so that both give them bit for bit (steady_state.cc's batch
// statistics find percentiles by selection instead of sorting).
#pragma once

#include <vector>

namespace capsim::sample_statistics {

// Throws capsim::Error unless 0 <= p <= 100 (NaN included), naming p.
void check_percentile(double p);
// numpy's linear interpolation between neighbouring order statistics lo <= hi at `fraction`
// (0..1) of the way, in numpy's _lerp form (exact at both ends).
double interpolate(double lo, double hi, double fraction);
// The mean summed in the vector's order (NaN when empty), as Samples::mean.
double mean_in_order(const std::vector<double>& values);

}  // namespace capsim::sample_statistics
