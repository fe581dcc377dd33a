// How far cuBLASLt's first heuristic pick is from its best candidate on BERT's GEMMs.
//
// For each shape (row-major Y[M, N] = X[M, K] W[K, N] + bias, float16, float32 accumulation,
// as plugins/dense/dense_launch.cc calls it), every algorithm cublasLtMatmulAlgoGetHeuristic
// returns (up to 32, 32 MiB of workspace), plus split-K variants of each (2, 3, 4, 6, 8 where
// cublasLtMatmulAlgoCheck accepts them), is timed on weights that are not in L2: a CUDA graph of
// 2 * R calls cycling through R copies of W (R * |W| > 150 MB), as inside a model whose weights
// stream from HBM. Prints per shape: the heuristic's pick, the best candidate, its settings and
// the largest difference of its output from the pick's.
//
//   nvcc -O2 -std=c++17 -I<cublas include> scripts/cublaslt_algos.cu -L<cublas lib> -lcublasLt -o algos
//   ./algos                 # the built-in BERT-base shapes at M = 128, 512, 1024, 4096
//   ./algos M N K [bias]    # one shape
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                     \
  do {                                                                                            \
    cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)
#define LK(x)                                                                                     \
  do {                                                                                            \
    cublasStatus_t s_ = (x);                                                                      \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                            \
      std::fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, int(s_));             \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

namespace {

constexpr size_t WS_BYTES = size_t(32) << 20;

__global__ void fill_kernel(__half* p, size_t n, unsigned seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = __float2half(scale * ((h & 0xffff) / 32768.f - 1.f));
  }
}

struct Candidate {
  cublasLtMatmulAlgo_t algo;
  size_t workspace;
  int splitk;
  float us = 0;
};

int cfg_int(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr) {
  uint32_t v = 0;
  size_t written = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, sizeof(v), &written);
  return int(v);
}

void run_shape(cublasLtHandle_t lt, int m, int n, int k, bool bias, cudaStream_t stream) {
  const size_t w_elems = size_t(k) * n;
  const int copies = int(std::max<size_t>(2, (size_t(150) << 20) / (w_elems * 2) + 1));
  __half *x, *y, *y_ref, *b, *w;
  void* ws;
  CK(cudaMalloc(&x, size_t(m) * k * 2));
  CK(cudaMalloc(&y, size_t(m) * n * 2));
  CK(cudaMalloc(&y_ref, size_t(m) * n * 2));
  CK(cudaMalloc(&b, size_t(n) * 2));
  CK(cudaMalloc(&w, w_elems * 2 * copies));
  CK(cudaMalloc(&ws, WS_BYTES));
  fill_kernel<<<1024, 256, 0, stream>>>(x, size_t(m) * k, 1, 1.f);
  fill_kernel<<<1024, 256, 0, stream>>>(b, n, 2, 1.f);
  fill_kernel<<<4096, 256, 0, stream>>>(w, w_elems * copies, 3, 1.f / std::sqrt(float(k)));
  CK(cudaGetLastError());

  // Column-major: Y^T (n x m, ld n) = W^T (n x k, ld n) * X^T (k x m, ld k).
  cublasLtMatmulDesc_t desc;
  LK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  if (bias) {
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    LK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    LK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof(b)));
  }
  cublasLtMatrixLayout_t la, lb, ld;
  LK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, n, k, n));
  LK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, k, m, k));
  LK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16F, n, m, n));
  cublasLtMatmulPreference_t pref;
  LK(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws_max = WS_BYTES;
  LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_max, sizeof(ws_max)));
  cublasLtMatmulHeuristicResult_t res[32];
  int found = 0;
  LK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 32, res, &found));

  std::vector<Candidate> cands;
  for (int i = 0; i < found; ++i) {
    if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
    cands.push_back({res[i].algo, res[i].workspaceSize, cfg_int(res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM)});
    for (int s : {2, 3, 4, 6, 8}) {
      cublasLtMatmulAlgo_t a = res[i].algo;
      uint32_t sk = s;
      if (cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &sk, sizeof(sk)) !=
          CUBLAS_STATUS_SUCCESS)
        continue;
      cublasLtMatmulHeuristicResult_t chk{};
      if (cublasLtMatmulAlgoCheck(lt, desc, la, lb, ld, ld, &a, &chk) != CUBLAS_STATUS_SUCCESS) continue;
      if (chk.workspaceSize > WS_BYTES) continue;
      cands.push_back({a, chk.workspaceSize, s});
    }
  }
  const float alpha = 1.f, beta = 0.f;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int calls = 2 * copies;
  std::vector<__half> ref(size_t(m) * n), got(size_t(m) * n);
  for (size_t c = 0; c < cands.size(); ++c) {
    Candidate& cd = cands[c];
    __half* out = c == 0 ? y_ref : y;
    if (cublasLtMatmul(lt, desc, &alpha, w, la, x, lb, &beta, out, ld, out, ld, &cd.algo, ws, WS_BYTES, stream) !=
        CUBLAS_STATUS_SUCCESS) {
      cd.us = -1;
      continue;
    }
    CK(cudaStreamSynchronize(stream));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < calls; ++i)
      cublasLtMatmul(lt, desc, &alpha, w + (i % copies) * w_elems, la, x, lb, &beta, y, ld, y, ld, &cd.algo, ws,
                     WS_BYTES, stream);
    CK(cudaStreamEndCapture(stream, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, stream));
    CK(cudaStreamSynchronize(stream));
    float best = 1e30f;
    for (int r = 0; r < 5; ++r) {
      CK(cudaEventRecord(e0, stream));
      CK(cudaGraphLaunch(ge, stream));
      CK(cudaEventRecord(e1, stream));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      best = std::min(best, ms);
    }
    cd.us = best * 1000.f / calls;
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
  }
  // The best candidate's output against the heuristic pick's.
  size_t bi = 0;
  for (size_t c = 0; c < cands.size(); ++c)
    if (cands[c].us > 0 && (cands[bi].us <= 0 || cands[c].us < cands[bi].us)) bi = c;
  float diff = 0;
  if (!cands.empty() && cands[0].us > 0) {
    LK(cublasLtMatmul(lt, desc, &alpha, w, la, x, lb, &beta, y, ld, y, ld, &cands[bi].algo, ws, WS_BYTES, stream));
    CK(cudaMemcpy(ref.data(), y_ref, ref.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(got.data(), y, got.size() * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < ref.size(); ++i)
      diff = std::max(diff, std::fabs(__half2float(ref[i]) - __half2float(got[i])));
  }
  if (cands.empty()) {
    std::printf("M %5d N %5d K %5d bias %d: no algorithm\n", m, n, k, int(bias));
  } else {
    const Candidate& h = cands[0];
    const Candidate& o = cands[bi];
    const double bytes = double(w_elems) * 2;
    std::printf(
        "M %5d N %5d K %5d bias %d: heuristic %7.2f us (%5.0f GB/s)  best %7.2f us (%5.0f GB/s) %.2fx  "
        "[cand %zu/%zu algo %d tile %d stages %d splitK %d ws %zu]  max|diff| %.3g\n",
        m, n, k, int(bias), h.us, bytes / h.us / 1e3, o.us, bytes / o.us / 1e3, h.us / o.us, bi, cands.size(),
        cfg_int(o.algo, CUBLASLT_ALGO_CONFIG_ID), cfg_int(o.algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
        cfg_int(o.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID), o.splitk, o.workspace, diff);
  }
  std::fflush(stdout);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
  cudaFree(x);
  cudaFree(y);
  cudaFree(y_ref);
  cudaFree(b);
  cudaFree(w);
  cudaFree(ws);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

}  // namespace

int main(int argc, char** argv) {
  cublasLtHandle_t lt;
  LK(cublasLtCreate(&lt));
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (argc >= 4) {
    run_shape(lt, std::atoi(argv[1]), std::atoi(argv[2]), std::atoi(argv[3]), argc < 5 || std::atoi(argv[4]) != 0,
              stream);
  } else {
    // BERT-base per layer: QKV (bias), attention output (no bias: it goes into SkipLayerNorm),
    // MLP up (bias), MLP down (no bias).
    const int shapes[4][3] = {{2304, 768, 1}, {768, 768, 0}, {3072, 768, 1}, {768, 3072, 0}};
    for (int m : {128, 512, 1024, 4096})
      for (const auto& s : shapes) run_shape(lt, m, s[0], s[1], s[2] != 0, stream);
  }
  cublasLtDestroy(lt);
  return 0;
}
