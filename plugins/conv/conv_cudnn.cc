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
#include <atomic>
#include <cmath>
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
#include "plugins/conv/conv_replay.h"
#include "plugins/conv/conv_timing.h"

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

CudnnExecStats cudnn_exec_stats() { return CudnnExecStats{}; }

void cudnn_reset_exec_stats() {}

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
  // Private non-blocking stream for capturing CUDA graphs of executions
  // (cudnn_execute's graph replay), created on first use under exec_mu.
  cudaStream_t capture_stream = nullptr;
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

constexpr int kPackSlots = 8;         // finalized variant packs kept per plan (pointer sets)
constexpr int kCaptureAfterUses = 2;  // a pointer set's graph is captured on its second execution

namespace {
std::atomic<uint64_t> g_graph_launches{0}, g_graph_captures{0}, g_graph_failures{0}, g_capturing_executions{0};
}  // namespace

// Hidden like the front end's types it holds (only this file looks inside).
struct __attribute__((visibility("hidden"))) CudnnPlan {
  std::shared_ptr<PlanGraph> graph;
  int64_t index = -1;  // execution plan index inside graph
  int device = 0;
  int n_user = 0;
  int64_t user_uids[kMaxUserSlots] = {};  // variant-pack order (sorted uids)
  size_t workspace = 0;
  // Plain graph for a call with bias / activation: cudnn_execute runs
  // run_bias_activation after cuDNN (and captures it into the same graph).
  bool separate_epilogue = false;
  bool graph_replay = false;  // direct path and TRT_FASTOPS_CONV_GRAPH_REPLAY on

  // Direct path (set when the graph needs nothing per call beyond the user
  // pointers and the workspace: no front-end workspace or auxiliary kernels,
  // no internal tensors, no runtime-compiled kernels to retain in CUDA graphs):
  // the chosen plan's backend descriptor, owned by `graph`. Null: every execute
  // goes through the front end.
  cudnnBackendDescriptor_t exec_plan = nullptr;
  // Per pointer set (frameworks hand the same buffers to a layer run after run:
  // arenas, CUDA graphs): the finalized variant pack, so a hit is one
  // cudnnBackendExecute, and once the set was seen twice outside capture, a
  // CUDA graph of that execution (+ separate epilogue), so a hit is one
  // cudaGraphLaunch. Mutable cache of an otherwise immutable plan, guarded by
  // the execution mutex of `device` (every execute holds it).
  struct Pack {
    const void* key[5] = {};  // x, w, bias, y, workspace of the calls it serves
    cudnnBackendDescriptor_t desc = nullptr;
    cudaGraphExec_t graph_exec = nullptr;
    bool no_graph = false;  // capture / launch failed once: execute directly
    int uses = 0;
    uint64_t last_use = 0;  // for least-recently-used replacement

    void release() {
      if (desc != nullptr) fe::detail::destroy_descriptor(desc);  // host object: safe once enqueued
      // An executable still running is freed when it completes (CUDA's
      // contract), so this is safe with work in flight.
      if (graph_exec != nullptr && cudaGraphExecDestroy(graph_exec) != cudaSuccess) cudaGetLastError();
      *this = Pack{};
    }
  };
  mutable Pack packs[kPackSlots];
  mutable uint64_t clock = 0;
  // Executables of slots replaced while the caller's stream was being captured,
  // destroyed at the next execution outside capture (no graph teardown inside
  // somebody else's capture).
  mutable std::vector<cudaGraphExec_t> retired;

  CudnnPlan() = default;
  CudnnPlan(const CudnnPlan&) = delete;
  CudnnPlan& operator=(const CudnnPlan&) = delete;
  ~CudnnPlan() {
    for (Pack& p : packs) p.release();
    destroy_retired();
  }
  void destroy_retired() const {
    for (cudaGraphExec_t e : retired)
      if (cudaGraphExecDestroy(e) != cudaSuccess) cudaGetLastError();
    retired.clear();
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

void fill_pointers(int n_user, const int64_t* uids, const ConvParams& p, void** ptrs) {
  for (int i = 0; i < n_user; ++i) ptrs[i] = user_pointer(p, uids[i]);
}

bool has_epilogue(const ConvParams& p) { return p.bias != nullptr || p.activation != Activation::none; }

// One graph variant and the plans built for it, in heuristics' order.
struct GraphCandidates {
  std::shared_ptr<PlanGraph> graph;
  bool fused = false;          // bias / activation are pointwise nodes of the graph
  std::vector<int64_t> built;  // execution plan indices that built
  int n_user = 0;
  int64_t user_uids[kMaxUserSlots] = {};
  std::string why;  // why nothing was built
};

// Builds p's graph variant and up to `want` of its plans. Never an error: a
// variant cuDNN cannot run leaves out->built empty with out->why set.
void build_candidates(const ConvParams& p, const ConvShape& s, bool fuse, DeviceHandles& h,
                      const CudnnPlanOptions& opt, int want, GraphCandidates* out) {
  out->fused = fuse;
  out->graph = make_graph(p, s, fuse);
  PlanGraph& g = *out->graph;
  fe::error_t e = g.validate();
  if (e.is_good()) e = g.build_operation_graph(h.plan);
  // Each mode that fails is skipped by the front end (an error only when none
  // lists anything); B often ranks engines differently from A.
  if (e.is_good()) e = g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::B, fe::HeurMode_t::FALLBACK});
  if (e.is_bad()) {
    out->why = fe_message(e);
    return;
  }
  g.deselect_workspace_greater_than(opt.max_workspace);
  if (p.dtype == DType::f32 && !opt.allow_tf32) {
    g.deselect_numeric_notes({fe::NumericalNote_t::TENSOR_CORE, fe::NumericalNote_t::DOWN_CONVERT_INPUTS});
  } else if (p.dtype != DType::f32) {
    g.deselect_numeric_notes({fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION});
  }
  if (!opt.allow_runtime_compilation) g.deselect_behavior_notes({fe::BehaviorNote_t::RUNTIME_COMPILATION});
  // cuDNN 9.14's FFT engines write past y when begin and end padding differ:
  // compute-sanitizer caught fft2d_c2r_32x32 writing up to 28 bytes after a
  // 504-byte y (float32 ConvTranspose x[1,4,3,4] w[4,3,2,2], group 2, strides
  // [1,2], pads [0,1,1,0]) while autotuning timed it. Such shapes keep the other engines.
  if (s.pre != s.post) g.deselect_numeric_notes({fe::NumericalNote_t::FFT});
  e = g.check_support();
  if (e.is_bad()) {
    out->why = fe_message(e);
    return;
  }
  std::vector<std::string> seen;  // engine + knob tags: modes A and B list many configurations twice
  std::string failures;
  for (int64_t i = 0; i < g.get_execution_plan_count() && int(out->built.size()) < want; ++i) {
    std::string tag;
    if (g.get_plan_name_at_index(i, tag).is_good()) {
      if (std::find(seen.begin(), seen.end(), tag) != seen.end()) continue;
      seen.push_back(tag);
    }
    fe::error_t be = g.build_plan_at_index(i);
    if (be.is_good()) {
      out->built.push_back(i);
    } else if (failures.size() < 512) {
      failures += "; plan " + std::to_string(i) + ": " + fe_message(be);
    }
  }
  if (out->built.empty()) {
    out->why = "no execution plan could be built" + failures;
    return;
  }
  e = g.prepare_variant_pack_template();
  std::vector<int64_t> uids;
  if (e.is_good()) uids = g.get_variant_pack_uids_sorted();
  if (e.is_bad() || uids.empty() || uids.size() > size_t(kMaxUserSlots)) {
    out->why = e.is_bad() ? fe_message(e) : "unexpected variant pack of " + std::to_string(uids.size()) + " tensors";
    out->built.clear();
    return;
  }
  out->n_user = static_cast<int>(uids.size());
  for (size_t i = 0; i < uids.size(); ++i) {
    if (uids[i] < UID_X || uids[i] > UID_Y) {
      out->why = "variant pack names an unknown tensor uid " + std::to_string(uids[i]);
      out->built.clear();
      return;
    }
    out->user_uids[i] = uids[i];
  }
}

struct Candidate {
  const GraphCandidates* variant = nullptr;
  int64_t index = -1;
};

// One call as the launcher would make it: the plan through the front end, then
// (plain graph for a call with an epilogue) our bias/activation kernel.
bool run_candidate(const Candidate& c, cudnnHandle_t handle, const ConvParams& p, void* ws, cudaStream_t stream) {
  void* ptrs[kMaxUserSlots];
  fill_pointers(c.variant->n_user, c.variant->user_uids, p, ptrs);
  if (c.variant->graph->execute_plan_at_index(handle, ptrs, c.variant->n_user, ws, c.index).is_bad()) return false;
  if (!c.variant->fused && has_epilogue(p)) return run_bias_activation(p, stream) == cudaSuccess;
  return true;
}

// Times each candidate on p's buffers (handle bound to `stream`) with the
// planning harness (CallTimer: median of several runs queued behind a GPU
// wait). *best: the fastest candidate's position, -1 when none ran; times[i]:
// candidate i's median microseconds (-1 when it did not run).
Status autotune(const std::vector<Candidate>& candidates, cudnnHandle_t handle, const ConvParams& p,
                cudaStream_t stream, int* best, std::vector<float>* times) {
  *best = -1;
  times->assign(candidates.size(), -1.f);
  int64_t max_ws = 0;
  for (const Candidate& c : candidates) {
    int64_t ws = 0;
    if (c.variant->graph->get_workspace_size_plan_at_index(c.index, ws).is_good()) max_ws = std::max(max_ws, ws);
  }
  void* ws = nullptr;
  if (max_ws > 0)
    TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(cudaMalloc(&ws, size_t(max_ws)), "cudaMalloc (cuDNN autotune workspace)"));
  Status st = Status::ok();
  {
    CallTimer timer;
    float best_us = 0.f;
    for (size_t i = 0; st.is_ok() && i < candidates.size(); ++i) {
      const Candidate& c = candidates[i];
      float us = -1.f;
      st = timer.time(stream, [&] { return run_candidate(c, handle, p, ws, stream); }, &us);
      if (us < 0.f) continue;  // this candidate failed: skip it
      (*times)[i] = us;
      if (*best < 0 || us < best_us) {
        *best = static_cast<int>(i);
        best_us = us;
      }
    }
  }
  if (ws) {
    const Status fst = cuda_status(cudaFree(ws), "cudaFree (cuDNN autotune workspace)");
    if (st.is_ok()) st = fst;
  }
  return st;
}

// The executable plan for candidate c. Null with *why set when its pieces
// cannot be queried.
std::shared_ptr<CudnnPlan> make_plan(const Candidate& c, const ConvParams& p, int device, const CudnnPlanOptions& opt,
                                     std::string* why) {
  const GraphCandidates& v = *c.variant;
  PlanGraph& g = *v.graph;
  auto out = std::make_shared<CudnnPlan>();
  out->graph = v.graph;
  out->index = c.index;
  out->device = device;
  out->n_user = v.n_user;
  for (int i = 0; i < v.n_user; ++i) out->user_uids[i] = v.user_uids[i];
  out->separate_epilogue = !v.fused && has_epilogue(p);
  int64_t ws = 0;
  fe::error_t e = g.get_workspace_size_plan_at_index(out->index, ws);
  if (e.is_bad() || ws < 0) {
    *why = "workspace query failed: " + fe_message(e);
    return nullptr;
  }
  out->workspace = static_cast<size_t>(ws);
  // The direct path needs exactly what the front end would do per call to be
  // "set the user pointers and the workspace": checked here once.
  const auto& vt = g.varpack_template;
  bool direct = g.has_plan(out->index) && !fe::isLoggingTensorDumpEnabled() &&
                vt.all_uids.size() == size_t(out->n_user) && vt.user_slots.size() == size_t(out->n_user) &&
                vt.workspace_slots.empty() && vt.replacement_slots.empty() && vt.backend_slots.empty() &&
                g.plan_backend_workspace(out->index) == ws && !g.plan_needs_graph_retention(out->index);
  for (int i = 0; direct && i < out->n_user; ++i) direct = vt.all_uids[size_t(i)] == out->user_uids[i];
  if (direct) out->exec_plan = g.plan_descriptor(out->index);
  out->graph_replay = direct && opt.graph_replay;
  return out;
}

// The slot for p's pointers + workspace: a cached one, else a new finalized
// variant pack in the least recently used slot. capturing: the caller's stream
// is being captured, so a replaced slot's graph executable is retired, not
// destroyed. Caller holds the device's execution mutex.
Status pack_for(const CudnnPlan& plan, const ConvParams& p, void* workspace, bool capturing, const char* op,
                CudnnPlan::Pack** out) {
  if (!capturing && !plan.retired.empty()) plan.destroy_retired();
  const void* key[5] = {p.x, p.w, p.bias, p.y, workspace};
  CudnnPlan::Pack* victim = &plan.packs[0];
  for (CudnnPlan::Pack& s : plan.packs) {
    if (s.desc != nullptr && std::memcmp(s.key, key, sizeof(key)) == 0) {
      if (s.uses < (1 << 30)) ++s.uses;
      s.last_use = ++plan.clock;
      *out = &s;
      return Status::ok();
    }
    if (s.last_use < victim->last_use) victim = &s;  // empty slots have 0
  }
  void* ptrs[kMaxUserSlots];
  fill_pointers(plan.n_user, plan.user_uids, p, ptrs);
  const int n = plan.n_user;
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
  if (capturing && victim->graph_exec != nullptr) {
    plan.retired.push_back(victim->graph_exec);
    victim->graph_exec = nullptr;
  }
  victim->release();
  std::memcpy(victim->key, key, sizeof(key));
  victim->desc = desc;
  victim->uses = 1;
  victim->last_use = ++plan.clock;
  *out = victim;
  return Status::ok();
}

// Binds the execution handle to `stream` (skipped when it already is).
Status bind_exec_stream(DeviceHandles& h, cudaStream_t stream, const char* op) {
  if (h.exec_stream_set && h.exec_stream == stream) return Status::ok();
  h.exec_stream_set = false;
  const cudnnStatus_t s = fe::detail::set_stream(h.exec, stream);
  if (s != CUDNN_STATUS_SUCCESS) return Status::errorf(op, ": cudnnSetStream failed: ", cudnn_error(s));
  h.exec_stream = stream;
  h.exec_stream_set = true;
  return Status::ok();
}

Status run_epilogue(const CudnnPlan& plan, const ConvParams& p, cudaStream_t stream) {
  if (!plan.separate_epilogue) return Status::ok();
  const cudaError_t err = run_bias_activation(p, stream);
  if (err == cudaSuccess) return Status::ok();
  return Status::errorf(conv_op_name(p), ": bias/activation kernel after cuDNN failed: ", cuda_error_string(err));
}

// True when `stream` is being captured, or when that cannot be told (then no
// graph is captured or launched for this call either).
bool stream_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();  // not sticky; the call just executes directly
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

// Marks the slot "execute directly from now on" after a failed capture or
// launch, clearing the (non-sticky) CUDA error it left.
void give_up_graph(CudnnPlan::Pack& pack) {
  cudaGetLastError();
  if (pack.graph_exec != nullptr && cudaGraphExecDestroy(pack.graph_exec) != cudaSuccess) cudaGetLastError();
  pack.graph_exec = nullptr;
  pack.no_graph = true;
  g_graph_failures.fetch_add(1, std::memory_order_relaxed);
}

// Captures plan's execution for `pack` (+ the separate epilogue) on the
// device's capture stream and instantiates it into pack.graph_exec. Nothing
// runs: the caller launches it. False (slot marked "no graph") on any failure.
// Caller holds the execution mutex; the handle is left bound to the capture
// stream (bind_exec_stream rebinds before the next direct execute).
bool capture_graph(DeviceHandles& h, const CudnnPlan& plan, CudnnPlan::Pack& pack, const ConvParams& p) {
  if (h.capture_stream == nullptr) {
    cudaStream_t s = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
      give_up_graph(pack);
      return false;
    }
    h.capture_stream = s;  // per device, never destroyed (like the handles)
  }
  cudaStream_t cs = h.capture_stream;
  if (!bind_exec_stream(h, cs, "").is_ok()) {
    give_up_graph(pack);
    return false;
  }
  const cudaGraphExec_t exec = capture_graph_exec(cs, [&](cudaStream_t s) {
    if (fe::detail::execute(h.exec, plan.exec_plan, pack.desc) != CUDNN_STATUS_SUCCESS) return false;
    return !plan.separate_epilogue || run_bias_activation(p, s) == cudaSuccess;
  });
  if (exec == nullptr) {
    give_up_graph(pack);
    return false;
  }
  pack.graph_exec = exec;
  g_graph_captures.fetch_add(1, std::memory_order_relaxed);
  return true;
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
    const bool epilogue = has_epilogue(p);
    const bool tune = opt.autotune && opt.max_candidates > 1;
    const int want = tune ? opt.max_candidates : 1;
    // Fused first (heuristics' first choice when nothing is timed, and the
    // winner of a tie); the plain graph too when timing, or when fusing fails.
    GraphCandidates fused, plain;
    if (epilogue) build_candidates(p, shape, true, h, opt, want, &fused);
    if (!epilogue || tune || fused.built.empty()) build_candidates(p, shape, false, h, opt, want, &plain);
    std::vector<Candidate> candidates;
    for (const GraphCandidates* v : {&fused, &plain})
      for (int64_t i : v->built) candidates.push_back(Candidate{v, i});
    if (candidates.empty()) {
      out->reason = epilogue ? "fused graph: " + fused.why + "; plain graph: " + plain.why : plain.why;
      return Status::ok();
    }
    int chosen = 0;
    std::vector<float> times;
    // A sole candidate is timed only when asked (the launcher compares it
    // with its own kernel); it then must run, like any timed candidate.
    if (candidates.size() > 1 || opt.time_chosen) {
      if (fe::detail::set_stream(h.plan, stream) != CUDNN_STATUS_SUCCESS) {
        out->reason = "cudnnSetStream failed";
        return Status::ok();
      }
      const Status tuned = autotune(candidates, h.plan, p, stream, &chosen, &times);
      if (!tuned.is_ok()) {
        // Timing is an optimisation: keep heuristics' first choice (a CUDA error
        // that is sticky will surface at execution anyway).
        cudaGetLastError();
        chosen = 0;
        times.clear();
      }
      if (chosen < 0) {
        out->reason = "no built plan executed";
        return Status::ok();
      }
    }
    const Candidate& best = candidates[size_t(chosen)];
    std::shared_ptr<CudnnPlan> plan = make_plan(best, p, device, opt, &out->reason);
    if (!plan) return Status::ok();
    std::string engine;
    if (plan->graph->get_plan_name_at_index(plan->index, engine).is_bad()) engine = "?";
    std::string epi;
    if (p.bias != nullptr) epi += "+bias";
    if (p.activation != Activation::none) epi += std::string("+") + activation_name(p.activation);
    std::string what = p.transpose ? "dgrad" : "fprop";
    if (!plan->separate_epilogue) what += epi;
    what += " engine=" + engine;
    if (plan->separate_epilogue) what += " " + epi + " by trt_fastops kernel";
    if (candidates.size() > 1) {
      // "(fastest of 4 fused + 4 plain; fused 14.2 us, plain 12.3 us)": each
      // variant's best median, so the choice can be checked from outside.
      float best_us[2] = {-1.f, -1.f};  // fused, plain
      for (size_t i = 0; i < times.size(); ++i) {
        float& b = best_us[candidates[i].variant->fused ? 0 : 1];
        if (times[i] >= 0.f && (b < 0.f || times[i] < b)) b = times[i];
      }
      auto us = [](float t) { return t < 0.f ? std::string("-") : format_us(t); };
      if (epilogue) {
        what += str_cat(" (fastest of ", fused.built.size(), " fused + ", plain.built.size(), " plain; fused ",
                        us(best_us[0]), ", plain ", us(best_us[1]), ")");
      } else {
        what += str_cat(" (fastest of ", plain.built.size(), ": ", us(best_us[1]), ")");
      }
    }
    out->description = std::move(what);
    if (size_t(chosen) < times.size() && times[size_t(chosen)] >= 0.f) out->time_us = times[size_t(chosen)];
    out->separate_epilogue = plan->separate_epilogue;
    out->graph_replay = plan->graph_replay;
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
  const char* op = conv_op_name(p);
  DeviceHandles& h = device_handles(plan.device);
  std::lock_guard<std::mutex> lock(h.exec_mu);
  try {
    if (h.exec == nullptr) return Status::errorf(op, ": no cuDNN handle for device ", plan.device);
    // Direct path (see CudnnPlan::exec_plan). A thread with no current CUDA
    // context (never the frameworks' threads) takes the front end's path, which
    // binds one first.
    if (plan.exec_plan != nullptr && fe::detail::has_current_context()) {
      // A caller's stream under capture (ORT / TensorRT CUDA graphs) gets the
      // direct execute, which its graph records; no graph is captured,
      // launched or destroyed then.
      const bool capturing = plan.graph_replay && stream_capturing(stream);
      if (capturing) g_capturing_executions.fetch_add(1, std::memory_order_relaxed);
      CudnnPlan::Pack* pack = nullptr;
      TRT_FASTOPS_RETURN_IF_ERROR(pack_for(plan, p, workspace, capturing, op, &pack));
      if (plan.graph_replay && !capturing && !pack->no_graph &&
          (pack->graph_exec != nullptr || (pack->uses >= kCaptureAfterUses && capture_graph(h, plan, *pack, p)))) {
        if (cudaGraphLaunch(pack->graph_exec, stream) == cudaSuccess) {
          g_graph_launches.fetch_add(1, std::memory_order_relaxed);
          return Status::ok();
        }
        give_up_graph(*pack);  // and execute directly below
      }
      TRT_FASTOPS_RETURN_IF_ERROR(bind_exec_stream(h, stream, op));
      const cudnnStatus_t s = fe::detail::execute(h.exec, plan.exec_plan, pack->desc);
      if (s != CUDNN_STATUS_SUCCESS) return Status::errorf(op, ": cuDNN execution failed: ", cudnn_error(s));
      return run_epilogue(plan, p, stream);
    }
    TRT_FASTOPS_RETURN_IF_ERROR(bind_exec_stream(h, stream, op));
    void* ptrs[kMaxUserSlots];
    fill_pointers(plan.n_user, plan.user_uids, p, ptrs);
    fe::error_t e = plan.graph->execute_plan_at_index(h.exec, ptrs, plan.n_user, workspace, plan.index);
    if (e.is_bad()) return Status::errorf(op, ": cuDNN execution failed: ", e.get_message());
    return run_epilogue(plan, p, stream);
  } catch (const std::exception& e) {
    return Status::errorf(op, ": cuDNN execution threw: ", e.what());
  } catch (...) {
    return Status::errorf(op, ": cuDNN execution threw an unknown exception");
  }
}

CudnnExecStats cudnn_exec_stats() {
  CudnnExecStats s;
  s.graph_launches = g_graph_launches.load(std::memory_order_relaxed);
  s.graph_captures = g_graph_captures.load(std::memory_order_relaxed);
  s.graph_failures = g_graph_failures.load(std::memory_order_relaxed);
  s.capturing_executions = g_capturing_executions.load(std::memory_order_relaxed);
  return s;
}

void cudnn_reset_exec_stats() {
  g_graph_launches = 0;
  g_graph_captures = 0;
  g_graph_failures = 0;
  g_capturing_executions = 0;
}

#endif  // TRT_FASTOPS_CONV_WITH_CUDNN

}  // namespace trt_fastops::conv
