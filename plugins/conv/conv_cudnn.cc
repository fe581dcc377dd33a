// cuDNN convolution through cudnn-frontend (design: conv_cudnn.h).
//
// Built with NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING: the front end resolves every
// cuDNN call through cudnn_frontend::cudnn_dlhandle (set here after dlopen) and
// its few CUDA runtime calls through the process's libcudart.so (dlopen too).
// The front end's inline code is compiled with hidden visibility so it never
// interposes with (or is interposed by) another copy of cudnn-frontend in the
// process (ONNX Runtime's, PyTorch's). Without the headers (cudnn-frontend needs
// nvrtc.h as well) this file builds a stub that reports cuDNN as unavailable.
#include "plugins/conv/conv_cudnn.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#if defined(__has_include)
#if __has_include(<cudnn_frontend.h>) && __has_include(<cudnn.h>) && __has_include(<nvrtc.h>)
#define TRT_FASTOPS_CONV_WITH_CUDNN 1
#endif
#endif

#if defined(TRT_FASTOPS_CONV_EXPECT_CUDNN) && !defined(TRT_FASTOPS_CONV_WITH_CUDNN)
#error "cmake/conv.cmake found nvrtc.h, but cudnn_frontend.h, cudnn.h or nvrtc.h is not on the include path"
#endif

#if defined(TRT_FASTOPS_CONV_WITH_CUDNN)
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#define CUDNN_FRONTEND_SKIP_JSON_LIB
#pragma GCC visibility push(hidden)
#include <cudnn_frontend.h>
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;  // the front end's handle on libcudnn (dynamic loading)
}
#pragma GCC visibility pop
#endif

#include "plugins/common/cuda_status.h"
#include "plugins/conv/conv_fallback.h"

namespace trt_fastops::conv {

#if !defined(TRT_FASTOPS_CONV_WITH_CUDNN)

struct CudnnPlan {};

bool cudnn_compiled() { return false; }

Status cudnn_library_status(size_t* version) {
  if (version) *version = 0;
  return Status::error(
      "this build of trt_fastops has no cuDNN support (cudnn_frontend.h, cudnn.h or nvrtc.h was not found "
      "when it was compiled)");
}

Status cudnn_build_plan(const ConvParams&, cudaStream_t, const CudnnPlanOptions&, CudnnPlanResult* out) {
  *out = CudnnPlanResult{};
  out->reason = cudnn_library_status(nullptr).message();
  return Status::ok();
}

Status cudnn_execute(const CudnnPlan&, const ConvParams& p, void*, cudaStream_t) {
  return Status::errorf(conv_op_name(p), ": cuDNN support not compiled in");
}

#else  // TRT_FASTOPS_CONV_WITH_CUDNN

namespace fe = cudnn_frontend;

namespace {

// ---------------------------------------------------------------------------
// Library loading (once per process; never unloaded: plans and handles may
// live until exit).

struct CudnnLibrary {
  bool ok = false;
  size_t version = 0;
  std::string reason;
};

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

CudnnLibrary load_cudnn() {
  CudnnLibrary lib;
  if (env_is("TRT_FASTOPS_CONV_DISABLE_CUDNN", "1")) {
    lib.reason = "disabled by TRT_FASTOPS_CONV_DISABLE_CUDNN=1";
    return lib;
  }
  std::vector<std::string> names;
  if (const char* user = std::getenv("TRT_FASTOPS_CUDNN_LIBRARY"); user != nullptr && user[0] != '\0')
    names.emplace_back(user);
  names.emplace_back("libcudnn.so.9");
  names.emplace_back("libcudnn.so");
  void* handle = nullptr;
  std::string tried;
  for (const std::string& name : names) {
    dlerror();
    handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    const char* err = dlerror();
    tried += (tried.empty() ? "" : "; ") + name + ": " + (err ? err : "not found");
  }
  if (handle == nullptr) {
    lib.reason = "libcudnn could not be loaded (" + tried + ")";
    return lib;
  }
  using GetVersion = size_t (*)();
  auto get_version = reinterpret_cast<GetVersion>(dlsym(handle, "cudnnGetVersion"));
  if (get_version == nullptr) {
    lib.reason = "the loaded libcudnn has no cudnnGetVersion";
    return lib;
  }
  lib.version = get_version();
  if (lib.version < 90000 || lib.version >= 100000) {
    lib.reason = "libcudnn version " + std::to_string(lib.version) + " found; trt_fastops needs cuDNN 9";
    return lib;
  }
  fe::cudnn_dlhandle = handle;
  lib.ok = true;
  return lib;
}

const CudnnLibrary& cudnn_library() {
  static const CudnnLibrary lib = load_cudnn();
  return lib;
}

// ---------------------------------------------------------------------------
// Per-device handles: one for planning (held for the whole, long, planning of a
// signature) and one for execution (held only around set-stream + execute),
// so planning a new shape never stalls running ones. Created while planning,
// never during capture; intentionally never destroyed (no safe point at exit).

constexpr int kMaxDevices = 64;

struct DeviceHandles {
  std::mutex plan_mu;
  cudnnHandle_t plan = nullptr;
  std::mutex exec_mu;
  cudnnHandle_t exec = nullptr;
  // The stream last given to `exec` (under exec_mu): cudnnSetStream is not a
  // plain store (it queries the stream's priority / context every call, a few
  // microseconds), so a hit on the same stream skips it.
  cudaStream_t exec_stream = nullptr;
  bool exec_stream_set = false;
};

DeviceHandles& device_handles(int device) {
  static DeviceHandles* all = new DeviceHandles[kMaxDevices];
  return all[device];
}

std::string cudnn_error(cudnnStatus_t s) {
  const char* msg = fe::detail::get_error_string(s);
  return msg ? msg : ("cudnnStatus " + std::to_string(static_cast<int>(s)));
}

Status create_handle(cudnnHandle_t* h, const char* what) {
  if (*h != nullptr) return Status::ok();
  const cudnnStatus_t s = fe::detail::create_handle(h);
  if (s != CUDNN_STATUS_SUCCESS) {
    *h = nullptr;
    return Status::errorf("cudnnCreate (", what, ") failed: ", cudnn_error(s));
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------
// Graph construction.

constexpr int64_t UID_X = 1, UID_W = 2, UID_B = 3, UID_Y = 4;
constexpr int kMaxUserSlots = 4;

fe::DataType_t io_type(DType t) {
  switch (t) {
    case DType::f16: return fe::DataType_t::HALF;
    case DType::bf16: return fe::DataType_t::BFLOAT16;
    default: return fe::DataType_t::FLOAT;
  }
}

// Largest power of two <= 16 that divides the address (what cuDNN may assume).
int64_t alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int64_t align = 16;
  while (align > 1 && (a % uintptr_t(align)) != 0) align /= 2;
  return align;
}

std::vector<int64_t> packed_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * std::max<int64_t>(dims[i + 1], 1);
  return s;
}

struct ConvShape {
  std::vector<int64_t> x, w, y, bias;  // dims (NCHW-style, >= 4-D)
  std::vector<int64_t> pre, post, stride, dilation;
};

// cuDNN wants at least 2 spatial dims: 1-D becomes H = 1. Post padding is
// derived from the output size (the relation cuDNN checks); negative pads
// cannot be expressed. ConvTranspose: the padding of the forward convolution
// whose data gradient it is, i.e. the same pad_begin.
bool make_shape(const ConvParams& p, ConvShape* s, std::string* why) {
  if (p.c_in == 0) {  // y = act(bias): nothing for cuDNN to convolve
    *why = "no input channels";
    return false;
  }
  // cuDNN only for 16-byte aligned tensors. The H100 run of a Conv+bias+relu
  // with x, w and bias one element off raised a device-side "misaligned
  // address" (sticky: it kills the process's CUDA context); our kernels never
  // vectorise on those pointers (scalar loads; sanitize_conv.py's misaligned
  // cases are memcheck-clean), so cuDNN's engines are what cannot be trusted
  // with a declared alignment below 16 (y's was not even declared). Framework
  // allocations (ORT, TensorRT, torch) are 256-byte aligned, so only views /
  // offsets take trt_fastops' kernels here; the plan cache key records each
  // pointer's alignment, so aligned calls of the same shape keep cuDNN.
  if (alignment_of(p.x) < 16 || alignment_of(p.w) < 16 || alignment_of(p.y) < 16 ||
      (p.bias != nullptr && alignment_of(p.bias) < 16)) {
    *why = str_cat("x, w, bias and y must be 16-byte aligned for cuDNN (alignments ", alignment_of(p.x), ", ",
                   alignment_of(p.w), ", ", p.bias != nullptr ? alignment_of(p.bias) : 0, ", ", alignment_of(p.y),
                   ")");
    return false;
  }
  const int nd = std::max(2, p.spatial);
  const int front = nd - p.spatial;
  s->x = {p.n, p.c_in};
  s->y = {p.n, p.c_out};
  s->w = p.transpose ? std::vector<int64_t>{p.c_in, p.c_out / p.group} : std::vector<int64_t>{p.c_out, p.c_in / p.group};
  s->bias = {1, p.c_out};
  s->pre.assign(nd, 0);
  s->post.assign(nd, 0);
  s->stride.assign(nd, 1);
  s->dilation.assign(nd, 1);
  for (int i = 0; i < front; ++i) {
    s->x.push_back(1);
    s->y.push_back(1);
    s->w.push_back(1);
    s->bias.push_back(1);
  }
  for (int i = 0; i < p.spatial; ++i) {
    const int d = front + i;
    const int64_t in = p.in[i], out = p.out[i], k = p.kernel[i], st = p.stride[i], dl = p.dilation[i];
    const int64_t pb = p.pad_begin[i];
    s->x.push_back(in);
    s->y.push_back(out);
    s->w.push_back(k);
    s->bias.push_back(1);
    if (pb < 0) {
      *why = "negative padding";
      return false;
    }
    if (in == 0) {
      *why = "an empty input dimension";
      return false;
    }
    const int64_t span = dl * (k - 1) + 1;
    // Forward relation small = floor((big + pre + post - span) / stride) + 1, with
    // (big, small) = (in, out) for Conv and (out, in) for ConvTranspose: post in [lo, lo + stride - 1].
    const int64_t big = p.transpose ? out : in;
    const int64_t small = p.transpose ? in : out;
    const int64_t lo = (small - 1) * st + span - big - pb;
    int64_t post = p.pad_end[i] >= lo && p.pad_end[i] <= lo + st - 1 ? p.pad_end[i] : std::max<int64_t>(lo, 0);
    if (post > lo + st - 1 || post < 0) {
      *why = "output size needs negative end padding";
      return false;
    }
    s->pre[d] = pb;
    s->post[d] = post;
    s->stride[d] = st;
    s->dilation[d] = dl;
  }
  return true;
}

// cudnn-frontend keeps a graph's built execution plans protected. A plan-cache
// hit wants only the chosen plan's backend descriptor, to call
// cudnnBackendExecute with a variant pack finalized once per pointer set
// (CudnnPlan::packs) instead of the front end creating, finalizing and
// destroying one on every execute.
class __attribute__((visibility("hidden"))) PlanGraph : public fe::graph::Graph {
 public:
  bool has_plan(int64_t i) const {
    return i >= 0 && size_t(i) < plans.execution_plans.size() && plans.execution_plans[size_t(i)] != nullptr;
  }
  cudnnBackendDescriptor_t plan_descriptor(int64_t i) const { return plans.execution_plans[size_t(i)]->get_raw_desc(); }
  int64_t plan_backend_workspace(int64_t i) const { return plans.execution_plans[size_t(i)]->getWorkspaceSize(); }
  bool plan_needs_graph_retention(int64_t i) const {
    return plans.execution_plans[size_t(i)]->needs_cuda_graph_retention();
  }
};

fe::graph::Tensor_attributes tensor_attrs(const char* name, int64_t uid, const std::vector<int64_t>& dims,
                                          const void* ptr, fe::DataType_t type) {
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim(dims)
      .set_stride(packed_strides(dims))
      .set_data_type(type)
      .set_alignment(alignment_of(ptr));
}

// The front end's graph for p; fuse: bias and activation as pointwise nodes.
std::shared_ptr<PlanGraph> make_graph(const ConvParams& p, const ConvShape& s, bool fuse) {
  const fe::DataType_t io = io_type(p.dtype);
  auto g = std::make_shared<PlanGraph>();
  g->set_io_data_type(io)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto x = g->tensor(tensor_attrs("x", UID_X, s.x, p.x, io));
  auto w = g->tensor(tensor_attrs("w", UID_W, s.w, p.w, io));
  std::shared_ptr<fe::graph::Tensor_attributes> t;
  if (!p.transpose) {
    t = g->conv_fprop(x, w,
                      fe::graph::Conv_fprop_attributes()
                          .set_name("fprop")
                          .set_pre_padding(s.pre)
                          .set_post_padding(s.post)
                          .set_stride(s.stride)
                          .set_dilation(s.dilation)
                          .set_compute_data_type(fe::DataType_t::FLOAT));
  } else {
    t = g->conv_dgrad(x, w,
                      fe::graph::Conv_dgrad_attributes()
                          .set_name("dgrad")
                          .set_pre_padding(s.pre)
                          .set_post_padding(s.post)
                          .set_stride(s.stride)
                          .set_dilation(s.dilation)
                          .set_compute_data_type(fe::DataType_t::FLOAT));
    t->set_dim(s.y).set_stride(packed_strides(s.y));  // dgrad cannot infer dx's size
  }
  if (fuse && p.bias != nullptr) {
    auto b = g->tensor(tensor_attrs("bias", UID_B, s.bias, p.bias, io));
    t = g->pointwise(t, b,
                     fe::graph::Pointwise_attributes()
                         .set_name("bias")
                         .set_mode(fe::PointwiseMode_t::ADD)
                         .set_compute_data_type(fe::DataType_t::FLOAT));
  }
  if (fuse && p.activation != Activation::none) {
    auto attrs = fe::graph::Pointwise_attributes().set_name("act").set_compute_data_type(fe::DataType_t::FLOAT);
    switch (p.activation) {
      case Activation::relu: attrs.set_mode(fe::PointwiseMode_t::RELU_FWD); break;
      case Activation::silu: attrs.set_mode(fe::PointwiseMode_t::SWISH_FWD).set_swish_beta(1.f); break;
      case Activation::gelu: attrs.set_mode(fe::PointwiseMode_t::GELU_FWD); break;
      default: break;
    }
    t = g->pointwise(t, attrs);
  }
  t->set_output(true).set_uid(UID_Y).set_data_type(io).set_dim(s.y).set_stride(packed_strides(s.y)).set_alignment(
      alignment_of(p.y));
  return g;
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::relu: return "relu";
    case Activation::silu: return "silu";
    case Activation::gelu: return "gelu";
    default: return "none";
  }
}

std::string fe_message(fe::error_t e) { return e.get_message(); }

}  // namespace

// ---------------------------------------------------------------------------

constexpr int kPackSlots = 8;  // finalized variant packs kept per plan (pointer sets)

// Hidden like the front end's types it holds (only this file looks inside).
struct __attribute__((visibility("hidden"))) CudnnPlan {
  std::shared_ptr<PlanGraph> graph;
  int64_t index = -1;  // execution plan index inside graph
  int device = 0;
  int n_user = 0;
  int64_t user_uids[kMaxUserSlots] = {};  // variant-pack order (sorted uids)
  size_t workspace = 0;

  // Direct path (set when the graph needs nothing per call beyond the user
  // pointers and the workspace: no front-end workspace or auxiliary kernels,
  // no internal tensors, no runtime-compiled kernels to retain in CUDA graphs):
  // the chosen plan's backend descriptor, owned by `graph`. Null: every execute
  // goes through the front end.
  cudnnBackendDescriptor_t exec_plan = nullptr;
  // Variant packs finalized for recent (pointers..., workspace) sets: frameworks
  // hand the same buffers to a layer run after run (arenas, CUDA graphs), so a hit
  // usually costs one cudnnBackendExecute. Mutable cache of an otherwise immutable
  // plan, guarded by the execution mutex of `device` (every execute holds it).
  struct Pack {
    void* ptrs[kMaxUserSlots + 1] = {};  // user pointers in uid order, then the workspace
    cudnnBackendDescriptor_t desc = nullptr;
  };
  mutable Pack packs[kPackSlots];
  mutable int next_pack = 0;

  CudnnPlan() = default;
  CudnnPlan(const CudnnPlan&) = delete;
  CudnnPlan& operator=(const CudnnPlan&) = delete;
  ~CudnnPlan() {
    for (Pack& p : packs)
      if (p.desc != nullptr) fe::detail::destroy_descriptor(p.desc);  // host object: safe once enqueued
  }
};

namespace {

// Pointer for a tensor uid of p.
void* user_pointer(const ConvParams& p, int64_t uid) {
  switch (uid) {
    case UID_X: return const_cast<void*>(p.x);
    case UID_W: return const_cast<void*>(p.w);
    case UID_B: return const_cast<void*>(p.bias);
    case UID_Y: return p.y;
    default: return nullptr;
  }
}

void fill_pointers(const CudnnPlan& plan, const ConvParams& p, void** ptrs) {
  for (int i = 0; i < plan.n_user; ++i) ptrs[i] = user_pointer(p, plan.user_uids[i]);
}

// Times each candidate plan (one warm-up, then the mean of `reps` runs) on
// p's buffers; returns the fastest index, or -1 when none ran.
Status autotune(const fe::graph::Graph& g, cudnnHandle_t handle, const ConvParams& p, const CudnnPlan& proto,
                const std::vector<int64_t>& candidates, cudaStream_t stream, int64_t* best) {
  constexpr int kReps = 3;
  *best = -1;
  int64_t max_ws = 0;
  for (int64_t c : candidates) {
    int64_t ws = 0;
    if (g.get_workspace_size_plan_at_index(c, ws).is_good()) max_ws = std::max(max_ws, ws);
  }
  void* ws = nullptr;
  if (max_ws > 0) TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(cudaMalloc(&ws, size_t(max_ws)), "cudaMalloc (cuDNN autotune workspace)"));
  cudaEvent_t start = nullptr, stop = nullptr;
  Status st = cuda_status(cudaEventCreate(&start), "cudaEventCreate");
  if (st.is_ok()) st = cuda_status(cudaEventCreate(&stop), "cudaEventCreate");
  if (st.is_ok()) st = cuda_status(cudaStreamSynchronize(stream), "cudaStreamSynchronize (before autotune)");
  void* ptrs[kMaxUserSlots];
  fill_pointers(proto, p, ptrs);
  float best_ms = 0.f;
  for (size_t i = 0; st.is_ok() && i < candidates.size(); ++i) {
    const int64_t c = candidates[i];
    if (g.execute_plan_at_index(handle, ptrs, proto.n_user, ws, c).is_bad()) continue;  // warm-up
    bool ran = cudaEventRecord(start, stream) == cudaSuccess;
    for (int r = 0; ran && r < kReps; ++r) ran = g.execute_plan_at_index(handle, ptrs, proto.n_user, ws, c).is_good();
    ran = ran && cudaEventRecord(stop, stream) == cudaSuccess && cudaEventSynchronize(stop) == cudaSuccess;
    float ms = 0.f;
    if (!ran || cudaEventElapsedTime(&ms, start, stop) != cudaSuccess) {
      cudaGetLastError();
      st = cuda_status(cudaStreamSynchronize(stream), "cudaStreamSynchronize (autotune)");
      continue;
    }
    if (*best < 0 || ms < best_ms) {
      *best = c;
      best_ms = ms;
    }
  }
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  if (ws) {
    const Status fst = cuda_status(cudaFree(ws), "cudaFree (cuDNN autotune workspace)");
    if (st.is_ok()) st = fst;
  }
  return st;
}

// Plans one graph variant. ok with *plan null when cuDNN has no engine for it.
Status plan_graph(const ConvParams& p, const ConvShape& s, bool fuse, int device, DeviceHandles& h,
                  cudaStream_t stream, const CudnnPlanOptions& opt, std::shared_ptr<CudnnPlan>* plan,
                  std::string* why) {
  plan->reset();
  auto g = make_graph(p, s, fuse);
  fe::error_t e = g->validate();
  if (e.is_good()) e = g->build_operation_graph(h.plan);
  if (e.is_good()) e = g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
  if (e.is_bad()) {
    *why = fe_message(e);
    return Status::ok();
  }
  g->deselect_workspace_greater_than(opt.max_workspace);
  if (p.dtype == DType::f32 && !opt.allow_tf32) {
    g->deselect_numeric_notes({fe::NumericalNote_t::TENSOR_CORE, fe::NumericalNote_t::DOWN_CONVERT_INPUTS});
  } else if (p.dtype != DType::f32) {
    g->deselect_numeric_notes({fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION});
  }
  if (!opt.allow_runtime_compilation) g->deselect_behavior_notes({fe::BehaviorNote_t::RUNTIME_COMPILATION});
  e = g->check_support();
  if (e.is_bad()) {
    *why = fe_message(e);
    return Status::ok();
  }
  const int want = opt.autotune ? std::max(1, opt.max_candidates) : 1;
  std::vector<int64_t> built;
  std::string failures;
  for (int64_t i = 0; i < g->get_execution_plan_count() && int(built.size()) < want; ++i) {
    fe::error_t be = g->build_plan_at_index(i);
    if (be.is_good()) {
      built.push_back(i);
    } else if (failures.size() < 512) {
      failures += "; plan " + std::to_string(i) + ": " + fe_message(be);
    }
  }
  if (built.empty()) {
    *why = "no execution plan could be built" + failures;
    return Status::ok();
  }
  e = g->prepare_variant_pack_template();
  if (e.is_bad()) {
    *why = fe_message(e);
    return Status::ok();
  }
  auto out = std::make_shared<CudnnPlan>();
  out->graph = g;
  out->device = device;
  const std::vector<int64_t> uids = g->get_variant_pack_uids_sorted();
  if (uids.empty() || uids.size() > size_t(kMaxUserSlots)) {
    *why = "unexpected variant pack of " + std::to_string(uids.size()) + " tensors";
    return Status::ok();
  }
  out->n_user = static_cast<int>(uids.size());
  for (size_t i = 0; i < uids.size(); ++i) {
    if (uids[i] < UID_X || uids[i] > UID_Y) {
      *why = "variant pack names an unknown tensor uid " + std::to_string(uids[i]);
      return Status::ok();
    }
    out->user_uids[i] = uids[i];
  }
  out->index = built.front();
  if (built.size() > 1) {
    if (fe::detail::set_stream(h.plan, stream) != CUDNN_STATUS_SUCCESS) {
      *why = "cudnnSetStream failed";
      return Status::ok();
    }
    int64_t best = -1;
    const Status tuned = autotune(*g, h.plan, p, *out, built, stream, &best);
    if (!tuned.is_ok()) {
      // Timing is an optimisation: keep heuristics' first choice (a CUDA error
      // that is sticky will surface at execution anyway).
      cudaGetLastError();
      best = built.front();
    }
    if (best < 0) {
      *why = "no built plan executed";
      return Status::ok();
    }
    out->index = best;
  }
  int64_t ws = 0;
  e = g->get_workspace_size_plan_at_index(out->index, ws);
  if (e.is_bad() || ws < 0) {
    *why = "workspace query failed: " + fe_message(e);
    return Status::ok();
  }
  out->workspace = static_cast<size_t>(ws);
  // The direct path needs exactly what the front end would do per call to be
  // "set the user pointers and the workspace": checked here once.
  const auto& vt = g->varpack_template;
  bool direct = g->has_plan(out->index) && !fe::isLoggingTensorDumpEnabled() &&
                vt.all_uids.size() == size_t(out->n_user) && vt.user_slots.size() == size_t(out->n_user) &&
                vt.workspace_slots.empty() && vt.replacement_slots.empty() && vt.backend_slots.empty() &&
                g->plan_backend_workspace(out->index) == ws && !g->plan_needs_graph_retention(out->index);
  for (int i = 0; direct && i < out->n_user; ++i) direct = vt.all_uids[size_t(i)] == out->user_uids[i];
  if (direct) out->exec_plan = g->plan_descriptor(out->index);
  *plan = std::move(out);
  return Status::ok();
}

// A finalized variant pack for ptrs (n user pointers in uid order) + workspace:
// a cached one, else a new one replacing the oldest slot. Caller holds the
// device's execution mutex.
Status variant_pack_for(const CudnnPlan& plan, void* const* ptrs, void* workspace, const char* op,
                        cudnnBackendDescriptor_t* out) {
  const int n = plan.n_user;
  for (CudnnPlan::Pack& p : plan.packs) {
    if (p.desc == nullptr || p.ptrs[n] != workspace) continue;
    bool same = true;
    for (int i = 0; i < n && same; ++i) same = p.ptrs[i] == ptrs[i];
    if (same) {
      *out = p.desc;
      return Status::ok();
    }
  }
  cudnnBackendDescriptor_t desc = nullptr;
  cudnnStatus_t s = fe::detail::create_descriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &desc);
  const char* step = "cudnnBackendCreateDescriptor (variant pack)";
  if (s == CUDNN_STATUS_SUCCESS) {
    step = "cudnnBackendSetAttribute (variant pack)";
    s = fe::detail::set_attribute(desc, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    if (s == CUDNN_STATUS_SUCCESS)
      s = fe::detail::set_attribute(desc, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    if (s == CUDNN_STATUS_SUCCESS)
      s = fe::detail::set_attribute(desc, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, plan.user_uids);
    if (s == CUDNN_STATUS_SUCCESS) {
      step = "cudnnBackendFinalize (variant pack)";
      s = fe::detail::finalize(desc);
    }
  }
  if (s != CUDNN_STATUS_SUCCESS) {
    if (desc != nullptr) fe::detail::destroy_descriptor(desc);
    return Status::errorf(op, ": ", step, " failed: ", cudnn_error(s));
  }
  CudnnPlan::Pack& slot = plan.packs[plan.next_pack];
  plan.next_pack = (plan.next_pack + 1) % kPackSlots;
  if (slot.desc != nullptr) fe::detail::destroy_descriptor(slot.desc);
  for (int i = 0; i < n; ++i) slot.ptrs[i] = ptrs[i];
  slot.ptrs[n] = workspace;
  slot.desc = desc;
  *out = desc;
  return Status::ok();
}

}  // namespace

bool cudnn_compiled() { return true; }

Status cudnn_library_status(size_t* version) {
  const CudnnLibrary& lib = cudnn_library();
  if (version) *version = lib.version;
  return lib.ok ? Status::ok() : Status::error(lib.reason);
}

Status cudnn_build_plan(const ConvParams& p, cudaStream_t stream, const CudnnPlanOptions& opt,
                        CudnnPlanResult* out) {
  *out = CudnnPlanResult{};
  const CudnnLibrary& lib = cudnn_library();
  if (!lib.ok) {
    out->reason = lib.reason;
    return Status::ok();
  }
  ConvShape shape;
  if (!make_shape(p, &shape, &out->reason)) return Status::ok();
  int device = 0;
  TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  if (device < 0 || device >= kMaxDevices) {
    out->reason = "device index " + std::to_string(device) + " is beyond the handle table";
    return Status::ok();
  }
  DeviceHandles& h = device_handles(device);
  std::lock_guard<std::mutex> plan_lock(h.plan_mu);
  try {
    Status handles = create_handle(&h.plan, "planning");
    if (handles.is_ok()) {
      std::lock_guard<std::mutex> exec_lock(h.exec_mu);
      handles = create_handle(&h.exec, "execution");
    }
    if (!handles.is_ok()) {  // a cuDNN that cannot start is a refusal, not an error
      out->reason = handles.message();
      return Status::ok();
    }
    const bool epilogue = p.bias != nullptr || p.activation != Activation::none;
    std::shared_ptr<CudnnPlan> plan;
    std::string why_fused, why_plain;
    if (epilogue) {
      TRT_FASTOPS_RETURN_IF_ERROR(plan_graph(p, shape, true, device, h, stream, opt, &plan, &why_fused));
    }
    bool separate = false;
    if (!plan) {
      TRT_FASTOPS_RETURN_IF_ERROR(plan_graph(p, shape, false, device, h, stream, opt, &plan, &why_plain));
      separate = epilogue;  // the launcher runs bias / activation after each execution
    }
    if (!plan) {
      out->reason = epilogue ? "fused graph: " + why_fused + "; plain graph: " + why_plain : why_plain;
      return Status::ok();
    }
    std::string engine;
    if (plan->graph->get_plan_name_at_index(plan->index, engine).is_bad()) engine = "?";
    std::string what = p.transpose ? "dgrad" : "fprop";
    if (!separate) {
      if (p.bias != nullptr) what += "+bias";
      if (p.activation != Activation::none) what += std::string("+") + activation_name(p.activation);
    } else {
      what += " (bias/activation by trt_fastops kernel)";
    }
    out->description = what + " engine=" + engine;
    out->separate_epilogue = separate;
    out->workspace = plan->workspace;
    out->plan = std::move(plan);
    return Status::ok();
  } catch (const std::exception& e) {
    out->plan.reset();
    out->reason = std::string("cudnn-frontend threw: ") + e.what();
    return Status::ok();
  } catch (...) {
    out->plan.reset();
    out->reason = "cudnn-frontend threw an unknown exception";
    return Status::ok();
  }
}

Status cudnn_execute(const CudnnPlan& plan, const ConvParams& p, void* workspace, cudaStream_t stream) {
  void* ptrs[kMaxUserSlots];
  fill_pointers(plan, p, ptrs);
  DeviceHandles& h = device_handles(plan.device);
  std::lock_guard<std::mutex> lock(h.exec_mu);
  try {
    if (h.exec == nullptr) return Status::errorf(conv_op_name(p), ": no cuDNN handle for device ", plan.device);
    if (!h.exec_stream_set || h.exec_stream != stream) {
      h.exec_stream_set = false;
      const cudnnStatus_t s = fe::detail::set_stream(h.exec, stream);
      if (s != CUDNN_STATUS_SUCCESS)
        return Status::errorf(conv_op_name(p), ": cudnnSetStream failed: ", cudnn_error(s));
      h.exec_stream = stream;
      h.exec_stream_set = true;
    }
    // Direct path (see CudnnPlan::exec_plan). A thread with no current CUDA
    // context (never the frameworks' threads) takes the front end's path, which
    // binds one first.
    if (plan.exec_plan != nullptr && fe::detail::has_current_context()) {
      cudnnBackendDescriptor_t pack = nullptr;
      TRT_FASTOPS_RETURN_IF_ERROR(variant_pack_for(plan, ptrs, workspace, conv_op_name(p), &pack));
      const cudnnStatus_t s = fe::detail::execute(h.exec, plan.exec_plan, pack);
      if (s != CUDNN_STATUS_SUCCESS)
        return Status::errorf(conv_op_name(p), ": cuDNN execution failed: ", cudnn_error(s));
      return Status::ok();
    }
    fe::error_t e = plan.graph->execute_plan_at_index(h.exec, ptrs, plan.n_user, workspace, plan.index);
    if (e.is_bad()) return Status::errorf(conv_op_name(p), ": cuDNN execution failed: ", e.get_message());
    return Status::ok();
  } catch (const std::exception& e) {
    return Status::errorf(conv_op_name(p), ": cuDNN execution threw: ", e.what());
  } catch (...) {
    return Status::errorf(conv_op_name(p), ": cuDNN execution threw an unknown exception");
  }
}

#endif  // TRT_FASTOPS_CONV_WITH_CUDNN

}  // namespace trt_fastops::conv
