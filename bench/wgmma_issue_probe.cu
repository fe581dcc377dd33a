// Does issuing wgmma hold the issuing warp until the tensor pipe takes each
// product? Item 34 measured 512 cycles to issue a d64 consumer's S and P V
// products, as long as their tensor work: if issue itself waits on the pipe, a
// consumer can do nothing else for that long, and the softmax overlaps other
// consumers' products only. (NOTES-attention item 54: only past about eight
// products in flight per SM.)
//
//   nvcc -std=c++17 --expt-relaxed-constexpr -O3 -gencode arch=compute_90a,code=sm_90a \
//        -I. bench/wgmma_issue_probe.cu -o /tmp/wgmma_issue_probe && /tmp/wgmma_issue_probe
//
// One CTA per SM (132). Each of one or two warpgroups issues N m64nWk16
// products (W 128 or 64; A and B from shared memory, W / 2 tensor cycles each
// at 2048 FMA per clock and SM), commits, and waits: cycles from the first
// issue to the commit (issue) and to the wait's return (done), medians over
// 256 rounds and the CTAs. With two warpgroups both issue at once, each on its
// own accumulators.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "plugins/attention/attention_hopper.cuh"
#include "plugins/common/hopper.cuh"

using namespace trt_fastops;
using namespace trt_fastops::attention;
using T = __half;

namespace {

constexpr int ROUNDS = 256, CTAS = 132, SMEM = 64 * 1024;

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "wgmma_issue_probe: %s failed: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

template <int N, int W>
__global__ void __launch_bounds__(256, 1) issue_kernel(long long* issue, long long* done, float* sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  T* base = reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  for (int i = threadIdx.x; i < (SMEM - 1024) / 2; i += blockDim.x) base[i] = __float2half(0.01f * (i % 7));
  fence_proxy_async_shared();
  __syncthreads();
  const int wg = threadIdx.x / 128;
  const T* sa = base + wg * 64 * 64;         // A: 64 rows x 64 (k), per warpgroup
  const T* sb = base + 2 * 64 * 64;          // B: W rows x 64 (k), shared
  float d[W / 8][4];
#pragma unroll
  for (int i = 0; i < W / 8; ++i) d[i][0] = d[i][1] = d[i][2] = d[i][3] = 0.f;
  for (int r = 0; r < ROUNDS; ++r) {
    const long long t0 = clock64();
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < N; ++k)
      Wgmma<W, T>::ss(d, sw128_desc(sa + (k & 3) * 16, 16), sw128_desc(sb + (k & 3) * 16, 16), 1);
    wgmma_commit();
    const long long t1 = clock64();
    wgmma_wait<0>();
    pin_registers<W / 8>(d);
    const long long t2 = clock64();
    if (threadIdx.x % 128 == 0) {
      const int slot = (blockIdx.x * 2 + wg) * ROUNDS + r;
      issue[slot] = t1 - t0;
      done[slot] = t2 - t0;
    }
  }
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < W / 8; ++i) s += d[i][0] + d[i][1] + d[i][2] + d[i][3];
  if (s == 12345.f) sink[0] = s;  // keeps the products live
#endif
}

long long median(std::vector<long long> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

template <int N, int W>
void run(int warpgroups, long long* issue, long long* done, float* sink) {
  auto kernel = issue_kernel<N, W>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM), "cudaFuncSetAttribute");
  const size_t slots = size_t(CTAS) * 2 * ROUNDS;
  check(cudaMemset(issue, 0xff, slots * sizeof(long long)), "cudaMemset");
  for (int rep = 0; rep < 2; ++rep) {
    kernel<<<CTAS, 128 * warpgroups, SMEM>>>(issue, done, sink);
    check(cudaGetLastError(), "issue_kernel launch");
  }
  std::vector<long long> hi(slots), hd(slots);
  check(cudaMemcpy(hi.data(), issue, slots * sizeof(long long), cudaMemcpyDeviceToHost), "cudaMemcpy");
  check(cudaMemcpy(hd.data(), done, slots * sizeof(long long), cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::vector<long long> vi, vd;
  for (size_t i = 0; i < slots; ++i)
    if (hi[i] >= 0) {
      vi.push_back(hi[i]);
      vd.push_back(hd[i]);
    }
  std::printf("%d warpgroup(s), %2d x m64n%dk16 (%4d tensor cycles): issue %5lld, done %5lld cycles\n", warpgroups,
              N, W, N * W / 2, median(vi), median(vd));
}

}  // namespace

int main() {
  long long *issue = nullptr, *done = nullptr;
  float* sink = nullptr;
  const size_t slots = size_t(CTAS) * 2 * ROUNDS;
  check(cudaMalloc(&issue, slots * sizeof(long long)), "cudaMalloc");
  check(cudaMalloc(&done, slots * sizeof(long long)), "cudaMalloc");
  check(cudaMalloc(&sink, sizeof(float)), "cudaMalloc");
  for (int wgs : {1, 2}) {
    run<1, 128>(wgs, issue, done, sink);
    run<4, 128>(wgs, issue, done, sink);
    run<8, 128>(wgs, issue, done, sink);
    run<16, 128>(wgs, issue, done, sink);
    run<8, 64>(wgs, issue, done, sink);
    run<16, 64>(wgs, issue, done, sink);
    run<32, 64>(wgs, issue, done, sink);
  }
  check(cudaFree(issue), "cudaFree");
  check(cudaFree(done), "cudaFree");
  check(cudaFree(sink), "cudaFree");
  return 0;
}
