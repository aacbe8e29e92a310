// Main of the executor's GPU tests. The tests fork rank processes that use CUDA, so this process
// must never initialise CUDA itself (a forked child cannot use its parent's CUDA state): the
// device count comes from a probe child. Exits 77 ("no CUDA device: skipped") without a GPU.
#define DOCTEST_CONFIG_IMPLEMENT
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

int g_gpu_count = 0;

int main(int argc, char** argv) {
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
  std::printf("%d CUDA device(s) visible\n", g_gpu_count);
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
