// What does a kernel's parameter size cost a launch? Session 60's causal tail
// table grew FlashArgs by 2 KiB, to about 3 KiB of parameters with the tensor
// maps, for every attention launch (NOTES-attention-log.md item 105).
//
//   nvcc -std=c++17 -O3 -arch=sm_90 bench/param_size_probe.cu -o /tmp/param_size_probe && /tmp/param_size_probe
//
// An almost empty kernel (one CTA of 32 threads reads one word of its
// parameters) with parameters of 64 B to 4 KiB, launched back to back:
//   host  : enqueue time a launch on the calling thread (eager);
//   eager : GPU time a launch over a stream of them (events around the batch);
//   graph : the same launches captured once and replayed, GPU time a launch.
// Medians of 7 batches of 4000 launches each, after a warm-up batch.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    cudaError_t err_ = (call);                                                             \
    if (err_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s failed: %s (%s:%d)\n", #call, cudaGetErrorString(err_),     \
                   __FILE__, __LINE__);                                                    \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

template <int BYTES>
struct Params {
  unsigned words[BYTES / 4];
};

template <int BYTES>
__global__ void param_probe_kernel(Params<BYTES> p, unsigned* out) {
  // One word read so the parameters are live; never true for the values sent.
  if (threadIdx.x == 0 && p.words[BYTES / 4 - 1] == 0xdeadbeefu) out[0] = p.words[0];
}

constexpr int LAUNCHES = 4000;
constexpr int BATCHES = 7;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <int BYTES>
void probe(cudaStream_t stream, unsigned* out) {
  Params<BYTES> p{};
  for (int i = 0; i < BYTES / 4; ++i) p.words[i] = i;
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  std::vector<double> host_us, eager_us, graph_us;
  for (int b = 0; b <= BATCHES; ++b) {
    CHECK(cudaEventRecord(start, stream));
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < LAUNCHES; ++i) param_probe_kernel<BYTES><<<1, 32, 0, stream>>>(p, out);
    auto t1 = std::chrono::steady_clock::now();
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(stop, stream));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (b == 0) continue;  // warm-up
    host_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / LAUNCHES);
    eager_us.push_back(1e3 * ms / LAUNCHES);
  }
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < LAUNCHES; ++i) param_probe_kernel<BYTES><<<1, 32, 0, stream>>>(p, out);
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int b = 0; b <= BATCHES; ++b) {
    CHECK(cudaEventRecord(start, stream));
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaEventRecord(stop, stream));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (b > 0) graph_us.push_back(1e3 * ms / LAUNCHES);
  }
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  std::printf("| %5d | %6.3f | %6.3f | %6.3f |\n", BYTES, median(host_us), median(eager_us),
              median(graph_us));
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s: microseconds a launch, medians of %d batches of %d\n", prop.name, BATCHES,
              LAUNCHES);
  std::printf("| param bytes | host enqueue | eager GPU | graph GPU |\n|---:|---:|---:|---:|\n");
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  unsigned* out = nullptr;
  CHECK(cudaMalloc(&out, sizeof(unsigned)));
  // Twice over, so a drift in clocks shows as a difference between the passes.
  for (int pass = 0; pass < 2; ++pass) {
    probe<64>(stream, out);
    probe<1024>(stream, out);
    probe<2048>(stream, out);
    probe<3072>(stream, out);
    probe<4032>(stream, out);
  }
  CHECK(cudaFree(out));
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
