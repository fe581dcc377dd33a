// Contract test section for the Conv and ConvTranspose plugins
// (plugins/trt/conv_plugin.*): the same steps as the norm sections (creator
// lookup, fields, capabilities, shapes constant and symbolic, format/type
// negotiation, configure, workspace, serialize -> deserialize, attach, clone,
// enqueue against a float64 reference). The op's rules are written out here
// independently of plugins/conv/conv_op. Included by contract_test.cc after
// contract_harness.h (one translation unit).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tests/trt/contract_harness.h"

namespace conv_contract {

// ---------------------------------------------------------------------------
// The spec

struct Attrs {
  std::vector<int64_t> kernel_shape, strides, dilations, pads, output_padding, output_shape;
  std::string auto_pad;    // "" = absent (NOTSET)
  int64_t group = 1;
  std::string activation;  // "" = none, "Relu", "Silu", "Gelu"
};

struct Case {
  const char* op;  // "Conv" or "ConvTranspose"
  std::vector<int64_t> x, w;
  bool bias;
  Attrs a;
};

static const char* const OPS[] = {"Conv", "ConvTranspose"};

static bool transpose_op(const std::string& op) { return op == "ConvTranspose"; }

static std::vector<std::string> attr_names(const std::string& op) {
  std::vector<std::string> n = {"kernel_shape", "strides", "dilations", "pads", "auto_pad", "group", "activation"};
  if (transpose_op(op)) {
    n.push_back("output_padding");
    n.push_back("output_shape");
    n.push_back("output_crop");
  }
  return n;
}

// The node's attributes as fields: ONNX-parser style (kINT32, strings
// without NUL) or serialized style (kINT64, strings with NUL).
static void add_fields(const Attrs& a, bool parser_style, Fields* f) {
  auto ints = [&](const char* n, const std::vector<int64_t>& v) {
    if (v.empty()) return;
    if (parser_style)
      f->int32_list(n, std::vector<int32_t>(v.begin(), v.end()));
    else
      f->int64_list(n, v);
  };
  auto text = [&](const char* n, const std::string& v) {
    if (parser_style)
      f->string_raw(n, v.c_str());
    else
      f->string(n, v.c_str());
  };
  ints("kernel_shape", a.kernel_shape);
  ints("strides", a.strides);
  ints("dilations", a.dilations);
  ints("pads", a.pads);
  ints("output_padding", a.output_padding);
  ints("output_shape", a.output_shape);
  if (!a.auto_pad.empty()) text("auto_pad", a.auto_pad);
  if (a.group != 1) {
    if (parser_style)
      f->int32("group", int32_t(a.group));
    else
      f->int64("group", a.group);
  }
  if (!a.activation.empty()) text("activation", a.activation);
}

static PluginPtr create_named(const Env& env, const char* op, Fields& f,
                              nv::TensorRTPhase phase = nv::TensorRTPhase::kBUILD, const char* layer = "conv_3") {
  auto* c = find_creator(env, op, "1", "trt_fastops");
  if (!c) return PluginPtr();
  return PluginPtr(c->createPlugin(layer, f.get(), phase));
}

// Resolved geometry (ONNX rules; ConvTranspose as ONNX Runtime resolves
// output_shape and SAME_*): spatial dims padded to 3 at the front.
struct Geo {
  bool ok = true;
  int spatial = 0;
  int64_t n = 0, c_in = 0, c_out = 0, group = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1};
  int64_t pb[3] = {0, 0, 0};
  std::vector<int64_t> y;  // [N, C_out, out...]
};

static int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && (a < 0)); }

static Geo geometry(const Case& c, const std::vector<int64_t>& x, const std::vector<int64_t>& w) {
  Geo g;
  const bool tr = transpose_op(c.op);
  const int sp = int(x.size()) - 2;
  const int front = 3 - sp;
  g.spatial = sp;
  g.group = c.a.group;
  g.n = x[0];
  g.c_in = x[1];
  g.c_out = tr ? w[1] * c.a.group : w[0];
  g.y = {g.n, g.c_out};
  for (int i = 0; i < sp; ++i) {
    const int64_t in = x[size_t(2 + i)], k = w[size_t(2 + i)];
    const int64_t s = c.a.strides.empty() ? 1 : c.a.strides[size_t(i)];
    const int64_t d = c.a.dilations.empty() ? 1 : c.a.dilations[size_t(i)];
    const int64_t op = c.a.output_padding.empty() ? 0 : c.a.output_padding[size_t(i)];
    const int64_t dk = d * (k - 1) + 1;
    const bool upper = c.a.auto_pad == "SAME_UPPER", same = upper || c.a.auto_pad == "SAME_LOWER";
    const bool valid = c.a.auto_pad == "VALID";
    const int64_t pads_b = c.a.pads.empty() || same || valid ? 0 : c.a.pads[size_t(i)];
    const int64_t pads_e = c.a.pads.empty() || same || valid ? 0 : c.a.pads[size_t(i + sp)];
    int64_t out = 0, pb = 0;
    if (!tr) {
      if (same) {
        out = (in + s - 1) / s;
        const int64_t total = std::max<int64_t>(0, (out - 1) * s + dk - in);
        pb = upper ? total / 2 : total - total / 2;
      } else {
        pb = pads_b;
        out = floor_div(in + pads_b + pads_e - dk, s) + 1;
      }
    } else {
      const int64_t natural = s * (in - 1) + op + dk;
      if (!c.a.output_shape.empty()) {
        const size_t off = c.a.output_shape.size() == size_t(sp) ? 0 : 2;
        out = c.a.output_shape[off + size_t(i)];
        const int64_t total = natural - out;
        pb = total < 0 ? 0 : (upper ? total / 2 : total - total / 2);
      } else if (same) {
        const int64_t total = std::max<int64_t>(0, natural - in * s);
        pb = upper ? total / 2 : total - total / 2;
        out = natural - total;
      } else {
        pb = pads_b;
        out = natural - pads_b - pads_e;
      }
    }
    g.ok = g.ok && out >= 1;
    g.in[front + i] = in;
    g.out[front + i] = out;
    g.k[front + i] = k;
    g.s[front + i] = s;
    g.d[front + i] = d;
    g.pb[front + i] = pb;
    g.y.push_back(out);
  }
  return g;
}

// ---------------------------------------------------------------------------
// Cases

static std::vector<Case> shape_cases() {
  std::vector<Case> v;
  auto add = [&](const char* op, std::vector<int64_t> x, std::vector<int64_t> w, bool bias, Attrs a) {
    v.push_back(Case{op, std::move(x), std::move(w), bias, std::move(a)});
  };
  Attrs a;
  a = Attrs(); a.pads = {1, 1, 1, 1}; a.activation = "Relu";
  add("Conv", {2, 4, 9, 10}, {8, 4, 3, 3}, true, a);
  a = Attrs(); a.strides = {2, 3}; a.dilations = {2, 1}; a.pads = {0, 1, 2, 0}; a.group = 2;
  add("Conv", {1, 4, 11, 7}, {6, 2, 3, 2}, true, a);
  a = Attrs(); a.auto_pad = "SAME_UPPER"; a.strides = {2, 2};
  add("Conv", {1, 3, 10, 9}, {5, 3, 3, 3}, false, a);
  a = Attrs(); a.auto_pad = "SAME_LOWER"; a.strides = {3, 2}; a.dilations = {2, 1}; a.activation = "Gelu";
  add("Conv", {2, 2, 8, 7}, {4, 2, 4, 2}, true, a);
  a = Attrs(); a.auto_pad = "VALID"; a.strides = {3}; a.kernel_shape = {5};
  add("Conv", {2, 3, 17}, {4, 3, 5}, true, a);
  a = Attrs(); a.pads = {1, 0, 0, 1, 0, 1}; a.strides = {1, 2, 1};
  add("Conv", {1, 2, 5, 6, 7}, {4, 2, 3, 1, 2}, true, a);
  a = Attrs(); a.auto_pad = "SAME_UPPER"; a.group = 6; a.activation = "Silu";
  add("Conv", {1, 6, 9, 9}, {6, 1, 3, 3}, true, a);
  a = Attrs(); a.strides = {2, 2}; a.pads = {1, 1, 1, 1}; a.output_padding = {1, 1};
  add("ConvTranspose", {1, 4, 5, 6}, {4, 3, 3, 3}, true, a);
  a = Attrs(); a.auto_pad = "SAME_UPPER"; a.strides = {2, 2};  // kernel 1: natural 2 * in - 1 < 2 * in
  add("ConvTranspose", {2, 3, 5, 4}, {3, 2, 1, 1}, false, a);
  a = Attrs(); a.auto_pad = "SAME_LOWER"; a.strides = {2, 3}; a.activation = "Gelu";
  add("ConvTranspose", {1, 2, 4, 5}, {2, 4, 4, 3}, true, a);
  a = Attrs(); a.auto_pad = "VALID"; a.strides = {3}; a.dilations = {2};
  add("ConvTranspose", {2, 4, 7}, {4, 3, 3}, true, a);
  a = Attrs(); a.strides = {2, 2}; a.output_shape = {10, 12};  // one smaller, one larger than natural (11)
  add("ConvTranspose", {1, 2, 5, 5}, {2, 3, 3, 3}, true, a);
  a = Attrs(); a.group = 2; a.strides = {1, 2}; a.pads = {0, 1, 1, 0}; a.activation = "Relu";
  add("ConvTranspose", {1, 4, 3, 4}, {4, 3, 2, 2}, true, a);
  a = Attrs(); a.strides = {2, 1, 2}; a.auto_pad = "SAME_UPPER";
  add("ConvTranspose", {1, 2, 3, 2, 3}, {2, 2, 2, 3, 2}, false, a);
  return v;
}

static std::string describe(const Case& c) {
  auto dims = [](const std::vector<int64_t>& d) {
    std::string s = "[";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
    return s + "]";
  };
  std::string s = std::string(c.op) + " X" + dims(c.x) + " W" + dims(c.w) + (c.bias ? " +B" : "");
  if (!c.a.strides.empty()) s += " s" + dims(c.a.strides);
  if (!c.a.dilations.empty()) s += " d" + dims(c.a.dilations);
  if (!c.a.pads.empty()) s += " p" + dims(c.a.pads);
  if (!c.a.output_padding.empty()) s += " op" + dims(c.a.output_padding);
  if (!c.a.output_shape.empty()) s += " os" + dims(c.a.output_shape);
  if (!c.a.auto_pad.empty()) s += " " + c.a.auto_pad;
  if (c.a.group != 1) s += " g" + std::to_string(c.a.group);
  if (!c.a.activation.empty()) s += " " + c.a.activation;
  return s;
}

static std::vector<nv::DimsExprs> const_inputs(TestExprBuilder& eb, const Case& c) {
  auto exprs = [&](const std::vector<int64_t>& d) {
    ExprShape s;
    for (int64_t v : d) s.d.push_back(eb.constant_expr(v));
    return to_exprs(s);
  };
  std::vector<nv::DimsExprs> ins = {exprs(c.x), exprs(c.w)};
  if (c.bias) ins.push_back(exprs({c.bias ? (transpose_op(c.op) ? c.w[1] * c.a.group : c.w[0]) : 0}));
  return ins;
}

static int64_t c_out_of(const Case& c) { return transpose_op(c.op) ? c.w[1] * c.a.group : c.w[0]; }

// ---------------------------------------------------------------------------
// Sections (CPU)

static void test_creators(const Env& env) {
  std::printf("[conv creators]\n");
  for (const char* op : OPS) {
    const std::string n = op;
    auto* c = find_creator(env, op, "1", "trt_fastops");
    check(c != nullptr, n + ": creator found by name/version/namespace");
    if (!c) continue;
    check(find_creator(env, op, "2", "trt_fastops") == nullptr, n + ": no version 2");
    check(find_creator(env, op, "1", "") == nullptr, n + ": not in the default namespace");
    nv::InterfaceInfo info = c->getInterfaceInfo();
    check(str(info.kind) == "PLUGIN CREATOR_V3ONE" && info.major == 1, n + ": creator interface PLUGIN CREATOR_V3ONE 1");
    const nv::PluginFieldCollection* names = c->getFieldNames();
    std::vector<std::string> expect = attr_names(op);
    expect.push_back("max_workspace_mb");
    bool all = names != nullptr && names->nbFields == int32_t(expect.size());
    for (const std::string& e : expect) {
      bool found = false;
      for (int32_t i = 0; names && i < names->nbFields; ++i) {
        if (str(names->fields[i].name) != e) continue;
        const bool text = e == "auto_pad" || e == "activation";
        found = text ? names->fields[i].type == nv::PluginFieldType::kCHAR
                     : names->fields[i].type == nv::PluginFieldType::kINT32 ||
                           names->fields[i].type == nv::PluginFieldType::kINT64;
      }
      all = all && found;
    }
    check(all, n + ": getFieldNames lists exactly the op's attributes (strings as kCHAR, ints as kINT32/64) + "
                   "max_workspace_mb");
  }
}

static void test_fields(const Env& env) {
  std::printf("[conv fields]\n");
  unsetenv("TRT_FASTOPS_CONV_MAX_WORKSPACE_MB");
  for (const char* op : OPS) {
    const std::string n = op;
    const bool tr = transpose_op(op);
    {  // defaults
      Fields f;
      PluginPtr p = create_named(env, op, f);
      check(bool(p), n + ": createPlugin with no fields (all defaults)");
      if (p) {
        auto d = dump_fields_full(runtime_of(p.get())->getFieldsToSerialize());
        check(d.count("auto_pad") && d["auto_pad"].type == nv::PluginFieldType::kCHAR && d["auto_pad"].text == "NOTSET",
              n + ": default auto_pad NOTSET serialized as a string");
        check(d.count("group") && d["group"].values == std::vector<double>{1}, n + ": default group 1");
        check(d.count("activation") && d["activation"].text.empty(), n + ": default activation '' (none)");
        check(d.count("max_workspace_mb") && d["max_workspace_mb"].values == std::vector<double>{256},
              n + ": default max_workspace_mb 256");
        check(!d.count("strides") && !d.count("pads") && !d.count("kernel_shape") && !d.count("output_shape"),
              n + ": absent lists are not serialized");
        check(build_of(p.get())->getNbOutputs() == 1, n + ": one output");
      }
    }
    // Parser style (kINT32, strings without NUL) and serialized style (kINT64, with NUL) read the same.
    Attrs a;
    a.strides = {2, 1};
    a.dilations = {1, 2};
    a.pads = {0, 1, 1, 0};
    a.group = 2;
    a.activation = "Silu";
    if (tr) a.output_padding = {1, 0};
    std::map<std::string, FieldFull> first;
    for (bool parser : {true, false}) {
      Fields f;
      add_fields(a, parser, &f);
      PluginPtr p = create_named(env, op, f);
      const std::string style = parser ? "kINT32 lists, strings without NUL" : "kINT64 lists, strings with NUL";
      check(bool(p), n + ": " + style + " accepted (" + env.logger->last_error() + ")");
      if (!p) continue;
      auto d = dump_fields_full(runtime_of(p.get())->getFieldsToSerialize());
      check(d["strides"].values == std::vector<double>{2, 1} && d["dilations"].values == std::vector<double>{1, 2} &&
                d["pads"].values == std::vector<double>{0, 1, 1, 0} && d["group"].values == std::vector<double>{2} &&
                d["activation"].text == "Silu" && (!tr || d["output_padding"].values == std::vector<double>{1, 0}),
            n + ": " + style + ": values kept");
      if (parser)
        first = d;
      else
        check(d == first, n + ": both styles serialize identically");
    }
    {  // a scalar int field for a 1-D list (the parser cannot tell INT from INTS of one)
      Fields f;
      f.int32("strides", 3).int64("group", 1).string_raw("auto_pad", "VALID");
      PluginPtr p = create_named(env, op, f);
      check(bool(p), n + ": scalar int32 'strides' read as a list of one");
      if (p) {
        auto d = dump_fields_full(runtime_of(p.get())->getFieldsToSerialize());
        check(d["strides"].values == std::vector<double>{3} && d["auto_pad"].text == "VALID",
              n + ": strides [3], auto_pad VALID kept");
      }
    }
    {  // empty auto_pad string = NOTSET (as ONNX Runtime reads it); empty list = absent
      Fields f;
      f.string_raw("auto_pad", "").int64_list("pads", {});
      PluginPtr p = create_named(env, op, f);
      check(bool(p), n + ": empty auto_pad string and empty pads list accepted");
    }
    auto refused = [&](Fields& f, const std::string& expect, const std::string& what) {
      env.logger->clear();
      PluginPtr p = create_named(env, op, f);
      const bool ok = !p && env.logger->saw_error(expect) && env.logger->saw_error("(layer 'conv_3')");
      check(ok, n + ": " + what + " refused with \"" + expect + "\"" +
                    (ok ? "" : " (got \"" + env.logger->last_error() + "\")"));
    };
    { Fields f; f.float32("group", 2.f); refused(f, n + ": attribute 'group' is a float, expected an int", "float group"); }
    { Fields f; f.int32_list("group", {1, 2}); refused(f, n + ": attribute 'group' is a list of 2 ints, expected an int", "list group"); }
    { Fields f; f.string("group", "2"); refused(f, n + ": attribute 'group' is a string, expected an int", "string group"); }
    { Fields f; f.float32_list("strides", {1.f, 2.f}); refused(f, n + ": attribute 'strides' is a list of 2 floats, expected a list of ints", "float strides"); }
    { Fields f; f.float64("pads", 1.0); refused(f, n + ": attribute 'pads' is a float, expected a list of ints", "float64 pads"); }
    { Fields f; f.string("kernel_shape", "3"); refused(f, n + ": attribute 'kernel_shape' is a string, expected a list of ints", "string kernel_shape"); }
    { Fields f; f.int32("auto_pad", 1); refused(f, n + ": attribute 'auto_pad' is an int, expected a string", "int auto_pad"); }
    { Fields f; f.float32("activation", 1.f); refused(f, n + ": attribute 'activation' is a float, expected a string", "float activation"); }
    { Fields f; f.string_raw("auto_pad", "SAME"); refused(f, n + ": attribute 'auto_pad' is 'SAME', expected NOTSET, SAME_UPPER, SAME_LOWER or VALID", "auto_pad SAME"); }
    { Fields f; f.string("activation", "Tanh"); refused(f, n + ": attribute 'activation' is 'Tanh', expected '' (none), 'Relu', 'Silu' or 'Gelu'", "activation Tanh"); }
    { Fields f; f.int32_list("strides", {0, 1}); refused(f, n + ": attribute 'strides' is [0, 1], expected values >= 1", "stride 0"); }
    { Fields f; f.int64_list("dilations", {1, -2}); refused(f, n + ": attribute 'dilations' is [1, -2], expected values >= 1", "dilation -2"); }
    { Fields f; f.int32_list("pads", {0, -1, 0, 0}); refused(f, n + ": attribute 'pads' is [0, -1, 0, 0], expected values >= 0", "negative pad"); }
    { Fields f; f.int64("group", 0); refused(f, n + ": attribute 'group' is 0, expected >= 1", "group 0"); }
    {
      Fields f;
      f.int32_list("pads", {1, 1, 1, 1}).string_raw("auto_pad", "SAME_UPPER");
      refused(f, n + ": attributes 'pads' ([1, 1, 1, 1]) and 'auto_pad' (SAME_UPPER) cannot be used together", "pads with auto_pad");
    }
    { Fields f; f.float32("alpha", 1.f); refused(f, n + ": unknown attribute 'alpha', expected one of kernel_shape, strides", "unknown field"); }
    { Fields f; f.string("plugin_namespace", "trt_fastops"); refused(f, n + ": unknown attribute 'plugin_namespace'", "plugin_namespace field"); }
    if (!tr) {
      Fields f;
      f.int32_list("output_padding", {1, 1});
      refused(f, "Conv: unknown attribute 'output_padding'", "output_padding on Conv");
      Fields g;
      g.int64_list("output_shape", {4, 4});
      refused(g, "Conv: unknown attribute 'output_shape'", "output_shape on Conv");
    } else {
      Fields f;
      f.int32_list("output_shape", {4, 0});
      refused(f, n + ": attribute 'output_shape' is [4, 0], expected values >= 1", "output_shape 0");
    }
    { Fields f; f.int32("max_workspace_mb", -1); refused(f, n + ": field 'max_workspace_mb' is -1, expected an int in [0, ", "max_workspace_mb -1"); }
    { Fields f; f.float32("max_workspace_mb", 1.f); refused(f, n + ": field 'max_workspace_mb' is a float, expected an int", "float max_workspace_mb"); }
    {  // build phase: the launcher's environment variable sets the default; run phase: the serialized value
      setenv("TRT_FASTOPS_CONV_MAX_WORKSPACE_MB", "3", 1);
      Fields f;
      PluginPtr p = create_named(env, op, f);
      Fields g;
      PluginPtr r = create_named(env, op, g, nv::TensorRTPhase::kRUNTIME);
      unsetenv("TRT_FASTOPS_CONV_MAX_WORKSPACE_MB");
      auto d = p ? dump_fields_full(runtime_of(p.get())->getFieldsToSerialize()) : std::map<std::string, FieldFull>();
      auto e = r ? dump_fields_full(runtime_of(r.get())->getFieldsToSerialize()) : std::map<std::string, FieldFull>();
      check(d["max_workspace_mb"].values == std::vector<double>{3},
            n + ": kBUILD takes max_workspace_mb from TRT_FASTOPS_CONV_MAX_WORKSPACE_MB");
      check(e["max_workspace_mb"].values == std::vector<double>{256},
            n + ": kRUNTIME ignores the environment (serialized value or 256)");
    }
  }
}

static void test_capabilities(const Env& env) {
  std::printf("[conv capabilities]\n");
  for (const char* op : OPS) {
    const std::string n = op;
    Fields f;
    PluginPtr p = create_named(env, op, f);
    if (!p) {
      check(false, n + ": create");
      continue;
    }
    check_v3_interfaces(env, p.get(), n);
    auto* b = build_of(p.get());
    env.logger->clear();
    const nv::DynamicPluginTensorDesc y = dyn_desc({1, 1, 1}, nv::DataType::kFLOAT);
    check(b && b->getWorkspaceSize(nullptr, 0, &y, 1) == 0 &&
              env.logger->saw_error(n + ": input 'X' (index 0) is missing; it is required"),
          n + ": getWorkspaceSize without inputs -> 0 + error (" + env.logger->last_error() + ")");
  }
}

static std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

static void test_output_shapes(const Env& env) {
  std::printf("[conv getOutputShapes]\n");
  for (const Case& c : shape_cases()) {
    const std::string tag = describe(c);
    Fields f;
    add_fields(c.a, true, &f);
    PluginPtr p = create_named(env, c.op, f);
    auto* b = p ? build_of(p.get()) : nullptr;
    if (!b) {
      check(false, tag + ": create (" + env.logger->last_error() + ")");
      continue;
    }
    const Geo g = geometry(c, c.x, c.w);
    // Constant dims: constant outputs.
    {
      TestExprBuilder eb;
      auto ins = const_inputs(eb, c);
      nv::DimsExprs out[1];
      env.logger->clear();
      int rc = b->getOutputShapes(ins.data(), int32_t(ins.size()), nullptr, 0, out, 1, eb);
      bool ok = rc == 0 && out[0].nbDims == int32_t(c.x.size());
      std::vector<int64_t> got;
      for (int32_t j = 0; ok && j < out[0].nbDims; ++j) {
        ok = out[0].d[j] != nullptr && out[0].d[j]->isConstant();
        if (ok) got.push_back(out[0].d[j]->getConstantValue());
      }
      check(ok && got == g.y, tag + ": constant dims -> constant Y " + dims_str(g.y) +
                                  (ok ? " (got " + dims_str(got) + ")" : " (" + env.logger->last_error() + ")"));
      check(eb.negative_constants() == 0, tag + ": no negative constants handed to IExprBuilder");
    }
    // Symbolic N and spatial dims: expressions that evaluate to the rule for any size.
    {
      TestExprBuilder eb;
      ExprShape xs;
      xs.d.push_back(eb.symbol("N"));
      xs.d.push_back(eb.constant_expr(c.x[1]));
      for (size_t i = 2; i < c.x.size(); ++i) xs.d.push_back(eb.symbol("D" + std::to_string(i - 2)));
      auto ins = const_inputs(eb, c);
      ins[0] = to_exprs(xs);
      nv::DimsExprs out[1];
      env.logger->clear();
      int rc = b->getOutputShapes(ins.data(), int32_t(ins.size()), nullptr, 0, out, 1, eb);
      check(rc == 0, tag + ": symbolic N and spatial dims accepted" + (rc ? " (" + env.logger->last_error() + ")" : ""));
      if (rc != 0) continue;
      check(out[0].d[0] == xs.d[0], tag + ": Y dim 0 is X's own N expression");
      int bad = 0, evaluated = 0;
      std::string first_bad;
      const bool fixed = !c.a.output_shape.empty();  // output_shape pins the spatial dims
      for (int64_t delta : {0, 1, 2, 5, 11, 30}) {
        std::vector<int64_t> x = c.x;
        x[0] = 1 + delta;
        for (size_t i = 2; i < x.size() && !fixed; ++i) x[i] += delta;
        std::map<std::string, int64_t> sym = {{"N", x[0]}};
        for (size_t i = 2; i < x.size(); ++i) sym["D" + std::to_string(i - 2)] = x[i];
        const Geo want = geometry(c, x, c.w);
        std::vector<int64_t> got;
        ++evaluated;
        if (!eval_dims(eb, out[0], sym, &got) || got != want.y) {
          ++bad;
          if (first_bad.empty()) first_bad = "X " + dims_str(x) + ": got " + dims_str(got) + ", want " + dims_str(want.y);
        }
      }
      check(bad == 0, tag + ": symbolic Y evaluates to the rule for " + std::to_string(evaluated) + " sizes" +
                          (bad ? " (" + first_bad + ")" : ""));
      check(eb.negative_constants() == 0, tag + ": symbolic: no negative constants");
    }
  }

  // Symbolic kernel (W's spatial dims not known at build time, no kernel_shape).
  {
    std::vector<Case> kc;
    Attrs a;
    a.pads = {1, 0, 1, 0};
    a.strides = {2, 1};
    a.dilations = {1, 2};
    kc.push_back(Case{"Conv", {1, 3, 12, 11}, {4, 3, 3, 2}, false, a});
    a = Attrs();
    a.auto_pad = "SAME_UPPER";
    a.strides = {2, 3};
    kc.push_back(Case{"ConvTranspose", {1, 2, 6, 5}, {2, 3, 1, 4}, false, a});
    a = Attrs();
    a.strides = {2, 2};
    a.pads = {1, 0, 0, 1};
    a.output_padding = {1, 0};
    kc.push_back(Case{"ConvTranspose", {2, 2, 6, 5}, {2, 3, 3, 2}, false, a});
    for (const Case& c : kc) {
      const std::string tag = describe(c) + " (symbolic kernel)";
      Fields f;
      add_fields(c.a, true, &f);
      PluginPtr p = create_named(env, c.op, f);
      auto* b = p ? build_of(p.get()) : nullptr;
      if (!b) {
        check(false, tag + ": create");
        continue;
      }
      TestExprBuilder eb;
      ExprShape ws{{eb.constant_expr(c.w[0]), eb.constant_expr(c.w[1]), eb.symbol("K0"), eb.symbol("K1")}};
      ExprShape xs{{eb.symbol("N"), eb.constant_expr(c.x[1]), eb.symbol("D0"), eb.symbol("D1")}};
      nv::DimsExprs ins[2] = {to_exprs(xs), to_exprs(ws)};
      nv::DimsExprs out[1];
      env.logger->clear();
      int rc = b->getOutputShapes(ins, 2, nullptr, 0, out, 1, eb);
      check(rc == 0, tag + ": accepted" + (rc ? " (" + env.logger->last_error() + ")" : ""));
      if (rc != 0) continue;
      int bad = 0, evaluated = 0;
      std::string first_bad;
      for (int64_t k0 = 1; k0 <= 4; ++k0) {
        for (int64_t k1 = 1; k1 <= 3; ++k1) {
          for (int64_t delta : {0, 3, 8}) {
            std::vector<int64_t> x = c.x, w = c.w;
            x[2] += delta;
            x[3] += delta;
            w[2] = k0;
            w[3] = k1;
            const Geo want = geometry(c, x, w);
            if (!want.ok) continue;
            std::vector<int64_t> got;
            ++evaluated;
            std::map<std::string, int64_t> sym = {{"N", x[0]}, {"D0", x[2]}, {"D1", x[3]}, {"K0", k0}, {"K1", k1}};
            if (!eval_dims(eb, out[0], sym, &got) || got != want.y) {
              ++bad;
              if (first_bad.empty())
                first_bad = "X " + dims_str(x) + " W " + dims_str(w) + ": got " + dims_str(got) + ", want " +
                            dims_str(want.y);
            }
          }
        }
      }
      check(bad == 0 && evaluated > 20, tag + ": evaluates to the rule for " + std::to_string(evaluated) +
                                            " kernel/size combinations" + (bad ? " (" + first_bad + ")" : ""));
      check(eb.negative_constants() == 0, tag + ": no negative constants");
    }
  }

  // What is known at build time is checked at build time, with conv_op's messages.
  struct Bad {
    const char* op;
    std::vector<int64_t> x, w, b;
    Attrs a;
    std::string expect;
  };
  std::vector<Bad> bad;
  Attrs none;
  bad.push_back({"Conv", {1, 4, 8, 8}, {8, 3, 3, 3}, {}, none,
                 "Conv: input 'W' (index 1) has shape [8, 3, 3, 3]; dim 1 is 3, expected 4 (X's 4 channels / group 1)"});
  bad.push_back({"Conv", {1, 4, 2, 2}, {8, 4, 3, 3}, {}, none,
                 "Conv: no output along spatial dim 0 (axis 2 of X): input size 2 + pads 0 + 0 = 2 is smaller than "
                 "the dilated kernel 3 (kernel 3, dilation 1)"});
  Attrs s3;
  s3.strides = {1, 1, 1};
  bad.push_back({"Conv", {1, 4, 8, 8}, {8, 4, 3, 3}, {}, s3,
                 "Conv: attribute 'strides' has 3 values [1, 1, 1], expected 2 (one value for X's 2 spatial dims)"});
  bad.push_back({"Conv", {1, 4, 8, 8}, {8, 4, 3, 3}, {7}, none, "Conv: input 'B' (index 2) has shape [7], expected [8]"});
  bad.push_back({"Conv", {1, 4, 8}, {8, 4, 3, 3}, {}, none,
                 "Conv: input 'W' (index 1) has shape [8, 4, 3, 3] (rank 4), expected rank 3 like X"});
  bad.push_back({"Conv", {4, 8}, {8, 4, 3}, {}, none, "Conv: input 'X' (index 0) has shape [4, 8] (rank 2), expected rank 3, 4 or 5"});
  Attrs g3;
  g3.group = 3;
  bad.push_back({"Conv", {1, 4, 8, 8}, {6, 1, 3, 3}, {}, g3,
                 "Conv: input 'X' (index 0) has 4 channels (dim 1 of shape [1, 4, 8, 8]), not divisible by group 3"});
  Attrs op2;
  op2.output_padding = {2, 2};
  bad.push_back({"ConvTranspose", {1, 4, 8, 8}, {4, 2, 3, 3}, {}, op2,
                 "ConvTranspose: attribute 'output_padding' is [2, 2], expected each value < max(stride, dilation)"});
  bad.push_back({"ConvTranspose", {1, 4, 8, 8}, {3, 2, 3, 3}, {}, none,
                 "ConvTranspose: input 'W' (index 1) has shape [3, 2, 3, 3]; dim 0 is 3, expected 4 (the channels of X)"});
  Attrs os;
  os.strides = {2, 2};
  os.output_shape = {20, 16};
  bad.push_back({"ConvTranspose", {1, 4, 8, 8}, {4, 2, 3, 3}, {}, os,
                 "ConvTranspose: attribute 'output_shape' is [20, 16], but along spatial dim 0 (axis 2 of X) at most 18"});
  for (const Bad& x : bad) {
    Fields f;
    add_fields(x.a, true, &f);
    PluginPtr p = create_named(env, x.op, f);
    auto* b = p ? build_of(p.get()) : nullptr;
    if (!b) {
      check(false, std::string(x.op) + ": create");
      continue;
    }
    TestExprBuilder eb;
    auto exprs = [&](const std::vector<int64_t>& d) {
      ExprShape s;
      for (int64_t v : d) s.d.push_back(eb.constant_expr(v));
      return to_exprs(s);
    };
    std::vector<nv::DimsExprs> ins = {exprs(x.x), exprs(x.w)};
    if (!x.b.empty()) ins.push_back(exprs(x.b));
    nv::DimsExprs out[1];
    env.logger->clear();
    const int rc = b->getOutputShapes(ins.data(), int32_t(ins.size()), nullptr, 0, out, 1, eb);
    check(rc == -1 && env.logger->saw_error(x.expect) && env.logger->saw_error("(layer 'conv_3')"),
          "refused at build time: \"" + x.expect + "\"" + (rc == -1 ? "" : " (accepted)") +
              (env.logger->saw_error(x.expect) ? "" : " (got \"" + env.logger->last_error() + "\")"));
  }
  // Counts and shape inputs.
  {
    Fields f;
    PluginPtr p = create_named(env, "Conv", f);
    auto* b = p ? build_of(p.get()) : nullptr;
    if (b) {
      TestExprBuilder eb;
      ExprShape x{{eb.constant_expr(1), eb.constant_expr(4), eb.constant_expr(8)}};
      ExprShape w{{eb.constant_expr(2), eb.constant_expr(4), eb.constant_expr(3)}};
      ExprShape bb{{eb.constant_expr(2)}};
      nv::DimsExprs ins[4] = {to_exprs(x), to_exprs(w), to_exprs(bb), to_exprs(bb)};
      nv::DimsExprs out[2];
      env.logger->clear();
      check(b->getOutputShapes(ins, 4, nullptr, 0, out, 1, eb) == -1 &&
                env.logger->saw_error("Conv: got 4 inputs, expected at most 3 (X, W, B?)"),
            "Conv: 4 inputs refused (" + env.logger->last_error() + ")");
      env.logger->clear();
      check(b->getOutputShapes(ins, 1, nullptr, 0, out, 1, eb) == -1 &&
                env.logger->saw_error("Conv: input 'W' (index 1) is missing; it is required"),
            "Conv: X alone refused (" + env.logger->last_error() + ")");
      env.logger->clear();
      check(b->getOutputShapes(ins, 2, nullptr, 0, out, 2, eb) == -1 &&
                env.logger->saw_error("Conv: the layer has 2 outputs, expected 1 (Y)"),
            "Conv: 2 outputs refused (" + env.logger->last_error() + ")");
      env.logger->clear();
      check(b->getOutputShapes(ins, 2, ins, 1, out, 1, eb) == -1 && env.logger->saw_error("shape inputs"),
            "Conv: shape inputs refused");
      check(b->getOutputShapes(ins, 3, nullptr, 0, out, 1, eb) == 0 && out[0].d[2]->isConstant() &&
                out[0].d[2]->getConstantValue() == 6,
            "Conv: X [1, 4, 8], W [2, 4, 3], B [2] -> Y [1, 2, 6]");
    } else {
      check(false, "Conv: create");
    }
  }
}

static void test_types_and_formats(const Env& env) {
  std::printf("[conv getOutputDataTypes / supportsFormatCombination]\n");
  for (const char* op : OPS) {
    const std::string n = op;
    Fields f;
    PluginPtr p = create_named(env, op, f);
    auto* b = p ? build_of(p.get()) : nullptr;
    if (!b) {
      check(false, n + ": create");
      continue;
    }
    for (int nin : {2, 3}) {
      const std::string ni = " (" + std::to_string(nin) + " inputs)";
      for (nv::DataType t : FLOAT_TYPES) {
        std::vector<nv::DataType> in(size_t(nin), t);
        nv::DataType out = nv::DataType::kINT8;
        check(b->getOutputDataTypes(&out, 1, in.data(), nin) == 0 && out == t,
              n + ": output type for X " + std::to_string(int(t)) + " = X's type" + ni);
      }
      std::vector<nv::DataType> in(size_t(nin), nv::DataType::kHALF);
      in[size_t(nin - 1)] = nv::DataType::kFLOAT;
      nv::DataType out;
      env.logger->clear();
      const std::string slot = nin == 2 ? "input 'W' (index 1)" : "input 'B' (index 2)";
      check(b->getOutputDataTypes(&out, 1, in.data(), nin) == -1 &&
                env.logger->saw_error(n + ": " + slot + " is float32, expected float16 (the dtype of X)"),
            n + ": float32 " + slot + " with float16 X refused (" + env.logger->last_error() + ")");
      std::fill(in.begin(), in.end(), nv::DataType::kINT32);
      env.logger->clear();
      check(b->getOutputDataTypes(&out, 1, in.data(), nin) == -1 &&
                env.logger->saw_error(n + ": input 'X' (index 0) is int32, expected float32, float16 or bfloat16"),
            n + ": int32 X refused" + ni);

      // Accept/refuse table over every position, type and format.
      const int nout = 1;
      std::vector<nv::DynamicPluginTensorDesc> io(size_t(nin + nout));
      for (auto& d : io) d = dyn_desc({1, 4, 8, 8}, nv::DataType::kFLOAT);
      int table_errors = 0, accepted = 0, asked = 0;
      for (nv::DataType xt : FLOAT_TYPES) {
        io[0].desc.type = xt;
        for (int pos = 0; pos < nin + nout; ++pos) {
          for (nv::TensorFormat fmt : {nv::TensorFormat::kLINEAR, nv::TensorFormat::kCHW32, nv::TensorFormat::kHWC8,
                                       nv::TensorFormat::kHWC}) {
            for (nv::DataType t : PROBE_TYPES) {
              if (pos == 0 && t != xt) continue;
              auto saved = io[size_t(pos)];
              io[size_t(pos)].desc.type = t;
              io[size_t(pos)].desc.format = fmt;
              const bool got = b->supportsFormatCombination(pos, io.data(), nin, nout);
              io[size_t(pos)] = saved;
              bool want = fmt == nv::TensorFormat::kLINEAR;
              if (pos == 0)
                want = want && (t == nv::DataType::kFLOAT || t == nv::DataType::kHALF || t == nv::DataType::kBF16);
              else
                want = want && t == xt;
              ++asked;
              accepted += got;
              if (got != want) {
                ++table_errors;
                std::printf("    %s: pos %d type %d format %d: got %d want %d\n", op, pos, int(t), int(fmt), got, want);
              }
            }
          }
        }
      }
      check(table_errors == 0, n + ": supportsFormatCombination table" + ni + " (" + std::to_string(asked) +
                                   " probes, " + std::to_string(accepted) + " accepted)");
      env.logger->clear();
      check(!b->supportsFormatCombination(nin + nout, io.data(), nin, nout) && env.logger->saw_error("out of range"),
            n + ": position out of range -> false + error" + ni);
    }
    std::vector<nv::DynamicPluginTensorDesc> io(4, dyn_desc({1, 4, 8, 8}, nv::DataType::kFLOAT));
    env.logger->clear();
    check(!b->supportsFormatCombination(0, io.data(), 1, 1) &&
              env.logger->saw_error(n + ": the layer has 1 inputs, expected 2 or 3 (X, W, B?)"),
          n + ": one input -> false + error");
  }
}

static std::vector<nv::DynamicPluginTensorDesc> dyn_inputs(const Case& c, nv::DataType t,
                                                           const std::vector<int64_t>& x_dims) {
  std::vector<nv::DynamicPluginTensorDesc> in = {dyn_desc(x_dims, t), dyn_desc(c.w, t)};
  if (c.bias) in.push_back(dyn_desc({c_out_of(c)}, t));
  return in;
}

static void test_configure_and_serialize(const Env& env, TestRecorder& recorder) {
  std::printf("[conv configurePlugin / getWorkspaceSize / serialize / attachToContext / onShapeChange]\n");
  unsetenv("TRT_FASTOPS_CONV_MAX_WORKSPACE_MB");
  std::vector<Case> cases;
  {
    Attrs a;
    a.strides = {2, 1};
    a.pads = {1, 0, 1, 2};
    a.dilations = {1, 2};
    a.group = 2;
    a.activation = "Relu";
    cases.push_back(Case{"Conv", {2, 8, 12, 10}, {32, 4, 3, 3}, true, a});
    a = Attrs();
    a.strides = {2, 2};
    a.output_padding = {1, 0};
    a.auto_pad = "SAME_LOWER";
    a.group = 2;
    a.activation = "Gelu";
    cases.push_back(Case{"ConvTranspose", {2, 8, 6, 5}, {8, 16, 3, 2}, true, a});
  }
  for (const Case& c : cases) {
    const std::string n = c.op;
    Fields f;
    add_fields(c.a, true, &f);
    f.int32("max_workspace_mb", 5);
    PluginPtr p = create_named(env, c.op, f);
    auto* b = p ? build_of(p.get()) : nullptr;
    if (!b) {
      check(false, n + ": create (" + env.logger->last_error() + ")");
      continue;
    }
    const Geo g = geometry(c, c.x, c.w);
    // configurePlugin with open N and spatial dims.
    std::vector<int64_t> open = c.x;
    open[0] = open[2] = open[3] = -1;
    auto in = dyn_inputs(c, nv::DataType::kHALF, open);
    std::vector<int64_t> y_open = g.y;
    y_open[0] = y_open[2] = y_open[3] = -1;
    std::vector<nv::DynamicPluginTensorDesc> out = {dyn_desc(y_open, nv::DataType::kHALF)};
    env.logger->clear();
    check(b->configurePlugin(in.data(), int32_t(in.size()), out.data(), 1) == 0,
          n + ": configurePlugin with open dims (" + env.logger->last_error() + ")");
    auto bad = in;
    // Conv: W's dim 1 must be C_in / group; ConvTranspose: W's dim 0 must be C_in.
    bad[1] = transpose_op(c.op) ? dyn_desc({c.w[0] + 1, c.w[1], c.w[2], c.w[3]}, nv::DataType::kHALF)
                                : dyn_desc({c.w[0], c.w[1] + 1, c.w[2], c.w[3]}, nv::DataType::kHALF);
    env.logger->clear();
    check(b->configurePlugin(bad.data(), int32_t(bad.size()), out.data(), 1) == -1 &&
              env.logger->saw_error(n + ": input 'W' (index 1) has shape"),
          n + ": configurePlugin refuses a wrong W (" + env.logger->last_error() + ")");

    // Workspace: from the profile's largest shapes, max(fallback, max_workspace_mb MiB).
    auto ranged = [&](std::vector<int64_t> lo, std::vector<int64_t> hi) {
      auto v = dyn_inputs(c, nv::DataType::kHALF, open);
      v[0].min = to_dims(lo);
      v[0].opt = to_dims(lo);
      v[0].max = to_dims(hi);
      return v;
    };
    std::vector<int64_t> small = c.x, large = c.x;
    large[0] *= 4;
    large[2] *= 3;
    large[3] *= 2;
    auto in_range = ranged(small, large);
    auto in_large = ranged(large, large);
    const size_t ws = b->getWorkspaceSize(in_range.data(), int32_t(in_range.size()), out.data(), 1);
    const size_t ws_large = b->getWorkspaceSize(in_large.data(), int32_t(in_large.size()), out.data(), 1);
    check(ws == ws_large && ws >= (size_t(5) << 20), n + ": getWorkspaceSize follows the profile's max shapes and "
                                                         "covers max_workspace_mb = 5 (" + std::to_string(ws) + " bytes)");
    {
      Fields z;
      add_fields(c.a, true, &z);
      z.int64("max_workspace_mb", 0);
      PluginPtr q = create_named(env, c.op, z);
      auto* bq = q ? build_of(q.get()) : nullptr;
      const size_t ws0 = bq ? bq->getWorkspaceSize(in_range.data(), int32_t(in_range.size()), out.data(), 1) : 1;
      auto in_small = ranged(small, small);
      const size_t ws0_small = bq ? bq->getWorkspaceSize(in_small.data(), int32_t(in_small.size()), out.data(), 1) : 1;
      const size_t w_bytes = size_t(c.w[0] * c.w[1] * c.w[2] * c.w[3]) * 2;
      check(bq && ws0 < (size_t(1) << 20) && ws == std::max(ws0, size_t(5) << 20),
            n + ": max_workspace_mb = 0 asks only for trt_fastops' kernels (" + std::to_string(ws0) +
                " bytes; packed weights of a " + std::to_string(w_bytes) + "-byte W at most a few times that)");
      check(bq && ws0_small <= ws0, n + ": the workspace bound does not shrink as shapes grow");
    }
    env.logger->clear();
    auto open_max = in;  // max dims left open: a malformed call
    check(b->getWorkspaceSize(open_max.data(), int32_t(open_max.size()), out.data(), 1) == 0 &&
              env.logger->saw_error(n + ": getWorkspaceSize got open dims in the profile's maximum shapes"),
          n + ": getWorkspaceSize with open max dims -> 0 + error (" + env.logger->last_error() + ")");

    // Serialize -> deserialize through the creator at run time.
    const nv::PluginFieldCollection* fc = runtime_of(p.get())->getFieldsToSerialize();
    auto before = dump_fields_full(fc);
    const std::vector<std::string> lists = {"strides", "pads", "dilations", "output_padding"};
    size_t expect_n = 4;  // auto_pad, group, activation, max_workspace_mb
    for (const std::string& l : lists) expect_n += before.count(l);
    check(before.size() == expect_n && before["max_workspace_mb"].values == std::vector<double>{5} &&
              before["group"].values == std::vector<double>{2} && before["activation"].text == c.a.activation &&
              before["auto_pad"].text == (c.a.auto_pad.empty() ? "NOTSET" : c.a.auto_pad),
          n + ": serializes the given attributes, auto_pad, group, activation, max_workspace_mb");
    auto* cr = find_creator(env, c.op, "1", "trt_fastops");
    PluginPtr r(cr->createPlugin("conv_3", fc, nv::TensorRTPhase::kRUNTIME));
    check(bool(r), n + ": createPlugin(kRUNTIME) from getFieldsToSerialize");
    if (!r) continue;
    auto after = dump_fields_full(runtime_of(r.get())->getFieldsToSerialize());
    check(after == before, n + ": deserialized plugin serializes the same fields");
    auto* br = build_of(r.get());
    check(br->configurePlugin(in.data(), int32_t(in.size()), out.data(), 1) == 0 &&
              br->getWorkspaceSize(in_range.data(), int32_t(in_range.size()), out.data(), 1) == ws,
          n + ": deserialized plugin configures the same and asks for the same workspace");

    // attachToContext: a new plugin whose errors go to the context's recorder.
    TestResourceContext ctx(&recorder);
    PluginPtr a(runtime_of(r.get())->attachToContext(&ctx));
    check(bool(a) && a.get() != r.get(), n + ": attachToContext returns a new plugin");
    if (!a) continue;
    auto* ra = runtime_of(a.get());
    std::vector<nv::PluginTensorDesc> tin = {tensor_desc(c.x, nv::DataType::kHALF), tensor_desc(c.w, nv::DataType::kHALF),
                                             tensor_desc({c_out_of(c)}, nv::DataType::kHALF)};
    std::vector<nv::PluginTensorDesc> tout = {tensor_desc(g.y, nv::DataType::kHALF)};
    recorder.clear();
    check(ra->onShapeChange(tin.data(), 3, tout.data(), 1) == 0,
          n + ": onShapeChange with known shapes (" + recorder.last() + ")");
    recorder.clear();
    env.logger->clear();
    auto tbad = tin;
    tbad[2] = tensor_desc({c_out_of(c) + 1}, nv::DataType::kHALF);
    check(ra->onShapeChange(tbad.data(), 3, tout.data(), 1) == -1 &&
              recorder.saw(n + ": input 'B' (index 2) has shape [" + std::to_string(c_out_of(c) + 1) + "]") &&
              recorder.saw("(layer 'conv_3')") && env.logger->errors().empty(),
          n + ": attached plugin reports to the recorder, not the logger (" + recorder.last() + ")");
    recorder.clear();
    auto ybad = tout;
    std::vector<int64_t> y_wrong = g.y;
    y_wrong[2] += 1;
    ybad[0] = tensor_desc(y_wrong, nv::DataType::kHALF);
    check(ra->onShapeChange(tin.data(), 3, ybad.data(), 1) == -1 &&
              recorder.saw(n + ": output 'Y' has shape " + dims_str(y_wrong) + ", expected " + dims_str(g.y)),
          n + ": onShapeChange refuses a Y of the wrong shape (" + recorder.last() + ")");
    recorder.clear();
    void* dummy_out[1] = {};
    const void* dummy_in[3] = {};
    check(ra->enqueue(tin.data(), tout.data(), dummy_in, dummy_out, nullptr, nullptr) == -1 &&
              recorder.saw(n + ": enqueue called without a successful onShapeChange"),
          n + ": enqueue after a failed onShapeChange refused (" + recorder.last() + ")");
    // After a good onShapeChange, null data pointers are refused before any launch.
    check(ra->onShapeChange(tin.data(), 3, tout.data(), 1) == 0, n + ": onShapeChange again");
    recorder.clear();
    check(ra->enqueue(tin.data(), tout.data(), dummy_in, dummy_out, nullptr, nullptr) == -1 &&
              recorder.saw(n + ": input 'X' (index 0) has no data (null pointer)"),
          n + ": enqueue with null pointers refused (" + recorder.last() + ")");
    // clone keeps the configuration.
    PluginPtr cl(a.get()->clone());
    check(bool(cl) && cl.get() != a.get(), n + ": clone returns a new plugin");
    if (cl) check(dump_fields_full(runtime_of(cl.get())->getFieldsToSerialize()) == before, n + ": clone serializes the same fields");
    // Not attached: errors go to the logger.
    env.logger->clear();
    check(runtime_of(r.get())->onShapeChange(tbad.data(), 3, tout.data(), 1) == -1 && env.logger->saw_error(n + ": "),
          n + ": unattached plugin reports to the logger");
  }
}

// ---------------------------------------------------------------------------
// Enqueue on the GPU against a float64 reference

static double activate(const std::string& act, double v) {
  if (act == "Relu") return v < 0 ? 0 : v;
  if (act == "Silu") return v / (1 + std::exp(-v));
  if (act == "Gelu") return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  return v;
}

// y (before activation) and the same convolution of absolute values (error scale).
static void reference(const Case& c, const Geo& g, const HostTensor& x, const HostTensor& w, const HostTensor* b,
                      std::vector<double>* y, std::vector<double>* y_abs) {
  const bool tr = transpose_op(c.op);
  const int64_t cg = g.c_in / g.group, kg = g.c_out / g.group;
  const int64_t in_sp = g.in[0] * g.in[1] * g.in[2], out_sp = g.out[0] * g.out[1] * g.out[2];
  const int64_t ks = g.k[0] * g.k[1] * g.k[2];
  y->assign(size_t(g.n * g.c_out * out_sp), 0.0);
  y_abs->assign(y->size(), 0.0);
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t co = 0; co < g.c_out; ++co) {
      const double bv = b ? b->values[size_t(co)] : 0.0;
      for (int64_t o = 0; o < out_sp; ++o) {
        (*y)[size_t((n * g.c_out + co) * out_sp + o)] = bv;
        (*y_abs)[size_t((n * g.c_out + co) * out_sp + o)] = std::fabs(bv);
      }
    }
  }
  // One tap: input position i[3] of channel ci, output position o[3] of channel co, weight index wi.
  auto accumulate = [&](int64_t n, int64_t ci, const int64_t* ip, int64_t co, const int64_t* op, int64_t wi) {
    for (int d = 0; d < 3; ++d)
      if (op[d] < 0 || op[d] >= g.out[d] || ip[d] < 0 || ip[d] >= g.in[d]) return;
    const double xv = x.values[size_t((n * g.c_in + ci) * in_sp + (ip[0] * g.in[1] + ip[1]) * g.in[2] + ip[2])];
    const double wv = w.values[size_t(wi)];
    const size_t yi = size_t((n * g.c_out + co) * out_sp + (op[0] * g.out[1] + op[1]) * g.out[2] + op[2]);
    (*y)[yi] += xv * wv;
    (*y_abs)[yi] += std::fabs(xv * wv);
  };
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t grp = 0; grp < g.group; ++grp) {
      for (int64_t cl = 0; cl < cg; ++cl) {
        const int64_t ci = grp * cg + cl;
        for (int64_t col = 0; col < kg; ++col) {
          const int64_t co = grp * kg + col;
          for (int64_t t = 0; t < ks; ++t) {
            const int64_t kk[3] = {t / (g.k[1] * g.k[2]), t / g.k[2] % g.k[1], t % g.k[2]};
            // Conv W [c_out, c_in / group, k...]; ConvTranspose W [c_in, c_out / group, k...].
            const int64_t wi = tr ? (ci * kg + col) * ks + t : (co * cg + cl) * ks + t;
            if (!tr) {
              for (int64_t o = 0; o < out_sp; ++o) {
                const int64_t op[3] = {o / (g.out[1] * g.out[2]), o / g.out[2] % g.out[1], o % g.out[2]};
                int64_t ip[3];
                for (int d = 0; d < 3; ++d) ip[d] = op[d] * g.s[d] - g.pb[d] + kk[d] * g.d[d];
                accumulate(n, ci, ip, co, op, wi);
              }
            } else {
              for (int64_t i = 0; i < in_sp; ++i) {
                const int64_t ip[3] = {i / (g.in[1] * g.in[2]), i / g.in[2] % g.in[1], i % g.in[2]};
                int64_t op[3];
                for (int d = 0; d < 3; ++d) op[d] = ip[d] * g.s[d] - g.pb[d] + kk[d] * g.d[d];
                accumulate(n, ci, ip, co, op, wi);
              }
            }
          }
        }
      }
    }
  }
}

static void run_enqueue_case(const Env& env, const Case& c, DType dt, int64_t max_workspace_mb, TestRecorder& recorder,
                             std::mt19937& rng) {
  const Geo g = geometry(c, c.x, c.w);
  std::string tag = describe(c) + " " + trt_fastops::dtype_name(dt);
  if (max_workspace_mb >= 0) tag += " max_workspace_mb " + std::to_string(max_workspace_mb);
  const nv::DataType tt = trt_type(dt);

  // Build-phase plugin -> workspace -> fields -> runtime plugin -> attach, as an engine does.
  Fields f;
  add_fields(c.a, true, &f);
  if (max_workspace_mb >= 0) f.int64("max_workspace_mb", max_workspace_mb);
  PluginPtr built = create_named(env, c.op, f);
  if (!built) {
    check(false, tag + ": create (" + env.logger->last_error() + ")");
    return;
  }
  std::vector<nv::DynamicPluginTensorDesc> din = dyn_inputs(c, tt, c.x);
  std::vector<nv::DynamicPluginTensorDesc> dout = {dyn_desc(g.y, tt)};
  auto* b = build_of(built.get());
  if (b->configurePlugin(din.data(), int32_t(din.size()), dout.data(), 1) != 0) {
    check(false, tag + ": configurePlugin (" + env.logger->last_error() + ")");
    return;
  }
  const size_t ws_bytes = b->getWorkspaceSize(din.data(), int32_t(din.size()), dout.data(), 1);
  auto* cr = find_creator(env, c.op, "1", "trt_fastops");
  PluginPtr loaded(cr->createPlugin("conv_3", runtime_of(built.get())->getFieldsToSerialize(), nv::TensorRTPhase::kRUNTIME));
  TestResourceContext ctx(&recorder);
  PluginPtr plugin(loaded ? runtime_of(loaded.get())->attachToContext(&ctx) : nullptr);
  if (!plugin) {
    check(false, tag + ": deserialize + attachToContext");
    return;
  }
  auto* rt = runtime_of(plugin.get());

  HostTensor x = random_tensor(dt, c.x, -1, 1, rng);
  HostTensor w = random_tensor(dt, c.w, -1, 1, rng);
  HostTensor bias;
  if (c.bias) bias = random_tensor(dt, {c_out_of(c)}, -0.5, 0.5, rng);
  std::vector<nv::PluginTensorDesc> in_desc = {tensor_desc(c.x, tt), tensor_desc(c.w, tt)};
  if (c.bias) in_desc.push_back(tensor_desc({c_out_of(c)}, tt));
  std::vector<nv::PluginTensorDesc> out_desc = {tensor_desc(g.y, tt)};
  recorder.clear();
  if (rt->onShapeChange(in_desc.data(), int32_t(in_desc.size()), out_desc.data(), 1) != 0) {
    check(false, tag + ": onShapeChange (" + recorder.last() + ")");
    return;
  }

  DeviceBuffer dx, dw, db, dy, dws;
  CUDA_OK(cudaMalloc(&dx.ptr, x.bytes.size()));
  CUDA_OK(cudaMemcpy(dx.ptr, x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMalloc(&dw.ptr, w.bytes.size()));
  CUDA_OK(cudaMemcpy(dw.ptr, w.bytes.data(), w.bytes.size(), cudaMemcpyHostToDevice));
  if (c.bias) {
    CUDA_OK(cudaMalloc(&db.ptr, bias.bytes.size()));
    CUDA_OK(cudaMemcpy(db.ptr, bias.bytes.data(), bias.bytes.size(), cudaMemcpyHostToDevice));
  }
  const int64_t y_numel = numel(g.y);
  const std::vector<uint8_t> poison = nan_bytes(dt, y_numel);
  CUDA_OK(cudaMalloc(&dy.ptr, poison.size()));
  if (ws_bytes > 0) CUDA_OK(cudaMalloc(&dws.ptr, ws_bytes));  // exactly what the plugin asked TensorRT for
  const void* in_ptrs[3] = {dx.ptr, dw.ptr, db.ptr};
  void* out_ptrs[1] = {dy.ptr};

  std::vector<double> ref, ref_abs;
  reference(c, g, x, w, c.bias ? &bias : nullptr, &ref, &ref_abs);
  const double rtol = dt == DType::f32 ? 2e-6 : dt == DType::f16 ? 1e-3 : 8e-3;
  const double acc = dt == DType::f32 ? 2e-5 : dt == DType::f16 ? 2e-3 : 8e-3;
  const double atol = dt == DType::f16 ? 1.2e-7 : 0.0;
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreate(&stream));
  // Twice: the first enqueue plans (cache miss), the second replays the plan.
  for (int round = 0; round < 2; ++round) {
    const std::string rtag = tag + (round ? " (replay)" : " (first)");
    CUDA_OK(cudaMemcpy(dy.ptr, poison.data(), poison.size(), cudaMemcpyHostToDevice));
    recorder.clear();
    const int rc = rt->enqueue(in_desc.data(), out_desc.data(), in_ptrs, out_ptrs, dws.ptr, stream);
    const cudaError_t sync = cudaStreamSynchronize(stream);
    check(rc == 0, rtag + ": enqueue returns 0" + (rc ? " (" + recorder.last() + ")" : ""));
    if (sync != cudaSuccess || rc != 0) {
      check(sync == cudaSuccess, rtag + ": stream sync: " + cudaGetErrorString(sync));
      break;
    }
    std::vector<uint8_t> got(poison.size());
    CUDA_OK(cudaMemcpy(got.data(), dy.ptr, got.size(), cudaMemcpyDeviceToHost));
    int64_t bad = 0;
    double worst = 0;
    for (int64_t i = 0; i < y_numel; ++i) {
      const double want = activate(c.a.activation, ref[size_t(i)]);
      const double v = decode(dt, got.data(), i);
      const double bound = 1.5 * (rtol * std::fabs(want) + (acc + rtol) * ref_abs[size_t(i)]) + atol + 1e-30;
      const double ratio = std::isnan(v) ? INFINITY : std::fabs(v - want) / bound;
      worst = std::max(worst, ratio);
      bad += !(ratio <= 1.0);
    }
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.3g", worst);
    check(bad == 0, rtag + ": Y matches the float64 reference (" + std::to_string(bad) + " of " +
                        std::to_string(y_numel) + " outside the bound, worst " + buf + " x bound)");
    check(recorder.errors.empty(), rtag + ": no errors recorded");
  }
  cudaStreamDestroy(stream);
  CUDA_OK(cudaGetLastError());
}

}  // namespace conv_contract

static void test_conv_plugins(const Env& env, TestRecorder& recorder) {
  conv_contract::test_creators(env);
  conv_contract::test_fields(env);
  conv_contract::test_capabilities(env);
  conv_contract::test_output_shapes(env);
  conv_contract::test_types_and_formats(env);
  conv_contract::test_configure_and_serialize(env, recorder);
}

static void test_conv_enqueue(const Env& env, TestRecorder& recorder) {
  std::printf("[conv enqueue]\n");
  unsetenv("TRT_FASTOPS_CONV_MAX_WORKSPACE_MB");
  std::mt19937 rng(4321);
  std::vector<conv_contract::Case> cases = conv_contract::shape_cases();
  // Wide enough for the GEMM kernels and cuDNN's tensor-core engines.
  conv_contract::Attrs a;
  a.pads = {1, 1, 1, 1};
  a.activation = "Relu";
  cases.push_back(conv_contract::Case{"Conv", {2, 32, 16, 16}, {64, 32, 3, 3}, true, a});
  a = conv_contract::Attrs();
  a.strides = {2, 2};
  a.pads = {1, 1, 1, 1};
  a.output_padding = {1, 1};
  cases.push_back(conv_contract::Case{"ConvTranspose", {2, 32, 8, 8}, {32, 32, 3, 3}, true, a});
  for (const conv_contract::Case& c : cases)
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) conv_contract::run_enqueue_case(env, c, dt, -1, recorder, rng);
  // No cuDNN workspace: engines that need one give way to trt_fastops' kernels within the bound.
  for (size_t i = cases.size() - 2; i < cases.size(); ++i)
    conv_contract::run_enqueue_case(env, cases[i], DType::f16, 0, recorder, rng);
}
