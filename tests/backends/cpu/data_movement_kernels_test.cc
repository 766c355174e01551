// CPU kernel tests for the shape family's data-movement kernels (the moves of
// backends/view_kernels.h: transpose, broadcast_to, concat, split, slice,
// slice_grad, pad) against naive float64 references (shape_test_util.h): exact in
// every dtype.
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_device.h"
#include "core/primitive.h"
#include "core/tensor.h"
#include "core/value.h"
#include "gtest/gtest.h"
#include "tests/backends/cpu/shape_test_util.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

// ----- transpose --------------------------------------------------------------------------------
std::vector<double> TransposeRef(const Tensor& x, const Ints& perm, Shape* out_shape) {
  out_shape->clear();
  for (int64_t p : perm) out_shape->push_back(x.dim(p));
  std::vector<double> v = ToDoubles(x);
  return MapRef(*out_shape, v, [&](const Index& o) {
    Index src(perm.size());
    for (size_t k = 0; k < perm.size(); ++k) src[perm[k]] = o[k];
    return Ravel(x.shape(), src);
  });
}

TEST(ShapeKernelsTest, TransposeEveryPermutationOfRank3) {
  std::mt19937_64 rng(3);
  std::vector<Ints> perms = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (DType dt : kAll) {
    Tensor x = Rand(dt, {2, 3, 4}, rng);
    for (const Ints& perm : perms) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dt), " perm ", perm[0], perm[1], perm[2]));
      Shape shape;
      std::vector<double> want = TransposeRef(x, perm, &shape);
      ExpectExact(RunOk(PrimId::kTranspose, {x}, {{"perm", perm}}), dt, shape, want);
    }
  }
}

TEST(ShapeKernelsTest, TransposeDefaultLargeAndEdgeCases) {
  std::mt19937_64 rng(4);
  for (DType dt : {kF32, kF64}) {
    Tensor x = Rand(dt, {130, 70, 5}, rng);  // above the parallel grain
    Shape shape;
    std::vector<double> want = TransposeRef(x, {2, 1, 0}, &shape);
    ExpectExact(RunOk(PrimId::kTranspose, {x}), dt, shape, want);
    want = TransposeRef(x, {1, 0, 2}, &shape);
    ExpectExact(RunOk(PrimId::kTranspose, {x}, {{"perm", Ints{1, 0, 2}}}), dt, shape, want);
  }
  Tensor s = MakeTensor(kI64, {}, {-4});
  ExpectExact(RunOk(PrimId::kTranspose, {s}), kI64, {}, {-4});
  Tensor e = Tensor::Zeros(kF32, {0, 3}).value();
  ExpectExact(RunOk(PrimId::kTranspose, {e}), kF32, {3, 0}, {});
  Tensor x = Tensor::Zeros(kF32, {2, 3}).value();
  ExpectRunError(PrimId::kTranspose, {x}, {{"perm", Ints{1, 1}}}, "not a permutation");
  ExpectRunError(PrimId::kTranspose, {x}, {{"perm", Ints{0}}}, "'perm'");
  ExpectRunError(PrimId::kTranspose, {x}, {{"perm", Ints{0, 5}}}, "not a permutation");
}

// ----- broadcast_to
// ----------------------------------------------------------------------------------
std::vector<double> BroadcastRef(const Tensor& x, const Shape& target) {
  std::vector<double> v = ToDoubles(x);
  size_t lead = target.size() - x.rank();
  return MapRef(target, v, [&](const Index& o) {
    Index src(x.rank());
    for (int k = 0; k < x.rank(); ++k) src[k] = x.dim(k) == 1 ? 0 : o[lead + k];
    return Ravel(x.shape(), src);
  });
}

TEST(ShapeKernelsTest, BroadcastTo) {
  std::mt19937_64 rng(5);
  struct Case {
    Shape in, target;
  };
  std::vector<Case> cases = {{{3, 1}, {2, 3, 4}},    {{}, {2, 2}},           {{1}, {0}},
                             {{4}, {3, 4}},          {{2, 1, 3}, {2, 5, 3}}, {{1, 1}, {1, 1}},
                             {{1, 300}, {200, 300}}, {{200, 1}, {200, 300}}};
  for (DType dt : kAll) {
    for (const Case& c : cases) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dt), ShapeToString(c.in), "->", ShapeToString(c.target)));
      Tensor x = Rand(dt, c.in, rng);
      Ints t(c.target.begin(), c.target.end());
      Tensor out = RunOk(PrimId::kBroadcastTo, {x}, {{"shape", t}});
      ExpectExact(out, dt, c.target, BroadcastRef(x, c.target));
      Tensor like = RunOk(PrimId::kBroadcastToLike, {x, Tensor::Zeros(kBool, c.target).value()});
      ExpectExact(like, dt, c.target, BroadcastRef(x, c.target));
    }
  }
  // Only leading 1s added: the buffer is shared.
  Tensor x = Rand(kF32, {3}, rng);
  EXPECT_EQ(RunOk(PrimId::kBroadcastTo, {x}, {{"shape", Ints{1, 3}}}).raw_data(), x.raw_data());
}

TEST(ShapeKernelsTest, BroadcastToErrors) {
  Tensor x = Tensor::Zeros(kF32, {3}).value();
  ExpectRunError(PrimId::kBroadcastTo, {x}, {{"shape", Ints{4}}}, "cannot broadcast f32[3] to [4]");
  ExpectRunError(PrimId::kBroadcastTo, {x}, {{"shape", Ints{}}}, "cannot broadcast");
  ExpectRunError(PrimId::kBroadcastTo, {x}, {{"shape", Ints{-1, 3}}}, "'shape'");
  ExpectRunError(PrimId::kBroadcastToLike, {x, Tensor::Zeros(kF32, {3, 2}).value()}, {},
                 "cannot broadcast");
}

// ----- concat, split
// ---------------------------------------------------------------------------------- Concatenation
// by placing each input's elements at its offset along `axis`.
std::vector<double> ConcatRef(const std::vector<Tensor>& xs, int axis, Shape* out_shape) {
  *out_shape = xs[0].shape();
  (*out_shape)[axis] = 0;
  for (const Tensor& x : xs) (*out_shape)[axis] += x.dim(axis);
  std::vector<double> out(NumElementsOf(*out_shape));
  int64_t offset = 0;
  for (const Tensor& x : xs) {
    std::vector<double> v = ToDoubles(x);
    for (int64_t i = 0; i < x.NumElements(); ++i) {
      Index idx = Unravel(x.shape(), i);
      idx[axis] += offset;
      out[Ravel(*out_shape, idx)] = v[i];
    }
    offset += x.dim(axis);
  }
  return out;
}

TEST(ShapeKernelsTest, Concat) {
  std::mt19937_64 rng(9);
  for (DType dt : kAll) {
    for (int64_t axis : {0, 1, 2, -1, -3}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dt), " axis ", axis));
      int a = axis < 0 ? axis + 3 : axis;
      std::vector<Tensor> xs;
      for (int64_t n : {2, 0, 3, 1}) {
        Shape s = {2, 3, 4};
        s[a] = n;
        xs.push_back(Rand(dt, s, rng));
      }
      Shape shape;
      std::vector<double> want = ConcatRef(xs, a, &shape);
      std::vector<Value> in(xs.begin(), xs.end());
      ExpectExact(RunOk(PrimId::kConcat, in, {{"axis", axis}}), dt, shape, want);
    }
  }
  Tensor big_a = Rand(kF32, {300, 100}, rng), big_b = Rand(kF32, {300, 60}, rng);
  Shape shape;
  std::vector<double> want = ConcatRef({big_a, big_b}, 1, &shape);
  ExpectExact(RunOk(PrimId::kConcat, {big_a, big_b}, {{"axis", int64_t{1}}}), kF32, shape, want);
  Tensor one = Rand(kI64, {4}, rng);
  ExpectExact(RunOk(PrimId::kConcat, {one}), kI64, {4}, ToDoubles(one));
}

TEST(ShapeKernelsTest, ConcatErrors) {
  Tensor a = Tensor::Zeros(kF32, {2, 3}).value();
  ExpectRunError(PrimId::kConcat, {a, Tensor::Zeros(kF64, {2, 3}).value()}, {},
                 "input 1 must match");
  ExpectRunError(PrimId::kConcat, {a, Tensor::Zeros(kF32, {2, 4}).value()}, {}, "every dim but 0");
  ExpectRunError(PrimId::kConcat, {a, Tensor::Zeros(kF32, {2}).value()}, {}, "got f32[2]");
  ExpectRunError(PrimId::kConcat, {a}, {{"axis", int64_t{2}}}, "'axis'");
  ExpectRunError(PrimId::kConcat, {Tensor::Zeros(kF32, {}).value()}, {}, "out of range");
}

TEST(ShapeKernelsTest, Split) {
  std::mt19937_64 rng(10);
  for (DType dt : kAll) {
    for (int64_t axis : {0, 1, -1}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dt), " axis ", axis));
      int a = axis < 0 ? axis + 3 : axis;
      Shape in = {4, 6, 3};
      in[a] = 6;
      Tensor x = Rand(dt, in, rng);
      std::vector<double> v = ToDoubles(x);
      absl::StatusOr<Value> r =
          RunCpuKernel(PrimId::kSplit, {x}, {{"axis", axis}, {"sizes", Ints{1, 0, 3, 2}}});
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_TRUE(r->is_tuple());
      ASSERT_EQ(r->tuple().size(), 4u);
      int64_t offset = 0;
      for (int64_t p = 0; p < 4; ++p) {
        const Tensor& piece = r->tuple()[p].tensor();
        Shape s = in;
        s[a] = Ints{1, 0, 3, 2}[p];
        std::vector<double> want = MapRef(s, v, [&](const Index& o) {
          Index src = o;
          src[a] += offset;
          return Ravel(in, src);
        });
        ExpectExact(piece, dt, s, want);
        offset += s[a];
      }
    }
  }
}

TEST(ShapeKernelsTest, SplitErrors) {
  Tensor x = Tensor::Zeros(kF32, {5, 2}).value();
  ExpectRunError(PrimId::kSplit, {x}, {{"sizes", Ints{2, 2}}}, "sum to dim 0");
  ExpectRunError(PrimId::kSplit, {x}, {{"sizes", Ints{6, -1}}}, "'sizes'");
  ExpectRunError(PrimId::kSplit, {x}, {{"sizes", Ints{}}}, "'sizes'");
  ExpectRunError(PrimId::kSplit, {x}, {{"sizes", Ints{5}}, {"axis", int64_t{2}}}, "'axis'");
}

// ----- slice, slice_grad
// ------------------------------------------------------------------------------ The source index
// of output position o along one dim, NumPy-style.
struct DimSlice {
  int64_t begin, stride, size;
};
DimSlice RefDimSlice(int64_t d, int64_t b, int64_t e, int64_t s) {
  if (b < 0) b += d;
  if (e < 0) e += d;
  b = std::min(std::max<int64_t>(b, 0), d);
  e = std::min(std::max<int64_t>(e, 0), d);
  int64_t n = 0;
  for (int64_t i = b; i < e; i += s) ++n;
  return {b, s, n};
}

std::vector<DimSlice> RefSlice(const Shape& in, const Ints& b, const Ints& e, const Ints& s) {
  std::vector<DimSlice> out;
  for (size_t k = 0; k < in.size(); ++k) {
    out.push_back(RefDimSlice(in[k], b[k], e[k], s.empty() ? 1 : s[k]));
  }
  return out;
}

struct SliceCase {
  Shape in;
  Ints begin, end, strides;
};

std::vector<SliceCase> SliceCases() {
  return {{{5, 6}, {1, 0}, {4, 6}, {}},
          {{5, 6}, {0, 1}, {5, 6}, {2, 2}},
          {{5, 6}, {-2, -5}, {100, -1}, {1, 3}},
          {{5, 6}, {4, -100}, {2, 3}, {}},
          {{4, 5, 6}, {-100, 2, 1}, {100, 3, 6}, {3, 1, 4}},
          {{7}, {6}, {7}, {5}},
          {{}, {}, {}, {}},
          {{0, 3}, {0, 1}, {5, 3}, {}},
          {{300, 250}, {3, 1}, {290, 250}, {1, 2}}};
}

TEST(ShapeKernelsTest, Slice) {
  std::mt19937_64 rng(11);
  for (DType dt : kAll) {
    for (const SliceCase& c : SliceCases()) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dt), " ", ShapeToString(c.in)));
      Tensor x = Rand(dt, c.in, rng);
      std::vector<DimSlice> ds = RefSlice(c.in, c.begin, c.end, c.strides);
      Shape out_shape;
      for (const DimSlice& d : ds) out_shape.push_back(d.size);
      std::vector<double> want = MapRef(out_shape, ToDoubles(x), [&](const Index& o) {
        Index src(o.size());
        for (size_t k = 0; k < o.size(); ++k) src[k] = ds[k].begin + o[k] * ds[k].stride;
        return Ravel(c.in, src);
      });
      AttrMap attrs = {{"begin", c.begin}, {"end", c.end}, {"strides", c.strides}};
      ExpectExact(RunOk(PrimId::kSlice, {x}, attrs), dt, out_shape, want);
    }
  }
}

TEST(ShapeKernelsTest, SliceGrad) {
  std::mt19937_64 rng(12);
  for (DType dt : kAll) {
    for (const SliceCase& c : SliceCases()) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dt), " ", ShapeToString(c.in)));
      std::vector<DimSlice> ds = RefSlice(c.in, c.begin, c.end, c.strides);
      Shape dy_shape;
      for (const DimSlice& d : ds) dy_shape.push_back(d.size);
      Tensor dy = Rand(dt, dy_shape, rng);
      Tensor ref = Tensor::Zeros(kF64, c.in).value();
      // Each input position is either the image of one dy position or zero.
      std::vector<double> want = MapRef(c.in, ToDoubles(dy), [&](const Index& i) -> int64_t {
        Index o(i.size());
        for (size_t k = 0; k < i.size(); ++k) {
          int64_t off = i[k] - ds[k].begin;
          if (off < 0 || off % ds[k].stride != 0 || off / ds[k].stride >= ds[k].size) return -1;
          o[k] = off / ds[k].stride;
        }
        return Ravel(dy_shape, o);
      });
      AttrMap attrs = {{"begin", c.begin}, {"end", c.end}, {"strides", c.strides}};
      ExpectExact(RunOk(PrimId::kSliceGrad, {dy, ref}, attrs), dt, c.in, want);
    }
  }
}

TEST(ShapeKernelsTest, SliceErrors) {
  Tensor x = Tensor::Zeros(kF32, {5, 6}).value();
  AttrMap ok = {{"begin", Ints{1, 0}}, {"end", Ints{4, 6}}};
  ExpectRunError(PrimId::kSlice, {x}, {{"begin", Ints{1}}, {"end", Ints{4, 6}}}, "'begin'");
  ExpectRunError(PrimId::kSlice, {x},
                 {{"begin", Ints{1, 0}}, {"end", Ints{4, 6}}, {"strides", Ints{1, 0}}},
                 "must be >= 1");
  ExpectRunError(PrimId::kSliceGrad, {Tensor::Zeros(kF32, {3, 5}).value(), x}, ok,
                 "must have the slice's shape [3,6]");
  ExpectRunError(PrimId::kSliceGrad, {x, Tensor::Zeros(kF32, {5}).value()}, ok, "'begin'");
}

// ----- pad --------------------------------------------------------------------------------------
TEST(ShapeKernelsTest, Pad) {
  std::mt19937_64 rng(15);
  struct Case {
    Shape in;
    Ints pads;
  };
  std::vector<Case> cases = {{{2, 3}, {1, 2, 0, 3}},
                             {{4}, {0, 0}},
                             {{}, {}},
                             {{0, 2}, {1, 1, 2, 0}},
                             {{2, 3, 2}, {1, 0, 2, 1, 0, 3}},
                             {{200, 180}, {3, 4, 5, 6}}};
  for (DType dt : kAll) {
    for (const Case& c : cases) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dt), ShapeToString(c.in)));
      Tensor x = Rand(dt, c.in, rng);
      Shape out_shape;
      for (size_t k = 0; k < c.in.size(); ++k) {
        out_shape.push_back(c.in[k] + c.pads[2 * k] + c.pads[2 * k + 1]);
      }
      double value = 2.75;
      double fill = dt == kBool ? 1.0 : IsInteger(dt) ? 2.0 : value;  // converted like cast
      std::vector<double> want = MapRef(
          out_shape, ToDoubles(x),
          [&](const Index& o) -> int64_t {
            Index src(o.size());
            for (size_t k = 0; k < o.size(); ++k) {
              src[k] = o[k] - c.pads[2 * k];
              if (src[k] < 0 || src[k] >= c.in[k]) return -1;
            }
            return Ravel(c.in, src);
          },
          fill);
      Tensor out = RunOk(PrimId::kPad, {x}, {{"pads", c.pads}, {"value", value}});
      EXPECT_EQ(out.shape(), out_shape);
      EXPECT_EQ(MaxAbsDiff(out, want), 0.0);
    }
  }
  Tensor x = MakeTensor(kF32, {1}, {5});
  ExpectExact(RunOk(PrimId::kPad, {x}, {{"pads", Ints{1, 1}}}), kF32, {3}, {0, 5, 0});
  ExpectRunError(PrimId::kPad, {x}, {{"pads", Ints{1}}}, "'pads' has 1 entries");
  ExpectRunError(PrimId::kPad, {x}, {{"pads", Ints{-1, 0}}}, "must be >= 0");
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
