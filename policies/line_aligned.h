// An allocator of cache-line-aligned storage, for tables read one 64-byte set at a time (the
// sightings history, the bypass history): glibc's malloc returns large blocks 16 bytes past a
// page boundary, so a 4-way set of 16-byte entries would straddle two lines and cost two misses.
//
// A block of 2 MiB or more is aligned to 2 MiB and offered to the kernel for transparent huge
// pages (MADV_HUGEPAGE, before anything is written to it): such a table is read at random, one
// line per lookup, and with 4 KiB pages nearly every lookup also missed the TLB (a bypass history
// of 16 MiB spans 4,096 pages; a profile had half of the bypass admission's samples on the
// instruction after its prefetches). Only a hint: a kernel that refuses it changes nothing.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>

namespace kvlanes {

template <class T>
struct LineAlignedAllocator {
  using value_type = T;
  static constexpr std::size_t kLine = 64;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
  LineAlignedAllocator() = default;
  template <class U>
  LineAlignedAllocator(const LineAlignedAllocator<U>&) {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T) - kHugePage) throw std::bad_alloc();
    const std::size_t bytes = n * sizeof(T);
    const std::size_t align = bytes >= kHugePage ? kHugePage : kLine;
    void* p = std::aligned_alloc(align, (bytes + align - 1) / align * align);
    if (p == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    if (align == kHugePage) ::madvise(p, (bytes + align - 1) / align * align, MADV_HUGEPAGE);
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { std::free(p); }
  template <class U>
  bool operator==(const LineAlignedAllocator<U>&) const {
    return true;
  }
};

}  // namespace kvlanes
