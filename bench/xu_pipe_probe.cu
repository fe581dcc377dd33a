// Do the softmax's exponentials (MUFU.EX2) and P's conversion to 16 bits
// (F2FP.PACK_AB) queue on the same pipe of an sm_90a SM? If they did, d64's
// 64 exponentials and 32 packs per thread and key block would cost 768 pipe
// cycles a warp, not 512, and moving the packs to integer ops would pay
// (NOTES-attention item 52: they do not). The two half-precision mixes ask
// whether a 16-bit exponential costs the pipe less (item 80: it does not).
//
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a bench/xu_pipe_probe.cu -o /tmp/xu_pipe_probe && /tmp/xu_pipe_probe
//
// 132 CTAs (one per SM) of 128, 512 or 1024 threads; every thread runs ITERS steps
// of CHAINS independent chains of one op mix. Prints cycles per step and warp
// on one SM sub-partition (4 per SM): the pipe's cost of the mix.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

namespace {

constexpr int ITERS = 4096, CHAINS = 8, CTAS = 132;

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "xu_pipe_probe: %s failed: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
  uint32_t d;
  asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t d;
  asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
// bf16x2 by integer ops (round half up, then the high halves): the ALU alternative.
__device__ __forceinline__ uint32_t pack_bf16x2_alu(float lo, float hi) {
  uint32_t d;
  asm volatile("prmt.b32 %0, %1, %2, 0x7632;"
               : "=r"(d)
               : "r"(__float_as_uint(lo) + 0x8000u), "r"(__float_as_uint(hi) + 0x8000u));
  return d;
}

// Half-precision exponentials: ex2.approx.f16 is one MUFU.EX2.F16; .f16x2 is two
// of them and a PRMT (ptxas 13.0). Would a 16-bit exponential cost the pipe less?
__device__ __forceinline__ uint32_t ex2_f16x2(uint32_t x) {
  uint32_t y;
  asm volatile("ex2.approx.f16x2 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}
// Returns both halves' bits as one float so the next step's cvt depends on this
// exponential (a chain, not dead code); the value itself is meaningless.
__device__ __forceinline__ float ex2_f16(float x) {
  unsigned short h, y;
  asm volatile("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  asm volatile("ex2.approx.f16 %0, %1;" : "=h"(y) : "h"(h));
  return __uint_as_float(uint32_t(y) << 16 | h);
}

enum Mix { EX2, PACK_F16, PACK_BF16, EX2_PACK_F16, PACK_BF16_ALU, EX2_PACK_BF16_ALU, EX2_F16X2, CVT_EX2_F16 };

template <Mix MIX>
__global__ void probe_kernel(float* sink, long long* cycles, float seed) {
  constexpr bool EXP = MIX == EX2 || MIX == EX2_PACK_F16 || MIX == EX2_PACK_BF16_ALU;
  float x[CHAINS], z[CHAINS];
#pragma unroll
  for (int j = 0; j < CHAINS; ++j) {
    x[j] = seed * float(threadIdx.x + j);
    z[j] = -seed * float(j);
  }
  __syncthreads();
  const long long t0 = clock64();
  for (int i = 0; i < ITERS; ++i) {
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) {
      if constexpr (EXP) x[j] = ex2(x[j]);
      if constexpr (MIX == EX2_F16X2) x[j] = __uint_as_float(ex2_f16x2(__float_as_uint(x[j])));
      if constexpr (MIX == CVT_EX2_F16) x[j] = ex2_f16(x[j]);
      // Each pack feeds the next one (its bits read as a float), so none is dead code.
      if constexpr (MIX == PACK_F16 || MIX == EX2_PACK_F16) z[j] = __uint_as_float(pack_f16x2(z[j], x[j]));
      if constexpr (MIX == PACK_BF16) z[j] = __uint_as_float(pack_bf16x2(z[j], x[j]));
      if constexpr (MIX == PACK_BF16_ALU || MIX == EX2_PACK_BF16_ALU)
        z[j] = __uint_as_float(pack_bf16x2_alu(z[j], x[j]));
    }
  }
  __syncthreads();
  const long long t1 = clock64();
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < CHAINS; ++j) s += x[j] + z[j];
  if (s == 12345.f) sink[0] = s;  // never true; keeps the chains live
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

template <Mix MIX>
void run(const char* name, int threads, float* sink, long long* cycles) {
  long long host[CTAS];
  for (int rep = 0; rep < 2; ++rep) {  // the first launch warms up
    probe_kernel<MIX><<<CTAS, threads>>>(sink, cycles, 1e-3f);
    check(cudaGetLastError(), "probe_kernel launch");
  }
  check(cudaMemcpy(host, cycles, sizeof host, cudaMemcpyDeviceToHost), "cudaMemcpy");
  long long most = 0;
  for (long long c : host) most = c > most ? c : most;
  const double steps_per_smsp = double(threads / 32) / 4 * ITERS * CHAINS;
  std::printf("%-36s %4d threads: %9lld cycles, %.2f cycles per step and warp\n", name, threads, most,
              double(most) / steps_per_smsp);
}

}  // namespace

int main() {
  float* sink = nullptr;
  long long* cycles = nullptr;
  check(cudaMalloc(&sink, sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&cycles, CTAS * sizeof(long long)), "cudaMalloc");
  for (int threads : {128, 512, 1024}) {
    run<EX2>("ex2", threads, sink, cycles);
    run<PACK_F16>("pack f16x2 (F2FP)", threads, sink, cycles);
    run<PACK_BF16>("pack bf16x2 (F2FP)", threads, sink, cycles);
    run<EX2_PACK_F16>("ex2 + pack f16x2", threads, sink, cycles);
    run<PACK_BF16_ALU>("pack bf16x2 (2 integer adds, PRMT)", threads, sink, cycles);
    run<EX2_PACK_BF16_ALU>("ex2 + pack bf16x2 (integer)", threads, sink, cycles);
    run<EX2_F16X2>("ex2 f16x2 (2 MUFU.EX2.F16 + PRMT)", threads, sink, cycles);
    run<CVT_EX2_F16>("cvt f16 + ex2 f16 (F2F, MUFU.EX2.F16)", threads, sink, cycles);
  }
  check(cudaFree(sink), "cudaFree");
  check(cudaFree(cycles), "cudaFree");
  return 0;
}
