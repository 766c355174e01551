#include "backends/cpu/conv_window.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

namespace kgrad {
namespace cpu {
namespace conv_internal {
namespace {

constexpr const char* kAxisNames[2] = {"height", "width"};
// Attribute values beyond this are nonsense and could overflow int64 arithmetic.
constexpr int64_t kMaxAttrValue = kMaxElements;

absl::Status BadAttr(const std::string& name, const std::vector<int64_t>& v,
                     absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' must be ", expected,
                                                 ", got [", absl::StrJoin(v, ", "), "]"));
}

absl::StatusOr<std::array<int64_t, 2>> PairAttr(const Primitive& p, const std::string& name,
                                                int64_t min) {
  const std::vector<int64_t>& v = p.GetInts(name);
  std::string expected = absl::StrCat("2 values [h, w], each >= ", min);
  if (v.size() != 2) return BadAttr(name, v, expected);
  for (int64_t x : v) {
    if (x < min || x > kMaxAttrValue) return BadAttr(name, v, expected);
  }
  return std::array<int64_t, 2>{v[0], v[1]};
}

absl::Status ParsePadding(const Primitive& p, Window* w) {
  const std::vector<int64_t>& v = p.GetInts("padding");
  const char* expected = "[pad_h, pad_w] or [top, bottom, left, right], each >= 0";
  if (v.size() != 2 && v.size() != 4) return BadAttr("padding", v, expected);
  for (int64_t x : v) {
    if (x < 0 || x > kMaxAttrValue) return BadAttr("padding", v, expected);
  }
  if (v.size() == 2) {
    w->pad_lo = w->pad_hi = {v[0], v[1]};
  } else {
    w->pad_lo = {v[0], v[2]};
    w->pad_hi = {v[1], v[3]};
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Window> ConvAttrs(const Primitive& p) {
  Window w;
  KGRAD_ASSIGN_OR_RETURN(w.stride, PairAttr(p, "stride", 1));
  KGRAD_ASSIGN_OR_RETURN(w.dilation, PairAttr(p, "dilation", 1));
  KGRAD_RETURN_IF_ERROR(ParsePadding(p, &w));
  w.groups = p.GetInt("groups");
  if (w.groups < 1 || w.groups > kMaxAttrValue) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'groups' must be >= 1, got ", w.groups));
  }
  return w;
}

absl::StatusOr<Window> PoolAttrs(const Primitive& p) {
  Window w;
  KGRAD_ASSIGN_OR_RETURN(w.kernel, PairAttr(p, "kernel", 1));
  if (p.GetInts("stride").empty()) {
    w.stride = w.kernel;  // non-overlapping windows
  } else {
    KGRAD_ASSIGN_OR_RETURN(w.stride, PairAttr(p, "stride", 1));
  }
  KGRAD_RETURN_IF_ERROR(ParsePadding(p, &w));
  return w;
}

absl::StatusOr<int64_t> WindowCount(const Window& w, int axis, int64_t in, bool pool) {
  const char* name = kAxisNames[axis];
  int64_t k = w.kernel[axis], d = w.dilation[axis], s = w.stride[axis];
  int64_t lo = w.pad_lo[axis], hi = w.pad_hi[axis];
  if (pool && lo >= k) {
    return absl::InvalidArgumentError(absl::StrCat("the first pooling window along the ", name,
                                                   " lies entirely in the padding (padding ", lo,
                                                   " >= kernel ", k, ")"));
  }
  if (k > 1 && d > kMaxAttrValue / (k - 1)) {
    return absl::InvalidArgumentError(absl::StrCat("the dilated kernel ", name, " (kernel ", k,
                                                   ", dilation ", d, ") is too large"));
  }
  int64_t eff = d * (k - 1) + 1;
  int64_t padded = in + lo + hi;
  if (padded < eff) {
    return absl::InvalidArgumentError(
        absl::StrCat("the padded input ", name, " ", padded, " (", in, " + ", lo, " + ", hi,
                     ") is smaller than the ", d > 1 ? "dilated " : "", "kernel ", name, " ", eff));
  }
  int64_t count = (padded - eff) / s + 1;
  int64_t last_start = (count - 1) * s - lo;
  if (pool && last_start >= in) {
    return absl::InvalidArgumentError(
        absl::StrCat("the last pooling window along the ", name, " starts at ", last_start,
                     ", past the input ", name, " ", in, ": it lies entirely in the padding"));
  }
  return count;
}

absl::StatusOr<const Tensor*> Nchw(const KernelContext& ctx, size_t i, const char* what) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* t, ctx.FloatTensorAt(i));
  if (t->rank() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", i, " must be a rank-4 ", what, " tensor, got ", t->TypeString()));
  }
  if (i > 0 && t->dtype() != ctx.input(0).tensor().dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " must be ",
                                                   DTypeName(ctx.input(0).tensor().dtype()),
                                                   " like input 0, got ", t->TypeString()));
  }
  return t;
}

absl::Status ExpectShape(size_t i, const Tensor& t, const Shape& expected, absl::string_view what) {
  if (t.shape() == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("input ", i, " must be shaped ",
                                                 ShapeToString(expected), " (", what, "), got ",
                                                 t.TypeString()));
}

}  // namespace conv_internal
}  // namespace cpu
}  // namespace kgrad
