// Main of the executor's GPU tests. The tests fork rank processes that use CUDA, so this process
// must never initialise CUDA itself (a forked child cannot use its parent's CUDA state): the
// device count comes from a probe child. `--gpus N` (taken out before doctest reads the
// arguments) is how many GPUs the selected cases need: with fewer visible the program exits 77
// ("N GPU(s) visible, these cases need M: skipped"), which ctest reports as skipped (ctest's
// entries give it: label gpu `--gpus 1`, label gpu2 `--gpus 2 --test-suite=gpu2`). Run by hand
// without it, the program needs one GPU and leaves the test suite gpu2 out where fewer than two
// are visible, saying so (doctest counts them as skipped).
#define DOCTEST_CONFIG_IMPLEMENT
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int g_gpu_count = 0;

int main(int argc, char** argv) {
  int needed = 0;  // 0: not given
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gpus") == 0 && i + 1 < argc) {
      needed = std::atoi(argv[++i]);
      if (needed < 1) {
        std::fprintf(stderr, "--gpus: give a count of at least 1\n");
        return 2;
      }
      continue;
    }
    args.push_back(argv[i]);
  }
  const pid_t pid = fork();
  if (pid == 0) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    _exit(count > 100 ? 100 : count);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  g_gpu_count = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
  if (g_gpu_count == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  if (g_gpu_count < needed) {
    std::printf("%d CUDA device(s) visible, these cases need %d: skipped\n", g_gpu_count, needed);
    return 77;
  }
  std::printf("%d CUDA device(s) visible\n", g_gpu_count);
  doctest::Context ctx(static_cast<int>(args.size()), args.data());
  if (needed == 0 && g_gpu_count < 2) {
    std::printf("test suite gpu2 left out: it needs 2 GPUs (ctest -L gpu2 reports it skipped)\n");
    ctx.addFilter("test-suite-exclude", "gpu2");
  }
  return ctx.run();
}
