// Dense launcher: cuBLASLt matmul with the BIAS epilogue (design: dense.h).
//
// Row-major Y[M, N] = X[M, K] · W[K, N] is, read column-major (cuBLASLt's
// order), Y^T (N x M, ld N) = W^T (N x K, ld N) · X^T (K x M, ld K): one
// cublasLtMatmul with rows = N, cols = M, A = W, B = X, no transposes, and the
// bias (length N = rows of D) added by CUBLASLT_EPILOGUE_BIAS.
//
// The matmul descriptor holds the bias pointer as an attribute, so it is built
// per call in stack storage (cublasLtMatmulDescInit: no allocation, a few
// stores) instead of being shared through the plan cache, where concurrent
// callers with different biases would race on it. The plan holds the layouts
// and the algorithm, which do not depend on the pointers beyond their
// alignment (part of the key: the heuristic reads the bias pointer's value and
// is told every matrix's alignment, since it assumes 256 bytes by default).
//
// activation = gelu: choose_path decides, for launch_dense and
// dense_kernel_name alike, between the sm_90a CUTLASS GEMM with bias + GELU in
// its epilogue (dense_gelu_sm90.h) and the fallback, cuBLASLt's BIAS epilogue
// followed by our GELU pass over Y (dense_gelu.h).
#include "plugins/dense/dense.h"

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <cublasLt.h>

#include "plugins/common/cuda_status.h"
#include "plugins/common/device.h"
#include "plugins/common/lru_cache.h"
#include "plugins/dense/dense_gelu.h"
#include "plugins/dense/dense_gelu_sm90.h"

namespace trt_fastops::dense {
namespace {

constexpr size_t WORKSPACE_BYTES = size_t(32) << 20;  // cuBLAS's recommendation for Hopper
constexpr size_t WORKSPACE_ALIGN = 256;                // cuBLASLt's workspace alignment
constexpr int64_t MAX_ALIGN = 256;                     // cuBLASLt's default alignment assumption
constexpr size_t DEFAULT_PLAN_CACHE = 64;
constexpr int MAX_DEVICES = 64;

// The sm_90a GEMM tiles this library carries (CMake defines
// TRT_FASTOPS_DENSE_SM90_BUILT where TRT_FASTOPS_CUDA_ARCHS has 90a: the
// DenseSm90Tile enumerators of TRT_FASTOPS_DENSE_SM90_TILES, each compiled from
// dense_gelu_sm90.cu into its own object).
#if defined(TRT_FASTOPS_DENSE_SM90_BUILT)
constexpr std::array SM90_BUILT{TRT_FASTOPS_DENSE_SM90_BUILT};
#else
constexpr std::array<DenseSm90Tile, 0> SM90_BUILT{};
#endif
constexpr bool HAVE_SM90_GEMM = !SM90_BUILT.empty();

constexpr bool sm90_built(DenseSm90Tile tile) {
  for (DenseSm90Tile t : SM90_BUILT)
    if (t == tile) return true;
  return false;
}

// Runs launch_dense_gelu_sm90<tile> for the built tile equal to `tile`.
template <size_t... I>
Status launch_sm90_tile(DenseSm90Tile tile, const DenseParams& p, int device, int sms, cudaStream_t stream,
                        std::index_sequence<I...>) {
  Status s = Status::errorf("Dense: internal error: the sm_90a tile ", dense_sm90_tile_info(tile).name,
                            " is not in this build");
  ((tile == SM90_BUILT[I] && (s = launch_dense_gelu_sm90<SM90_BUILT[I]>(p, device, sms, stream), true)) || ...);
  return s;
}

// ---------------------------------------------------------------------------
// Library loading (once per process; never unloaded: plans and handles live
// until exit). Only the functions used here are resolved, typed from the header.

struct CublasLt {
  bool ok = false;
  size_t version = 0;
  std::string reason;  // why not, when !ok (the whole message)
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtGetVersion) get_version = nullptr;
  decltype(&cublasLtGetStatusName) status_name = nullptr;
  decltype(&cublasLtGetStatusString) status_string = nullptr;
  decltype(&cublasLtMatmulDescInit_internal) matmul_desc_init = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) matmul_desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
};

template <typename F>
void resolve(void* handle, const char* name, F* fn, std::string* missing) {
  *fn = reinterpret_cast<F>(dlsym(handle, name));
  if (*fn == nullptr) *missing += (missing->empty() ? "" : ", ") + std::string(name);
}

CublasLt load_cublaslt() {
  CublasLt lt;
  const char* names[] = {"libcublasLt.so.13", "libcublasLt.so"};
  void* handle = nullptr;
  std::string tried;
  for (const char* name : names) {
    dlerror();
    handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    const char* err = dlerror();  // names the file already
    tried += str_cat(tried.empty() ? "" : "; ", err ? err : str_cat(name, ": not found"));
  }
  if (handle == nullptr) {
    lt.reason = str_cat("Dense: cannot load libcublasLt.so.13 (CUDA 13 cuBLAS): ", tried,
                        " (onnxruntime-gpu's CUDA EP loads it; elsewhere install nvidia-cublas or put its lib "
                        "directory on LD_LIBRARY_PATH)");
    return lt;
  }
  std::string missing;
  resolve(handle, "cublasLtCreate", &lt.create, &missing);
  resolve(handle, "cublasLtGetVersion", &lt.get_version, &missing);
  resolve(handle, "cublasLtGetStatusName", &lt.status_name, &missing);
  resolve(handle, "cublasLtGetStatusString", &lt.status_string, &missing);
  resolve(handle, "cublasLtMatmulDescInit_internal", &lt.matmul_desc_init, &missing);
  resolve(handle, "cublasLtMatmulDescSetAttribute", &lt.matmul_desc_set, &missing);
  resolve(handle, "cublasLtMatrixLayoutCreate", &lt.layout_create, &missing);
  resolve(handle, "cublasLtMatrixLayoutDestroy", &lt.layout_destroy, &missing);
  resolve(handle, "cublasLtMatmulPreferenceCreate", &lt.pref_create, &missing);
  resolve(handle, "cublasLtMatmulPreferenceDestroy", &lt.pref_destroy, &missing);
  resolve(handle, "cublasLtMatmulPreferenceSetAttribute", &lt.pref_set, &missing);
  resolve(handle, "cublasLtMatmulAlgoGetHeuristic", &lt.heuristic, &missing);
  resolve(handle, "cublasLtMatmul", &lt.matmul, &missing);
  if (!missing.empty()) {
    lt.reason = str_cat("Dense: the loaded libcublasLt lacks ", missing);
    return lt;
  }
  lt.version = lt.get_version();
  // Enum values and descriptor sizes come from the cuBLAS 13 headers: another
  // major version (an unversioned libcublasLt.so from CUDA 12) is refused.
  if (lt.version / 10000 != CUBLAS_VER_MAJOR) {
    lt.reason = str_cat("Dense: the loaded libcublasLt has version ", lt.version, "; trt_fastops needs cuBLAS ",
                        CUBLAS_VER_MAJOR, " (libcublasLt.so.", CUBLAS_VER_MAJOR, ")");
    return lt;
  }
  lt.ok = true;
  return lt;
}

const CublasLt& cublaslt() {
  static const CublasLt lt = load_cublaslt();
  return lt;
}

std::string status_text(const CublasLt& lt, cublasStatus_t s) {
  const char* name = lt.status_name ? lt.status_name(s) : nullptr;
  const char* text = lt.status_string ? lt.status_string(s) : nullptr;
  return str_cat(name ? name : "cublasStatus", " (", text ? text : std::to_string(int(s)).c_str(), ")");
}

// ---------------------------------------------------------------------------
// Per-device handles, created on first use and never destroyed.

struct DeviceHandle {
  std::mutex mu;
  std::atomic<cublasLtHandle_t> handle{nullptr};
};

Status device_handle(const CublasLt& lt, int device, cublasLtHandle_t* out) {
  if (device < 0 || device >= MAX_DEVICES) {
    return Status::errorf("Dense: device index ", device, " is beyond the handle table (", MAX_DEVICES, ")");
  }
  static DeviceHandle* all = new DeviceHandle[MAX_DEVICES];
  DeviceHandle& h = all[device];
  *out = h.handle.load(std::memory_order_acquire);
  if (*out != nullptr) return Status::ok();
  std::lock_guard<std::mutex> lock(h.mu);
  *out = h.handle.load(std::memory_order_relaxed);
  if (*out != nullptr) return Status::ok();
  cublasLtHandle_t created = nullptr;
  const cublasStatus_t s = lt.create(&created);
  if (s != CUBLAS_STATUS_SUCCESS) {
    return Status::errorf("Dense: cublasLtCreate failed on device ", device, ": ", status_text(lt, s));
  }
  h.handle.store(created, std::memory_order_release);
  *out = created;
  return Status::ok();
}

// ---------------------------------------------------------------------------
// Plans and their cache.

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

// Largest power of two <= MAX_ALIGN dividing the address (0 for null).
int64_t alignment_of(const void* p) {
  if (p == nullptr) return 0;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int64_t align = MAX_ALIGN;
  while (align > 1 && (a % uintptr_t(align)) != 0) align /= 2;
  return align;
}

// What the heuristic may assume of the workspace: the caller's bytes less what
// aligning its pointer to WORKSPACE_ALIGN can cost, so any pointer works.
size_t workspace_budget(size_t bytes) {
  return bytes > WORKSPACE_ALIGN ? (bytes - WORKSPACE_ALIGN) & ~(WORKSPACE_ALIGN - 1) : 0;
}

struct DenseKey {
  int64_t device, dtype, m, n, k, has_bias;
  int64_t align_x, align_w, align_bias, align_y;
  int64_t workspace;  // the caller's workspace_bytes (the heuristic's limit)

  bool operator==(const DenseKey& o) const { return std::memcmp(this, &o, sizeof(DenseKey)) == 0; }
};
static_assert(sizeof(DenseKey) == 11 * sizeof(int64_t), "DenseKey must have no padding");


// Immutable once built; the layouts are destroyed with the last reference
// (eviction while a caller still runs it waits for that caller).
struct DensePlan {
  const CublasLt* lt = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;  // W^T, X^T, Y^T (also C)
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;  // bytes the algorithm needs

  DensePlan() = default;
  DensePlan(const DensePlan&) = delete;
  DensePlan& operator=(const DensePlan&) = delete;
  ~DensePlan() {
    for (cublasLtMatrixLayout_t l : {a, b, d})
      if (l != nullptr) lt->layout_destroy(l);
  }
};
using PlanHandle = std::shared_ptr<const DensePlan>;
using PlanCache = LruCache<DenseKey, PlanHandle, PodKeyHash<DenseKey>>;

size_t plan_cache_capacity() {
  const char* v = std::getenv("TRT_FASTOPS_DENSE_PLAN_CACHE");
  if (v == nullptr || *v == '\0') return DEFAULT_PLAN_CACHE;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  return (end == v || *end != '\0' || n < 1) ? DEFAULT_PLAN_CACHE : size_t(n);
}

// Never destroyed: plans hold cuBLASLt descriptors, and no point at exit is
// known to come before the library's own teardown.
PlanCache& plan_cache() {
  static PlanCache* cache = new PlanCache(plan_cache_capacity());
  return *cache;
}

std::string describe(const DenseParams& p) {
  return str_cat(dtype_name(p.dtype), " X [", p.m, ", ", p.k, "] x W [", p.k, ", ", p.n, "]",
                 p.bias != nullptr ? " + bias" : "");
}

// The matmul descriptor for p, in caller-provided storage (see the top of the file).
Status init_matmul_desc(const CublasLt& lt, const DenseParams& p, cublasLtMatmulDescOpaque_t* storage) {
  cublasLtMatmulDesc_t desc = storage;
  cublasStatus_t s = lt.matmul_desc_init(desc, sizeof(*storage), CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const char* step = "cublasLtMatmulDescInit";
  if (s == CUBLAS_STATUS_SUCCESS && p.bias != nullptr) {
    step = "cublasLtMatmulDescSetAttribute";
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    const int32_t bias_type = cuda_type(p.dtype);
    s = lt.matmul_desc_set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
    if (s == CUBLAS_STATUS_SUCCESS)
      s = lt.matmul_desc_set(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias));
    if (s == CUBLAS_STATUS_SUCCESS)
      s = lt.matmul_desc_set(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type));
  }
  if (s != CUBLAS_STATUS_SUCCESS) return Status::errorf("Dense: ", step, " failed: ", status_text(lt, s));
  return Status::ok();
}

Status build_plan(const CublasLt& lt, cublasLtHandle_t handle, const DenseParams& p, const DenseKey& key,
                  PlanHandle* out) {
  auto plan = std::make_shared<DensePlan>();
  plan->lt = &lt;
  const cudaDataType_t type = cuda_type(p.dtype);
  const uint64_t m = uint64_t(p.m), n = uint64_t(p.n), k = uint64_t(p.k);
  cublasStatus_t s = lt.layout_create(&plan->a, type, n, k, int64_t(n));  // W^T: N x K, ld N
  if (s == CUBLAS_STATUS_SUCCESS) s = lt.layout_create(&plan->b, type, k, m, int64_t(k));  // X^T: K x M, ld K
  if (s == CUBLAS_STATUS_SUCCESS) s = lt.layout_create(&plan->d, type, n, m, int64_t(n));  // Y^T: N x M, ld N
  if (s != CUBLAS_STATUS_SUCCESS) {
    return Status::errorf("Dense: cublasLtMatrixLayoutCreate failed for ", describe(p), ": ", status_text(lt, s));
  }
  cublasLtMatmulDescOpaque_t desc_storage;
  TRT_FASTOPS_RETURN_IF_ERROR(init_matmul_desc(lt, p, &desc_storage));

  cublasLtMatmulPreference_t pref = nullptr;
  s = lt.pref_create(&pref);
  if (s != CUBLAS_STATUS_SUCCESS) {
    return Status::errorf("Dense: cublasLtMatmulPreferenceCreate failed: ", status_text(lt, s));
  }
  const uint64_t max_workspace = workspace_budget(size_t(key.workspace));
  const uint32_t align_a = uint32_t(key.align_w), align_b = uint32_t(key.align_x), align_d = uint32_t(key.align_y);
  s = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace, sizeof(max_workspace));
  if (s == CUBLAS_STATUS_SUCCESS)
    s = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a));
  if (s == CUBLAS_STATUS_SUCCESS)
    s = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b));
  if (s == CUBLAS_STATUS_SUCCESS)
    s = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof(align_d));
  if (s == CUBLAS_STATUS_SUCCESS)
    s = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d));
  if (s != CUBLAS_STATUS_SUCCESS) {
    lt.pref_destroy(pref);
    return Status::errorf("Dense: cublasLtMatmulPreferenceSetAttribute failed: ", status_text(lt, s));
  }
  cublasLtMatmulHeuristicResult_t result;
  std::memset(&result, 0, sizeof(result));
  int found = 0;
  s = lt.heuristic(handle, &desc_storage, plan->a, plan->b, plan->d, plan->d, pref, 1, &result, &found);
  lt.pref_destroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS || found < 1 || result.state != CUBLAS_STATUS_SUCCESS) {
    const cublasStatus_t why = s != CUBLAS_STATUS_SUCCESS ? s : found < 1 ? CUBLAS_STATUS_NOT_SUPPORTED : result.state;
    return Status::errorf("Dense: cublasLtMatmulAlgoGetHeuristic found no algorithm for ", describe(p),
                          " (alignments x ", key.align_x, ", W ", key.align_w, ", bias ", key.align_bias, ", Y ",
                          key.align_y, " bytes; workspace ", max_workspace, " bytes): ", status_text(lt, why));
  }
  plan->algo = result.algo;
  plan->workspace = result.workspaceSize;
  *out = std::move(plan);
  return Status::ok();
}

// The current device (common/device: cached per device), as a Status.
Status current_dense_device(LaunchDevice* d) {
  return cuda_status(current_launch_device(d), "Dense: querying the current device");
}

// ---------------------------------------------------------------------------
// Which implementation runs p (validated): one decision for launch_dense and
// dense_kernel_name.

enum class Path { nothing, fill, cublaslt, cutlass_sm90 };

struct Choice {
  Path path = Path::nothing;
  DenseSm90Tile tile = DenseSm90Tile::coop_128x256;  // cutlass_sm90 only
};

bool aligned_to(const void* ptr, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

// What the sm_90a kernels need of p and the device (dense_gelu_sm90.h).
bool sm90_gemm_fits(const DenseParams& p, const LaunchDevice& dev) {
  constexpr int64_t INT32_LIMIT = 0x7fffffff;  // CUTLASS's problem shape is int
  return HAVE_SM90_GEMM && dev.cc_major == 9 && dev.cc_minor == 0 && p.activation == DenseActivation::gelu &&
         (p.dtype == DType::f16 || p.dtype == DType::bf16) && p.k % DENSE_SM90_ALIGN_ELEMS == 0 &&
         p.n % DENSE_SM90_ALIGN_ELEMS == 0 && p.m <= INT32_LIMIT && p.n <= INT32_LIMIT && p.k <= INT32_LIMIT &&
         aligned_to(p.x, DENSE_SM90_ALIGN_BYTES) && aligned_to(p.w, DENSE_SM90_ALIGN_BYTES) &&
         aligned_to(p.y, DENSE_SM90_ALIGN_BYTES) && aligned_to(p.bias, size_t(dtype_size(p.dtype)));
}

// Tiles along M times tiles along N.
int64_t tile_count(const DenseParams& p, DenseSm90Tile tile) {
  const DenseSm90TileInfo& t = dense_sm90_tile_info(tile);
  return ((p.m + t.tile_m - 1) / t.tile_m) * ((p.n + t.tile_n - 1) / t.tile_n);
}

// The tile rule. Small M from scripts/tune_dense.py, the GELU GEMM's kernel time
// inside BERT-base's CUDA-graph replays (N = 3072, K = 768, µs per call; run 2
// of bench/NOTES-dense.md's session 16, the latest check in
// bench/results/dense_model_tiles.json), which ranks tiles otherwise than
// isolated calls on warm weights; large M from scripts/bench_dense.py
// (bench/results/dense_tiles.json):
//   M <= 512 and 64x64 tiles no more than SMs (M 128: 96 tiles): 64x64 with
//     one consumer warpgroup and no persistent loop (5.72 against 6.58 for
//     64x64 ping-pong; narrower tiles lost);
//   other M <= 512: 128x96 cooperative in 2x1 clusters, the two CTAs of a
//     cluster sharing each W tile (M 512: 8.59 against 9.13 without clusters,
//     10.14 for 64x64 ping-pong and 9.50 for 128x128; the replay's kernels 19
//     us shorter than with the fallback);
//   fewer 128x256 tiles than SMs (M 1024: 96 tiles): the fallback, cuBLASLt +
//     our GELU pass (BERT b8 s128: its replay's kernels 12 us shorter than with
//     the best tile);
//   else 128x256 cooperative (M 4096: 47.5 against 51.2 for the fallback;
//     M 16384: 171 against 194; no other tile was faster by more than 1%).
constexpr int64_t SM90_SMALL_M = 512;
constexpr DenseSm90Tile SM90_ONE_WAVE = DenseSm90Tile::ws_64x64, SM90_SMALL = DenseSm90Tile::coop_128x96_c2,
                        SM90_LARGE = DenseSm90Tile::coop_128x256;

// Whether p runs a CUTLASS tile (*tile) or the fallback (false); a build
// without the rule's tile takes its first built one.
bool sm90_tile(const DenseParams& p, const LaunchDevice& dev, DenseSm90Tile* tile) {
  DenseSm90Tile want = SM90_LARGE;
  if (p.m <= SM90_SMALL_M) {
    want = tile_count(p, SM90_ONE_WAVE) <= dev.multiprocessors ? SM90_ONE_WAVE : SM90_SMALL;
  } else if (tile_count(p, SM90_LARGE) < dev.multiprocessors) {
    return false;
  }
  *tile = sm90_built(want) || SM90_BUILT.empty() ? want : SM90_BUILT[0];
  return true;
}

// dense_set_gelu_path: AUTO, FALLBACK or a DenseSm90Tile (>= 0).
constexpr int GELU_AUTO = -1, GELU_FALLBACK = -2;
std::atomic<int> g_gelu_path{GELU_AUTO};

// dev: null when the device could not be asked (then no sm_90a path).
Choice choose_path(const DenseParams& p, const LaunchDevice* dev) {
  Choice c;
  if (p.m == 0 || p.n == 0) return c;
  if (p.k == 0) {
    c.path = Path::fill;
    return c;
  }
  const int forced = g_gelu_path.load(std::memory_order_relaxed);
  if (forced != GELU_FALLBACK && dev != nullptr && sm90_gemm_fits(p, *dev)) {
    if (forced >= 0) {
      c.path = Path::cutlass_sm90;
      c.tile = DenseSm90Tile(forced);
      return c;
    }
    if (sm90_tile(p, *dev, &c.tile)) {
      c.path = Path::cutlass_sm90;
      return c;
    }
  }
  c.path = Path::cublaslt;
  return c;
}

// "cutlass_sm90_gelu<float16,coop_128x256>": interned once per (dtype, tile).
const char* sm90_kernel_name(DType dtype, DenseSm90Tile tile) {
  static const auto names = [] {
    std::vector<std::string> v;
    for (const DType d : {DType::f16, DType::bf16})
      for (const DenseSm90TileInfo& t : DENSE_SM90_TILES)
        v.push_back(std::string("cutlass_sm90_gelu<") + dtype_name(d) + "," + t.name + ">");
    return v;
  }();
  return names[size_t(dtype == DType::bf16) * size_t(DenseSm90Tile::count) + size_t(tile)].c_str();
}

// K == 0: Y = bias broadcast over rows (row 0 copied from bias, then the
// filled rows doubled: log2(M) + 1 stream-ordered copies), or zeros.
// With gelu: GELU(bias) by the GELU pass over the filled Y; GELU(0) = 0 needs
// nothing.
Status fill_without_k(const DenseParams& p, int sms, cudaStream_t stream) {
  const size_t row = size_t(p.n) * size_t(dtype_size(p.dtype));
  auto* y = static_cast<char*>(p.y);
  if (p.bias == nullptr) {
    return cuda_status(cudaMemsetAsync(y, 0, row * size_t(p.m), stream), "Dense: cudaMemsetAsync (K == 0: Y = 0)");
  }
  TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(cudaMemcpyAsync(y, p.bias, row, cudaMemcpyDeviceToDevice, stream),
                                          "Dense: cudaMemcpyAsync (K == 0: Y = bias)"));
  for (int64_t filled = 1; filled < p.m;) {
    const int64_t count = filled < p.m - filled ? filled : p.m - filled;
    TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(
        cudaMemcpyAsync(y + size_t(filled) * row, y, size_t(count) * row, cudaMemcpyDeviceToDevice, stream),
        "Dense: cudaMemcpyAsync (K == 0: Y = bias)"));
    filled += count;
  }
  if (p.activation == DenseActivation::gelu) {
    return cuda_status(launch_dense_gelu(p.dtype, p.y, p.m * p.n, sms, stream), "Dense: GELU kernel (K == 0)");
  }
  return Status::ok();
}

}  // namespace

size_t dense_workspace_bytes() { return WORKSPACE_BYTES; }

Status validate_dense_params(const DenseParams& p) {
  auto bad = [](const char* what) { return Status::errorf("Dense: invalid params: ", what); };
  if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16) return bad("unknown dtype");
  if (p.activation != DenseActivation::none && p.activation != DenseActivation::gelu) {
    return Status::errorf("Dense: invalid params: unknown activation ", int(p.activation));
  }
  if (p.m < 0 || p.n < 0 || p.k < 0) {
    return Status::errorf("Dense: invalid params: negative size (m ", p.m, ", n ", p.n, ", k ", p.k, ")");
  }
  int64_t mn = 0, bytes = 0;
  if (__builtin_mul_overflow(p.m, p.n, &mn) || __builtin_mul_overflow(mn, dtype_size(p.dtype), &bytes)) {
    return bad("m * n elements overflow int64");
  }
  if (p.m == 0 || p.n == 0) return Status::ok();
  if (p.y == nullptr) return bad("y is null");
  if (p.k == 0) return Status::ok();
  if (p.x == nullptr) return bad("x is null");
  if (p.w == nullptr) return bad("w is null");
  if (p.workspace_bytes > 0 && p.workspace == nullptr) return bad("workspace is null but workspace_bytes > 0");
  return Status::ok();
}

Status dense_library_status(size_t* version) {
  const CublasLt& lt = cublaslt();
  if (version) *version = lt.ok ? lt.version : 0;
  return lt.ok ? Status::ok() : Status::error(lt.reason);
}

Status dense_set_gelu_path(const std::string& path, std::string* previous) {
  int next = path == "auto" ? GELU_AUTO : path == "fallback" ? GELU_FALLBACK : -3;
  for (const DenseSm90Tile t : SM90_BUILT)
    if (path == dense_sm90_tile_info(t).name) next = int(t);
  if (next == -3) {
    std::string known = "'auto', 'fallback'";
    for (const std::string& t : dense_sm90_tiles()) known += ", '" + t + "'";
    return Status::errorf("Dense: unknown GELU path '", path, "' (this build has ", known, ")");
  }
  const int before = g_gelu_path.exchange(next);
  if (previous != nullptr) {
    *previous = before == GELU_AUTO       ? "auto"
                : before == GELU_FALLBACK ? "fallback"
                                          : dense_sm90_tile_info(DenseSm90Tile(before)).name;
  }
  return Status::ok();
}

std::vector<std::string> dense_sm90_tiles() {
  std::vector<std::string> names;
  for (const DenseSm90Tile t : SM90_BUILT) names.emplace_back(dense_sm90_tile_info(t).name);
  return names;
}

const char* dense_kernel_name(const DenseParams& p) {
  if (!validate_dense_params(p).is_ok()) return "invalid";
  LaunchDevice dev;
  const bool known = current_dense_device(&dev).is_ok();
  if (!known) cudaGetLastError();  // the query's error is not the caller's
  const Choice c = choose_path(p, known ? &dev : nullptr);
  const bool gelu = p.activation == DenseActivation::gelu;
  switch (c.path) {
    case Path::nothing: return "none";
    case Path::fill: return gelu && p.bias != nullptr ? "fill_k0+gelu" : "fill_k0";
    case Path::cutlass_sm90: return sm90_kernel_name(p.dtype, c.tile);
    case Path::cublaslt: break;
  }
  if (p.bias != nullptr) return gelu ? "cublaslt_bias+gelu" : "cublaslt_bias";
  return gelu ? "cublaslt+gelu" : "cublaslt";
}

Status launch_dense(const DenseParams& p, cudaStream_t stream) {
  TRT_FASTOPS_RETURN_IF_ERROR(validate_dense_params(p));
  if (p.m == 0 || p.n == 0) return Status::ok();
  LaunchDevice dev;
  TRT_FASTOPS_RETURN_IF_ERROR(current_dense_device(&dev));
  const Choice choice = choose_path(p, &dev);
  if (choice.path == Path::fill) return fill_without_k(p, dev.multiprocessors, stream);
  if (choice.path == Path::cutlass_sm90) {
    return launch_sm90_tile(choice.tile, p, dev.index, dev.multiprocessors, stream,
                            std::make_index_sequence<SM90_BUILT.size()>());
  }

  const CublasLt& lt = cublaslt();
  if (!lt.ok) return Status::error(lt.reason);
  const int device = dev.index;
  cublasLtHandle_t handle = nullptr;
  TRT_FASTOPS_RETURN_IF_ERROR(device_handle(lt, device, &handle));

  const size_t ws_bytes = p.workspace != nullptr ? p.workspace_bytes : 0;
  DenseKey key;
  std::memset(&key, 0, sizeof(key));
  key.device = device;
  key.dtype = int64_t(p.dtype);
  key.m = p.m;
  key.n = p.n;
  key.k = p.k;
  key.has_bias = p.bias != nullptr;
  key.align_x = alignment_of(p.x);
  key.align_w = alignment_of(p.w);
  key.align_bias = alignment_of(p.bias);
  key.align_y = alignment_of(p.y);
  key.workspace = int64_t(ws_bytes);

  PlanCache& cache = plan_cache();
  PlanHandle plan;
  if (auto hit = cache.get(key)) {
    plan = std::move(*hit);
  } else {
    // Racing misses of one key may both plan; the second put replaces the first.
    TRT_FASTOPS_RETURN_IF_ERROR(build_plan(lt, handle, p, key, &plan));
    cache.put(key, plan);
  }

  // The workspace, aligned up; the plan asked for no more than workspace_budget.
  void* ws = nullptr;
  size_t ws_usable = 0;
  if (ws_bytes > 0) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(p.workspace);
    const uintptr_t aligned = (base + WORKSPACE_ALIGN - 1) & ~uintptr_t(WORKSPACE_ALIGN - 1);
    if (aligned - base < ws_bytes) {
      ws = reinterpret_cast<void*>(aligned);
      ws_usable = ws_bytes - (aligned - base);
    }
  }
  if (plan->workspace > ws_usable) {
    return Status::errorf("Dense: internal error: the plan needs ", plan->workspace, " workspace bytes, ",
                          ws_usable, " are usable");
  }
  cublasLtMatmulDescOpaque_t desc;
  TRT_FASTOPS_RETURN_IF_ERROR(init_matmul_desc(lt, p, &desc));
  const float alpha = 1.f, beta = 0.f;  // beta 0: C (= Y) is not read
  const cublasStatus_t s = lt.matmul(handle, &desc, &alpha, p.w, plan->a, p.x, plan->b, &beta, p.y, plan->d, p.y,
                                     plan->d, &plan->algo, ws, ws_usable, stream);
  if (s != CUBLAS_STATUS_SUCCESS) {
    return Status::errorf("Dense: cublasLtMatmul failed for ", describe(p), ": ", status_text(lt, s));
  }
  if (p.activation == DenseActivation::gelu) {  // the fallback's second pass (see the top of the file)
    return cuda_status(launch_dense_gelu(p.dtype, p.y, p.m * p.n, dev.multiprocessors, stream), "Dense: GELU kernel");
  }
  return Status::ok();
}

LruCacheStats dense_plan_cache_stats() { return plan_cache().stats(); }

void dense_plan_cache_reset_stats() { plan_cache().reset_stats(); }

void dense_plan_cache_clear() { plan_cache().clear(); }

void dense_plan_cache_set_capacity(size_t capacity) { plan_cache().set_capacity(capacity); }

}  // namespace trt_fastops::dense
