// Geometry of one convolution as trt_fastops' own kernels see it (shared by
// the device code in conv_fallback.cuh and the host code that fills it).
// Plain data; compiles as C++ or CUDA.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TRT_FASTOPS_HD __host__ __device__
#else
#define TRT_FASTOPS_HD
#endif

namespace trt_fastops::conv {

// Division by a divisor fixed per launch (1 <= d < 2^31), exact for numerators
// 0 <= n < 2^31: q = (n * mul) >> (31 + shift), 2^shift >= d, mul = ceil(2^(31+shift) / d).
// Why exact: e = mul * d - 2^(31+shift) is below d <= 2^shift, so n * mul / 2^(31+shift)
// exceeds n / d by n * e / (d * 2^(31+shift)) < 1 / d, which never crosses the
// next integer (n / d is at most (d - 1) / d past its floor).
struct FastDiv {
  uint32_t d = 1;
  uint32_t mul = 0x80000000u;
  uint32_t shift = 0;

  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor == 0 ? 1 : divisor) {
    while ((uint64_t(1) << shift) < d) ++shift;
    const uint64_t p = uint64_t(1) << (31 + shift);
    mul = static_cast<uint32_t>((p + d - 1) / d);
  }
  TRT_FASTOPS_HD uint32_t div(uint32_t n) const {
    return static_cast<uint32_t>((uint64_t(n) * mul) >> (31 + shift));
  }
};

// Spatial dims as [d, h, w]: 1-D and 2-D convolutions pad the front with size 1
// (kernel 1, stride 1, dilation 1, pad 0), so every kernel is written for 3-D.
struct ConvGeometry {
  int in[3];
  int out[3];
  int kernel[3];
  int stride[3];
  int dilation[3];
  int pad[3];        // pad_begin (may be negative: cropping)
  int64_t in_sp;     // in[0] * in[1] * in[2]   (< 2^31)
  int64_t out_sp;    // out[0] * out[1] * out[2] (< 2^31)
  int64_t batch;
  int c_in, c_out, group;
  int cg;            // c_in / group: input channels per group
  int kg;            // c_out / group: output channels per group
  int ks;            // kernel[0] * kernel[1] * kernel[2]
  int kgemm;         // cg * ks: GEMM depth
  int kgemm_pad;     // padded depth of the packed weights (multiple of the kernel's BK)
  int kg_pad;        // padded width of the packed weights (multiple of the kernel's BN)
  int64_t m_total;   // batch * out_sp: GEMM rows
  int activation;    // conv::Activation as int
  bool transpose;
  FastDiv div_cg, div_kw, div_kh;  // k -> (tap, c); tap -> (kd, kh, kw)
  FastDiv div_sd, div_sh, div_sw;  // ConvTranspose: strides
  FastDiv div_osp, div_ow, div_oh; // direct kernel: index in image -> (channel, od, oh, ow)
};

}  // namespace trt_fastops::conv
