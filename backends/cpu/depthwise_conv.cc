#include "backends/cpu/depthwise_conv.h"

#include <algorithm>
#include <vector>

#include "backends/cpu/conv_window.h"
#include "backends/cpu/parallel.h"

namespace kgrad {
namespace cpu {
namespace conv_internal {

using ops::ConvGeom;
using ops::Window;

// 1-D and 2-D windows only (a trivial depth axis): 3-D depthwise convolutions
// take the im2col GEMMs, which loop over groups.
bool IsDepthwise(const ConvGeom& g) {
  return g.win.groups > 1 && g.cg == 1 && g.d == 1 && g.kd == 1 && g.od == 1;
}

namespace {

// The fewest tasks of `work_per_task` multiply-adds each worth running in parallel
// (a ParallelFor grain): small tasks share a thread wake-up. Work is estimated in
// double: the dims are bounded, but their products need not fit int64.
int64_t TaskGrain(double work_per_task) {
  return static_cast<int64_t>(std::clamp(kParallelGrain / std::max(1.0, work_per_task), 1.0,
                                         static_cast<double>(kParallelGrain)));
}

// An output plane's multiply-adds.
double PlaneWork(const ConvGeom& g) {
  return static_cast<double>(g.oh) * g.ow * g.kh * g.kw;
}

// The input row read by output row i through filter row p, or -1 for padding.
int64_t InputRow(const ConvGeom& g, int64_t i, int64_t p) {
  int64_t ih = i * g.win.stride[ops::kH] - g.win.pad_lo[ops::kH] + p * g.win.dilation[ops::kH];
  return ih < 0 || ih >= g.h ? -1 : ih;
}

// Filter column q's input-column offset and the output columns [j0, j1) whose tap
// lies inside the row; the same for every row, so computed once per call.
struct ColumnTap {
  int64_t off, j0, j1;
};
std::vector<ColumnTap> ColumnTaps(const ConvGeom& g) {
  std::vector<ColumnTap> taps(g.kw);
  for (int64_t q = 0; q < g.kw; ++q) {
    taps[q].off = q * g.win.dilation[ops::kW] - g.win.pad_lo[ops::kW];
    auto [j0, j1] = ValidRange(taps[q].off, g.win.stride[ops::kW], g.w, g.ow);
    taps[q].j0 = j0;
    taps[q].j1 = j1;
  }
  return taps;
}

// out_row[j] += wv * in_row[j*sw + off] over the valid j: one tap over a whole
// output row (contiguous at stride 1, so it vectorises).
template <typename T>
void TapRow(const T* __restrict in_row, T wv, int64_t sw, const ColumnTap& t,
            T* __restrict out_row) {
  if (sw == 1) {
    const T* __restrict src = in_row + t.off;
    for (int64_t j = t.j0; j < t.j1; ++j) out_row[j] += wv * src[j];
  } else {
    for (int64_t j = t.j0; j < t.j1; ++j) out_row[j] += wv * in_row[j * sw + t.off];
  }
}

}  // namespace

template <typename T>
void DepthwiseForward(const ConvGeom& g, const T* x, const T* w, T* y) {
  const int64_t taps = g.kh * g.kw;
  const int64_t sw = g.win.stride[ops::kW];
  const std::vector<ColumnTap> cols = ColumnTaps(g);
  ParallelFor(g.n * g.o, TaskGrain(PlaneWork(g)), [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      const int64_t n = plane / g.o, o = plane % g.o, c = o / g.og;
      const T* xp = x + (n * g.c + c) * g.h * g.w;
      const T* wo = w + o * taps;
      T* yp = y + plane * g.oh * g.ow;
      std::fill(yp, yp + g.oh * g.ow, T(0));
      for (int64_t i = 0; i < g.oh; ++i) {
        T* yr = yp + i * g.ow;
        for (int64_t p = 0; p < g.kh; ++p) {
          const int64_t ih = InputRow(g, i, p);
          if (ih < 0) continue;
          for (int64_t q = 0; q < g.kw; ++q) {
            TapRow(xp + ih * g.w, wo[p * g.kw + q], sw, cols[q], yr);
          }
        }
      }
    }
  });
}

template <typename T>
void DepthwiseBackpropInput(const ConvGeom& g, const T* dy, const T* w, T* dx) {
  const Window& k = g.win;
  const int64_t taps = g.kh * g.kw;
  const std::vector<ColumnTap> cols = ColumnTaps(g);
  // One input plane per task: it receives only its own group's output channels,
  // so no two tasks write the same element.
  ParallelFor(g.n * g.c, TaskGrain(PlaneWork(g) * g.og), [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      const int64_t n = plane / g.c, c = plane % g.c;
      T* xp = dx + plane * g.h * g.w;
      std::fill(xp, xp + g.h * g.w, T(0));
      for (int64_t m = 0; m < g.og; ++m) {
        const int64_t o = c * g.og + m;
        const T* dyp = dy + (n * g.o + o) * g.oh * g.ow;
        const T* wo = w + o * taps;
        for (int64_t i = 0; i < g.oh; ++i) {
          const T* dyr = dyp + i * g.ow;
          for (int64_t p = 0; p < g.kh; ++p) {
            const int64_t ih = InputRow(g, i, p);
            if (ih < 0) continue;
            T* xr = xp + ih * g.w;
            for (int64_t q = 0; q < g.kw; ++q) {
              const ColumnTap& t = cols[q];
              const T wv = wo[p * g.kw + q];
              if (k.stride[ops::kW] == 1) {
                T* __restrict dst = xr + t.off;
                const T* __restrict src = dyr;
                for (int64_t j = t.j0; j < t.j1; ++j) dst[j] += wv * src[j];
              } else {
                for (int64_t j = t.j0; j < t.j1; ++j) xr[j * k.stride[ops::kW] + t.off] += wv * dyr[j];
              }
            }
          }
        }
      }
    }
  });
}

template <typename T>
void DepthwiseBackpropFilter(const ConvGeom& g, const T* x, const T* dy, T* dw) {
  const Window& k = g.win;
  const int64_t taps = g.kh * g.kw;
  // One output channel per task, its taps summed over samples in order.
  ParallelFor(g.o, TaskGrain(PlaneWork(g) * g.n), [&](int64_t b, int64_t e) {
    std::vector<T> lanes(g.ow);
    for (int64_t o = b; o < e; ++o) {
      const int64_t c = o / g.og;
      T* dwo = dw + o * taps;
      for (int64_t p = 0; p < g.kh; ++p) {
        for (int64_t q = 0; q < g.kw; ++q) {
          const int64_t off = q * k.dilation[ops::kW] - k.pad_lo[ops::kW];
          auto [j0, j1] = ValidRange(off, k.stride[ops::kW], g.w, g.ow);
          const int64_t sw = k.stride[ops::kW];
          // Per-column partial sums (a loop that vectorises), added up at the end.
          std::fill(lanes.begin(), lanes.end(), T(0));
          for (int64_t n = 0; n < g.n; ++n) {
            const T* xp = x + (n * g.c + c) * g.h * g.w;
            const T* dyp = dy + (n * g.o + o) * g.oh * g.ow;
            for (int64_t i = 0; i < g.oh; ++i) {
              const int64_t ih = InputRow(g, i, p);
              if (ih < 0) continue;
              const T* xr = xp + ih * g.w + off;
              const T* dyr = dyp + i * g.ow;
              if (sw == 1) {
                for (int64_t j = j0; j < j1; ++j) lanes[j] += dyr[j] * xr[j];
              } else {
                for (int64_t j = j0; j < j1; ++j) lanes[j] += dyr[j] * xr[j * sw];
              }
            }
          }
          T acc = 0;
          for (int64_t j = j0; j < j1; ++j) acc += lanes[j];
          dwo[p * g.kw + q] = acc;
        }
      }
    }
  });
}

template void DepthwiseForward<float>(const ConvGeom&, const float*, const float*, float*);
template void DepthwiseForward<double>(const ConvGeom&, const double*, const double*, double*);
template void DepthwiseBackpropInput<float>(const ConvGeom&, const float*, const float*, float*);
template void DepthwiseBackpropInput<double>(const ConvGeom&, const double*, const double*,
                                             double*);
template void DepthwiseBackpropFilter<float>(const ConvGeom&, const float*, const float*, float*);
template void DepthwiseBackpropFilter<double>(const ConvGeom&, const double*, const double*,
                                              double*);

}  // namespace conv_internal
}  // namespace cpu
}  // namespace kgrad
