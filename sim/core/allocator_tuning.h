// How the capsim executable sets up glibc's allocator before it allocates anything, and how the
// library's worker threads extend that to their own heaps.
//
// Why: a run grows vectors of per-request records and per-step samples to tens or hundreds of
// MiB. With glibc's defaults every block past 128 KiB is a fresh mmap and every freed one goes
// back to the kernel, so the same memory is faulted in again, 4 KiB at a time; on the virtual
// machines capsim runs on a minor fault costs ~6 us (the issue #12 workload at 100k requests:
// 21,750 faults, a third of its 0.45 s). Keeping freed memory (mmap and trim thresholds of
// 256 MiB), growing the heap 64 MiB at a time and asking for transparent huge pages on it takes
// that run to ~600 faults and ~0.19 s (docs/scale.md, "The allocator"). The output does not
// depend on where memory comes from: it is byte-identical either way.
#pragma once

#include <cstddef>
#include <cstdint>

namespace capsim {

// Whether this build runs under a sanitizer's allocator (then nothing is tuned).
bool built_with_sanitizer();

// What tune_allocator did: whether it set the thresholds, and how many bytes of the heap it
// asked transparent huge pages for (0 where the kernel or the heap's layout did not allow it).
struct AllocatorTuning {
  bool thresholds_set = false;
  std::size_t huge_page_bytes = 0;
  // Where the heap grown for the run starts (its 128 MiB block) and where the marked range
  // starts: one 4 KiB page apart (glibc's chunk header sits in that page), 0 when not marked.
  std::uintptr_t grown_from = 0, huge_from = 0;
};

// Sets glibc malloc's mmap and trim thresholds (256 MiB) and top pad (64 MiB), takes the free
// rest of glibc's first heap (never freed), moves the break to a page short of a 2 MiB
// boundary, grows the main heap by 128 MiB plus the pad at once and
// marks that MADV_HUGEPAGE from the boundary (untouched pages cost
// nothing: the resident size grows only as memory is used). CAPSIM_MALLOC_TUNING=off keeps
// glibc's defaults. Call once, before threads exist and before the program allocates much (the
// capsim executable calls it from a static constructor that runs before the others). Does nothing when opted out, under a sanitizer or without glibc; a program that links
// the library and never calls it keeps glibc's defaults, and tune_thread_heap then does nothing.
AllocatorTuning tune_allocator();

// For a worker thread, at its start (sim/plan's parallel runs): a thread allocates from its own
// glibc arena, whose heaps are glibc's mmaps that tune_allocator cannot reach. Once tune_allocator
// has run, this takes a 48 MiB block from the thread's arena, marks its whole 2 MiB pages
// MADV_HUGEPAGE and frees it (below the trim threshold it stays the arena's). Returns the bytes
// marked: 0 when not tuned, already done on this thread, or not possible.
std::size_t tune_thread_heap();

}  // namespace capsim
