// Launcher for the layer-norm family: validates NormParams, picks a kernel
// variant (see norm_kernels.cuh) and enqueues it. Never synchronises, never
// allocates, so it is safe under CUDA-graph capture.
//
// Variant choice (VEC = 16 / sizeof(T): 4 floats or 8 halves; "vectorisable" =
// cols % VEC == 0 and every pointer read or written per column 16-byte aligned):
//   row      vectorisable, 32 * VEC < cols <= 128 * VEC (264..1024 for 16-bit types)
//            and at most kRowMaxRowsPerSm rows per SM: one CTA per row, one vector
//            per thread, parameters loaded with the row.
//   warp     vectorisable, cols <= 32 * 4 * VEC (1024 for 16-bit types, 512 for fp32):
//            one warp per row, 1, 2 or 4 vectors per lane.
//   block    vectorisable, cols <= 1024 * 4 * VEC (32768 for 16-bit, 16384 for fp32):
//            one CTA per row, 4 vectors per thread, the smallest CTA (64..1024)
//            that holds the row.
//   generic  anything else: row cached in shared memory when 4 * cols bytes fit
//            the device's opt-in limit, else three passes over global memory;
//            128 threads up to 4096 cols, else 512 (about 50% of copy bandwidth).
// Why these (H100, fp16/bf16/fp32, hidden 512..32768, see bench/NOTES-norms.md):
// a thread must keep ~64 bytes of loads in flight and the SM ~1024 threads, so
// the fewest threads per row with 4 vectors each wins over wider CTAs; at 64
// registers (4 x 16-byte vectors of row as floats plus addresses) 1024 threads fit.
// That is the bandwidth-bound regime. With few rows per SM (BERT-base
// SkipLayerNorm in the model: 128..16384 rows of 768, inputs fresh in L2 from the
// previous GEMM) a row's dependent chain is the cost, and ORT's design (CTA per
// row, cols / 8 threads, everything loaded up front) beat the warp path by
// 7-25% (H100 per-kernel profile): hence the row path there.
// norm_set_path forces a path for measurement (falls back where it cannot run).
#include <atomic>
#include <cstdint>
#include <limits>
#include <mutex>
#include <set>
#include <string>

#include "plugins/common/cuda_utils.cuh"
#include "plugins/common/dispatch.cuh"
#include "plugins/common/device.h"
#include "plugins/common/smem_optin.h"
#include "plugins/norm/norm.h"
#include "plugins/norm/norm_kernels.cuh"

namespace trt_fastops::norm {
namespace {

constexpr int kWarpRows = 4;        // rows (warps) per CTA on the warp path
constexpr int kWarpMaxItems = 4;    // vectors per lane on the warp path: 1, 2 or 4 (warp_fit: also 3)
// Row path (CTA per row, a vector per thread): BLOCK = cols / VEC rounded up to
// whole warps, up to kRowMaxBlock when forced (fp32 768/1024, fp16 up to 2048).
constexpr int kRowMaxBlock = 256;
// Automatic choice of the row path, where the warp path would run otherwise:
//  * more than one warp's worth of vectors (nvec > 32): with a single warp per
//    CTA the 32-CTAs-per-SM cap halves occupancy, and the warp path's 4-row CTAs
//    don't have that problem;
//  * at most kRowMaxRowsPerSm rows per SM. Evidence (H100, BERT-base in the
//    model, fp16 768, skip + bias + sum): ORT's CTA-per-row kernel beat our warp
//    path at 1, 4, 31 and 124 rows per SM (128..16384 rows); at 248 rows per SM
//    (32768 rows, standalone) both sit at the memory floor, so the warp path
//    stays there. 128 covers 16384 rows on 132 SMs. Measured (scripts/
//    bench_norms.py --bert, H100, fp16 768 + skip + bias): the row path is the
//    fastest of ours at 128, 512, 4096 and 16384 rows (4096: 6.53 us, warp 8.35;
//    bench/NOTES-norms.md).
constexpr int kRowMaxRowsPerSm = 128;
// Warp path, at most this many rows per SM: latency-bound (BERT batch 1: 128
// rows), so per-column parameters load with the row (norm_kernels.cuh, EARLY).
constexpr int kEarlyRowsPerSm = 8;
constexpr int kBlockItems = 4;      // vectors per thread on the block path
constexpr int kBlockMinDim = 64;    // block path: 64..1024 threads
constexpr int kBlockMaxDim = 1024;
// Room left for the kernels' static shared memory when sizing the row cache.
constexpr int kStaticSmemReserve = 1024;
constexpr int kDefaultSmem = 48 * 1024;  // available without opting in

enum class Path { none, warp, row, block, generic_smem, generic_multipass, invalid };

std::atomic<int> g_forced_path{int(NormPath::automatic)};  // norm_set_path

struct Plan {
  Path path = Path::invalid;
  int block = 0;        // threads per CTA
  int items = 0;        // vectors per thread (warp / block paths)
  bool early = false;   // warp path: parameters loaded with the row
  size_t smem = 0;      // dynamic shared memory bytes
  unsigned grid = 0;    // CTAs
};

bool params_valid(const NormParams& p) {
  if (p.kind != NormKind::layer && p.kind != NormKind::rms) return false;
  if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16) return false;
  if (p.cols <= 0 || p.rows < 0) return false;
  if (p.rows == 0) return true;  // nothing is read or written; empty tensors may have null data
  if (p.rows > std::numeric_limits<int64_t>::max() / p.cols) return false;
  if (p.x == nullptr || p.gamma == nullptr || p.y == nullptr) return false;
  if (p.skip != nullptr && (p.skip_rows <= 0 || p.rows % p.skip_rows != 0)) return false;
  if (p.kind == NormKind::rms && p.mean_out != nullptr) return false;  // RMSNorm has no mean
  return true;
}

bool vector_ok(const NormParams& p, int vec) {
  if (p.cols % vec != 0) return false;
  const bool aligned = is_aligned(p.x, 16) && is_aligned(p.y, 16) && is_aligned(p.skip, 16) &&
                       is_aligned(p.bias, 16) && is_aligned(p.sum_out, 16) &&
                       (p.gamma_scalar || is_aligned(p.gamma, 16)) &&
                       (p.beta_scalar || is_aligned(p.beta, 16));
  return aligned;
}

unsigned grid_for(int64_t ctas) { return norm_grid_for(ctas); }

Plan warp_plan(const NormParams& p, int64_t nvec, int sms, bool fit) {
  Plan plan;
  plan.path = Path::warp;
  plan.block = kWarpRows * kWarpSize;
  const int need = static_cast<int>((nvec + kWarpSize - 1) / kWarpSize);  // 1..4
  // Powers of two by default (the measured set); warp_fit: exactly what the row needs.
  plan.items = fit ? need : need <= 1 ? 1 : need <= 2 ? 2 : 4;
  plan.grid = grid_for((p.rows + kWarpRows - 1) / kWarpRows);
  plan.early = sms > 0 && p.rows <= int64_t(kEarlyRowsPerSm) * sms;
  return plan;
}

Plan row_plan(const NormParams& p, int64_t nvec) {
  Plan plan;
  plan.path = Path::row;
  plan.block = static_cast<int>((nvec + kWarpSize - 1) / kWarpSize) * kWarpSize;
  plan.items = 1;
  plan.early = true;
  plan.grid = grid_for(p.rows);
  return plan;
}

Plan block_plan(const NormParams& p, int64_t nvec) {
  Plan plan;
  plan.path = Path::block;
  plan.items = kBlockItems;
  plan.block = kBlockMinDim;
  while (int64_t(plan.block) * kBlockItems < nvec) plan.block *= 2;
  plan.grid = grid_for(p.rows);
  return plan;
}

Plan generic_plan(const NormParams& p, int optin_smem) {
  Plan plan;
  plan.block = generic_block_dim(p.cols);
  plan.grid = grid_for(p.rows);
  const int64_t cache_bytes = p.cols * int64_t(sizeof(float));
  if (cache_bytes <= int64_t(optin_smem) - kStaticSmemReserve) {
    plan.path = Path::generic_smem;
    plan.smem = static_cast<size_t>(cache_bytes);
  } else {
    plan.path = Path::generic_multipass;
  }
  return plan;
}

// optin_smem: the device's opt-in shared memory per CTA (decides cached vs multi-pass);
// sms: the device's multiprocessors (0: unknown); forced: norm_set_path's setting.
Plan make_plan(const NormParams& p, int optin_smem, int sms, NormPath forced) {
  if (!params_valid(p)) return Plan{};
  if (p.rows == 0) {
    Plan plan;
    plan.path = Path::none;
    return plan;
  }
  const int vec = 16 / static_cast<int>(dtype_size(p.dtype));
  const bool vectors = vector_ok(p, vec);
  const int64_t nvec = vectors ? p.cols / vec : 0;
  const bool warp_fits = vectors && nvec <= int64_t(kWarpSize) * kWarpMaxItems;
  const bool row_fits = vectors && nvec <= kRowMaxBlock;
  const bool block_fits = vectors && nvec <= int64_t(kBlockMaxDim) * kBlockItems;
  switch (forced) {  // a forced path that cannot run p falls through to the automatic choice
    case NormPath::warp:
      if (warp_fits) return warp_plan(p, nvec, sms, false);
      break;
    case NormPath::warp_fit:
      if (warp_fits) return warp_plan(p, nvec, sms, true);
      break;
    case NormPath::row:
      if (row_fits) return row_plan(p, nvec);
      break;
    case NormPath::block:
      if (block_fits) return block_plan(p, nvec);
      break;
    case NormPath::generic:
      return generic_plan(p, optin_smem);
    case NormPath::automatic:
      break;
  }
  if (warp_fits) {
    const bool few_rows = sms > 0 && p.rows <= int64_t(kRowMaxRowsPerSm) * sms;
    if (nvec > kWarpSize && few_rows) return row_plan(p, nvec);
    return warp_plan(p, nvec, sms, false);
  }
  if (block_fits) return block_plan(p, nvec);
  return generic_plan(p, optin_smem);
}

template <typename T>
NormArgs<T> make_args(const NormParams& p) {
  NormArgs<T> a;
  a.x = static_cast<const T*>(p.x);
  a.skip = static_cast<const T*>(p.skip);
  a.bias = static_cast<const T*>(p.bias);
  a.gamma = static_cast<const T*>(p.gamma);
  a.beta = static_cast<const T*>(p.beta);
  a.y = static_cast<T*>(p.y);
  a.sum_out = static_cast<T*>(p.sum_out);
  a.mean_out = p.mean_out;
  a.rstd_out = p.rstd_out;
  a.rows = p.rows;
  a.cols = p.cols;
  a.skip_rows = p.skip != nullptr ? p.skip_rows : 1;
  a.epsilon = p.epsilon;
  a.inv_cols = static_cast<float>(1.0 / static_cast<double>(p.cols));
  a.rms = p.kind == NormKind::rms;
  a.gamma_scalar = p.gamma_scalar;
  a.beta_scalar = p.beta_scalar;
  return a;
}

cudaError_t launch_plan(const NormParams& p, const Plan& plan, cudaStream_t stream, int device,
                        int optin_smem) {
  return dispatch_dtype(p.dtype, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    const NormArgs<T> args = make_args<T>(p);
    switch (plan.path) {
      case Path::warp:
        return dispatch_int<1, 2, 3, 4>(plan.items, [&](auto ITEMS) {
          return dispatch_bool(plan.early, [&](auto EARLY) {
            norm_warp_kernel<T, ITEMS.value, kWarpRows, EARLY.value>
                <<<plan.grid, kWarpRows * kWarpSize, 0, stream>>>(args);
            return cudaGetLastError();
          });
        });
      case Path::row:
        return dispatch_block_dim<32, 64, 96, 128, 160, 192, 224, kRowMaxBlock>(plan.block, [&](auto BLOCK) {
          norm_row_kernel<T, BLOCK.value><<<plan.grid, BLOCK.value, 0, stream>>>(args);
          return cudaGetLastError();
        });
      case Path::block:
        return dispatch_block_dim<64, 128, 256, 512, 1024>(plan.block, [&](auto BLOCK) {
          norm_block_kernel<T, BLOCK.value, kBlockItems><<<plan.grid, BLOCK.value, 0, stream>>>(args);
          return cudaGetLastError();
        });
      case Path::generic_smem:
      case Path::generic_multipass:
        return dispatch_bool(plan.path == Path::generic_smem, [&](auto CACHE) {
          return dispatch_block_dim<kGenericSmallBlock, kGenericBlock>(plan.block, [&](auto BLOCK) {
            auto* kernel = norm_generic_kernel<T, BLOCK.value, CACHE.value>;
            if constexpr (CACHE.value) {
              if (plan.smem > size_t(kDefaultSmem)) {
                // The device's whole opt-in, not this launch's size: concurrent
                // launches never lower each other's limit.
                static std::atomic<uint64_t> done{0};
                const cudaError_t err = allow_dynamic_smem(kernel, optin_smem - kStaticSmemReserve, done, device);
                if (err != cudaSuccess) return err;
              }
            }
            kernel<<<plan.grid, BLOCK.value, plan.smem, stream>>>(args);
            return cudaGetLastError();
          });
        });
      case Path::none:
        return cudaSuccess;
      case Path::invalid:
        break;
    }
    return cudaErrorInvalidValue;
  });
}

const char* type_name(DType t) { return dtype_name(t); }

// Interned names: stable pointers for the process lifetime.
const char* intern(std::string name) {
  static std::mutex mu;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lock(mu);
  return names.insert(std::move(name)).first->c_str();
}

}  // namespace

cudaError_t launch_norm(const NormParams& p, cudaStream_t stream) {
  if (!params_valid(p)) return cudaErrorInvalidValue;
  if (p.rows == 0) return cudaSuccess;
  int device = 0;
  const cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const int optin_smem = device_smem_optin(device);
  const auto forced = NormPath(g_forced_path.load(std::memory_order_relaxed));
  return launch_plan(p, make_plan(p, optin_smem, current_device_sms(), forced), stream, device, optin_smem);
}

NormPath norm_set_path(NormPath path) { return NormPath(g_forced_path.exchange(int(path))); }

const char* norm_kernel_name(const NormParams& p) {
  if (!params_valid(p)) return "invalid";
  if (p.rows == 0) return "none";
  int device = 0;
  int optin_smem = kDefaultSmem;
  if (cudaGetDevice(&device) == cudaSuccess) {
    optin_smem = device_smem_optin(device);
  } else {
    cudaGetLastError();
  }
  const Plan plan = make_plan(p, optin_smem, current_device_sms(),
                              NormPath(g_forced_path.load(std::memory_order_relaxed)));
  const std::string t = type_name(p.dtype);
  const int vec = 16 / static_cast<int>(dtype_size(p.dtype));
  switch (plan.path) {
    case Path::warp:
      return intern("norm_warp<" + t + ",vec" + std::to_string(vec) + ",items" +
                    std::to_string(plan.items) + ",rows" + std::to_string(kWarpRows) +
                    (plan.early ? ",early>" : ">"));
    case Path::row:
      return intern("norm_row<" + t + ",vec" + std::to_string(vec) + ",block" + std::to_string(plan.block) + ">");
    case Path::block:
      return intern("norm_block<" + t + ",vec" + std::to_string(vec) + ",items" +
                    std::to_string(plan.items) + ",block" + std::to_string(plan.block) + ">");
    case Path::generic_smem:
      return intern("norm_generic_smem<" + t + ",block" + std::to_string(plan.block) + ">");
    case Path::generic_multipass:
      return intern("norm_generic_multipass<" + t + ",block" + std::to_string(plan.block) + ">");
    case Path::none:
      return "none";
    case Path::invalid:
      break;
  }
  return "invalid";
}

}  // namespace trt_fastops::norm
