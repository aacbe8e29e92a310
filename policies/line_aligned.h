// An allocator of cache-line-aligned storage, for tables read one 64-byte set at a time (the
// sightings history, the bypass history): glibc's malloc returns large blocks 16 bytes past a
// page boundary, so a 4-way set of 16-byte entries would straddle two lines and cost two misses.
#pragma once

#include <cstddef>
#include <new>

namespace kvlanes {

template <class T>
struct LineAlignedAllocator {
  using value_type = T;
  static constexpr std::size_t kLine = 64;
  LineAlignedAllocator() = default;
  template <class U>
  LineAlignedAllocator(const LineAlignedAllocator<U>&) {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kLine}));
  }
  void deallocate(T* p, std::size_t) { ::operator delete (p, std::align_val_t{kLine}); }
  template <class U>
  bool operator==(const LineAlignedAllocator<U>&) const {
    return true;
  }
};

}  // namespace kvlanes
