// Test program (g++ -O2): page faults of 40,000 small vectors with glibc defaults (mode 0), mallopt
// only (1), mallopt + madvise(MADV_HUGEPAGE) of 64 MiB before the heap has grown (3, as the
// earlier in-process attempt of LOG 2026-12-03.04 is described) and after it has grown (2).
// Output of `perf stat -e page-faults ./a.out MODE`: heap_advice_test.out.
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>
static void Smaps() {
  std::ifstream f("/proc/self/smaps");
  std::string line, cur;
  while (std::getline(f, line)) {
    if (line.find("[heap]") != std::string::npos) cur = line;
    if (!cur.empty() && (line.rfind("AnonHugePages", 0) == 0 || line.rfind("Rss", 0) == 0 ||
                         line.rfind("THPeligible", 0) == 0))
      std::printf("  %s\n", line.c_str());
    if (!cur.empty() && line.rfind("VmFlags", 0) == 0) {
      std::printf("  %s | %s\n", cur.c_str(), line.c_str());
      cur.clear();
    }
  }
}
int main(int argc, char** argv) {
  int mode = atoi(argv[1]);
  if (mode >= 1) {
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TOP_PAD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
  }
  if (mode == 3) {  // madvise 64 MiB from the heap's start before it has grown
    void* q = malloc(16);
    uintptr_t b = ((uintptr_t)q + (2u << 20) - 1) & ~uintptr_t((2u << 20) - 1);
    int r = madvise((void*)b, 64u << 20, MADV_HUGEPAGE);
    std::printf("madvise-before %lx (64 MiB) -> %d\n", b, r);
    free(q);
  }
  if (mode == 2) {
    void* volatile p = malloc(1 << 20);
    free(p);
    char* lo = (char*)sbrk(0);
    // heap start: find from a tiny malloc
    void* q = malloc(16);
    uintptr_t b = ((uintptr_t)q + (2u << 20) - 1) & ~uintptr_t((2u << 20) - 1);
    uintptr_t e = (uintptr_t)lo & ~uintptr_t((2u << 20) - 1);
    int r = madvise((void*)b, e - b, MADV_HUGEPAGE);
    std::printf("madvise %lx-%lx (%lu MiB) -> %d\n", b, e, (e - b) >> 20, r);
    free(q);
  }
  std::vector<std::vector<int>> v;
  for (int i = 0; i < 40000; ++i) v.emplace_back(50, i);
  Smaps();
  return 0;
}
