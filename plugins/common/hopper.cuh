// PTX wrappers for sm_90 asynchronous data movement and warp specialisation:
// mbarriers, TMA (cp.async.bulk.tensor) loads completing on them, named
// barriers and register reallocation (setmaxnreg, sm_90a). Device-only, no
// framework includes. Every wrapper compiles to nothing below sm_90a, where
// the kernels that use them are empty.
#pragma once

#include <cstdint>

#include "plugins/common/mma.cuh"

namespace trt_fastops {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TRT_FASTOPS_SM90A 1
#endif

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
#ifdef TRT_FASTOPS_SM90A
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
#endif
}

// Makes initialised barriers visible to the async proxy (the TMA unit) too.
__device__ __forceinline__ void mbar_init_fence() {
#ifdef TRT_FASTOPS_SM90A
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// One arrival that also announces `bytes` still to land through complete_tx.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#ifdef TRT_FASTOPS_SM90A
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
#endif
}

// Announces `bytes` still to land through complete_tx, without an arrival
// (the phase also waits for the expected arrivals).
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
#ifdef TRT_FASTOPS_SM90A
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
#endif
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#ifdef TRT_FASTOPS_SM90A
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
#endif
}

// Blocks until the barrier phase with the given parity has completed. The
// suspend-time hint (CUTLASS's, 10 ms) lets the warp sleep in try_wait until
// the phase completes; without it each try returns after a short poll, and the
// producer and store warps polled through whole tiles (ncu: 46M polls a call;
// time within noise either way, bench/NOTES-attention-log.md item 72).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
#ifdef TRT_FASTOPS_SM90A
  constexpr uint32_t SUSPEND_HINT_NS = 0x989680;
  const uint32_t addr = smem_addr(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity), "r"(SUSPEND_HINT_NS)
        : "memory");
  } while (!done);
#endif
}

// TMA load of one box of a 4-D tensor map (a __grid_constant__ kernel
// parameter) into shared memory; completion is counted on `bar` in bytes.
__device__ __forceinline__ void tma_load_4d(void* dst, const void* tensor_map, uint64_t* bar, int c0, int c1, int c2,
                                            int c3) {
#ifdef TRT_FASTOPS_SM90A
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, "
      "%6}], [%2];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
#endif
}

// tma_load_4d into the same shared-memory offset of every CTA of the cluster in
// `cta_mask`; each of those CTAs counts the bytes on its own barrier at `bar`'s offset.
__device__ __forceinline__ void tma_load_4d_multicast(void* dst, const void* tensor_map, uint64_t* bar,
                                                      uint16_t cta_mask, int c0, int c1, int c2, int c3) {
#ifdef TRT_FASTOPS_SM90A
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
      "[%1, {%3, %4, %5, %6}], [%2], %7;\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
      "h"(cta_mask)
      : "memory");
#endif
}

// This CTA's rank within its thread-block cluster.
__device__ __forceinline__ uint32_t cluster_cta_rank() {
  uint32_t rank = 0;
#ifdef TRT_FASTOPS_SM90A
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
#endif
  return rank;
}

// Every thread of every CTA of the cluster arrives, then waits for all (release /
// acquire at cluster scope): barriers initialised before it may be used by the
// other CTAs after it, and no CTA leaves while another may still reach its memory.
__device__ __forceinline__ void cluster_sync() {
#ifdef TRT_FASTOPS_SM90A
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
#endif
}

// One arrival on the barrier at `bar`'s offset in CTA `cta` of the cluster. The default
// (CTA-scope) release, as CUTLASS's ClusterBarrier::arrive: what it orders are reads of this
// CTA's shared memory, done (wgmma waits) before the arrival; the .cluster scope put a
// MEMBAR.ALL.GPU before every arrival.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t cta) {
#ifdef TRT_FASTOPS_SM90A
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(smem_addr(bar)),
      "r"(cta)
      : "memory");
#endif
}

// TMA store of one box from shared memory into a 4-D tensor map (elements
// outside the tensor are not written), in the issuing thread's bulk group.
__device__ __forceinline__ void tma_store_4d(const void* tensor_map, const void* src, int c0, int c1, int c2, int c3) {
#ifdef TRT_FASTOPS_SM90A
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(tensor_map)),
               "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
#endif
}
__device__ __forceinline__ void tma_store_commit() {
#ifdef TRT_FASTOPS_SM90A
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most N of this thread's committed bulk groups are still
// reading shared memory (READ) or still incomplete (their global writes too).
template <int N, bool READ>
__device__ __forceinline__ void tma_store_wait() {
#ifdef TRT_FASTOPS_SM90A
  if constexpr (READ) {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
  } else {
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
  }
#endif
}
// Orders this thread's shared-memory writes before later reads of them by the
// async proxy (a TMA store issued after a barrier).
__device__ __forceinline__ void fence_proxy_async_shared() {
#ifdef TRT_FASTOPS_SM90A
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void tma_prefetch_descriptor(const void* tensor_map) {
#ifdef TRT_FASTOPS_SM90A
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(tensor_map)) : "memory");
#endif
}

// Programmatic dependent launch. A grid launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start before the grid
// ahead of it in the stream has finished; each thread waits here for that
// grid's completion and memory before its first global access (a no-op for a
// grid launched without the attribute). launch_dependents lets the next such
// grid start launching (its CTAs take SMs as this grid's leave, and wait).
// Plain sm_90 PTX (not only sm_90a); nothing below compute capability 9.0.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Register reallocation between warpgroups: the producer gives registers
// back, the consumers take them. N is per thread, a multiple of 8.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
#ifdef TRT_FASTOPS_SM90A
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
#ifdef TRT_FASTOPS_SM90A
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

// Named barriers (ids 1..15; 0 is __syncthreads) over `threads` threads.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace trt_fastops
