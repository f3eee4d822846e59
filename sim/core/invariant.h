// Invariant checks of the simulation (requests and tokens conserved, KV blocks never
// over-allocated or leaked, time never going backwards, every arrived request ending exactly
// once). Compiled into Debug, sanitizer and fuzz builds (CAPSIM_INVARIANTS, set by CMake);
// Release builds compile them out, so they cost nothing in the timed build.
//
// A failed invariant is a bug in capsim, never bad input: it prints what broke and where, then
// aborts (a test, sanitizer or fuzz run reports it), instead of throwing capsim::Error.
#pragma once

namespace capsim {

[[noreturn]] void invariant_failed(const char* condition, const char* what, const char* file,
                                   int line);

}  // namespace capsim

#ifdef CAPSIM_INVARIANTS
#define CAPSIM_INVARIANTS_ON 1
#define CAPSIM_INVARIANT(condition, what) \
  ((condition) ? (void)0 : ::capsim::invariant_failed(#condition, what, __FILE__, __LINE__))
#else
#define CAPSIM_INVARIANTS_ON 0
#define CAPSIM_INVARIANT(condition, what) ((void)0)
#endif
