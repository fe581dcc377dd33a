// How long one consumer warpgroup's softmax of a 64 x 128 score block takes on
// an sm_90a SM, alone and while another warpgroup of the same CTA keeps the
// tensor cores busy (NOTES-attention item 37). The softmax is the ws kernel's
// own (softmax_update + pack_p from attention_kernels.cuh, d128 / n128 shapes).
//
//   nvcc -std=c++17 --expt-relaxed-constexpr -O3 -gencode arch=compute_90a,code=sm_90a \
//        -I. bench/softmax_contention.cu -o /tmp/softmax_contention && /tmp/softmax_contention
//
// Warpgroup 0 runs ITERS softmaxes back to back (each one's probabilities,
// scaled, are the next one's scores, so none can be skipped); warpgroup 1, by
// mode, does nothing, or issues groups of eight m64n128k16 products until
// warpgroup 0 is done: S = Q K^T from shared memory (ss), or O += P V with P
// from registers (rs), or runs the same softmax loop, or FFMA chains. Then both
// warpgroups run the ws kernel's consumer loop (consumer_loop: products,
// softmax and rescale, no producer or TMA), with and without ping-pong turns.
// One CTA per SM, every SM busy; cycles are per softmax, per product group or
// per key block, medians over the CTAs.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "plugins/attention/attention_hopper.cuh"
#include "plugins/common/hopper.cuh"

using namespace trt_fastops;
using namespace trt_fastops::attention;
using T = __half;

constexpr int NT = 16, DT = 16;  // 128 keys, head dim 128
constexpr int ITERS = 4096;
enum Mode { SOFTMAX_ALONE, WITH_SS, WITH_RS, WITH_SOFTMAX, SS_ALONE, RS_ALONE, WITH_FMA, PINGPONG, NO_TURNS };

// The ws kernel's consumer loop without its producer: S = Q K^T and O += P V
// issued together, the softmax of S while P V runs, O rescaled before the next
// P V; PINGPONG: the two warpgroups take turns issuing, as the kernel's do.
// Cycles per key block, per warpgroup.
template <bool TURNS>
__device__ void consumer_loop(const T* sq, const T* sk, const T* sv, long long* cycles, float* sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const int wg = threadIdx.x / 128;
  float s[1][NT][4], o[1][DT][4], row_max[1][2] = {{NEG_INF, NEG_INF}}, row_sum[1][2] = {{0.f, 0.f}}, alpha[1][2];
  uint32_t ap[NT / 2][1][4];
#pragma unroll
  for (int i = 0; i < DT; ++i) o[0][i][0] = o[0][i][1] = o[0][i][2] = o[0][i][3] = 0.f;
  if (TURNS && wg == 1) named_barrier_arrive(2, 256);  // warpgroup 0 goes first
  auto issue_s = [&] {
#pragma unroll
    for (int kk = 0; kk < 8; ++kk)
      Wgmma<128, T>::ss(s[0], sw128_desc(sq + (kk >> 2) * 64 * 64 + (kk & 3) * 16, 16),
                        sw128_desc(sk + (kk >> 2) * 128 * 64 + (kk & 3) * 16, 16), kk > 0);
  };
  auto issue_pv = [&] {
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) Wgmma<128, T>::rs(o[0], ap[ks][0], sw128_desc(sv + ks * 16 * 64, 128 * 128));
  };
  const long long t0 = clock64();
  // As the ws kernel's tile: block 0's S product alone, then S_j with P_{j-1} V_{j-1}, then the last P V.
  if (TURNS) named_barrier_sync(2 + wg, 256);
  wgmma_fence();
  issue_s();
  wgmma_commit();
  if (TURNS) named_barrier_arrive(2 + (wg ^ 1), 256);
  wgmma_wait<0>();
  pin_registers<NT>(s[0]);
  softmax_update<1, NT>(s, row_max, row_sum, 1.4426950f, alpha);
  pack_p<T, 1, NT>(s, ap);
  for (int i = 1; i < ITERS / 4; ++i) {
    if (TURNS) named_barrier_sync(2 + wg, 256);
    wgmma_fence();
    issue_s();
    wgmma_commit();
    if (i > 1) rescale_o<1, DT>(o, alpha);
    wgmma_fence();
    issue_pv();
    wgmma_commit();
    if (TURNS) named_barrier_arrive(2 + (wg ^ 1), 256);
    wgmma_wait<1>();
    pin_registers<NT>(s[0]);
    softmax_update<1, NT>(s, row_max, row_sum, 1.4426950f, alpha);
    wgmma_wait<0>();
    pin_registers<DT>(o[0]);
    pack_p<T, 1, NT>(s, ap);
  }
  if (TURNS) named_barrier_sync(2 + wg, 256);
  rescale_o<1, DT>(o, alpha);
  wgmma_fence();
  issue_pv();
  wgmma_commit();
  if (TURNS) named_barrier_arrive(2 + (wg ^ 1), 256);
  wgmma_wait<0>();
  pin_registers<DT>(o[0]);
  const long long t1 = clock64();
  if (TURNS && wg == 0) named_barrier_sync(2, 256);  // warpgroup 1's last arrival
  if (threadIdx.x % 128 == 0) cycles[wg * gridDim.x + blockIdx.x] = t1 - t0;
  float c = row_sum[0][0];
#pragma unroll
  for (int i = 0; i < DT; ++i) c += o[0][i][0];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = c;
#endif
}

__device__ void softmax_loop(float (&s)[1][NT][4], long long* cycles, float* sink) {
  float row_max[1][2] = {{NEG_INF, NEG_INF}}, row_sum[1][2] = {{0.f, 0.f}}, alpha[1][2];
  uint32_t ap[NT / 2][1][4];
  float check = 0.f;
  const long long t0 = clock64();
  for (int i = 0; i < ITERS; ++i) {
    softmax_update<1, NT>(s, row_max, row_sum, 1.4426950f, alpha);
    pack_p<T, 1, NT>(s, ap);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[0][nt][e] *= 6.f;  // probabilities back to scores in [0, 6]
    uint32_t x = 0;  // every packed value used
#pragma unroll
    for (int ks = 0; ks < NT / 2; ++ks) x ^= ap[ks][0][0] ^ ap[ks][0][1] ^ ap[ks][0][2] ^ ap[ks][0][3];
    check += alpha[0][0] + __uint_as_float(x & 0x3fff3fffu);
  }
  const long long t1 = clock64();
  if (threadIdx.x % 128 == 0) cycles[blockIdx.x] = t1 - t0;
  sink[blockIdx.x * blockDim.x + threadIdx.x] = check + row_sum[0][0] + row_sum[0][1];
}

// Whether any thread of warpgroup 1 (threads 128-255) passes true: one
// decision for the whole warpgroup, which must issue each wgmma together.
__device__ __forceinline__ bool warpgroup_any(bool v) {
  int r;
  asm volatile(
      "{\n.reg .pred p, q;\nsetp.ne.u32 q, %1, 0;\nbar.red.or.pred p, 1, 128, q;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(r)
      : "r"(int(v)));
  return r != 0;
}

template <int MODE>
__global__ void __launch_bounds__(256, 1) probe(long long* soft_cycles, long long* gemm_cycles, int* gemm_groups,
                                                float* sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  T* sk = sq + 64 * 128;
  T* sv = sk + 128 * 128;
  volatile int* done = reinterpret_cast<volatile int*>(sv + 128 * 128);
  for (int i = threadIdx.x; i < 64 * 128 + 2 * 128 * 128; i += blockDim.x) sq[i] = __float2half(((i * 37) % 19) * 0.01f);
  if (threadIdx.x == 0) *done = 0;
  fence_async_smem();
  __syncthreads();
  const int wg = threadIdx.x / 128, lane = threadIdx.x % 32;
  if (MODE == PINGPONG || MODE == NO_TURNS) {
    consumer_loop<MODE == PINGPONG>(sq, sk, sv, soft_cycles, sink);
  } else if (wg == 0) {
    float s[1][NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[0][nt][e] = float(((threadIdx.x * 131 + nt * 7 + e * 3) % 97)) * 0.0625f;
    if (MODE == SS_ALONE || MODE == RS_ALONE) {
      if (threadIdx.x == 0) *done = 1;
      return;
    }
    softmax_loop(s, soft_cycles, sink);
    __syncwarp();
    if (lane == 0) atomicAdd(const_cast<int*>(done), 1);  // four warps
  } else if (MODE == WITH_SOFTMAX) {
    float s[1][NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[0][nt][e] = float(((threadIdx.x * 61 + nt * 5 + e) % 89)) * 0.0625f;
    softmax_loop(s, soft_cycles + gridDim.x, sink + gridDim.x * blockDim.x);
  } else if (MODE == WITH_FMA) {
    // Independent FFMA chains (the FMA pipe busy, no tensor cores) until warpgroup 0 is done.
    float x[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) x[i] = threadIdx.x * 1e-3f + i;
    while (*done < 4) {
#pragma unroll
      for (int r = 0; r < 8; ++r)
#pragma unroll
        for (int i = 0; i < 32; ++i) x[i] = fmaf(x[i], 0.999f, 1e-3f);
    }
    float c = 0.f;
#pragma unroll
    for (int i = 0; i < 32; ++i) c += x[i];
    sink[gridDim.x * blockDim.x + blockIdx.x * blockDim.x + threadIdx.x] = c;
  } else if (MODE != SOFTMAX_ALONE) {
    float acc[DT][4];
#pragma unroll
    for (int i = 0; i < DT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
    uint32_t ap[NT / 2][4];
#pragma unroll
    for (int i = 0; i < NT / 2; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) ap[i][e] = 0x2c002c00u + threadIdx.x + i + e;  // small half2 values
    const bool alone = MODE == SS_ALONE || MODE == RS_ALONE;
    const bool ss = MODE == WITH_SS || MODE == SS_ALONE;
    int groups = 0;
    const long long t0 = clock64();
    // Until warpgroup 0's four warps are done (alone: a fixed 4096 groups).
    while (alone ? groups < 4096 : !warpgroup_any(*done >= 4)) {
      wgmma_fence();
      if (ss) {
#pragma unroll
        for (int kk = 0; kk < 8; ++kk)
          Wgmma<128, T>::ss(acc, sw128_desc(sq + (kk >> 2) * 64 * 64 + (kk & 3) * 16, 16),
                            sw128_desc(sk + (kk >> 2) * 128 * 64 + (kk & 3) * 16, 16), 1);
      } else {
#pragma unroll
        for (int ks = 0; ks < 8; ++ks) Wgmma<128, T>::rs(acc, ap[ks], sw128_desc(sv + ks * 16 * 64, 128 * 128));
      }
      wgmma_commit();
      wgmma_wait<0>();
      pin_registers<DT>(acc);
      ++groups;
    }
    const long long t1 = clock64();
    if (threadIdx.x == 128) {
      gemm_cycles[blockIdx.x] = t1 - t0;
      gemm_groups[blockIdx.x] = groups;
    }
    float c = 0.f;
#pragma unroll
    for (int i = 0; i < DT; ++i) c += acc[i][0] + acc[i][3];
    sink[gridDim.x * blockDim.x + blockIdx.x * blockDim.x + threadIdx.x] = c;
  }
#endif
}

#define CHECK(x)                                                                          \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorString(e_));                \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

template <int MODE>
void run(const char* name, int sms) {
  long long *soft, *gemm;
  int* groups;
  float* sink;
  CHECK(cudaMalloc(&soft, 2 * sms * sizeof(long long)));
  CHECK(cudaMalloc(&gemm, sms * sizeof(long long)));
  CHECK(cudaMalloc(&groups, sms * sizeof(int)));
  CHECK(cudaMalloc(&sink, 2 * sms * 256 * sizeof(float)));
  CHECK(cudaMemset(soft, 0, 2 * sms * sizeof(long long)));
  CHECK(cudaMemset(gemm, 0, sms * sizeof(long long)));
  CHECK(cudaMemset(groups, 0, sms * sizeof(int)));
  const int smem = 1024 + (64 * 128 + 2 * 128 * 128) * 2 + 16;
  CHECK(cudaFuncSetAttribute(probe<MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  for (int rep = 0; rep < 2; ++rep) {  // the first launch warms the clocks
    probe<MODE><<<sms, 256, smem>>>(soft, gemm, groups, sink);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
  }
  std::vector<long long> hs(2 * sms), hg(sms);
  std::vector<int> hn(sms);
  CHECK(cudaMemcpy(hs.data(), soft, hs.size() * sizeof(long long), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hg.data(), gemm, hg.size() * sizeof(long long), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hn.data(), groups, hn.size() * sizeof(int), cudaMemcpyDeviceToHost));
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  std::vector<double> per_soft, per_group;
  const int per = MODE == PINGPONG || MODE == NO_TURNS ? ITERS / 4 : ITERS;  // key blocks or softmaxes
  for (int i = 0; i < sms; ++i) {
    if (hs[i] > 0) per_soft.push_back(double(hs[i]) / per);
    if (hn[i] > 0) per_group.push_back(double(hg[i]) / hn[i]);
  }
  const double soft_c = median(per_soft), group_c = median(per_group);
  // A group: 64 x 128 x 128 multiply-adds = 512 cycles at 2048 per clock per SM.
  std::printf("%-28s %14.0f %16.0f %14.2f\n", name, soft_c, group_c, group_c > 0 ? 512.0 / group_c : 0.0);
  CHECK(cudaFree(soft));
  CHECK(cudaFree(gemm));
  CHECK(cudaFree(groups));
  CHECK(cudaFree(sink));
}

int main() {
  int dev = 0, sms = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, dev));
  std::printf("%s, %d SMs; softmax of a 64 x 128 block (d128 consumer), cycles\n", prop.name, sms);
  std::printf("%-28s %14s %16s %14s\n", "warpgroup 1", "per softmax", "per 8 products", "tensor busy");
  run<SOFTMAX_ALONE>("idle", sms);
  run<SS_ALONE>("ss products, no softmax", sms);
  run<RS_ALONE>("rs products, no softmax", sms);
  run<WITH_SS>("ss products (S = Q K^T)", sms);
  run<WITH_RS>("rs products (O += P V)", sms);
  run<WITH_SOFTMAX>("the same softmax", sms);
  run<WITH_FMA>("FFMA chains (no tensor)", sms);
  std::printf("\nthe consumer loop alone (two warpgroups, no producer), cycles per key block (tensor work: 1024)\n");
  run<PINGPONG>("ping-pong turns", sms);
  run<NO_TURNS>("no turns", sms);
  return 0;
}
