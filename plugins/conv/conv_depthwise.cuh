// Device code of trt_fastops' depthwise convolution: Conv with one input
// channel per group (c_in == group), channel multiplier kg = c_out / group,
// 1-D or 2-D (the geometry's leading depth dim is 1), NCHW, float16 / bfloat16 /
// float32 with float32 accumulation, bias + activation fused, one rounding.
// Framework-free; the host side (tiling, launch) is conv_depthwise.cu.
//
// These convolutions are memory-bound (9-49 multiply-adds per input element
// read), so the kernel reads x once from DRAM, in order, and keeps the
// multiply-adds on registers and shared memory:
//   - A tile is P consecutive (image, channel) planes x a band of output rows x
//     a band of output columns (DepthwiseTiling, conv_depthwise.h). Its input
//     box (every input cell the tile's outputs read, zero outside x) is copied
//     into shared memory as float32 once, in box order: thread tid copies box
//     cells tid + k * threads, so a warp's loads are consecutive addresses of a
//     row and its shared-memory stores consecutive words (no bank conflicts).
//     Conversion to float32 happens once per cell here, not once per tap.
//   - Each cell's x offset ("slot") is computed once per CTA into shared memory
//     and reused for every tile (only when tiles split the width does the box's
//     column range, and so the slots, change per tile): per tile a load is an
//     LDS, an add, one unsigned compare (rows, planes and columns outside x were
//     folded into the slot or into that compare) and a predicated LDG.
//   - The grid is persistent (at most the resident CTAs) and each CTA loads its
//     next tile into registers (DW_PREFETCH elements per thread) right after
//     publishing the current one, so DRAM reads stay in flight during compute.
//   - Compute: a work item is one output channel's DW_ITEM_COLS adjacent
//     columns x R rows. Unrolled variants (3x3 / 5x5 / 7x7, stride 1 / 2, no
//     dilation): the K x K weights sit in registers, each input row of the
//     item's window is read once as float4s and feeds every output row that
//     uses it (R = 4 for stride 1 up to 5x5, else 2). Generic variant (any
//     kernel, stride, dilation): one row, the item's 4 columns strided by the
//     tile's column-group count so that neighbouring lanes read neighbouring
//     words; runtime tap loops.
//   - The tile's P * kg weights and biases (zeros without bias) are prefetched
//     and staged in shared memory with the box. Channel multiplier: the kg
//     output channels of a plane are separate items over the same box.
//   - y is written per item row: one 8/16-byte store where out_w % 4 == 0 and
//     y is aligned, pairs where out_w is even, else scalars (store_mode).
//   - Staged path (DepthwiseTiling::staged, whole-plane tiles): the register
//     prefetch above keeps only DW_PREFETCH 2-byte loads per thread in flight
//     (~16 KB per SM: latency-bound at 0.5-1 TB/s). A whole-plane tile's P
//     planes are one contiguous run of x, so it is copied raw with 4/8/16-byte
//     cp.async into a shared-memory staging buffer, stages - 1 tiles ahead of
//     the one being computed (nothing in flight costs registers). After the
//     wait + barrier, each thread widens its elements of the staged planes
//     into the box (input (r, c) -> box cell (r + pad_top, c + pad_left);
//     cells outside the box are skipped). The halo (zero padding) is the same
//     for every whole-plane tile and never written by that pass, so the box
//     is zeroed once per CTA. A short last tile leaves stale box planes that
//     compute skips (q >= planes). Compute is the same as above.
// Offsets inside a box, a plane and a tile are 32-bit (plan_depthwise keeps
// them below 2^30); plane indices and tensor offsets are 64-bit.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "plugins/common/cuda_utils.cuh"
#include "plugins/common/mma.cuh"
#include "plugins/conv/conv_activation.cuh"
#include "plugins/conv/conv_depthwise.h"
#include "plugins/conv/conv_geometry.h"

namespace trt_fastops::conv {

template <typename T>
struct DepthwiseArgs {
  ConvGeometry g;
  DepthwiseTiling t;
  const T* x;
  const T* w;     // [c_out][1][kh][kw]
  const T* bias;  // [c_out] or null
  T* y;
  int store_mode;  // 2: 4 outputs per store, 1: pairs, 0: scalars
};

// A box cell outside x. Any tile shift (|shift| < 2^30) keeps slot + shift
// negative, i.e. outside [0, limit) as an unsigned compare.
constexpr int DW_INVALID_SLOT = -(1 << 30);

// Raw element bits between the global load and the shared-memory store.
template <typename T>
struct DwRaw {
  using type = unsigned short;
};
template <>
struct DwRaw<float> {
  using type = float;
};

template <typename T>
__device__ __forceinline__ typename DwRaw<T>::type dw_load(const T* p, bool pred) {
  using R = typename DwRaw<T>::type;
  R v = R(0);
  if (pred) v = __ldg(reinterpret_cast<const R*>(p));
  return v;
}

template <typename T>
__device__ __forceinline__ float dw_to_float(typename DwRaw<T>::type r);
template <>
__device__ __forceinline__ float dw_to_float<float>(float r) {
  return r;
}
template <>
__device__ __forceinline__ float dw_to_float<__half>(unsigned short r) {
  return __half2float(__ushort_as_half(r));
}
template <>
__device__ __forceinline__ float dw_to_float<__nv_bfloat16>(unsigned short r) {
  return __uint_as_float(static_cast<uint32_t>(r) << 16);  // bf16 is the top half of a float: exact
}

struct DwTile {
  int64_t q0;        // first plane (image * c_in + channel)
  int c0;            // its channel
  int oh0, ow0;      // first output row / column
  int ih_lo, iw_lo;  // input row / column of box cell (0, 0)
};

// Tiles are ordered column tile fastest, then row tile, then plane block, so
// CTAs running at the same time share halo rows in L2.
template <int IR>
__device__ __forceinline__ DwTile dw_tile(const ConvGeometry& g, const DepthwiseTiling& t, int tile) {
  const int rest = static_cast<int>(t.div_col_tiles.div(static_cast<uint32_t>(tile)));
  const int ct = tile - rest * t.col_tiles;
  const int pb = static_cast<int>(t.div_row_tiles.div(static_cast<uint32_t>(rest)));
  const int rt = rest - pb * t.row_tiles;
  DwTile d;
  d.q0 = int64_t(pb) * t.planes;
  d.c0 = static_cast<int>(d.q0 % g.c_in);
  d.oh0 = rt * t.tile_rows * IR;
  d.ow0 = ct * t.tile_cols * DW_ITEM_COLS;
  d.ih_lo = d.oh0 * g.stride[1] - g.pad[1];
  d.iw_lo = d.ow0 * g.stride[2] - g.pad[2];
  return d;
}

// slots[u] for this thread's box cells u = tid + k * threads: the cell's x
// offset from (plane q0, row ih_lo), or DW_INVALID_SLOT where it lies outside
// x along w (or along h when every tile has the same rows); the per-tile check
// in dw_prefetch covers the rest. Shared memory, not registers (they would
// cost DW_PREFETCH registers across the compute); only the owning thread
// writes and reads its slots, so no barrier is involved.
__device__ __forceinline__ void dw_slots(const ConvGeometry& g, const DepthwiseTiling& t, const DwTile& d, int tid,
                                         int threads, int* slots) {
#pragma unroll
  for (int k = 0; k < DW_PREFETCH; ++k) {
    const int u = tid + k * threads;
    if (u < t.box_cells) {
      const int bp = static_cast<int>(t.div_plane_cells.div(static_cast<uint32_t>(u)));
      const int rem = u - bp * t.plane_cells;
      const int br = static_cast<int>(t.div_box_cols.div(static_cast<uint32_t>(rem)));
      const int iw = d.iw_lo + (rem - br * t.box_cols);
      const bool col_ok = static_cast<unsigned>(iw) < static_cast<unsigned>(g.in[2]);
      const bool row_ok = !t.rows_fixed || static_cast<unsigned>(d.ih_lo + br) < static_cast<unsigned>(g.in[1]);
      slots[u] = col_ok && row_ok ? bp * static_cast<int>(g.in_sp) + br * g.in[2] + iw : DW_INVALID_SLOT;
    }
  }
}

// Prefetches the weights, then biases (zeros without bias), of the tile's
// channels c0 .. c0 + P - 1 into registers (P <= c_in: wraps to channel 0 at
// most once).
template <typename T, int NW>
__device__ __forceinline__ void dw_prefetch_weights(const DepthwiseArgs<T>& a, const DwTile& d,
                                                    typename DwRaw<T>::type (&wv)[NW], int tid, int threads) {
  const ConvGeometry& g = a.g;
  const DepthwiseTiling& t = a.t;
  const int64_t w_total = int64_t(g.c_out) * g.ks;
  const int64_t w0 = int64_t(d.c0) * g.kg * g.ks;
  const int64_t b0 = int64_t(d.c0) * g.kg - t.weight_cells;
#pragma unroll
  for (int k = 0; k < NW; ++k) {
    const int e = tid + k * threads;
    const bool is_w = e < t.weight_cells;
    const bool ok = is_w || (e < t.weight_cells + t.bias_cells && a.bias != nullptr);
    const int64_t total = is_w ? w_total : int64_t(g.c_out);
    int64_t i = (is_w ? w0 : b0) + e;
    if (i >= total) i -= total;
    wv[k] = dw_load((is_w ? a.w : a.bias) + (ok ? i : 0), ok);
  }
}

template <typename T, int NW>
__device__ __forceinline__ void dw_fill_weights(const DepthwiseTiling& t, const typename DwRaw<T>::type (&wv)[NW],
                                                float* ws, int tid, int threads) {
#pragma unroll
  for (int k = 0; k < NW; ++k) {
    const int e = tid + k * threads;
    if (e < t.weight_cells + t.bias_cells) ws[e] = dw_to_float<T>(wv[k]);
  }
}

// Issues the tile's loads into registers (zero outside x). slot + shift is the
// cell's offset from plane q0's first element: inside x exactly when it is in
// [0, limit), with limit = the planes that exist (whole-plane tiles; rows
// outside x are already invalid slots) or one plane (row bands: the compare is
// the row check).
template <typename T, int N, int NW>
__device__ __forceinline__ void dw_prefetch(const DepthwiseArgs<T>& a, const DwTile& d, const int* slots,
                                            typename DwRaw<T>::type (&xv)[N], typename DwRaw<T>::type (&wv)[NW],
                                            int tid, int threads) {
  const ConvGeometry& g = a.g;
  const DepthwiseTiling& t = a.t;
  const int shift = d.ih_lo * g.in[2];
  const int64_t planes_left = g.batch * g.c_in - d.q0;
  const int limit = t.rows_fixed ? static_cast<int>((planes_left < t.planes ? planes_left : t.planes) * g.in_sp)
                                 : static_cast<int>(g.in_sp);
  const T* xt = a.x + d.q0 * g.in_sp;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int u = tid + k * threads;
    const int e = (u < t.box_cells ? slots[u] : DW_INVALID_SLOT) + shift;
    const bool ok = static_cast<unsigned>(e) < static_cast<unsigned>(limit);
    xv[k] = dw_load(xt + (ok ? e : 0), ok);
  }
  dw_prefetch_weights(a, d, wv, tid, threads);
}

template <typename T, int N, int NW>
__device__ __forceinline__ void dw_fill_smem(const DepthwiseTiling& t, const typename DwRaw<T>::type (&xv)[N],
                                             const typename DwRaw<T>::type (&wv)[NW], float* xs, float* ws, int tid,
                                             int threads) {
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int u = tid + k * threads;
    if (u < t.box_cells) xs[u] = dw_to_float<T>(xv[k]);
  }
  dw_fill_weights<T>(t, wv, ws, tid, threads);
}

// ---- Staged path: cp.async of whole planes --------------------------------

// W bytes (4, 8, 16) from global to shared memory, asynchronously; only the
// first src_bytes (<= W) are read, the rest of the W is zero-filled (a chunk
// tail never reads past x's end). Both addresses are W-aligned.
template <int W>
__device__ __forceinline__ void dw_cp_async(void* smem, const void* gmem, int src_bytes) {
  static_assert(W == 4 || W == 8 || W == 16, "cp.async copies 4, 8 or 16 bytes");
  if constexpr (W == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
                 "r"(src_bytes)
                 : "memory");
  } else {  // .cg is 16-byte only
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_addr(smem)), "l"(gmem), "n"(W),
                 "r"(src_bytes)
                 : "memory");
  }
}

// cp.async.wait_group takes an immediate: n = stages - 2 (0..DW_MAX_STAGES - 2).
__device__ __forceinline__ void dw_cp_async_wait(int n) {
  static_assert(DW_MAX_STAGES - 2 <= 2, "extend the cases below");
  if (n <= 0) {
    cp_async_wait<0>();
  } else if (n == 1) {
    cp_async_wait<1>();
  } else {
    cp_async_wait<2>();
  }
}

template <int W>
__device__ __forceinline__ void dw_stage_copy(const unsigned char* src, unsigned char* dst, int bytes, int tid,
                                              int threads) {
  for (int o = tid * W; o < bytes; o += threads * W) {
    const int n = bytes - o;
    dw_cp_async<W>(dst + o, src + o, n < W ? n : W);
  }
}

// Issues the cp.async of whole-plane tile `tile` (planes tile * P .. + P - 1,
// fewer in the last tile) into `stage`: one contiguous run of x, whose start
// is a multiple of copy_bytes (plan_depthwise checked x and P * in_sp).
template <typename T>
__device__ __forceinline__ void dw_stage_issue(const DepthwiseArgs<T>& a, int64_t tile, unsigned char* stage, int tid,
                                               int threads) {
  const ConvGeometry& g = a.g;
  const DepthwiseTiling& t = a.t;
  const int64_t q0 = tile * t.planes;
  const int64_t left = g.batch * g.c_in - q0;
  const int n = static_cast<int>(left < t.planes ? left : t.planes);
  const int bytes = n * static_cast<int>(g.in_sp) * static_cast<int>(sizeof(T));  // <= stage_bytes
  const unsigned char* src = reinterpret_cast<const unsigned char*>(a.x + q0 * g.in_sp);
  if (t.copy_bytes == 16) {
    dw_stage_copy<16>(src, stage, bytes, tid, threads);
  } else if (t.copy_bytes == 8) {
    dw_stage_copy<8>(src, stage, bytes, tid, threads);
  } else {
    dw_stage_copy<4>(src, stage, bytes, tid, threads);
  }
}

// VEC raw elements (1, or 4 consecutive ones of a row: 8 / 16 aligned bytes) as floats.
template <typename T, int VEC>
__device__ __forceinline__ void dw_load_raw(const typename DwRaw<T>::type* p, float (&f)[VEC]) {
  if constexpr (VEC == 1) {
    f[0] = dw_to_float<T>(*p);
  } else if constexpr (sizeof(T) == 4) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    f[0] = v.x;
    f[1] = v.y;
    f[2] = v.z;
    f[3] = v.w;
  } else {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    f[0] = dw_to_float<T>(static_cast<unsigned short>(v.x & 0xffffu));
    f[1] = dw_to_float<T>(static_cast<unsigned short>(v.x >> 16));
    f[2] = dw_to_float<T>(static_cast<unsigned short>(v.y & 0xffffu));
    f[3] = dw_to_float<T>(static_cast<unsigned short>(v.y >> 16));
  }
}

// Widens the staged raw planes of tile d into the box. Thread tid handles
// plane positions rem = VEC * (u0 + k * threads) of planes b0, b0 + ppp, ...
// (ppp = planes per pass: several when a plane has fewer position units than
// the CTA has threads), so the (row, column) -> box-cell math is done once per
// position, not once per element; a warp reads consecutive raw elements and
// writes consecutive box words of a row. VEC = 4 (in_w % 4 == 0: four
// elements of one row per load) quarters the per-element instructions, which
// bound small stride-2 convs (ncu: 45 % SM throughput, 15 % DRAM).
template <typename T, int VEC>
__device__ __forceinline__ void dw_widen(const ConvGeometry& g, const DepthwiseTiling& t, const DwTile& d,
                                         const unsigned char* stage, float* xs, int b0, int u0, int ppp,
                                         int threads) {
  using Raw = typename DwRaw<T>::type;
  const Raw* raw = reinterpret_cast<const Raw*>(stage);
  const int in_sp = static_cast<int>(g.in_sp), in_w = g.in[2];
  const int64_t left = g.batch * g.c_in - d.q0;
  const int n = static_cast<int>(left < t.planes ? left : t.planes);
  for (int u = u0; u < in_sp / VEC; u += threads) {
    const int rem = u * VEC;
    const int r = static_cast<int>(t.div_in_w.div(static_cast<uint32_t>(rem)));
    const int br = r - d.ih_lo;                // box row (ih_lo = -pad_top: whole planes)
    const int bc = rem - r * in_w - d.iw_lo;   // box column of the first element
    if (static_cast<unsigned>(br) >= static_cast<unsigned>(t.box_rows)) continue;  // a row no output reads
    const int cell = br * t.box_cols + bc;
    const Raw* src = raw + rem;
#pragma unroll 4
    for (int b = b0; b < n; b += ppp) {
      float f[VEC];
      dw_load_raw<T, VEC>(src + b * in_sp, f);
#pragma unroll
      for (int e = 0; e < VEC; ++e)  // columns no output reads (cropping pads, stride remainder) are skipped
        if (static_cast<unsigned>(bc + e) < static_cast<unsigned>(t.box_cols)) xs[b * t.plane_cells + cell + e] = f[e];
    }
  }
}

// Item -> (plane in tile, output channel in group, row group, column group).
struct DwItem {
  int bp, j, gr, gc;
};

__device__ __forceinline__ DwItem dw_item(const ConvGeometry& g, const DepthwiseTiling& t, int it) {
  DwItem r;
  const int rest0 = static_cast<int>(t.div_tile_cols.div(static_cast<uint32_t>(it)));
  r.gc = it - rest0 * t.tile_cols;
  const int rest1 = static_cast<int>(t.div_tile_rows.div(static_cast<uint32_t>(rest0)));
  r.gr = rest0 - rest1 * t.tile_rows;
  r.bp = static_cast<int>(t.div_kg.div(static_cast<uint32_t>(rest1)));
  r.j = rest1 - r.bp * g.kg;
  return r;
}

__device__ __forceinline__ float dw_bias(const ConvGeometry& g, const DepthwiseTiling& t, const float* ws,
                                        const DwItem& item) {
  return ws[t.weight_cells + item.bp * g.kg + item.j];
}

// Four adjacent outputs (n of them inside the row), rounded once.
template <typename T>
__device__ __forceinline__ void dw_store4(T* p, const float (&v)[4], int n, int mode) {
  if (n >= 4 && mode == 2) {
    if constexpr (sizeof(T) == 4) {
      *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
      *reinterpret_cast<uint2*>(p) = make_uint2(Word<T>::from_float(v), Word<T>::from_float(v + 2));
    }
  } else if (n >= 4 && mode == 1) {
    if constexpr (sizeof(T) == 4) {
      reinterpret_cast<float2*>(p)[0] = make_float2(v[0], v[1]);
      reinterpret_cast<float2*>(p)[1] = make_float2(v[2], v[3]);
    } else {
      reinterpret_cast<uint32_t*>(p)[0] = Word<T>::from_float(v);
      reinterpret_cast<uint32_t*>(p)[1] = Word<T>::from_float(v + 2);
    }
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (e < n) p[e] = from_float<T>(v[e]);
  }
}

// n floats from a 16-byte aligned shared-memory address: float4s, then a
// float2 and / or a float for the tail.
template <int N>
__device__ __forceinline__ void dw_load_window(const float* p, float (&win)[N]) {
#pragma unroll
  for (int m = 0; m + 4 <= N; m += 4) {
    const float4 f = *reinterpret_cast<const float4*>(p + m);
    win[m + 0] = f.x;
    win[m + 1] = f.y;
    win[m + 2] = f.z;
    win[m + 3] = f.w;
  }
  constexpr int M = N / 4 * 4;
  if constexpr (N - M >= 2) {
    const float2 f = *reinterpret_cast<const float2*>(p + M);
    win[M] = f.x;
    win[M + 1] = f.y;
  }
  if constexpr ((N - M) % 2 == 1) win[N - 1] = p[N - 1];
}

// Unrolled K x K, stride S, no dilation: item = R rows x 4 adjacent columns.
template <typename T, int K, int S>
__device__ __forceinline__ void dw_compute_unrolled(const DepthwiseArgs<T>& a, const DwTile& d, const float* xs,
                                                    const float* ws, int tid, int threads) {
  constexpr int V = DW_ITEM_COLS;
  constexpr int R = dw_item_rows(K, S);
  constexpr int NR = (R - 1) * S + K;   // input rows of an item
  constexpr int NW = (V - 1) * S + K;   // input columns of an item row
  const ConvGeometry& g = a.g;
  const DepthwiseTiling& t = a.t;
  const int64_t planes = g.batch * g.c_in;
  const int out_h = g.out[1], out_w = g.out[2];
  for (int it = tid; it < t.items; it += threads) {
    const DwItem item = dw_item(g, t, it);
    const int64_t q = d.q0 + item.bp;
    const int oh_b = d.oh0 + item.gr * R;
    const int ow_b = d.ow0 + item.gc * V;
    if (q >= planes || oh_b >= out_h || ow_b >= out_w) continue;
    const float* src = xs + item.bp * t.plane_cells + item.gr * (R * S) * t.box_cols + item.gc * (V * S);
    const float* wsrc = ws + (item.bp * g.kg + item.j) * (K * K);
    float wr[K * K];
#pragma unroll
    for (int i = 0; i < K * K; ++i) wr[i] = wsrc[i];
    float acc[R][V];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int v = 0; v < V; ++v) acc[r][v] = 0.f;
#pragma unroll
    for (int i = 0; i < NR; ++i) {
      float win[NW];
      dw_load_window<NW>(src + i * t.box_cols, win);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int kh = i - r * S;
        if (kh < 0 || kh >= K) continue;
#pragma unroll
        for (int kw = 0; kw < K; ++kw)
#pragma unroll
          for (int v = 0; v < V; ++v) acc[r][v] = fmaf(win[v * S + kw], wr[kh * K + kw], acc[r][v]);
      }
    }
    const float b = dw_bias(g, t, ws, item);
    T* yp = a.y + (q * g.kg + item.j) * g.out_sp + ow_b;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int oh = oh_b + r;
      if (oh >= out_h) break;
      float v[V];
#pragma unroll
      for (int e = 0; e < V; ++e) v[e] = apply_activation(acc[r][e] + b, g.activation);
      dw_store4<T>(yp + int64_t(oh) * out_w, v, out_w - ow_b, a.store_mode);
    }
  }
}

// Any kernel / stride / dilation: item = one row, columns gc + tile_cols * v.
template <typename T>
__device__ __forceinline__ void dw_compute_generic(const DepthwiseArgs<T>& a, const DwTile& d, const float* xs,
                                                   const float* ws, int tid, int threads) {
  constexpr int V = DW_ITEM_COLS;
  const ConvGeometry& g = a.g;
  const DepthwiseTiling& t = a.t;
  const int64_t planes = g.batch * g.c_in;
  const int out_h = g.out[1], out_w = g.out[2];
  const int kh_n = g.kernel[1], kw_n = g.kernel[2];
  const int row_step = g.dilation[1] * t.box_cols;
  const int col_step = g.dilation[2];
  const int v_step = t.tile_cols * g.stride[2];
  for (int it = tid; it < t.items; it += threads) {
    const DwItem item = dw_item(g, t, it);
    const int64_t q = d.q0 + item.bp;
    const int oh = d.oh0 + item.gr;
    const int ow = d.ow0 + item.gc;
    if (q >= planes || oh >= out_h || ow >= out_w) continue;
    const float* src = xs + item.bp * t.plane_cells + item.gr * g.stride[1] * t.box_cols + item.gc * g.stride[2];
    const float* wsrc = ws + (item.bp * g.kg + item.j) * g.ks;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0.f;
    for (int kh = 0; kh < kh_n; ++kh) {
      const float* row = src + kh * row_step;
      const float* wrow = wsrc + kh * kw_n;
      for (int kw = 0; kw < kw_n; ++kw) {
        const float wv = wrow[kw];
        const float* p = row + kw * col_step;
#pragma unroll
        for (int v = 0; v < V; ++v) acc[v] = fmaf(p[v * v_step], wv, acc[v]);
      }
    }
    const float b = dw_bias(g, t, ws, item);
    T* yp = a.y + (q * g.kg + item.j) * g.out_sp + int64_t(oh) * out_w;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int c = ow + v * t.tile_cols;
      if (c < out_w) yp[c] = from_float<T>(apply_activation(acc[v] + b, g.activation));
    }
  }
}

// One tile's outputs from the box and weights in shared memory (K == 0: the generic variant).
template <typename T, int K, int S>
__device__ __forceinline__ void dw_compute(const DepthwiseArgs<T>& a, const DwTile& d, const float* xs,
                                           const float* ws, int tid, int threads) {
  if constexpr (K == 0) {
    dw_compute_generic(a, d, xs, ws, tid, threads);
  } else {
    dw_compute_unrolled<T, K, S>(a, d, xs, ws, tid, threads);
  }
}

// Register budget: the unrolled variants keep an item's window rows, K x K
// weights and R x 4 accumulators live for ILP on top of the DW_PREFETCH
// prefetch registers (up to 128 registers: 2 CTAs of 256 threads per SM, whose
// prefetches keep ~16 KB of 16-bit input in flight per SM); the generic
// variant fits 80 (3 CTAs). The staged path holds no input in registers: 3
// CTAs (80 registers) for every variant (shared memory usually allows 2-3).
constexpr int dw_min_blocks(int k, bool staged) { return k == 0 || staged ? 3 : 2; }

// Register-prefetch path (any tiling). Shared memory: box_cells floats of
// input, weight_cells + bias_cells floats of weights and biases (padded to 4),
// box_cells int slots.
template <typename T, int K, int S>
__device__ __forceinline__ void dw_run_registers(const DepthwiseArgs<T>& a, float4* smem) {
  using Raw = typename DwRaw<T>::type;
  constexpr int IR = dw_item_rows(K, S);
  float* xs = reinterpret_cast<float*>(smem);
  float* ws = xs + a.t.box_cells;
  int* slots = reinterpret_cast<int*>(ws + dw_round4(a.t.weight_cells + a.t.bias_cells));
  const int tid = threadIdx.x;
  const int threads = blockDim.x;
  int tile = blockIdx.x;

  DwTile cur = dw_tile<IR>(a.g, a.t, tile);
  dw_slots(a.g, a.t, cur, tid, threads, slots);
  Raw xv[DW_PREFETCH];
  Raw wv[DW_WEIGHT_PREFETCH];
  dw_prefetch(a, cur, slots, xv, wv, tid, threads);
  for (;;) {
    __syncthreads();  // the previous tile's compute is done with shared memory
    dw_fill_smem<T>(a.t, xv, wv, xs, ws, tid, threads);
    __syncthreads();
    const int64_t next = int64_t(tile) + gridDim.x;
    const bool more = next < a.t.tiles;
    DwTile nxt = cur;
    if (more) {
      nxt = dw_tile<IR>(a.g, a.t, static_cast<int>(next));
      if (!a.t.cols_fixed) dw_slots(a.g, a.t, nxt, tid, threads, slots);
      dw_prefetch(a, nxt, slots, xv, wv, tid, threads);
    }
    dw_compute<T, K, S>(a, cur, xs, ws, tid, threads);
    if (!more) break;
    tile = static_cast<int>(next);
    cur = nxt;
  }
}

// Staged path (whole-plane tiles). Shared memory: box_cells floats of input,
// weight_cells + bias_cells floats (padded to 4), then `stages` staging
// buffers of stage_bytes (multiples of 16). The CTA's i-th tile is staged in
// buffer i % stages; stages - 1 tiles are in flight while one is computed.
template <typename T, int K, int S>
__device__ __forceinline__ void dw_run_staged(const DepthwiseArgs<T>& a, float4* smem) {
  using Raw = typename DwRaw<T>::type;
  constexpr int IR = dw_item_rows(K, S);
  const DepthwiseTiling& t = a.t;
  float* xs = reinterpret_cast<float*>(smem);
  float* ws = xs + t.box_cells;
  unsigned char* staging = reinterpret_cast<unsigned char*>(ws + dw_round4(t.weight_cells + t.bias_cells));
  const int tid = threadIdx.x;
  const int threads = blockDim.x;
  const int stages = t.stages;
  int tile = blockIdx.x;

  // Tiles i = 0 .. stages - 2 of this CTA in flight first; one commit group
  // per tile (empty past the last) so that group counts stay uniform.
  for (int s = 0; s < stages - 1; ++s) {
    const int64_t ahead = int64_t(tile) + int64_t(s) * gridDim.x;
    if (ahead < t.tiles) dw_stage_issue(a, ahead, staging + s * t.stage_bytes, tid, threads);
    cp_async_commit();
  }
  // The halo is zero for every whole-plane tile and dw_widen never writes it:
  // zero the box once (box_cells is a multiple of 4).
  for (int u = tid; u < t.box_cells / 4; u += threads) smem[u] = make_float4(0.f, 0.f, 0.f, 0.f);
  const bool vec4 = a.g.in[2] % 4 == 0;                   // rows in whole 4-element loads
  const int units = static_cast<int>(a.g.in_sp) / (vec4 ? 4 : 1);
  const int ppp = threads > units ? threads / units : 1;  // planes per widening pass
  const int b0 = tid / units;                             // 0 unless units < threads
  const int u0 = tid - b0 * units;
  const bool widens = b0 < ppp;

  DwTile cur = dw_tile<IR>(a.g, t, tile);
  Raw wv[DW_WEIGHT_PREFETCH];
  dw_prefetch_weights(a, cur, wv, tid, threads);
  int stage = 0;  // buffer of the current tile
  for (;;) {
    dw_cp_async_wait(stages - 2);  // this thread's copies of the current tile have landed
    // Everyone's copies are visible; the previous tile's compute (box) and
    // widening (its buffer, the one refilled next) are done.
    __syncthreads();
    const int refill = stage == 0 ? stages - 1 : stage - 1;
    const int64_t ahead = int64_t(tile) + int64_t(stages - 1) * gridDim.x;
    if (ahead < t.tiles) dw_stage_issue(a, ahead, staging + refill * t.stage_bytes, tid, threads);
    cp_async_commit();
    if (widens) {
      const unsigned char* buf = staging + stage * t.stage_bytes;
      if (vec4) {
        dw_widen<T, 4>(a.g, t, cur, buf, xs, b0, u0, ppp, threads);
      } else {
        dw_widen<T, 1>(a.g, t, cur, buf, xs, b0, u0, ppp, threads);
      }
    }
    dw_fill_weights<T>(t, wv, ws, tid, threads);
    __syncthreads();
    const int64_t next = int64_t(tile) + gridDim.x;
    const bool more = next < t.tiles;
    DwTile nxt = cur;
    if (more) {
      nxt = dw_tile<IR>(a.g, t, static_cast<int>(next));
      dw_prefetch_weights(a, nxt, wv, tid, threads);
    }
    dw_compute<T, K, S>(a, cur, xs, ws, tid, threads);
    if (!more) break;
    tile = static_cast<int>(next);
    cur = nxt;
    stage = stage + 1 == stages ? 0 : stage + 1;
  }
  cp_async_wait<0>();  // no copy outlives the CTA (the trailing groups are empty)
}

// K == 0: the generic variant (S unused). Dynamic shared memory:
// DepthwiseTiling::smem_bytes (layouts above).
template <typename T, int K, int S, bool STAGED>
__global__ void __launch_bounds__(DW_MAX_THREADS, dw_min_blocks(K, STAGED))
    conv_depthwise_kernel(const DepthwiseArgs<T> a) {
  extern __shared__ float4 dw_smem[];
  if (static_cast<int>(blockIdx.x) >= a.t.tiles) return;
  if constexpr (STAGED) {
    dw_run_staged<T, K, S>(a, dw_smem);
  } else {
    dw_run_registers<T, K, S>(a, dw_smem);
  }
}

}  // namespace trt_fastops::conv
