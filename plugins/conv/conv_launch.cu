// Conv launcher: plan cache, planning (cuDNN or fallback), execution and the
// cuDNN-failure fallback. Contract and environment: conv_launch.h.
#include "plugins/conv/conv_launch.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugins/common/cuda_status.h"
#include "plugins/common/cuda_utils.cuh"
#include "plugins/conv/conv_cudnn.h"
#include "plugins/conv/conv_fallback.h"
#include "plugins/conv/conv_replay.h"
#include "plugins/conv/conv_timing.h"
#include "plugins/conv/plan_cache.h"

namespace trt_fastops::conv {

struct ConvPlan {
  ConvKey key{};
  bool empty = false;
  FallbackPlan fallback;                     // always valid: the plan itself, or cuDNN's backup
  std::shared_ptr<const CudnnPlan> cudnn;    // set when cuDNN runs it
  bool separate_epilogue = false;            // info only: the CudnnPlan runs its own epilogue
  bool graph_replay = false;                 // info only: cuDNN hits may replay a CUDA graph
  std::shared_ptr<LaunchReplay> replay;      // the fallback's graphs (null: its launches run directly)
  size_t workspace = 0;                      // max(cuDNN's, fallback's); the fallback's when it runs alone
  double cudnn_us = 0;                       // planning's median GPU times (0: not timed)
  double fallback_us = 0;
  int fallback_timed = 0;                    // variants of the fallback timed (the fastest kept)
  std::string description;
  std::string fallback_kernel;
  std::string cudnn_refusal;
};

namespace {

using PlanCache = LruCache<ConvKey, ConvPlanHandle, PodKeyHash<ConvKey>>;

// Never destroyed: plans hold cuDNN graphs whose teardown at exit could run
// after libcudnn / the CUDA context are gone.
PlanCache& plan_cache() {
  static PlanCache* cache = new PlanCache(conv_cache_capacity_from_env());
  return *cache;
}

std::atomic<uint64_t> g_cudnn_plans{0}, g_fallback_plans{0}, g_exec_failures{0}, g_capture_misses{0};
std::atomic<int> g_debug_fail_cudnn{0};  // conv_debug_fail_cudnn_executions

// Consumes one armed debug failure, if any.
bool take_debug_failure() {
  int n = g_debug_fail_cudnn.load(std::memory_order_relaxed);
  while (n > 0) {
    if (g_debug_fail_cudnn.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) return true;
  }
  return false;
}

bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return !(std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0 || std::strcmp(v, "off") == 0);
}

long long env_int(const char* name, long long fallback, long long lo) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  return (end == v || *end != '\0' || n < lo) ? fallback : n;
}

CudnnPlanOptions cudnn_options_from_env() {
  CudnnPlanOptions o;
  o.autotune = env_flag("TRT_FASTOPS_CONV_AUTOTUNE", true);
  o.max_candidates = static_cast<int>(env_int("TRT_FASTOPS_CONV_AUTOTUNE_CANDIDATES", 16, 0));
  o.max_workspace = env_int("TRT_FASTOPS_CONV_MAX_WORKSPACE_MB", 256, 0) << 20;
  o.allow_tf32 = env_flag("TRT_FASTOPS_CONV_ALLOW_TF32", false);
  o.allow_runtime_compilation = env_flag("TRT_FASTOPS_CONV_RUNTIME_COMPILE", true);
  o.graph_replay = env_flag("TRT_FASTOPS_CONV_GRAPH_REPLAY", true);
  return o;
}

void warn_cudnn_unavailable_once(const std::string& reason) {
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr,
                 "trt_fastops: cuDNN is not available (%s); Conv/ConvTranspose run on trt_fastops' own CUDA "
                 "kernels\n",
                 reason.c_str());
  });
}

void warn_exec_failure_once(const std::string& what) {
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr,
                 "trt_fastops: a cached cuDNN convolution plan failed at execution (%s); it was evicted and "
                 "trt_fastops' own kernel is used for that signature from now on (further failures are "
                 "counted in conv_cache_stats, not printed)\n",
                 what.c_str());
  });
}

FallbackKernel forced_kernel(ConvBackend b) {
  switch (b) {
    case ConvBackend::fallback_gemm: return FallbackKernel::gemm_nhwc;
    case ConvBackend::fallback_direct: return FallbackKernel::direct;
    case ConvBackend::fallback_gather: return FallbackKernel::gemm;
    case ConvBackend::fallback_depthwise: return FallbackKernel::depthwise;
    default: return FallbackKernel::none;
  }
}

// Times plan's fallback and its variants (fallback_variants: the GEMM's tile
// widths and split-K factors, the depthwise kernel's tile sizes) on p's buffers, with their own workspace, on `stream`,
// with the harness that timed cuDNN's candidates, and keeps the fastest in
// plan->fallback, its time in plan->fallback_us. A variant that fails here
// just does not win (the chosen one's error surfaces when it runs); a
// harness failure (allocation, synchronisation) leaves fallback_us 0 and is
// named in the description (a sticky CUDA error surfaces at the next call).
Status tune_fallback(const ConvParams& p, FallbackKernel force, cudaStream_t stream, ConvPlan* plan) {
  std::vector<FallbackPlan> candidates{plan->fallback};
  for (const FallbackVariant& v : fallback_variants(plan->fallback)) {
    FallbackPlan alt;
    TRT_FASTOPS_RETURN_IF_ERROR(plan_fallback(p, force, &alt, v));
    candidates.push_back(alt);
  }
  size_t bytes = 0;
  for (const FallbackPlan& c : candidates) bytes = std::max(bytes, c.workspace);
  void* ws = nullptr;
  Status st = Status::ok();
  if (bytes > 0)  // cudaMalloc: 256-byte aligned, as run_fallback needs (16)
    st = cuda_status(cudaMalloc(&ws, bytes), "cudaMalloc (fallback timing workspace)");
  float best = -1.f;
  size_t best_i = 0;
  if (st.is_ok()) {
    CallTimer timer;
    for (size_t i = 0; i < candidates.size() && st.is_ok(); ++i) {
      float us = -1.f;
      st = timer.time(stream, [&] { return run_fallback(candidates[i], p, ws, stream) == cudaSuccess; }, &us);
      if (st.is_ok() && us >= 0.f && (best < 0.f || us < best)) {
        best = us;
        best_i = i;
      }
    }
  }
  if (ws != nullptr) {
    const Status fst = cuda_status(cudaFree(ws), "cudaFree (fallback timing workspace)");
    if (st.is_ok()) st = fst;
  }
  if (!st.is_ok()) {
    cudaGetLastError();  // reported in the description; the next call must not inherit it
    plan->description += "; fallback " + plan->fallback_kernel + " not timed: " + st.message();
    return Status::ok();
  }
  if (best < 0.f) {
    plan->description += "; fallback " + plan->fallback_kernel + " failed when timed";
    return Status::ok();
  }
  plan->fallback = candidates[best_i];
  plan->fallback_kernel = fallback_kernel_name(plan->fallback, p);
  plan->fallback_us = best;
  plan->fallback_timed = static_cast<int>(candidates.size());
  return Status::ok();
}

// "gemm_nhwc<float16,bn64,split2> (best of 6 variants) 41.0 us": the tuned fallback.
std::string timed_fallback(const ConvPlan& plan) {
  std::string s = plan.fallback_kernel;
  if (plan.fallback_timed > 1) s += " (best of " + std::to_string(plan.fallback_timed) + " variants)";
  return s + " " + format_us(plan.fallback_us);
}

// After tune_fallback: makes plan a fallback plan when its time beats cuDNN's
// chosen plan (plan->cudnn_us).
void race_fallback_against_cudnn(ConvPlan* plan) {
  if (plan->fallback_us <= 0) return;
  // Strictly faster: a tie keeps cuDNN (its hits replay CUDA graphs).
  if (plan->fallback_us < plan->cudnn_us) {
    plan->description = "fallback " + plan->fallback_kernel + " (faster than cuDNN's best: " +
                        format_us(plan->fallback_us) + " vs " + format_us(plan->cudnn_us) +
                        (plan->fallback_timed > 1 ? ", best of " + std::to_string(plan->fallback_timed) + " variants" : "") +
                        ", " + plan->description + ")";
    plan->cudnn_refusal = "slower than trt_fastops' kernel " + plan->fallback_kernel + " (" +
                          format_us(plan->cudnn_us) + " vs " + format_us(plan->fallback_us) + ")";
    plan->cudnn.reset();
    plan->separate_epilogue = false;
    plan->graph_replay = false;
    plan->workspace = plan->fallback.workspace;
  } else {
    plan->description += "; fallback " + timed_fallback(*plan);
  }
}

Status build_plan(const ConvParams& p, const ConvKey& key, ConvBackend backend, cudaStream_t stream,
                  std::shared_ptr<ConvPlan>* out) {
  auto plan = std::make_shared<ConvPlan>();
  plan->key = key;
  const FallbackKernel force = forced_kernel(backend);
  TRT_FASTOPS_RETURN_IF_ERROR(plan_fallback(p, force, &plan->fallback));
  plan->empty = plan->fallback.kernel == FallbackKernel::none;
  plan->fallback_kernel = fallback_kernel_name(plan->fallback, p);
  plan->workspace = plan->fallback.workspace;
  if (plan->empty) {
    plan->description = "empty output (nothing to compute)";
    *out = std::move(plan);
    return Status::ok();
  }
  CudnnPlanOptions options = cudnn_options_from_env();
  if (backend == ConvBackend::automatic || backend == ConvBackend::cudnn) {
    // Automatic + autotuning: cuDNN's choice races trt_fastops' kernel.
    const bool race = backend == ConvBackend::automatic && options.autotune &&
                      env_flag("TRT_FASTOPS_CONV_TIME_FALLBACK", true);
    options.time_chosen = race;
    CudnnPlanResult r;
    TRT_FASTOPS_RETURN_IF_ERROR(cudnn_build_plan(p, stream, options, &r));
    if (r.plan) {
      plan->cudnn = std::move(r.plan);
      plan->separate_epilogue = r.separate_epilogue;
      plan->graph_replay = r.graph_replay;
      plan->workspace = std::max(plan->workspace, r.workspace);
      plan->cudnn_us = r.time_us;
      plan->description = "cudnn " + r.description;
      if (race && plan->cudnn_us > 0) {
        TRT_FASTOPS_RETURN_IF_ERROR(tune_fallback(p, force, stream, plan.get()));
        race_fallback_against_cudnn(plan.get());
      }
      // cuDNN kept: its backup only runs after a cuDNN failure, so the kernel
      // needing only packed weights keeps the workspace near cuDNN's (no
      // channels-last x, no split-K partials).
      if (plan->cudnn && plan->fallback.workspace > r.workspace && plan->fallback.kernel != FallbackKernel::gemm) {
        TRT_FASTOPS_RETURN_IF_ERROR(plan_fallback(p, FallbackKernel::gemm, &plan->fallback));
        plan->fallback_kernel = fallback_kernel_name(plan->fallback, p);
        plan->workspace = std::max(plan->fallback.workspace, r.workspace);
        if (plan->fallback_us > 0) plan->description += " (backup: " + plan->fallback_kernel + ")";
      }
    } else {
      plan->cudnn_refusal = r.reason;
      size_t version = 0;
      const Status lib = cudnn_library_status(&version);
      if (!lib.is_ok()) warn_cudnn_unavailable_once(lib.message());
      if (backend == ConvBackend::cudnn)
        return Status::errorf(conv_op_name(p), ": cuDNN cannot run ", describe_conv(p, int(key.device)), ": ",
                              r.reason);
    }
  } else {
    plan->cudnn_refusal = std::string("backend '") + conv_backend_name(backend) + "' requested";
  }
  if (!plan->cudnn) {
    // Our kernel runs on its own choice ('auto', 'fallback'; forced kernels
    // stay as forced): with autotuning its variants are timed, unless the race
    // already did.
    const bool own_choice = backend == ConvBackend::automatic || backend == ConvBackend::fallback;
    if (own_choice && options.autotune && plan->fallback_us == 0 && !fallback_variants(plan->fallback).empty())
      TRT_FASTOPS_RETURN_IF_ERROR(tune_fallback(p, force, stream, plan.get()));
    plan->workspace = plan->fallback.workspace;
    if (options.graph_replay) plan->replay = std::make_shared<LaunchReplay>();
    // (A fallback that won the race against cuDNN already says so.)
    if (plan->cudnn_us == 0)
      plan->description = "fallback " + (plan->fallback_us > 0 ? timed_fallback(*plan) : plan->fallback_kernel);
  }
  *out = std::move(plan);
  return Status::ok();
}

}  // namespace

Status conv_workspace_bound(const ConvParams& p, size_t cudnn_budget, size_t* bytes) {
  if (bytes == nullptr) return Status::errorf(conv_op_name(p), ": conv_workspace_bound needs a bytes output");
  *bytes = 0;
  // plan_fallback's checks refuse null data pointers but its choice never
  // reads them: stand-ins let it plan from the sizes alone. Alignment changes
  // the choice (16-byte aligned buffers read in place, others copied), so the
  // bound covers both, and every variant autotuning may pick.
  size_t most = cudnn_budget;
  for (uintptr_t address : {uintptr_t{256}, uintptr_t{258}}) {
    ConvParams sizes = p;
    const void* stand_in = reinterpret_cast<const void*>(address);
    sizes.x = sizes.w = stand_in;
    if (sizes.bias != nullptr) sizes.bias = stand_in;
    sizes.y = const_cast<void*>(stand_in);
    FallbackPlan plan;
    TRT_FASTOPS_RETURN_IF_ERROR(plan_fallback(sizes, FallbackKernel::none, &plan));
    most = std::max(most, plan.workspace);
    for (const FallbackVariant& v : fallback_variants(plan)) {
      FallbackPlan alt;
      TRT_FASTOPS_RETURN_IF_ERROR(plan_fallback(sizes, FallbackKernel::none, &alt, v));
      most = std::max(most, alt.workspace);
    }
  }
  *bytes = most;
  return Status::ok();
}

const char* conv_backend_name(ConvBackend backend) {
  switch (backend) {
    case ConvBackend::automatic: return "auto";
    case ConvBackend::cudnn: return "cudnn";
    case ConvBackend::fallback: return "fallback";
    case ConvBackend::fallback_gemm: return "gemm";
    case ConvBackend::fallback_direct: return "direct";
    case ConvBackend::fallback_gather: return "gather";
    case ConvBackend::fallback_depthwise: return "depthwise";
  }
  return "invalid";
}

bool parse_conv_backend(const std::string& name, ConvBackend* backend) {
  for (ConvBackend b : {ConvBackend::automatic, ConvBackend::cudnn, ConvBackend::fallback, ConvBackend::fallback_gemm,
                        ConvBackend::fallback_direct, ConvBackend::fallback_gather,
                        ConvBackend::fallback_depthwise}) {
    if (name == conv_backend_name(b)) {
      *backend = b;
      return true;
    }
  }
  return false;
}

Status conv_prepare(const ConvParams& p, cudaStream_t stream, ConvPlanHandle* plan, size_t* workspace_bytes,
                    ConvBackend backend) {
  if (plan == nullptr || workspace_bytes == nullptr)
    return Status::errorf(conv_op_name(p), ": conv_prepare needs plan and workspace_bytes outputs");
  plan->reset();
  *workspace_bytes = 0;
  if (backend == ConvBackend::automatic && env_flag("TRT_FASTOPS_CONV_FORCE_FALLBACK", false))
    backend = ConvBackend::fallback;
  int device = 0;
  TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  const ConvKey key = make_conv_key(p, device, static_cast<int>(backend));
  if (std::optional<ConvPlanHandle> hit = plan_cache().get(key)) {
    *plan = std::move(*hit);
    *workspace_bytes = (*plan)->workspace;
    return Status::ok();
  }
  // Miss: never plan into a graph being captured.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing"));
  if (capture != cudaStreamCaptureStatusNone) {
    g_capture_misses.fetch_add(1, std::memory_order_relaxed);
    return Status::errorf(conv_op_name(p), ": no cached plan for ", describe_conv(p, device),
                          " while the stream is being captured into a CUDA graph; planning (cuDNN heuristics, "
                          "autotuning, allocation) cannot be captured: run the model once without capture first "
                          "(warm-up), or raise TRT_FASTOPS_CONV_CACHE_SIZE if the plan was evicted");
  }
  std::shared_ptr<ConvPlan> built;
  TRT_FASTOPS_RETURN_IF_ERROR(build_plan(p, key, backend, stream, &built));
  (built->cudnn ? g_cudnn_plans : g_fallback_plans).fetch_add(1, std::memory_order_relaxed);
  plan_cache().put(key, built);
  *workspace_bytes = built->workspace;
  *plan = std::move(built);
  return Status::ok();
}

Status conv_run(const ConvParams& p, const ConvPlanHandle& plan, void* workspace, size_t workspace_bytes,
                cudaStream_t stream) {
  const char* op = conv_op_name(p);
  if (!plan) return Status::errorf(op, ": conv_run without a plan (call conv_prepare first)");
  int device = 0;
  TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  if (make_conv_key(p, device, static_cast<int>(plan->key.backend)) != plan->key)
    return Status::errorf(op, ": the plan was prepared for a different signature than ", describe_conv(p, device));
  if (plan->empty) return Status::ok();
  if (workspace_bytes < plan->workspace || (plan->workspace > 0 && workspace == nullptr))
    return Status::errorf(op, ": workspace of ", workspace_bytes, " bytes, the plan needs ", plan->workspace);
  if (plan->workspace > 0 && !is_aligned(workspace, 16))
    return Status::errorf(op, ": workspace must be 16-byte aligned");

  if (plan->cudnn) {
    // cudnn_execute runs the plan's separate bias/activation kernel too.
    Status st = take_debug_failure()
                    ? Status::errorf(op, ": cuDNN execution failed: injected by conv_debug_fail_cudnn_executions")
                    : cudnn_execute(*plan->cudnn, p, workspace, stream);
    if (st.is_ok()) return Status::ok();
    // The plan failed: evict it for good (the signature now maps to the
    // fallback) and produce this call's output with the fallback.
    g_exec_failures.fetch_add(1, std::memory_order_relaxed);
    warn_exec_failure_once(st.message());
    auto replacement = std::make_shared<ConvPlan>(*plan);
    replacement->cudnn.reset();
    replacement->separate_epilogue = false;
    replacement->graph_replay = false;
    if (env_flag("TRT_FASTOPS_CONV_GRAPH_REPLAY", true)) replacement->replay = std::make_shared<LaunchReplay>();
    replacement->cudnn_refusal = "cuDNN plan failed at execution: " + st.message();
    replacement->description = "fallback " + plan->fallback_kernel + " (after a cuDNN execution failure)";
    plan_cache().put(plan->key, std::move(replacement));
  }
  auto enqueue = [&](cudaStream_t s) { return run_fallback(plan->fallback, p, workspace, s); };
  const cudaError_t err =
      plan->replay ? plan->replay->run(ReplayKey{{p.x, p.w, p.bias, p.y, workspace}}, stream, enqueue) : enqueue(stream);
  if (err == cudaSuccess) return Status::ok();
  const std::string what = std::string(op) + " kernel " + plan->fallback_kernel;
  return cuda_status(err, what.c_str());
}

ConvPlanInfo conv_plan_info(const ConvPlanHandle& plan) {
  ConvPlanInfo info;
  if (!plan) return info;
  info.empty = plan->empty;
  info.cudnn = plan->cudnn != nullptr;
  info.separate_epilogue = plan->separate_epilogue;
  info.graph_replay = plan->graph_replay;
  info.workspace = plan->workspace;
  info.cudnn_us = plan->cudnn_us;
  info.fallback_us = plan->fallback_us;
  info.description = plan->description;
  info.fallback_kernel = plan->fallback_kernel;
  info.cudnn_refusal = plan->cudnn_refusal;
  return info;
}

ConvCacheStats conv_cache_stats() {
  ConvCacheStats s;
  s.cache = plan_cache().stats();
  s.cudnn_plans = g_cudnn_plans.load(std::memory_order_relaxed);
  s.fallback_plans = g_fallback_plans.load(std::memory_order_relaxed);
  s.exec_failures = g_exec_failures.load(std::memory_order_relaxed);
  s.capture_misses = g_capture_misses.load(std::memory_order_relaxed);
  const CudnnExecStats exec = cudnn_exec_stats();
  s.graph_launches = exec.graph_launches;
  s.graph_captures = exec.graph_captures;
  s.graph_failures = exec.graph_failures;
  s.capturing_executions = exec.capturing_executions;
  const ReplayStats replay = replay_stats();
  s.fallback_graph_launches = replay.launches;
  s.fallback_graph_captures = replay.captures;
  s.fallback_graph_failures = replay.failures;
  s.cudnn_compiled = cudnn_compiled();
  const Status lib = cudnn_library_status(&s.cudnn_version);
  s.cudnn_available = lib.is_ok();
  s.cudnn_status = lib.is_ok() ? "ok" : lib.message();
  return s;
}

void conv_cache_clear() { plan_cache().clear(); }

void conv_cache_reset_stats() {
  plan_cache().reset_stats();
  g_cudnn_plans = 0;
  g_fallback_plans = 0;
  g_exec_failures = 0;
  g_capture_misses = 0;
  cudnn_reset_exec_stats();
  replay_reset_stats();
}

void conv_cache_set_capacity(size_t capacity) { plan_cache().set_capacity(capacity); }

void conv_debug_fail_cudnn_executions(int count) { g_debug_fail_cudnn.store(count > 0 ? count : 0); }

}  // namespace trt_fastops::conv
