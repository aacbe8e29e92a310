// Internal to kernels/ (CUDA sources only: device code): PTX wrappers of the bulk copies
// (cp.async.bulk, the Hopper TMA unit) and their mbarriers. They compile to nothing in device
// passes below sm_90 (KVLANES_BULK_DEVICE 0); the launcher never runs such an image
// (BulkCopyDeviceRefusal reads the image's PTX version).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define KVLANES_BULK_DEVICE 1
#else
#define KVLANES_BULK_DEVICE 0
#endif

namespace kvlanes::kernels::detail {

__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void BarrierInit(uint32_t bar) {
#if KVLANES_BULK_DEVICE
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
#endif
}

// Makes the barriers' initialization visible to the async proxy (the bulk copies).
__device__ __forceinline__ void FenceBarrierInit() {
#if KVLANES_BULK_DEVICE
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// Arrives on the barrier (count 1) and adds `bytes` to the transaction count its phase waits for.
__device__ __forceinline__ void ArriveExpectBytes(uint32_t bar, uint32_t bytes) {
#if KVLANES_BULK_DEVICE
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
#endif
}

// Global -> shared; the bytes complete the barrier's transaction count as they land.
__device__ __forceinline__ void BulkLoad(uint32_t dst_smem, const void* src, uint32_t bytes,
                                         uint32_t bar) {
#if KVLANES_BULK_DEVICE
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(dst_smem),
      "l"(__cvta_generic_to_global(src)), "r"(bytes), "r"(bar)
      : "memory");
#endif
}

// Spins until the barrier's phase of this parity has completed.
__device__ __forceinline__ void WaitParity(uint32_t bar, uint32_t parity) {
#if KVLANES_BULK_DEVICE
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred ready;\n"
        " mbarrier.try_wait.parity.shared::cta.b64 ready, [%1], %2;\n"
        " selp.u32 %0, 1, 0, ready;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
#endif
}

// Shared -> global in the current bulk group, committed as one group.
__device__ __forceinline__ void BulkStoreCommit(void* dst, uint32_t src_smem, uint32_t bytes) {
#if KVLANES_BULK_DEVICE
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(
                   __cvta_generic_to_global(dst)),
               "r"(src_smem), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}

// Every committed bulk group but the newest has finished reading its shared memory.
__device__ __forceinline__ void WaitReadAllButNewest() {
#if KVLANES_BULK_DEVICE
  asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
#endif
}

// Makes this thread's earlier ordinary writes to shared memory visible to the bulk copies (the
// async proxy); the writer fences, then the threads synchronize, then one issues the copy.
__device__ __forceinline__ void FenceSharedForBulk() {
#if KVLANES_BULK_DEVICE
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// Arrives on the barrier (count 1) with no bytes to wait for: its phase completes at once.
__device__ __forceinline__ void Arrive(uint32_t bar) {
#if KVLANES_BULK_DEVICE
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
#endif
}

// Every committed bulk group has finished reading its shared memory.
__device__ __forceinline__ void WaitReadAll() {
#if KVLANES_BULK_DEVICE
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#endif
}

// Every committed bulk group has completed (its writes are done).
__device__ __forceinline__ void WaitAllGroups() {
#if KVLANES_BULK_DEVICE
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

}  // namespace kvlanes::kernels::detail
