#include "plugins/conv/conv_cpu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "plugins/common/dtype.h"
#include "plugins/common/host_elements.h"

namespace trt_fastops::conv {
namespace {

double activate(Activation a, double v) {
  switch (a) {
    case Activation::none: return v;
    case Activation::relu: return v < 0.0 ? 0.0 : v;  // NaN stays NaN
    case Activation::silu: return v / (1.0 + std::exp(-v));
    case Activation::gelu: return 0.5 * v * (1.0 + std::erf(v * 0.70710678118654752440));
  }
  return v;
}

// ceil(a / b) and floor(a / b) for b > 0 and any sign of a.
int64_t div_floor(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
int64_t div_ceil(int64_t a, int64_t b) { return -div_floor(-a, b); }

// Sizes of the three spatial dims as one 3-D problem (unused dims are 1).
struct Geometry {
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3];
  int64_t in_plane, out_plane, k_plane;  // products
  int64_t c_in_g, c_out_g;               // channels per group
};

Geometry geometry(const ConvParams& p) {
  Geometry g{};
  // Spatial dims right-aligned into 3 slots so the innermost loop is always the last dim.
  const int off = CONV_MAX_SPATIAL - p.spatial;
  for (int i = 0; i < CONV_MAX_SPATIAL; ++i) {
    const int j = i - off;
    const bool used = j >= 0;
    g.in[i] = used ? p.in[j] : 1;
    g.out[i] = used ? p.out[j] : 1;
    g.k[i] = used ? p.kernel[j] : 1;
    g.s[i] = used ? p.stride[j] : 1;
    g.d[i] = used ? p.dilation[j] : 1;
    g.pb[i] = used ? p.pad_begin[j] : 0;
  }
  g.in_plane = g.in[0] * g.in[1] * g.in[2];
  g.out_plane = g.out[0] * g.out[1] * g.out[2];
  g.k_plane = g.k[0] * g.k[1] * g.k[2];
  g.c_in_g = p.c_in / p.group;
  g.c_out_g = p.c_out / p.group;
  return g;
}

// Input data of one (batch, group) slice and weights of one group, in float64,
// converted once per slice and reused by every plane of the chunk that needs them.
struct SliceCache {
  int64_t x_key = -1, w_key = -1;
  std::vector<double> x, w;
};

void load_x_slice(const ConvParams& p, const Geometry& g, int64_t b, int64_t grp, SliceCache* c) {
  const int64_t key = b * p.group + grp;
  if (c->x_key == key) return;
  const int64_t n = g.c_in_g * g.in_plane;
  c->x.resize(size_t(n));
  const int64_t base = (b * p.c_in + grp * g.c_in_g) * g.in_plane;
  for (int64_t i = 0; i < n; ++i) c->x[size_t(i)] = load_element(p.x, p.dtype, base + i);
  c->x_key = key;
}

// Conv weights of output channel oc: [c_in_g, k...]. ConvTranspose weights of
// group grp: [c_in_g, c_out_g, k...] (the whole group, all output channels).
void load_w_conv(const ConvParams& p, const Geometry& g, int64_t oc, SliceCache* c) {
  if (c->w_key == oc) return;
  const int64_t n = g.c_in_g * g.k_plane;
  c->w.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) c->w[size_t(i)] = load_element(p.w, p.dtype, oc * n + i);
  c->w_key = oc;
}

void load_w_transpose(const ConvParams& p, const Geometry& g, int64_t grp, SliceCache* c) {
  if (c->w_key == grp) return;
  const int64_t n = g.c_in_g * g.c_out_g * g.k_plane;
  c->w.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) c->w[size_t(i)] = load_element(p.w, p.dtype, grp * n + i);
  c->w_key = grp;
}

// acc[out plane] += sum over input channels of the group and kernel taps.
// Innermost loop: along the last spatial dim, contiguous in acc, strided in x.
void conv_plane(const Geometry& g, const double* x, const double* w, double* acc) {
  for (int64_t ic = 0; ic < g.c_in_g; ++ic) {
    const double* xc = x + ic * g.in_plane;
    const double* wc = w + ic * g.k_plane;
    for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
      for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
        // Valid output range along the last dim for every k2 is computed below.
        for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
          const double wv = wc[(k0 * g.k[1] + k1) * g.k[2] + k2];
          const int64_t off2 = k2 * g.d[2] - g.pb[2];
          // o2 * s2 + off2 in [0, in2)
          const int64_t o2_lo = std::max<int64_t>(0, div_ceil(-off2, g.s[2]));
          const int64_t o2_hi = std::min<int64_t>(g.out[2], div_floor(g.in[2] - 1 - off2, g.s[2]) + 1);
          if (o2_lo >= o2_hi) continue;
          for (int64_t o0 = 0; o0 < g.out[0]; ++o0) {
            const int64_t i0 = o0 * g.s[0] + k0 * g.d[0] - g.pb[0];
            if (i0 < 0 || i0 >= g.in[0]) continue;
            for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
              const int64_t i1 = o1 * g.s[1] + k1 * g.d[1] - g.pb[1];
              if (i1 < 0 || i1 >= g.in[1]) continue;
              const double* xr = xc + (i0 * g.in[1] + i1) * g.in[2];
              double* ar = acc + (o0 * g.out[1] + o1) * g.out[2];
              const int64_t s2 = g.s[2];
              for (int64_t o2 = o2_lo; o2 < o2_hi; ++o2) ar[o2] += wv * xr[o2 * s2 + off2];
            }
          }
        }
      }
    }
  }
}

// ConvTranspose: y[o] += x[i] * w[k] where o = i * s + k * d - pad_begin.
// Innermost loop along the last input dim: contiguous in x, strided in acc.
void transpose_plane(const Geometry& g, const double* x, const double* w, int64_t ocg, double* acc) {
  for (int64_t ic = 0; ic < g.c_in_g; ++ic) {
    const double* xc = x + ic * g.in_plane;
    const double* wc = w + (ic * g.c_out_g + ocg) * g.k_plane;
    for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
      for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
        for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
          const double wv = wc[(k0 * g.k[1] + k1) * g.k[2] + k2];
          const int64_t off2 = k2 * g.d[2] - g.pb[2];
          // i2 * s2 + off2 in [0, out2), i2 in [0, in2)
          const int64_t i2_lo = std::max<int64_t>(0, div_ceil(-off2, g.s[2]));
          const int64_t i2_hi = std::min<int64_t>(g.in[2], div_floor(g.out[2] - 1 - off2, g.s[2]) + 1);
          if (i2_lo >= i2_hi) continue;
          for (int64_t i0 = 0; i0 < g.in[0]; ++i0) {
            const int64_t o0 = i0 * g.s[0] + k0 * g.d[0] - g.pb[0];
            if (o0 < 0 || o0 >= g.out[0]) continue;
            for (int64_t i1 = 0; i1 < g.in[1]; ++i1) {
              const int64_t o1 = i1 * g.s[1] + k1 * g.d[1] - g.pb[1];
              if (o1 < 0 || o1 >= g.out[1]) continue;
              const double* xr = xc + (i0 * g.in[1] + i1) * g.in[2];
              double* ar = acc + (o0 * g.out[1] + o1) * g.out[2];
              const int64_t s2 = g.s[2];
              for (int64_t i2 = i2_lo; i2 < i2_hi; ++i2) ar[i2 * s2 + off2] += wv * xr[i2];
            }
          }
        }
      }
    }
  }
}

}  // namespace

Status check_conv_cpu_params(const ConvParams& p) {
  const char* fn = "run_conv_cpu";
  if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16)
    return Status::errorf(fn, ": dtype ", int(p.dtype), " is not float32, float16 or bfloat16");
  if (p.spatial < 1 || p.spatial > CONV_MAX_SPATIAL)
    return Status::errorf(fn, ": spatial is ", p.spatial, ", expected 1, 2 or 3");
  if (p.n < 0 || p.c_in < 0 || p.c_out < 0)
    return Status::errorf(fn, ": n, c_in, c_out are ", p.n, ", ", p.c_in, ", ", p.c_out, ", expected >= 0");
  if (p.group < 1 || p.c_in % p.group != 0 || p.c_out % p.group != 0)
    return Status::errorf(fn, ": group ", p.group, " must be >= 1 and divide c_in ", p.c_in, " and c_out ", p.c_out);
  if (p.activation != Activation::none && p.activation != Activation::relu && p.activation != Activation::silu &&
      p.activation != Activation::gelu)
    return Status::errorf(fn, ": activation ", int(p.activation), " is unknown");
  for (int i = 0; i < p.spatial; ++i) {
    if (p.in[i] < 0 || p.out[i] < 0 || p.kernel[i] < 1 || p.stride[i] < 1 || p.dilation[i] < 1 ||
        p.pad_begin[i] < 0 || p.pad_end[i] < 0 || p.output_padding[i] < 0) {
      return Status::errorf(fn, ": spatial dim ", i, " has in ", p.in[i], ", out ", p.out[i], ", kernel ",
                            p.kernel[i], ", stride ", p.stride[i], ", dilation ", p.dilation[i], ", pads ",
                            p.pad_begin[i], "/", p.pad_end[i], ", output_padding ", p.output_padding[i],
                            ": a value is out of range");
    }
    const int64_t dk = p.dilation[i] * (p.kernel[i] - 1) + 1;
    int64_t want = 0;
    if (!p.transpose) {
      const int64_t padded = p.in[i] + p.pad_begin[i] + p.pad_end[i];
      want = padded >= dk ? (padded - dk) / p.stride[i] + 1 : 0;
    } else {
      want = p.stride[i] * (p.in[i] - 1) + p.output_padding[i] + dk - p.pad_begin[i] - p.pad_end[i];
    }
    if (p.out[i] != want)
      return Status::errorf(fn, ": spatial dim ", i, ": out is ", p.out[i], ", the parameters give ", want);
  }
  if (conv_cpu_planes(p) == 0) return Status::ok();
  int64_t out_plane = 1;
  for (int i = 0; i < p.spatial; ++i) out_plane *= p.out[i];
  if (out_plane == 0) return Status::ok();
  if (!p.y) return Status::errorf(fn, ": y is null");
  if (!p.x && p.c_in > 0) return Status::errorf(fn, ": x is null");
  if (!p.w && p.c_in > 0) return Status::errorf(fn, ": w is null");
  return Status::ok();
}

int64_t conv_cpu_planes(const ConvParams& p) { return p.n * p.c_out; }

int64_t conv_cpu_plane_cost(const ConvParams& p) {
  const Geometry g = geometry(p);
  // Conv: every output element sums c_in_g * k taps; ConvTranspose: every input element
  // scatters c_in_g * k taps into the plane.
  return std::max<int64_t>(1, (p.transpose ? g.in_plane : g.out_plane) * g.c_in_g * g.k_plane);
}

Status run_conv_cpu_planes(const ConvParams& p, int64_t plane_begin, int64_t plane_end) {
  TRT_FASTOPS_RETURN_IF_ERROR(check_conv_cpu_params(p));
  const int64_t planes = conv_cpu_planes(p);
  if (plane_begin < 0 || plane_end > planes || plane_begin > plane_end)
    return Status::errorf("run_conv_cpu: plane range [", plane_begin, ", ", plane_end, ") outside [0, ", planes, ")");
  const Geometry g = geometry(p);
  if (g.out_plane == 0 || plane_begin == plane_end) return Status::ok();
  SliceCache cache;
  std::vector<double> acc(size_t(g.out_plane));
  for (int64_t plane = plane_begin; plane < plane_end; ++plane) {
    const int64_t b = plane / p.c_out, oc = plane % p.c_out;
    const int64_t grp = oc / g.c_out_g, ocg = oc % g.c_out_g;
    std::fill(acc.begin(), acc.end(), 0.0);
    if (g.c_in_g > 0 && g.in_plane > 0) {
      load_x_slice(p, g, b, grp, &cache);
      if (!p.transpose) {
        load_w_conv(p, g, oc, &cache);
        conv_plane(g, cache.x.data(), cache.w.data(), acc.data());
      } else {
        load_w_transpose(p, g, grp, &cache);
        transpose_plane(g, cache.x.data(), cache.w.data(), ocg, acc.data());
      }
    }
    const double bias = p.bias ? load_element(p.bias, p.dtype, oc) : 0.0;
    const int64_t base = plane * g.out_plane;
    // float64 -> float32 first: exact for every float32, and 16-bit types round once
    // from the float32 value (the GPU kernels round the same way).
    for (int64_t i = 0; i < g.out_plane; ++i)
      store_element(p.y, p.dtype, base + i, static_cast<float>(activate(p.activation, acc[size_t(i)] + bias)));
  }
  return Status::ok();
}

Status run_conv_cpu(const ConvParams& p) { return run_conv_cpu_planes(p, 0, conv_cpu_planes(p)); }

}  // namespace trt_fastops::conv
