// Internal to the conv family's CPU kernels: direct loops for depthwise
// convolutions (groups > 1, one input channel per group, any channel multiplier),
// the MobileNet case. im2col would copy each input plane KH*KW times to feed GEMMs
// of a single row; the direct loops read it in place, one filter tap at a time
// over whole output rows (contiguous and vectorisable at stride 1).
//
// Geometry as ops/conv_window.h's ConvGeom; o = c * og + m for output channel m of
// input channel c. Tap (p, q) of output (i, j) reads x[ih, iw] with
//   ih = i*sh - top + p*dh,  iw = j*sw - left + q*dw  (0 outside).
#ifndef KGRAD_BACKENDS_CPU_DEPTHWISE_CONV_H_
#define KGRAD_BACKENDS_CPU_DEPTHWISE_CONV_H_

#include "ops/conv_window.h"

namespace kgrad {
namespace cpu {
namespace conv_internal {

// Whether the direct depthwise loops apply: grouped, one input channel per group.
bool IsDepthwise(const ops::ConvGeom& g);

// y = conv2d(x, w); y [N, O, OH, OW] is overwritten.
template <typename T>
void DepthwiseForward(const ops::ConvGeom& g, const T* x, const T* w, T* y);
// dx = conv2d_backprop_input(dy, w); dx [N, C, H, W] is overwritten.
template <typename T>
void DepthwiseBackpropInput(const ops::ConvGeom& g, const T* dy, const T* w, T* dx);
// dw = conv2d_backprop_filter(x, dy), summed over the batch in sample order (the
// result does not depend on the thread count); dw [O, 1, KH, KW] is overwritten.
template <typename T>
void DepthwiseBackpropFilter(const ops::ConvGeom& g, const T* x, const T* dy, T* dw);

}  // namespace conv_internal
}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_DEPTHWISE_CONV_H_
