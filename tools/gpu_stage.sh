#!/usr/bin/env bash
# Stages GPU binaries for a machine that lacks the build dependencies (the lent H200 machines
# have CUDA and NCCL but no Boost, yaml-cpp or doctest): builds here with CUDA on, strips the
# binaries into build-dev/bin and copies the two shared libraries they need into build-dev/lib.
# Then run tools/gpu_run.sh there with build-dev carried along (docs/gpu_runs.md).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build build-gpu --target kvlanes kvlanes_exec_gpu_tests kvlanes_kernels_gpu_tests kvlanes_forward_gpu_tests kvlanes_partial_merge_gpu_tests -j"$(nproc)"
mkdir -p build-dev/bin build-dev/lib
for b in kvlanes kvlanes_exec_gpu_tests kvlanes_kernels_gpu_tests kvlanes_forward_gpu_tests kvlanes_partial_merge_gpu_tests; do strip -o build-dev/bin/$b build-gpu/$b; done
for l in libboost_program_options.so.1.74.0 libyaml-cpp.so.0.7; do cp -L /lib/x86_64-linux-gnu/$l build-dev/lib/; done
du -sh build-dev
