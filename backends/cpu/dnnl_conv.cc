#include "backends/cpu/dnnl_conv.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cpu/parallel.h"
#include "backends/kernel_cache.h"
#include "core/status_macros.h"

#ifndef KGRAD_NO_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace kgrad {
namespace cpu {
namespace conv_internal {

using ops::ConvGeom;

namespace {

// oneDNN's output length for one axis: (in + lo + hi - ((k - 1) * d + 1)) / s + 1.
int64_t DnnlWindows(int64_t in, int64_t k, int64_t s, int64_t d, int64_t lo, int64_t hi) {
  const int64_t span = in + lo + hi - ((k - 1) * d + 1);
  return span < 0 ? -1 : span / s + 1;
}

}  // namespace

bool DnnlConvApplies(const ConvGeom& g, DType dtype) {
#ifdef KGRAD_NO_DNNL
  (void)g;
  (void)dtype;
  return false;
#else
  if (dtype != DType::kFloat32) return false;
  for (int64_t d : {g.n, g.c, g.d, g.h, g.w, g.o, g.kd, g.kh, g.kw, g.od, g.oh, g.ow}) {
    if (d <= 0) return false;  // empty tensors: the own kernels' trivial paths
  }
  const auto& k = g.win;
  const ops::Axes in{g.d, g.h, g.w}, kernel{g.kd, g.kh, g.kw}, out{g.od, g.oh, g.ow};
  for (int a = 0; a < ops::kMaxSpatial; ++a) {
    if (DnnlWindows(in[a], kernel[a], k.stride[a], k.dilation[a], k.pad_lo[a], k.pad_hi[a]) !=
        out[a]) {
      return false;
    }
  }
  return true;
#endif
}

#ifdef KGRAD_NO_DNNL

absl::Status DnnlConv(const KernelContext&, const ConvGeom&, DnnlConvKind, float*, float*, float*,
                      const Tensor*) {
  return absl::UnimplementedError("kgrad was built without oneDNN");
}

#else

namespace {

// Owners of oneDNN's C handles (the C API: oneDNN's C++ API throws).
template <typename H, dnnl_status_t (*Destroy)(H)>
class Handle {
 public:
  Handle() = default;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (h_ != nullptr) Destroy(h_);
  }
  H* out() { return &h_; }
  H get() const { return h_; }

 private:
  H h_ = nullptr;
};
using Engine = Handle<dnnl_engine_t, dnnl_engine_destroy>;
using Stream = Handle<dnnl_stream_t, dnnl_stream_destroy>;
using Attr = Handle<dnnl_primitive_attr_t, dnnl_primitive_attr_destroy>;
using PrimDesc = Handle<dnnl_primitive_desc_t, dnnl_primitive_desc_destroy>;
using Primitive = Handle<dnnl_primitive_t, dnnl_primitive_destroy>;
using Memory = Handle<dnnl_memory_t, dnnl_memory_destroy>;

absl::Status Check(dnnl_status_t s, const char* call) {
  if (s == dnnl_success) return absl::OkStatus();
  if (s == dnnl_unimplemented) {
    return absl::UnimplementedError(absl::StrCat("oneDNN ", call, ": no implementation"));
  }
  if (s == dnnl_out_of_memory) {
    return absl::ResourceExhaustedError(absl::StrCat("oneDNN ", call, ": out of memory"));
  }
  return absl::InternalError(absl::StrCat("oneDNN ", call, " failed (status ", s, ")"));
}

// What one call needs: the engine, a stream, and the user buffers' descriptors.
struct Setup {
  Engine engine;
  Stream stream;
  Attr attr;  // user-managed scratchpad: oneDNN's workspace comes from the context
  dnnl_memory_desc_t x_user, w_user, y_user;  // NCHW, OIHW (GOIHW with groups), NCHW
  dnnl_memory_desc_t x_any, w_any, y_any;     // the same dims, layout left to oneDNN
  dnnl_dims_t strides, dilates, pad_lo, pad_hi;
};

// Pointwise convolutions: 1x1 windows at stride 1 without padding, one group.
bool IsPointwise(const ConvGeom& g) {
  const ops::Axes zero{0, 0, 0}, one{1, 1, 1};
  return g.kd == 1 && g.kh == 1 && g.kw == 1 && g.win.groups == 1 && g.win.stride == one &&
         g.win.pad_lo == zero && g.win.pad_hi == zero;
}

// The layout the primitive is asked to use for x and y:
// - pointwise convolutions (backward weights only: their forward and backward
//   data are kgrad's per-sample GEMMs, see DnnlConv): NCHW, which oneDNN's
//   GEMM-based kernel computes directly. The blocked 1x1 kernel is faster than
//   that GEMM but not by the cost of the reorders (mobilenet_v2 forward: batch 1
//   7.65 -> 6.94 ms, batch 8 69.5 -> 65.9 ms; the strided 1x1 convolutions of
//   resnet18 gained nothing and stay blocked).
// - the forward of other one-group convolutions of 16 or more input channels:
//   NHWC, reordered from and to NCHW around the call. resnet18's forward at batch
//   1 went from 17.8 to 15.4 ms (medians of 10, three interleaved rounds, 2-core
//   AMD EPYC; `kgrad bench`), at batch 8 it stayed at 98-99 ms. Not for the
//   backward kernels (the suite's conv net step: 7.6 -> 8.1 ms), nor for first
//   layers of a few channels or depthwise ones (mobilenet_v2: slower).
// - otherwise oneDNN's own choice (blocked), reordered from and to NCHW.
// 3-D windows (5-D tensors) take the same choices in their NCDHW / NDHWC forms.
dnnl_format_tag_t ActivationTag(const ConvGeom& g, DnnlConvKind kind) {
  const bool three = g.win.spatial == 3;
  if (IsPointwise(g)) return three ? dnnl_ncdhw : dnnl_nchw;
  if (kind == DnnlConvKind::kForward && g.win.groups == 1 && g.c >= 16) {
    return three ? dnnl_ndhwc : dnnl_nhwc;
  }
  return dnnl_format_tag_any;
}

absl::Status MakeSetup(const ConvGeom& g, DnnlConvKind kind, Setup* s) {
  KGRAD_RETURN_IF_ERROR(Check(dnnl_engine_create(s->engine.out(), dnnl_cpu, 0), "engine_create"));
  KGRAD_RETURN_IF_ERROR(
      Check(dnnl_stream_create(s->stream.out(), s->engine.get(), dnnl_stream_default_flags),
            "stream_create"));
  KGRAD_RETURN_IF_ERROR(Check(dnnl_primitive_attr_create(s->attr.out()), "attr_create"));
  KGRAD_RETURN_IF_ERROR(Check(
      dnnl_primitive_attr_set_scratchpad_mode(s->attr.get(), dnnl_scratchpad_mode_user),
      "set_scratchpad_mode"));
  // 1-D and 2-D windows as 2-D (a 1-D window's height is 1), 3-D as 3-D.
  const bool three = g.win.spatial == 3;
  const int nd = three ? 5 : 4;
  const dnnl_dims_t x3{g.n, g.c, g.d, g.h, g.w}, y3{g.n, g.o, g.od, g.oh, g.ow};
  const dnnl_dims_t w3{g.o, g.cg, g.kd, g.kh, g.kw};
  const dnnl_dims_t gw3{g.win.groups, g.og, g.cg, g.kd, g.kh, g.kw};
  const dnnl_dims_t x2{g.n, g.c, g.h, g.w}, y2{g.n, g.o, g.oh, g.ow};
  const dnnl_dims_t w2{g.o, g.cg, g.kh, g.kw}, gw2{g.win.groups, g.og, g.cg, g.kh, g.kw};
  const int64_t* x = three ? x3 : x2;
  const int64_t* y = three ? y3 : y2;
  const int64_t* w = three ? w3 : w2;
  const int64_t* gw = three ? gw3 : gw2;
  const dnnl_format_tag_t act = three ? dnnl_ncdhw : dnnl_nchw;
  const dnnl_format_tag_t filt = three ? dnnl_oidhw : dnnl_oihw;
  const dnnl_format_tag_t gfilt = three ? dnnl_goidhw : dnnl_goihw;
  const bool grouped = g.win.groups > 1;
  struct Desc {
    dnnl_memory_desc_t* md;
    int ndims;
    const int64_t* dims;
    dnnl_format_tag_t tag;
  };
  const Desc descs[] = {
      {&s->x_user, nd, x, act},
      {&s->y_user, nd, y, act},
      {&s->w_user, grouped ? nd + 1 : nd, grouped ? gw : w, grouped ? gfilt : filt},
      {&s->x_any, nd, x, ActivationTag(g, kind)},
      {&s->y_any, nd, y, ActivationTag(g, kind)},
      {&s->w_any, grouped ? nd + 1 : nd, grouped ? gw : w, dnnl_format_tag_any},
  };
  for (const Desc& d : descs) {
    KGRAD_RETURN_IF_ERROR(
        Check(dnnl_memory_desc_init_by_tag(d.md, d.ndims, d.dims, dnnl_f32, d.tag), "memory_desc"));
  }
  const int first = three ? ops::kD : ops::kH;  // oneDNN's first spatial axis
  for (int a = first; a < ops::kMaxSpatial; ++a) {
    s->strides[a - first] = g.win.stride[a];
    s->dilates[a - first] = g.win.dilation[a] - 1;  // oneDNN counts the gaps between taps
    s->pad_lo[a - first] = g.win.pad_lo[a];
    s->pad_hi[a - first] = g.win.pad_hi[a];
  }
  return absl::OkStatus();
}

// The forward primitive descriptor (also the hint the backward ones need).
absl::Status ForwardDesc(const Setup& s, PrimDesc* pd) {
  dnnl_convolution_desc_t d;
  KGRAD_RETURN_IF_ERROR(Check(dnnl_dilated_convolution_forward_desc_init(
                                  &d, dnnl_forward_training, dnnl_convolution_direct, &s.x_any,
                                  &s.w_any, nullptr, &s.y_any, s.strides, s.dilates, s.pad_lo,
                                  s.pad_hi),
                              "convolution_forward_desc_init"));
  return Check(dnnl_primitive_desc_create(pd->out(), &d, s.attr.get(), s.engine.get(), nullptr),
               "convolution forward primitive_desc_create");
}

absl::Status BackwardDesc(const Setup& s, DnnlConvKind kind, const PrimDesc& hint, PrimDesc* pd) {
  dnnl_convolution_desc_t d;
  if (kind == DnnlConvKind::kBackwardData) {
    KGRAD_RETURN_IF_ERROR(Check(dnnl_dilated_convolution_backward_data_desc_init(
                                    &d, dnnl_convolution_direct, &s.x_any, &s.w_any, &s.y_any,
                                    s.strides, s.dilates, s.pad_lo, s.pad_hi),
                                "convolution_backward_data_desc_init"));
  } else {
    KGRAD_RETURN_IF_ERROR(Check(dnnl_dilated_convolution_backward_weights_desc_init(
                                    &d, dnnl_convolution_direct, &s.x_any, &s.w_any, nullptr,
                                    &s.y_any, s.strides, s.dilates, s.pad_lo, s.pad_hi),
                                "convolution_backward_weights_desc_init"));
  }
  return Check(
      dnnl_primitive_desc_create(pd->out(), &d, s.attr.get(), s.engine.get(), hint.get()),
      "convolution backward primitive_desc_create");
}

// One operand: the user's buffer, and the primitive's copy when oneDNN wants
// another layout (scratch from the context, filled or drained by a reorder; for
// a weight the step keeps across runs, the copy kept in the step's cache).
struct Operand {
  int arg;
  const dnnl_memory_desc_t* user_md;
  const dnnl_memory_desc_t* prim_md;
  float* data;
  bool is_output;
  const Tensor* kept = nullptr;  // the input tensor whose copy the cache may keep
  Memory user, prim;
  Tensor scratch;
};

// The cache key of a plain blocked f32 layout: its dims, padding and blocking,
// field by field (the descriptor's unused union bytes are not part of it).
// Empty (not cached) for any other kind of layout.
std::string LayoutKey(const dnnl_memory_desc_t& md) {
  if (md.format_kind != dnnl_blocked || md.extra.flags != 0 || md.ndims > DNNL_MAX_NDIMS) return "";
  const dnnl_blocking_desc_t& b = md.format_desc.blocking;
  if (b.inner_nblks < 0 || b.inner_nblks > DNNL_MAX_NDIMS) return "";
  std::string key = absl::StrCat("f", static_cast<int>(md.data_type), " o", md.offset0, " b", b.inner_nblks);
  for (int i = 0; i < md.ndims; ++i) {
    absl::StrAppend(&key, " ", md.dims[i], "/", md.padded_dims[i], "+", md.padded_offsets[i], ":",
                    b.strides[i]);
  }
  for (int i = 0; i < b.inner_nblks; ++i) absl::StrAppend(&key, " ", b.inner_idxs[i], "x", b.inner_blks[i]);
  return key;
}

absl::Status Reorder(const Setup& s, dnnl_memory_t from, const dnnl_memory_desc_t* from_md,
                     dnnl_memory_t to, const dnnl_memory_desc_t* to_md) {
  PrimDesc pd;
  KGRAD_RETURN_IF_ERROR(Check(dnnl_reorder_primitive_desc_create(pd.out(), from_md, s.engine.get(),
                                                                  to_md, s.engine.get(), nullptr),
                              "reorder primitive_desc_create"));
  Primitive r;
  KGRAD_RETURN_IF_ERROR(Check(dnnl_primitive_create(r.out(), pd.get()), "reorder primitive_create"));
  const dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  return Check(dnnl_primitive_execute(r.get(), s.stream.get(), 2, args), "reorder execute");
}

// Scratch of `bytes` from the context (f32 elements, rounded up).
absl::StatusOr<Tensor> Scratch(const KernelContext& ctx, size_t bytes) {
  return ctx.Allocate(DType::kFloat32, {static_cast<int64_t>((bytes + 3) / 4)});
}

absl::Status Bind(const KernelContext& ctx, const Setup& s, Operand* op) {
  KGRAD_RETURN_IF_ERROR(
      Check(dnnl_memory_create(op->user.out(), op->user_md, s.engine.get(), op->data), "memory_create"));
  if (dnnl_memory_desc_equal(op->user_md, op->prim_md)) return absl::OkStatus();
  const std::string key =
      op->kept != nullptr && ctx.cache() != nullptr ? LayoutKey(*op->prim_md) : std::string();
  std::optional<Tensor> hit;
  if (!key.empty()) hit = ctx.cache()->Find(*op->kept, key);
  if (hit.has_value()) {
    op->scratch = *std::move(hit);
  } else {
    KGRAD_ASSIGN_OR_RETURN(op->scratch, Scratch(ctx, dnnl_memory_desc_get_size(op->prim_md)));
  }
  KGRAD_RETURN_IF_ERROR(Check(dnnl_memory_create(op->prim.out(), op->prim_md, s.engine.get(),
                                                 op->scratch.mutable_data<float>()),
                              "memory_create"));
  if (op->is_output || hit.has_value()) return absl::OkStatus();
  KGRAD_RETURN_IF_ERROR(Reorder(s, op->user.get(), op->user_md, op->prim.get(), op->prim_md));
  if (!key.empty()) {
    // The reorder ran on the stream: finish it before other runs may read the copy.
    KGRAD_RETURN_IF_ERROR(Check(dnnl_stream_wait(s.stream.get()), "stream_wait"));
    ctx.cache()->Store(*op->kept, key, op->scratch);
  }
  return absl::OkStatus();
}

dnnl_memory_t Bound(const Operand& op) { return op.prim.get() != nullptr ? op.prim.get() : op.user.get(); }

// oneDNN's GEMM-based convolutions ("gemm:jit", what it picks for plain layouts
// on machines without AVX-512, and for grouped windows it has no direct kernel
// for) split their sums by the thread count: forward results differed in the
// last bits on 1, 2, 3 and 5 threads (tests/backends/cpu/conv_kernels_test on a
// 2-core AVX2 EPYC), where the direct kernels sum each output on one thread. Those
// are left to kgrad's im2col GEMMs (Unimplemented). Backward weights run on one
// thread per fixed chunk (BackwardWeightsInChunks) and may use any kernel.
absl::Status RefuseThreadDependentSums(const PrimDesc& pd, DnnlConvKind kind) {
  if (kind == DnnlConvKind::kBackwardWeights) return absl::OkStatus();
  const char* impl = nullptr;
  if (dnnl_primitive_desc_query(pd.get(), dnnl_query_impl_info_str, 0, &impl) != dnnl_success ||
      impl == nullptr) {
    return absl::UnimplementedError("oneDNN did not name its convolution kernel");
  }
  if (std::strstr(impl, "gemm") != nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("oneDNN's convolution kernel ", impl, " sums by the thread count"));
  }
  return absl::OkStatus();
}

// Backward weights left in the primitive's own layout (no reorder to OIHW): a
// buffer the call allocates, and that layout.
struct BlockedWeights {
  dnnl_memory_desc_t md;
  Tensor buffer;
};

// One oneDNN call over the whole of `g`, with the calling thread's OpenMP threads.
// With `blocked` (backward weights only), w is not written: the weights' gradient
// goes to blocked->buffer in the primitive's layout.
absl::Status DnnlConvCall(const KernelContext& ctx, const ConvGeom& g, DnnlConvKind kind, float* x,
                          float* w, float* y, const Tensor* kept_w, BlockedWeights* blocked = nullptr) {
  Setup s;
  KGRAD_RETURN_IF_ERROR(MakeSetup(g, kind, &s));
  PrimDesc fwd, bwd;
  KGRAD_RETURN_IF_ERROR(ForwardDesc(s, &fwd));
  if (kind != DnnlConvKind::kForward) KGRAD_RETURN_IF_ERROR(BackwardDesc(s, kind, fwd, &bwd));
  const PrimDesc& pd = kind == DnnlConvKind::kForward ? fwd : bwd;
  KGRAD_RETURN_IF_ERROR(RefuseThreadDependentSums(pd, kind));
  auto md = [&](dnnl_query_t q) { return dnnl_primitive_desc_query_md(pd.get(), q, 0); };
  // The output is y (forward), x (backward data) or w (backward weights); the
  // operand in that role is a difference ("diff_") in the backward primitives.
  const bool out_x = kind == DnnlConvKind::kBackwardData;
  const bool out_w = kind == DnnlConvKind::kBackwardWeights;
  const bool out_y = kind == DnnlConvKind::kForward;
  Operand ops[3] = {
      {out_x ? DNNL_ARG_DIFF_SRC : DNNL_ARG_SRC, &s.x_user,
       md(out_x ? dnnl_query_diff_src_md : dnnl_query_src_md), x, out_x},
      {out_w ? DNNL_ARG_DIFF_WEIGHTS : DNNL_ARG_WEIGHTS, &s.w_user,
       md(out_w ? dnnl_query_diff_weights_md : dnnl_query_weights_md), w, out_w},
      {out_y ? DNNL_ARG_DST : DNNL_ARG_DIFF_DST, &s.y_user,
       md(out_y ? dnnl_query_dst_md : dnnl_query_diff_dst_md), y, out_y},
  };
  if (!out_w) ops[1].kept = kept_w;
  if (out_w && blocked != nullptr) {
    blocked->md = *ops[1].prim_md;
    KGRAD_ASSIGN_OR_RETURN(blocked->buffer, Scratch(ctx, dnnl_memory_desc_get_size(&blocked->md)));
    ops[1].user_md = ops[1].prim_md;  // the same layout: Bind makes no copy
    ops[1].data = blocked->buffer.mutable_data<float>();
  }
  for (Operand& op : ops) KGRAD_RETURN_IF_ERROR(Bind(ctx, s, &op));
  Tensor pad_scratch;
  Memory pad;
  const dnnl_memory_desc_t* pad_md = md(dnnl_query_scratchpad_md);
  const size_t pad_bytes = pad_md != nullptr ? dnnl_memory_desc_get_size(pad_md) : 0;
  std::vector<dnnl_exec_arg_t> args;
  for (const Operand& op : ops) args.push_back({op.arg, Bound(op)});
  if (pad_bytes > 0) {
    KGRAD_ASSIGN_OR_RETURN(pad_scratch, Scratch(ctx, pad_bytes));
    KGRAD_RETURN_IF_ERROR(Check(dnnl_memory_create(pad.out(), pad_md, s.engine.get(),
                                                   pad_scratch.mutable_data<float>()),
                                "memory_create"));
    args.push_back({DNNL_ARG_SCRATCHPAD, pad.get()});
  }
  Primitive conv;
  KGRAD_RETURN_IF_ERROR(Check(dnnl_primitive_create(conv.out(), pd.get()), "primitive_create"));
  KGRAD_RETURN_IF_ERROR(Check(dnnl_primitive_execute(conv.get(), s.stream.get(),
                                                     static_cast<int>(args.size()), args.data()),
                              "convolution execute"));
  for (Operand& op : ops) {
    if (op.is_output && op.prim.get() != nullptr) {
      KGRAD_RETURN_IF_ERROR(Reorder(s, op.prim.get(), op.prim_md, op.user.get(), op.user_md));
    }
  }
  return Check(dnnl_stream_wait(s.stream.get()), "stream_wait");
}

// oneDNN's backward-weights kernels split the reduction over the batch and the
// image among threads, so their sums depend on the thread count (checked: 1 vs
// 2, 3, 4 threads differ in the last bits for every shape tried), and a
// caller's thread count changes with how many runs share the cores. So the batch
// is cut into kWeightChunks fixed chunks, each summed by oneDNN on one thread
// into its own slice, and the slices added in chunk order: the same bits
// whatever the threads. (Forward and backward-data results were the same at
// every thread count: each output is summed by one thread.)
//
// The slices stay in the kernel's blocked layout, are added there (element by
// element, in chunk order: the same sums as in OIHW) and reordered once: one
// reorder per convolution instead of one per chunk on one thread each (resnet18
// batch 8: 40 of its 77 ms of reorders per training step, ONEDNN_VERBOSE=1).
// Chunks whose kernels chose different layouts (uneven chunks) are reordered
// one by one.
absl::Status BackwardWeightsInChunks(const KernelContext& ctx, const ConvGeom& g, float* x,
                                     float* dw, float* dy) {
  if (g.n < kWeightChunks) {
    // Fewer samples than chunks: the im2col kernel's blocks of output channels
    // (one oneDNN call per sample on one thread, or row bands of one sample,
    // measured 1.25-1.5x slower on resnet18 at batch 1).
    return absl::UnimplementedError("backward weights of few samples: not sent to oneDNN");
  }
  const int64_t chunks = kWeightChunks;
  std::vector<BlockedWeights> slices(chunks);
  std::vector<absl::Status> status(chunks);
  ParallelForOneThreadEach(chunks, 2, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      ConvGeom part = g;
      const int64_t n0 = g.n * c / chunks;
      part.n = g.n * (c + 1) / chunks - n0;
      status[c] = DnnlConvCall(ctx, part, DnnlConvKind::kBackwardWeights, x + n0 * g.c * g.d * g.h * g.w,
                               nullptr, dy + n0 * g.o * g.od * g.oh * g.ow, nullptr, &slices[c]);
    }
  });
  for (const absl::Status& st : status) KGRAD_RETURN_IF_ERROR(st);
  Setup s;
  KGRAD_RETURN_IF_ERROR(MakeSetup(g, DnnlConvKind::kBackwardWeights, &s));
  auto to_user = [&](BlockedWeights& slice, float* out) -> absl::Status {
    Memory from, to;
    KGRAD_RETURN_IF_ERROR(Check(dnnl_memory_create(from.out(), &slice.md, s.engine.get(),
                                                   slice.buffer.mutable_data<float>()),
                                "memory_create"));
    KGRAD_RETURN_IF_ERROR(Check(dnnl_memory_create(to.out(), &s.w_user, s.engine.get(), out), "memory_create"));
    KGRAD_RETURN_IF_ERROR(Reorder(s, from.get(), &slice.md, to.get(), &s.w_user));
    return Check(dnnl_stream_wait(s.stream.get()), "stream_wait");
  };
  bool same = true;
  for (int64_t c = 1; c < chunks; ++c) same = same && dnnl_memory_desc_equal(&slices[c].md, &slices[0].md);
  const int64_t wsize = g.o * g.cg * g.kd * g.kh * g.kw;
  if (!same) {
    KGRAD_ASSIGN_OR_RETURN(Tensor partial, ctx.Allocate(DType::kFloat32, {chunks - 1, wsize}));
    for (int64_t c = 0; c < chunks; ++c) {
      KGRAD_RETURN_IF_ERROR(to_user(slices[c], c == 0 ? dw : partial.mutable_data<float>() + (c - 1) * wsize));
    }
    const float* p = partial.data<float>();
    for (int64_t c = 1; c < chunks; ++c, p += wsize) {
      for (int64_t i = 0; i < wsize; ++i) dw[i] += p[i];
    }
    return absl::OkStatus();
  }
  // (The padding lanes of a blocked layout are summed too; the reorder drops them.)
  const int64_t total = static_cast<int64_t>(dnnl_memory_desc_get_size(&slices[0].md) / sizeof(float));
  float* sum = slices[0].buffer.mutable_data<float>();
  ParallelFor(total, kParallelGrain / 4, [&](int64_t b, int64_t e) {
    for (int64_t c = 1; c < chunks; ++c) {
      const float* p = slices[c].buffer.data<float>();
      for (int64_t i = b; i < e; ++i) sum[i] += p[i];
    }
  });
  return to_user(slices[0], dw);
}

}  // namespace

absl::Status DnnlConv(const KernelContext& ctx, const ConvGeom& g, DnnlConvKind kind, float* x,
                      float* w, float* y, const Tensor* kept_w) {
  if (kind == DnnlConvKind::kBackwardWeights) return BackwardWeightsInChunks(ctx, g, x, w, y);
  // A pointwise forward or backward data is one GEMM per sample, which oneDNN
  // would hand to its GEMM-based kernel: kgrad's own computes the same GEMM with
  // the same sgemm, in tiles whose bits do not depend on the threads.
  if (IsPointwise(g)) return absl::UnimplementedError("pointwise: kgrad's per-sample GEMM");
  return DnnlConvCall(ctx, g, kind, x, w, y, kept_w);
}

#endif  // KGRAD_NO_DNNL

}  // namespace conv_internal
}  // namespace cpu
}  // namespace kgrad
