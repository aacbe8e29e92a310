// A hint for the large arrays filled once (a trace load's file text and block ids, serving mode's
// per-request records): that
// the kernel back them with transparent huge pages where it allows them (Linux,
// /sys/kernel/mm/transparent_hugepage/enabled "always" or "madvise"). Filling fresh memory costs
// a page fault per 4 KiB page otherwise (on the 2-core development VM about a fifth of a trace
// load, in `kvlanes bench read`). Only a hint: a kernel that refuses it changes nothing, and no
// output depends on it.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

namespace kvlanes::reader {

// Arrays smaller than this get no hint: a huge page that is only partly written costs up to 2 MiB
// of memory, which a small trace would feel more than the faults it saves.
inline constexpr size_t kHugePageHintMinBytes = size_t{8} << 20;

// Asks for huge pages on the whole 2 MiB pages inside [p, p + bytes) (none when it holds none, or
// when bytes < kHugePageHintMinBytes).
inline void AdviseHugePages(const void* p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  if (bytes < kHugePageHintMinBytes) return;
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace kvlanes::reader
