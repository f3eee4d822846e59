// How many threads capsim may use: $CAPSIM_THREADS (a positive count), else the hardware's.
// The plan's parallel runs and a long run's end-of-run summaries both ask here.
#pragma once

namespace capsim {

unsigned default_threads();

}  // namespace capsim
