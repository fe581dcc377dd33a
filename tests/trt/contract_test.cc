// Contract test for trt_fastops' TensorRT plugins (libtrt_fastops_trt.so and
// libtrt_fastops_trt_autoload.so): drives each plugin exactly as TensorRT
// would, with test doubles (trt_doubles.h) in place of libnvinfer, which this
// program impersonates by exporting getPluginRegistry / getLogger /
// getInferLibVersion.
//
// Layout: contract_harness.h (checks, fields, plugin access, GPU helpers),
// this file (loading, the norm plugins, main), one section file per further
// plugin family (contract_conv.h, contract_attention.h).
//
// Usage: trt_fastops_trt_contract_test [--lib-dir DIR] [--no-enqueue] [--require-gpu] [-v]
//   --lib-dir      where the two libraries are (default: the build's lib dir,
//                  or $TRT_FASTOPS_TRT_LIB_DIR)
//   --no-enqueue   skip the GPU part even if a GPU is present
//   --require-gpu  fail (instead of skipping enqueue) without a CUDA device
// Prints "trt contract: N passed, M failed"; exit code 0 only if M == 0.
#include <NvInferRuntime.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "plugins/common/dtype.h"
#include "tests/trt/contract_harness.h"

// ---------------------------------------------------------------------------
// libnvinfer stand-ins, found by the plugin libraries through dlsym.

static TestRegistry g_registry;
static TestLogger g_global_logger("getLogger");
static int32_t g_runtime_version = NV_TENSORRT_MAJOR * 10000 + NV_TENSORRT_MINOR * 100 + NV_TENSORRT_PATCH;

extern "C" TENSORRTAPI nvinfer1::IPluginRegistry* getPluginRegistry() noexcept { return &g_registry; }
extern "C" TENSORRTAPI nvinfer1::ILogger* getLogger() noexcept { return &g_global_logger; }
extern "C" TENSORRTAPI int32_t getInferLibVersion() noexcept { return g_runtime_version; }

// ---------------------------------------------------------------------------
// The spec, written out independently of plugins/norm/norm_op.

struct OpSpec {
  const char* name;
  std::vector<const char*> inputs;   // slot order
  std::vector<bool> input_optional;
  std::vector<const char*> outputs;  // slot order
  std::vector<int> stat_outputs;     // float32 outputs (Mean, InvStdDev)
  bool has_stash_type;
  bool rms;
  int skip, scale, b, bias;  // input slots, -1 when absent
  int mean, inv, sum;        // output slots, -1 when absent
};

static const OpSpec SPECS[] = {
    {"LayerNorm", {"X", "Scale", "B"}, {false, false, true}, {"Y", "Mean", "InvStdDev"}, {1, 2}, true, false,
     -1, 1, 2, -1, 1, 2, -1},
    {"SkipLayerNorm", {"X", "Skip", "Scale", "B", "Bias"}, {false, false, false, true, true},
     {"Y", "Mean", "InvStdDev", "Sum"}, {1, 2}, false, false, 1, 2, 3, 4, 1, 2, 3},
    {"RMSNorm", {"X", "Scale", "Skip", "Bias"}, {false, false, true, true}, {"Y", "Sum"}, {}, true, true, 2, 1, -1,
     3, -1, -1, 1},
};

static bool is_stat(const OpSpec& op, int slot) {
  for (int s : op.stat_outputs)
    if (s == slot) return true;
  return false;
}
static int all_inputs_mask(const OpSpec& op) { return (1 << op.inputs.size()) - 1; }
static int all_outputs_mask(const OpSpec& op) { return (1 << op.outputs.size()) - 1; }
static int nb_outputs_of(int mask) { return 32 - __builtin_clz(unsigned(mask | 1)); }

static PluginPtr create(const Env& env, const OpSpec& op, Fields& f, nv::TensorRTPhase phase = nv::TensorRTPhase::kBUILD,
                        const char* layer = "node_7") {
  auto* c = find_creator(env, op.name, "1", "trt_fastops");
  if (!c) return PluginPtr();
  return PluginPtr(c->createPlugin(layer, f.get(), phase));
}

// The op's natural input shapes for X of `x` and normalized dims from `axis`.
static std::vector<std::vector<int64_t>> input_shapes(const OpSpec& op, int mask, const std::vector<int64_t>& x,
                                                      int axis) {
  const int rank = int(x.size());
  const int a = axis < 0 ? axis + rank : axis;
  std::vector<int64_t> norm(x.begin() + a, x.end());
  std::vector<std::vector<int64_t>> shapes;
  for (int s = 0; s < int(op.inputs.size()); ++s) {
    if (!(mask >> s & 1)) continue;
    if (s == 0 || s == op.skip)
      shapes.push_back(x);
    else
      shapes.push_back(norm);
  }
  return shapes;
}

// ---------------------------------------------------------------------------
// Sections

// Every plugin the library must provide (name; version "1", namespace "trt_fastops").
static const char* const ALL_PLUGINS[] = {"LayerNorm", "SkipLayerNorm", "RMSNorm", "Conv", "ConvTranspose",
                                          "Attention"};
static const int NB_PLUGINS = int(sizeof(ALL_PLUGINS) / sizeof(ALL_PLUGINS[0]));
static const std::string NB_PLUGINS_STR = std::to_string(NB_PLUGINS);

static void test_creators(const Env& env) {
  std::printf("[creators]\n");
  check(int(env.creators.size()) == NB_PLUGINS, "getCreators returns " + NB_PLUGINS_STR + " creators (got " +
                                                    std::to_string(env.creators.size()) + ")");
  for (const OpSpec& op : SPECS) {
    auto* c = find_creator(env, op.name, "1", "trt_fastops");
    check(c != nullptr, std::string(op.name) + ": creator found by name/version/namespace");
    if (!c) continue;
    check(find_creator(env, op.name, "2", "trt_fastops") == nullptr, std::string(op.name) + ": no version 2");
    check(find_creator(env, op.name, "1", "") == nullptr, std::string(op.name) + ": not in the default namespace");
    nv::InterfaceInfo info = c->getInterfaceInfo();
    check(str(info.kind) == "PLUGIN CREATOR_V3ONE" && info.major == 1,
          std::string(op.name) + ": creator interface PLUGIN CREATOR_V3ONE 1");
    const nv::PluginFieldCollection* names = c->getFieldNames();
    std::vector<std::string> expect = {"axis", "epsilon", "inputs", "outputs"};
    if (op.has_stash_type) expect.push_back("stash_type");
    bool all = names != nullptr;
    for (const std::string& e : expect) {
      bool found = false;
      for (int32_t i = 0; names && i < names->nbFields; ++i) found = found || str(names->fields[i].name) == e;
      all = all && found;
    }
    check(all && names->nbFields == int32_t(expect.size()),
          std::string(op.name) + ": getFieldNames lists exactly axis, epsilon, inputs, outputs" +
              (op.has_stash_type ? ", stash_type" : ""));
  }
}

static void test_fields(const Env& env) {
  std::printf("[fields]\n");
  for (const OpSpec& op : SPECS) {
    const std::string n = op.name;
    {  // defaults
      Fields f;
      PluginPtr p = create(env, op, f);
      check(bool(p), n + ": createPlugin with no fields (all defaults)");
      if (p) {
        auto d = dump_fields(runtime_of(p.get())->getFieldsToSerialize());
        check(d.count("axis") && d["axis"].value == -1, n + ": default axis -1");
        check(d.count("epsilon") && std::fabs(d["epsilon"].value - 1e-5) < 1e-12, n + ": default epsilon 1e-5");
        check(op.has_stash_type == bool(d.count("stash_type")) && (!op.has_stash_type || d["stash_type"].value == 1),
              n + ": stash_type 1 serialized iff the op has it");
        check(d.count("outputs") && d["outputs"].value == 1, n + ": default outputs = 1 (Y)");
        check(!d.count("inputs"), n + ": no 'inputs' field unless given");
        check(build_of(p.get())->getNbOutputs() == 1, n + ": one output by default");
      }
    }
    {  // int32 / int64 ints, float32 / float64 floats
      Fields a;
      a.int32("axis", -2).float64("epsilon", 1e-3);
      if (op.has_stash_type) a.int32("stash_type", 1);
      PluginPtr p = create(env, op, a);
      check(bool(p), n + ": int32 axis, float64 epsilon accepted");
      if (p) {
        auto d = dump_fields(runtime_of(p.get())->getFieldsToSerialize());
        check(d["axis"].value == -2 && std::fabs(d["epsilon"].value - 1e-3) < 1e-9,
              n + ": int32 axis / float64 epsilon values kept");
      }
      Fields b;
      b.int64("axis", 1).float32("epsilon", 2e-6f).int64("outputs", 1);
      if (op.has_stash_type) b.int64("stash_type", 1);
      PluginPtr q = create(env, op, b);
      check(bool(q), n + ": int64 axis, float32 epsilon accepted");
      if (q) {
        auto d = dump_fields(runtime_of(q.get())->getFieldsToSerialize());
        check(d["axis"].value == 1 && std::fabs(d["epsilon"].value - 2e-6) < 1e-12,
              n + ": int64 axis / float32 epsilon values kept");
      }
    }
    // Refusals: nullptr, and the message (op name, what, layer) reaches the
    // logger (a creator has no execution context, so no recorder).
    auto refused = [&](Fields& f, const std::string& expect, const std::string& what) {
      env.logger->clear();
      PluginPtr p = create(env, op, f);
      const bool ok = !p && env.logger->saw_error(expect) && env.logger->saw_error("(layer 'node_7')");
      check(ok, n + ": " + what + " refused with \"" + expect + "\"" +
                    (ok ? "" : " (got \"" + env.logger->last_error() + "\")"));
    };
    { Fields f; f.float32("axis", 1.f); refused(f, n + ": attribute 'axis' is a float, expected an int", "float axis"); }
    { Fields f; f.float64("axis", 1.0); refused(f, n + ": attribute 'axis' is a float, expected an int", "float64 axis"); }
    { Fields f; f.int32("epsilon", 1); refused(f, n + ": attribute 'epsilon' is an int, expected a float", "int epsilon"); }
    { Fields f; f.string("axis", "-1"); refused(f, n + ": attribute 'axis' is a string, expected an int", "string axis"); }
    { Fields f; f.int32_list("axis", {1, 2}); refused(f, n + ": attribute 'axis' is a list of 2 ints, expected an int", "list axis"); }
    { Fields f; f.float32("alpha", 1.f); refused(f, n + ": unknown attribute 'alpha'", "unknown float field"); }
    { Fields f; f.string("plugin_namespace", "x"); refused(f, n + ": unknown attribute 'plugin_namespace'", "unknown string field"); }
    { Fields f; f.float32("epsilon", -1.f); refused(f, n + ": attribute 'epsilon' is -1, expected a finite float >= 0", "negative epsilon"); }
    if (op.has_stash_type) {
      Fields f;
      f.int32("stash_type", 0);
      refused(f, n + ": attribute 'stash_type' is 0, expected 1", "stash_type 0");
    } else {
      Fields f;
      f.int32("stash_type", 1);
      refused(f, n + ": unknown attribute 'stash_type'", "stash_type on an op without it");
    }
    { Fields f; f.int32("outputs", 2); refused(f, n + ": field 'outputs' is 2, expected a bitmask", "outputs without Y"); }
    {
      Fields f;
      f.int32("outputs", 1 << op.outputs.size());
      refused(f, n + ": field 'outputs' is " + std::to_string(1 << op.outputs.size()), "outputs beyond the op's slots");
    }
    { Fields f; f.float32("inputs", 3.f); refused(f, n + ": field 'inputs' is a float, expected an int", "float inputs"); }
    {
      Fields f;
      f.int32("inputs", 1 << op.inputs.size());
      refused(f, n + ": field 'inputs' is " + std::to_string(1 << op.inputs.size()), "inputs beyond the op's slots");
    }
    {
      Fields f;
      f.int32("inputs", all_inputs_mask(op) & ~(1 << op.scale));
      refused(f, n + ": input 'Scale' (index " + std::to_string(op.scale) + ") is missing; it is required",
              "inputs without Scale");
    }
    if (op.rms) {
      Fields f;
      f.int32("inputs", 0b11).int32("outputs", 0b11);
      refused(f, n + ": output 'Sum' (index 1) is requested without input 'Skip' (index 2)", "Sum without Skip");
    }
  }
}

static void test_capabilities(const Env& env) {
  std::printf("[capabilities]\n");
  for (const OpSpec& op : SPECS) {
    const std::string n = op.name;
    Fields f;
    PluginPtr p = create(env, op, f);
    if (!p) {
      check(false, n + ": create");
      continue;
    }
    check_v3_interfaces(env, p.get(), n);
    auto* b = build_of(p.get());
    check(b && b->getWorkspaceSize(nullptr, 0, nullptr, 0) == 0, n + ": getWorkspaceSize == 0");
  }
}

// getOutputShapes with constant and symbolic dims.
static void test_output_shapes(const Env& env) {
  std::printf("[getOutputShapes]\n");
  for (const OpSpec& op : SPECS) {
    const std::string n = op.name;
    for (int axis : {-1, 1}) {
      Fields f;
      f.int64("axis", axis).int32("inputs", all_inputs_mask(op)).int32("outputs", all_outputs_mask(op));
      PluginPtr p = create(env, op, f);
      if (!p) {
        check(false, n + ": create with all inputs/outputs");
        continue;
      }
      auto* b = build_of(p.get());
      const int nb_out = b->getNbOutputs();
      check(nb_out == int(op.outputs.size()), n + ": all outputs -> getNbOutputs " + std::to_string(op.outputs.size()));
      for (bool symbolic : {false, true}) {
        TestExprBuilder eb;
        // X = [B, S, 8] symbolic in B and S, or [2, 3, 8].
        const nv::IDimensionExpr* d0 = symbolic ? static_cast<const nv::IDimensionExpr*>(eb.symbol("B")) : eb.constant_expr(2);
        const nv::IDimensionExpr* d1 = symbolic ? static_cast<const nv::IDimensionExpr*>(eb.symbol("S")) : eb.constant_expr(3);
        const nv::IDimensionExpr* d2 = eb.constant_expr(8);
        ExprShape x{{d0, d1, d2}};
        std::vector<nv::DimsExprs> ins;
        for (int s = 0; s < int(op.inputs.size()); ++s) {
          if (s == 0 || s == op.skip)
            ins.push_back(to_exprs(x));
          else if (axis == -1)
            ins.push_back(to_exprs(ExprShape{{eb.constant_expr(8)}}));
          else
            ins.push_back(to_exprs(ExprShape{{d1, eb.constant_expr(8)}}));  // normalized [S, 8]
        }
        std::vector<nv::DimsExprs> outs(static_cast<size_t>(nb_out));
        const int made_before = eb.constants_made();
        int rc = b->getOutputShapes(ins.data(), int32_t(ins.size()), nullptr, 0, outs.data(), nb_out, eb);
        const std::string tag = n + " axis " + std::to_string(axis) + (symbolic ? " symbolic" : " constant");
        check(rc == 0, tag + ": getOutputShapes succeeds" + (rc ? " (" + env.logger->last_error() + ")" : ""));
        if (rc != 0) continue;
        for (int k = 0; k < nb_out; ++k) {
          bool ok = outs[size_t(k)].nbDims == 3;
          const int a = axis < 0 ? 2 : axis;
          for (int j = 0; ok && j < 3; ++j) {
            const nv::IDimensionExpr* e = outs[size_t(k)].d[j];
            if (is_stat(op, k) && j >= a)
              ok = e && e->isConstant() && e->getConstantValue() == 1;
            else
              ok = e == x.d[size_t(j)];  // X's own expression, symbolic or not
          }
          check(ok, tag + ": output " + op.outputs[size_t(k)] +
                        (is_stat(op, k) ? " = X.shape[:axis] + 1s" : " = X's dims"));
        }
        if (op.stat_outputs.empty()) check(eb.constants_made() == made_before, tag + ": no constants needed");
      }
    }
    // Validation of what is known at build time.
    {
      Fields f;
      f.int32("inputs", all_inputs_mask(op));
      PluginPtr p = create(env, op, f);
      auto* b = p ? build_of(p.get()) : nullptr;
      if (!b) {
        check(false, n + ": create");
        continue;
      }
      TestExprBuilder eb;
      ExprShape x{{eb.symbol("B"), eb.constant_expr(8)}};
      std::vector<nv::DimsExprs> ins;
      for (int s = 0; s < int(op.inputs.size()); ++s)
        ins.push_back(s == 0 || s == op.skip ? to_exprs(x)
                                             : to_exprs(ExprShape{{eb.constant_expr(s == op.scale ? 7 : 8)}}));
      nv::DimsExprs out[4];
      env.logger->clear();
      int rc = b->getOutputShapes(ins.data(), int32_t(ins.size()), nullptr, 0, out, 1, eb);
      const std::string expect = n + ": input 'Scale' (index " + std::to_string(op.scale) +
                                 ") has shape [7], expected the normalized shape [8]";
      check(rc == -1 && env.logger->saw_error(expect), n + ": Scale [7] for cols 8 refused at build time (" +
                                                           env.logger->last_error() + ")");
      // A symbolic normalized dim is left to run time.
      ExprShape xs{{eb.constant_expr(2), eb.symbol("H")}};
      ins.clear();
      for (int s = 0; s < int(op.inputs.size()); ++s)
        ins.push_back(s == 0 || s == op.skip ? to_exprs(xs) : to_exprs(ExprShape{{eb.constant_expr(5)}}));
      rc = b->getOutputShapes(ins.data(), int32_t(ins.size()), nullptr, 0, out, 1, eb);
      check(rc == 0, n + ": Scale [5] against a symbolic normalized dim accepted at build time");
      // axis out of range
      Fields g;
      g.int64("axis", 2);
      PluginPtr q = create(env, op, g);
      auto* bq = q ? build_of(q.get()) : nullptr;
      std::vector<nv::DimsExprs> two;
      two.push_back(to_exprs(x));
      for (int s = 1; s < int(op.inputs.size()); ++s)
        if (!op.input_optional[size_t(s)]) two.push_back(s == op.skip ? to_exprs(x) : to_exprs(ExprShape{{eb.constant_expr(8)}}));
      env.logger->clear();
      rc = bq ? bq->getOutputShapes(two.data(), int32_t(two.size()), nullptr, 0, out, 1, eb) : 0;
      check(rc == -1 && env.logger->saw_error(n + ": attribute 'axis' is 2, expected a value in [-2, 2)"),
            n + ": axis 2 for rank 2 refused (" + env.logger->last_error() + ")");
      // Wrong output count, shape inputs.
      env.logger->clear();
      rc = b->getOutputShapes(ins.data(), int32_t(ins.size()), nullptr, 0, out, 2, eb);
      check(rc == -1 && env.logger->saw_error("the layer has 2 outputs, but the plugin was created with 1"),
            n + ": 2 outputs for a 1-output plugin refused");
      env.logger->clear();
      rc = b->getOutputShapes(ins.data(), int32_t(ins.size()), ins.data(), 1, out, 1, eb);
      check(rc == -1 && env.logger->saw_error("shape inputs"), n + ": shape inputs refused");
    }
  }
}


static void test_types_and_formats(const Env& env) {
  std::printf("[getOutputDataTypes / supportsFormatCombination]\n");
  for (const OpSpec& op : SPECS) {
    const std::string n = op.name;
    Fields f;
    f.int32("inputs", all_inputs_mask(op)).int32("outputs", all_outputs_mask(op));
    PluginPtr p = create(env, op, f);
    auto* b = p ? build_of(p.get()) : nullptr;
    if (!b) {
      check(false, n + ": create");
      continue;
    }
    const int nin = int(op.inputs.size()), nout = int(op.outputs.size());
    for (nv::DataType t : FLOAT_TYPES) {
      std::vector<nv::DataType> in(static_cast<size_t>(nin), t), out(size_t(nout), nv::DataType::kINT8);
      int rc = b->getOutputDataTypes(out.data(), nout, in.data(), nin);
      bool ok = rc == 0;
      for (int k = 0; ok && k < nout; ++k) ok = out[size_t(k)] == (is_stat(op, k) ? nv::DataType::kFLOAT : t);
      check(ok, n + ": output types for X " + std::to_string(int(t)) + " = X's type, Mean/InvStdDev float32");
    }
    {
      std::vector<nv::DataType> in(static_cast<size_t>(nin), nv::DataType::kHALF), out(static_cast<size_t>(nout));
      in[size_t(op.scale)] = nv::DataType::kFLOAT;
      env.logger->clear();
      int rc = b->getOutputDataTypes(out.data(), nout, in.data(), nin);
      const std::string expect = n + ": input 'Scale' (index " + std::to_string(op.scale) +
                                 ") is float32, expected float16 (the dtype of X)";
      check(rc == -1 && env.logger->saw_error(expect), n + ": float32 Scale with float16 X refused (" +
                                                           env.logger->last_error() + ")");
      std::fill(in.begin(), in.end(), nv::DataType::kINT32);
      env.logger->clear();
      rc = b->getOutputDataTypes(out.data(), nout, in.data(), nin);
      check(rc == -1 && env.logger->saw_error(n + ": input 'X' (index 0) is int32, expected float32, float16 or bfloat16"),
            n + ": int32 X refused (" + env.logger->last_error() + ")");
    }
    // Accept/refuse table over every position, type and format.
    std::vector<nv::DynamicPluginTensorDesc> io(size_t(nin + nout));
    for (auto& d : io) d = dyn_desc({2, 8}, nv::DataType::kFLOAT);
    int table_errors = 0, accepted = 0, asked = 0;
    for (nv::DataType xt : FLOAT_TYPES) {
      io[0].desc.type = xt;
      for (int pos = 0; pos < nin + nout; ++pos) {
        for (nv::TensorFormat fmt : {nv::TensorFormat::kLINEAR, nv::TensorFormat::kCHW32, nv::TensorFormat::kHWC8}) {
          for (nv::DataType t : PROBE_TYPES) {
            if (pos == 0 && t != xt) continue;  // position 0 is probed with the X type of this round
            auto saved = io[size_t(pos)];
            io[size_t(pos)].desc.type = t;
            io[size_t(pos)].desc.format = fmt;
            const bool got = b->supportsFormatCombination(pos, io.data(), nin, nout);
            io[size_t(pos)] = saved;
            bool want = fmt == nv::TensorFormat::kLINEAR;
            if (pos == 0)
              want = want && (t == nv::DataType::kFLOAT || t == nv::DataType::kHALF || t == nv::DataType::kBF16);
            else if (pos >= nin && is_stat(op, pos - nin))
              want = want && t == nv::DataType::kFLOAT;
            else
              want = want && t == xt;
            ++asked;
            accepted += got;
            if (got != want) {
              ++table_errors;
              std::printf("    %s: pos %d type %d format %d: got %d want %d\n", op.name, pos, int(t), int(fmt), got,
                          want);
            }
          }
        }
      }
    }
    check(table_errors == 0, n + ": supportsFormatCombination table (" + std::to_string(asked) + " probes, " +
                                 std::to_string(accepted) + " accepted)");
    env.logger->clear();
    check(!b->supportsFormatCombination(nin + nout, io.data(), nin, nout) && env.logger->saw_error("out of range"),
          n + ": position out of range -> false + error");
  }
}

static void test_configure_and_serialize(const Env& env, TestRecorder& recorder) {
  std::printf("[configurePlugin / serialize / attachToContext / onShapeChange]\n");
  for (const OpSpec& op : SPECS) {
    const std::string n = op.name;
    const int in_mask = all_inputs_mask(op);
    const int out_mask = all_outputs_mask(op);
    Fields f;
    f.int32("axis", 1).float64("epsilon", 3e-4).int32("inputs", in_mask).int32("outputs", out_mask);
    if (op.has_stash_type) f.int32("stash_type", 1);
    PluginPtr p = create(env, op, f);
    auto* b = p ? build_of(p.get()) : nullptr;
    if (!b) {
      check(false, n + ": create");
      continue;
    }
    const int nin = int(op.inputs.size()), nout = int(op.outputs.size());
    // configurePlugin with a dynamic batch dim.
    auto shapes = input_shapes(op, in_mask, {-1, 4, 6}, 1);
    std::vector<nv::DynamicPluginTensorDesc> in, out;
    for (auto& s : shapes) in.push_back(dyn_desc(s, nv::DataType::kHALF));
    for (int k = 0; k < nout; ++k)
      out.push_back(dyn_desc({-1, 4, 6}, is_stat(op, k) ? nv::DataType::kFLOAT : nv::DataType::kHALF));
    check(b->configurePlugin(in.data(), nin, out.data(), nout) == 0, n + ": configurePlugin with a dynamic dim");
    auto bad = in;
    bad[size_t(op.scale)] = dyn_desc({5}, nv::DataType::kHALF);
    env.logger->clear();
    check(b->configurePlugin(bad.data(), nin, out.data(), nout) == -1 &&
              env.logger->saw_error(n + ": input 'Scale' (index " + std::to_string(op.scale) + ") has shape [5]"),
          n + ": configurePlugin refuses a wrong Scale (" + env.logger->last_error() + ")");
    check(b->getWorkspaceSize(in.data(), nin, out.data(), nout) == 0, n + ": workspace 0 after configure");

    // Serialize -> deserialize through the creator at runtime.
    const nv::PluginFieldCollection* fc = runtime_of(p.get())->getFieldsToSerialize();
    auto before = dump_fields(fc);
    check(before.size() == size_t(op.has_stash_type ? 5 : 4), n + ": serializes axis, epsilon, inputs, outputs" +
                                                                  (op.has_stash_type ? ", stash_type" : ""));
    auto* c = find_creator(env, op.name, "1", "trt_fastops");
    PluginPtr r(c->createPlugin("node_7", fc, nv::TensorRTPhase::kRUNTIME));
    check(bool(r), n + ": createPlugin(kRUNTIME) from getFieldsToSerialize");
    if (!r) continue;
    auto after = dump_fields(runtime_of(r.get())->getFieldsToSerialize());
    bool same = before.size() == after.size();
    for (auto& kv : before)
      same = same && after.count(kv.first) && after[kv.first].type == kv.second.type &&
             after[kv.first].value == kv.second.value;
    check(same, n + ": deserialized plugin serializes the same fields");
    check(before["axis"].value == 1 && std::fabs(before["epsilon"].value - 3e-4) < 1e-9 &&
              before["inputs"].value == in_mask && before["outputs"].value == out_mask,
          n + ": serialized values are the created ones");
    auto* br = build_of(r.get());
    check(br->getNbOutputs() == nout && br->configurePlugin(in.data(), nin, out.data(), nout) == 0,
          n + ": deserialized plugin configures the same");

    // attachToContext: a new plugin whose errors go to the context's recorder.
    TestResourceContext ctx(&recorder);
    PluginPtr a(runtime_of(r.get())->attachToContext(&ctx));
    check(bool(a) && a.get() != r.get(), n + ": attachToContext returns a new plugin");
    if (!a) continue;
    auto* ra = runtime_of(a.get());
    std::vector<nv::PluginTensorDesc> tin, tout;
    auto run_shapes = input_shapes(op, in_mask, {3, 4, 6}, 1);
    for (auto& s : run_shapes) tin.push_back(tensor_desc(s, nv::DataType::kHALF));
    for (int k = 0; k < nout; ++k)
      tout.push_back(tensor_desc(is_stat(op, k) ? std::vector<int64_t>{3, 1, 1} : std::vector<int64_t>{3, 4, 6},
                                 is_stat(op, k) ? nv::DataType::kFLOAT : nv::DataType::kHALF));
    check(ra->onShapeChange(tin.data(), nin, tout.data(), nout) == 0, n + ": onShapeChange with known shapes");
    recorder.clear();
    env.logger->clear();
    auto tbad = tin;
    tbad[size_t(op.scale)] = tensor_desc({4, 5}, nv::DataType::kHALF);
    check(ra->onShapeChange(tbad.data(), nin, tout.data(), nout) == -1 &&
              recorder.saw(n + ": input 'Scale' (index " + std::to_string(op.scale) + ") has shape [4, 5]") &&
              recorder.saw("(layer 'node_7')") && env.logger->errors().empty(),
          n + ": attached plugin reports to the recorder, not the logger (" + recorder.last() + ")");
    recorder.clear();
    void* dummy_out[4] = {};
    const void* dummy_in[5] = {};
    check(ra->enqueue(tin.data(), tout.data(), dummy_in, dummy_out, nullptr, nullptr) == -1 &&
              recorder.saw(n + ": enqueue called without a successful onShapeChange"),
          n + ": enqueue after a failed onShapeChange refused (" + recorder.last() + ")");
    // clone keeps the configuration.
    PluginPtr cl(a.get()->clone());
    check(bool(cl) && cl.get() != a.get(), n + ": clone returns a new plugin");
    if (cl) {
      auto cloned = dump_fields(runtime_of(cl.get())->getFieldsToSerialize());
      bool eq = cloned.size() == before.size();
      for (auto& kv : before) eq = eq && cloned.count(kv.first) && cloned[kv.first].value == kv.second.value;
      check(eq, n + ": clone serializes the same fields");
    }
    // Not attached: errors go to the logger.
    env.logger->clear();
    check(runtime_of(r.get())->onShapeChange(tbad.data(), nin, tout.data(), nout) == -1 && env.logger->saw_error(n + ": "),
          n + ": unattached plugin reports to the logger");
  }
  // 'inputs' mask vs the layer's input count.
  {
    const OpSpec& op = SPECS[1];  // SkipLayerNorm: X, Skip, Scale, Bias (no B)
    Fields f;
    f.int32("inputs", 0b10111);
    PluginPtr p = create(env, op, f);
    auto* b = p ? build_of(p.get()) : nullptr;
    if (b) {
      TestExprBuilder eb;
      ExprShape x{{eb.constant_expr(2), eb.constant_expr(8)}};
      ExprShape c{{eb.constant_expr(8)}};
      nv::DimsExprs ins[5] = {to_exprs(x), to_exprs(x), to_exprs(c), to_exprs(c), to_exprs(c)};
      nv::DimsExprs out[1];
      check(b->getOutputShapes(ins, 4, nullptr, 0, out, 1, eb) == 0, "SkipLayerNorm: inputs = X, Skip, Scale, Bias");
      env.logger->clear();
      check(b->getOutputShapes(ins, 5, nullptr, 0, out, 1, eb) == -1 &&
                env.logger->saw_error("SkipLayerNorm: the layer has 5 inputs, but field 'inputs' = 23 (X, Skip, Scale, Bias) names 4"),
            "SkipLayerNorm: 5 inputs against inputs = 23 refused (" + env.logger->last_error() + ")");
    } else {
      check(false, "SkipLayerNorm: create with inputs = 23");
    }
    Fields g;
    PluginPtr q = create(env, SPECS[0], g);
    auto* bq = q ? build_of(q.get()) : nullptr;
    if (bq) {
      TestExprBuilder eb;
      ExprShape x{{eb.constant_expr(2), eb.constant_expr(8)}};
      nv::DimsExprs ins[4] = {to_exprs(x), to_exprs(x), to_exprs(x), to_exprs(x)};
      nv::DimsExprs out[1];
      env.logger->clear();
      check(bq->getOutputShapes(ins, 4, nullptr, 0, out, 1, eb) == -1 &&
                env.logger->saw_error("LayerNorm: got 4 inputs, expected at most 3"),
            "LayerNorm: 4 inputs without an 'inputs' field refused (" + env.logger->last_error() + ")");
    }
  }
}

struct EnqueueCase {
  int op;                       // index into SPECS
  std::vector<int64_t> x;       // X dims
  int axis;
  int inputs;                   // mask over input slots
  int outputs;                  // mask over output slots
  std::vector<int64_t> scale;   // Scale dims ({} = normalized shape); B follows Scale
  std::vector<int64_t> skip;    // Skip dims ({} = X's)
  float epsilon;
};

static const EnqueueCase ENQUEUE_CASES[] = {
    // LayerNorm: X, Scale, B? -> Y, Mean?, InvStdDev?
    {0, {2, 3, 40}, -1, 0b111, 0b111, {1, 40}, {}, 1e-5f},
    {0, {5, 33}, -1, 0b011, 0b001, {}, {}, 1e-5f},
    {0, {4, 6, 7}, 1, 0b111, 0b101, {}, {}, 1e-3f},  // Mean is a placeholder
    {0, {3, 4096}, -1, 0b111, 0b011, {1}, {}, 1e-5f},  // scalar Scale and B
    {0, {2, 12288}, -1, 0b111, 0b111, {}, {}, 1e-5f},
    // SkipLayerNorm: X, Skip, Scale, B?, Bias? -> Y, Mean?, InvStdDev?, Sum?
    {1, {2, 5, 64}, -1, 0b11111, 0b1111, {}, {}, 1e-5f},
    {1, {2, 5, 64}, -1, 0b00111, 0b1001, {}, {5, 64}, 1e-5f},  // Skip broadcast; Mean, InvStdDev placeholders
    {1, {3, 129}, -1, 0b10111, 0b0111, {}, {}, 1e-5f},        // Bias without B
    {1, {4, 1000}, -1, 0b01111, 0b0001, {}, {1, 1000}, 1e-5f},
    // RMSNorm: X, Scale, Skip?, Bias? -> Y, Sum?
    {2, {4, 96}, -1, 0b0011, 0b01, {}, {}, 1e-5f},
    {2, {2, 3, 33}, -1, 0b1111, 0b11, {}, {}, 1e-5f},
    {2, {2, 4, 5}, 1, 0b0111, 0b11, {}, {4, 5}, 1e-5f},
    {2, {2, 8192}, -1, 0b0011, 0b01, {}, {}, 1e-6f},
};

static void run_enqueue_case(const Env& env, const EnqueueCase& ec, DType dt, TestRecorder& recorder,
                             std::mt19937& rng) {
  const OpSpec& op = SPECS[ec.op];
  const int rank = int(ec.x.size());
  const int axis = ec.axis < 0 ? ec.axis + rank : ec.axis;
  std::vector<int64_t> normalized(ec.x.begin() + axis, ec.x.end());
  const int64_t rows = numel(std::vector<int64_t>(ec.x.begin(), ec.x.begin() + axis));
  const int64_t cols = numel(normalized);
  std::string tag = std::string(op.name) + " " + trt_fastops::dtype_name(dt) + " X [";
  for (int i = 0; i < rank; ++i) tag += (i ? ", " : "") + std::to_string(ec.x[size_t(i)]);
  tag += "] axis " + std::to_string(ec.axis) + " inputs " + std::to_string(ec.inputs) + " outputs " +
         std::to_string(ec.outputs);

  // Build-phase plugin -> fields -> runtime plugin -> attach, as an engine does.
  Fields f;
  f.int64("axis", ec.axis).float32("epsilon", ec.epsilon).int32("inputs", ec.inputs).int32("outputs", ec.outputs);
  PluginPtr built = create(env, op, f);
  if (!built) {
    check(false, tag + ": create (" + env.logger->last_error() + ")");
    return;
  }
  auto* c = find_creator(env, op.name, "1", "trt_fastops");
  PluginPtr loaded(c->createPlugin("node_7", runtime_of(built.get())->getFieldsToSerialize(), nv::TensorRTPhase::kRUNTIME));
  TestResourceContext ctx(&recorder);
  PluginPtr plugin(loaded ? runtime_of(loaded.get())->attachToContext(&ctx) : nullptr);
  if (!plugin) {
    check(false, tag + ": deserialize + attachToContext");
    return;
  }
  auto* rt = runtime_of(plugin.get());

  // Inputs, by slot.
  std::vector<int64_t> param_dims = ec.scale.empty() ? normalized : ec.scale;
  std::vector<int64_t> skip_dims = ec.skip.empty() ? ec.x : ec.skip;
  std::vector<HostTensor> in(op.inputs.size());
  for (int s = 0; s < int(op.inputs.size()); ++s) {
    if (!(ec.inputs >> s & 1)) continue;
    if (s == 0)
      in[size_t(s)] = random_tensor(dt, ec.x, -2, 2, rng);
    else if (s == op.skip)
      in[size_t(s)] = random_tensor(dt, skip_dims, -2, 2, rng);
    else if (s == op.scale)
      in[size_t(s)] = random_tensor(dt, param_dims, 0.5, 1.5, rng);
    else if (s == op.b)
      in[size_t(s)] = random_tensor(dt, param_dims, -0.5, 0.5, rng);
    else
      in[size_t(s)] = random_tensor(dt, normalized, -0.5, 0.5, rng);  // Bias: [cols]
  }
  const int nb_out = nb_outputs_of(ec.outputs);
  std::vector<nv::PluginTensorDesc> in_desc, out_desc;
  std::vector<int> in_slots;
  for (int s = 0; s < int(op.inputs.size()); ++s) {
    if (!(ec.inputs >> s & 1)) continue;
    in_desc.push_back(tensor_desc(in[size_t(s)].dims, trt_type(dt)));
    in_slots.push_back(s);
  }
  std::vector<int64_t> stat_dims(ec.x.begin(), ec.x.begin() + axis);
  stat_dims.resize(size_t(rank), 1);
  for (int k = 0; k < nb_out; ++k)
    out_desc.push_back(is_stat(op, k) ? tensor_desc(stat_dims, nv::DataType::kFLOAT) : tensor_desc(ec.x, trt_type(dt)));

  recorder.clear();
  int rc = rt->onShapeChange(in_desc.data(), int32_t(in_desc.size()), out_desc.data(), nb_out);
  if (rc != 0) {
    check(false, tag + ": onShapeChange (" + recorder.last() + ")");
    return;
  }

  // Device buffers: inputs copied, outputs poisoned with NaN.
  std::vector<DeviceBuffer> dev_in(in_slots.size()), dev_out(static_cast<size_t>(nb_out));
  std::vector<const void*> in_ptrs;
  std::vector<void*> out_ptrs;
  for (size_t i = 0; i < in_slots.size(); ++i) {
    const HostTensor& h = in[size_t(in_slots[i])];
    CUDA_OK(cudaMalloc(&dev_in[i].ptr, h.bytes.size()));
    CUDA_OK(cudaMemcpy(dev_in[i].ptr, h.bytes.data(), h.bytes.size(), cudaMemcpyHostToDevice));
    in_ptrs.push_back(dev_in[i].ptr);
  }
  std::vector<DType> out_types;
  std::vector<int64_t> out_numel;
  for (int k = 0; k < nb_out; ++k) {
    DType t = is_stat(op, k) ? DType::f32 : dt;
    int64_t n = is_stat(op, k) ? rows : rows * cols;
    std::vector<uint8_t> poison = nan_bytes(t, n);
    CUDA_OK(cudaMalloc(&dev_out[size_t(k)].ptr, poison.size()));
    CUDA_OK(cudaMemcpy(dev_out[size_t(k)].ptr, poison.data(), poison.size(), cudaMemcpyHostToDevice));
    out_ptrs.push_back(dev_out[size_t(k)].ptr);
    out_types.push_back(t);
    out_numel.push_back(n);
  }
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreate(&stream));
  rc = rt->enqueue(in_desc.data(), out_desc.data(), in_ptrs.data(), out_ptrs.data(), nullptr, stream);
  cudaError_t sync = cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  check(rc == 0, tag + ": enqueue returns 0" + (rc ? " (" + recorder.last() + ")" : ""));
  CUDA_OK(sync);
  CUDA_OK(cudaGetLastError());
  if (rc != 0) return;

  std::vector<std::vector<uint8_t>> got(static_cast<size_t>(nb_out));
  for (int k = 0; k < nb_out; ++k) {
    got[size_t(k)].resize(size_t(out_numel[size_t(k)] * trt_fastops::dtype_size(out_types[size_t(k)])));
    CUDA_OK(cudaMemcpy(got[size_t(k)].data(), dev_out[size_t(k)].ptr, got[size_t(k)].size(), cudaMemcpyDeviceToHost));
  }

  // float64 reference.
  const HostTensor* x = &in[0];
  const HostTensor* skip = op.skip >= 0 && (ec.inputs >> op.skip & 1) ? &in[size_t(op.skip)] : nullptr;
  const HostTensor* gamma = &in[size_t(op.scale)];
  const HostTensor* beta = op.b >= 0 && (ec.inputs >> op.b & 1) ? &in[size_t(op.b)] : nullptr;
  const HostTensor* bias = op.bias >= 0 && (ec.inputs >> op.bias & 1) ? &in[size_t(op.bias)] : nullptr;
  const int64_t skip_rows = skip ? numel(skip->dims) / cols : 1;
  double tol_abs = dt == DType::f32 ? 1e-4 : dt == DType::f16 ? 5e-3 : 2e-2;
  double tol_rel = dt == DType::f32 ? 1e-4 : dt == DType::f16 ? 5e-3 : 1e-2;
  int64_t bad_y = 0, bad_sum = 0, bad_mean = 0, bad_rstd = 0, bad_placeholder = 0;
  double max_err_y = 0;
  std::vector<double> s(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) {
      double v = x->values[size_t(r * cols + j)];
      if (skip) v += skip->values[size_t((r % skip_rows) * cols + j)];
      if (bias) v += bias->values[size_t(j)];
      s[size_t(j)] = v;
    }
    double mean = 0;
    if (!op.rms) {
      for (double v : s) mean += v;
      mean /= double(cols);
    }
    double var = 0;
    for (double v : s) var += (v - mean) * (v - mean);
    var /= double(cols);
    const double rstd = 1.0 / std::sqrt(var + double(ec.epsilon));
    for (int k = 0; k < nb_out; ++k) {
      const bool written = ec.outputs >> k & 1;
      const std::vector<uint8_t>& g = got[size_t(k)];
      if (!written) {  // placeholder: must stay untouched (NaN)
        const int64_t n = is_stat(op, k) ? 1 : cols;
        for (int64_t j = 0; j < n; ++j)
          bad_placeholder += !std::isnan(decode(out_types[size_t(k)], g.data(), is_stat(op, k) ? r : r * cols + j));
        continue;
      }
      if (k == op.mean || k == op.inv) {
        const double want = k == op.mean ? mean : rstd;
        const double v = decode(DType::f32, g.data(), r);
        const bool ok = std::fabs(v - want) <= 1e-5 + 1e-4 * std::fabs(want);
        (k == op.mean ? bad_mean : bad_rstd) += !ok;
        continue;
      }
      for (int64_t j = 0; j < cols; ++j) {
        double want;
        if (k == 0) {
          const double ga = gamma->values[size_t(gamma->values.size() == 1 ? 0 : j)];
          const double be = beta ? beta->values[size_t(beta->values.size() == 1 ? 0 : j)] : 0.0;
          want = (s[size_t(j)] - mean) * rstd * ga + be;
        } else {
          want = s[size_t(j)];  // Sum
        }
        const double v = decode(dt, g.data(), r * cols + j);
        const double err = std::fabs(v - want);
        const bool ok = err <= tol_abs + tol_rel * std::fabs(want);  // NaN fails
        if (k == 0) {
          bad_y += !ok;
          if (err > max_err_y || std::isnan(v)) max_err_y = std::isnan(v) ? INFINITY : err;
        } else {
          bad_sum += !ok;
        }
      }
    }
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3g", max_err_y);
  check(bad_y == 0, tag + ": Y matches float64 reference (" + std::to_string(bad_y) + " bad, max err " + buf + ")");
  if (op.sum >= 0 && op.sum < nb_out && (ec.outputs >> op.sum & 1))
    check(bad_sum == 0, tag + ": Sum matches (" + std::to_string(bad_sum) + " bad)");
  if (op.mean >= 0 && op.mean < nb_out && (ec.outputs >> op.mean & 1))
    check(bad_mean == 0, tag + ": Mean matches (" + std::to_string(bad_mean) + " bad)");
  if (op.inv >= 0 && op.inv < nb_out && (ec.outputs >> op.inv & 1))
    check(bad_rstd == 0, tag + ": InvStdDev matches (" + std::to_string(bad_rstd) + " bad)");
  if (nb_out != __builtin_popcount(unsigned(ec.outputs)))
    check(bad_placeholder == 0, tag + ": placeholder outputs left untouched");
  check(recorder.errors.empty(), tag + ": no errors recorded");
}

static void test_enqueue(const Env& env, TestRecorder& recorder) {
  std::printf("[enqueue]\n");
  std::mt19937 rng(1234);
  for (const EnqueueCase& ec : ENQUEUE_CASES)
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) run_enqueue_case(env, ec, dt, recorder, rng);
}

// ---------------------------------------------------------------------------
// Further plugin families

#include "tests/trt/contract_attention.h"
#include "tests/trt/contract_conv.h"

// ---------------------------------------------------------------------------

int main(int argc, char** argv) {
  std::string lib_dir = TRT_FASTOPS_TRT_LIB_DIR;
  if (const char* e = std::getenv("TRT_FASTOPS_TRT_LIB_DIR")) lib_dir = e;
  bool no_enqueue = false, require_gpu = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--lib-dir" && i + 1 < argc)
      lib_dir = argv[++i];
    else if (a == "--no-enqueue")
      no_enqueue = true;
    else if (a == "--require-gpu")
      require_gpu = true;
    else if (a == "-v")
      g_verbose = true;
    else {
      std::fprintf(stderr, "usage: %s [--lib-dir DIR] [--no-enqueue] [--require-gpu] [-v]\n", argv[0]);
      return 2;
    }
  }
  std::printf("trt contract: TensorRT %d.%d headers, libraries from %s\n", NV_TENSORRT_MAJOR, NV_TENSORRT_MINOR,
              lib_dir.c_str());

  // --- Loading style 1: dlopen + getCreators/setLoggerFinder (loadLibrary).
  std::printf("[loading]\n");
  const std::string core_path = lib_dir + "/libtrt_fastops_trt.so";
  void* core = dlopen(core_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  check(core != nullptr, "dlopen " + core_path + (core ? "" : std::string(": ") + dlerror()));
  if (!core) {
    std::printf("trt contract: %d passed, %d failed\n", g_passed, g_failed + 1);
    return 1;
  }
  check(g_registry.entries.empty(), "loading libtrt_fastops_trt.so registers nothing by itself");
  auto get_creators = reinterpret_cast<GetCreatorsFn>(dlsym(core, "getCreators"));
  auto set_logger_finder = reinterpret_cast<SetLoggerFinderFn>(dlsym(core, "setLoggerFinder"));
  check(get_creators != nullptr && set_logger_finder != nullptr, "exports getCreators and setLoggerFinder");
  check(dlsym(core, "trt_fastops_trt_register") == nullptr, "core library has no registration entry point");
  if (!get_creators || !set_logger_finder) {
    std::printf("trt contract: %d passed, %d failed\n", g_passed, g_failed);
    return 1;
  }

  // A TensorRT of another major version: refused before touching anything.
  g_runtime_version = (NV_TENSORRT_MAJOR == 10 ? 11 : 10) * 10000 + 100;
  check(call_get_creators(get_creators).empty(), "getCreators returns nothing under a different TensorRT major");
  g_runtime_version = NV_TENSORRT_MAJOR * 10000 + NV_TENSORRT_MINOR * 100 + NV_TENSORRT_PATCH;

  Env env;
  env.creators = call_get_creators(get_creators);
  check(call_get_creators(get_creators) == env.creators, "getCreators is stable across calls");

  // Before setLoggerFinder, errors reach libnvinfer's getLogger().
  {
    Fields f;
    f.float32("axis", 0.f);
    auto* c = find_creator(env, "LayerNorm", "1", "trt_fastops");
    nv::IPluginV3* p = c ? c->createPlugin("early", f.get(), nv::TensorRTPhase::kBUILD) : nullptr;
    check(p == nullptr && g_global_logger.saw_error("LayerNorm: attribute 'axis' is a float"),
          "without a logger finder, errors go to getLogger()");
    delete p;
  }
  TestLogger logger("finder");
  TestLoggerFinder finder(&logger);
  set_logger_finder(&finder);
  env.logger = &logger;
  g_global_logger.clear();
  {
    Fields f;
    f.float32("axis", 0.f);
    PluginPtr p = create(env, SPECS[0], f);
    check(!p && logger.saw_error("LayerNorm: attribute 'axis' is a float") && g_global_logger.errors().empty(),
          "after setLoggerFinder, errors go to the finder's logger");
  }

  TestRecorder recorder;
  test_creators(env);
  test_fields(env);
  test_capabilities(env);
  test_output_shapes(env);
  test_types_and_formats(env);
  test_configure_and_serialize(env, recorder);
  test_conv_plugins(env, recorder);
  test_attention_plugin(env, recorder);

  // --- Loading style 2: the autoload library registers on dlopen.
  std::printf("[autoload]\n");
  const std::string auto_path = lib_dir + "/libtrt_fastops_trt_autoload.so";
  void* autoload = dlopen(auto_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  check(autoload != nullptr, "dlopen " + auto_path + (autoload ? "" : std::string(": ") + dlerror()));
  if (autoload) {
    check(int(g_registry.entries.size()) == NB_PLUGINS, "autoload registered " + NB_PLUGINS_STR +
                                                            " creators into getPluginRegistry() on load (got " +
                                                            std::to_string(g_registry.entries.size()) + ")");
    for (const char* name : ALL_PLUGINS) {
      nv::IPluginCreatorInterface* c = g_registry.getCreator(name, "1", "trt_fastops");
      check(c != nullptr && c == find_creator(env, name, "1", "trt_fastops"),
            std::string(name) + ": registry lookup (name, \"1\", \"trt_fastops\") finds the library's creator");
    }
    auto reg = reinterpret_cast<RegisterFn>(dlsym(autoload, "trt_fastops_trt_register"));
    check(reg != nullptr, "autoload exports trt_fastops_trt_register");
    if (reg) {
      check(reg(nullptr) == 0 && int(g_registry.entries.size()) == NB_PLUGINS, "registering again is a no-op");
      TestRegistry other;
      check(reg(&other) == NB_PLUGINS && int(other.entries.size()) == NB_PLUGINS,
            "explicit registry: " + NB_PLUGINS_STR + " creators registered");
      TestRegistry third;
      g_runtime_version = (NV_TENSORRT_MAJOR == 10 ? 11 : 10) * 10000;
      check(reg(&third) == -1 && third.entries.empty(), "explicit registration refused under a different TensorRT major");
      g_runtime_version = NV_TENSORRT_MAJOR * 10000 + NV_TENSORRT_MINOR * 100 + NV_TENSORRT_PATCH;
    }
  }

  // --- Enqueue on a GPU.
  int devices = 0;
  const cudaError_t dev_err = cudaGetDeviceCount(&devices);
  if (no_enqueue) {
    std::printf("SKIP enqueue: --no-enqueue\n");
  } else if (dev_err != cudaSuccess || devices == 0) {
    std::printf("SKIP enqueue: no GPU (%s)\n", dev_err != cudaSuccess ? cudaGetErrorString(dev_err) : "0 devices");
    if (require_gpu) check(false, "--require-gpu: a CUDA device is needed");
  } else {
    test_enqueue(env, recorder);
    test_conv_enqueue(env, recorder);
    test_attention_enqueue(env, recorder);
  }

  std::printf("trt contract: %d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
