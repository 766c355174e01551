// CPU kernel tests for the shape family against naive float64 references:
// plain loops over multi-indices, obviously correct. Data movement is exact in
// every dtype; sums are compared with tight tolerances.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_device.h"
#include "core/primitive.h"
#include "core/tensor.h"
#include "core/value.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

const DType kAll[] = {kF32, kF64, kI32, kI64, kBool};
const DType kNumeric[] = {kF32, kF64, kI32, kI64};

using Index = std::vector<int64_t>;

// ----- Reference helpers ---------------------------------------------------------------
Index Unravel(int64_t flat, const Shape& s) {
  Index idx(s.size());
  for (int k = static_cast<int>(s.size()) - 1; k >= 0; --k) {
    idx[k] = flat % s[k];
    flat /= s[k];
  }
  return idx;
}

int64_t Ravel(const Index& idx, const Shape& s) {
  int64_t flat = 0;
  for (size_t k = 0; k < s.size(); ++k) flat = flat * s[k] + idx[k];
  return flat;
}

// out[i] = src[source(index of i)], or `fill` where source gives -1.
std::vector<double> MapRef(const Shape& out_shape, const std::vector<double>& src,
                           const std::function<int64_t(const Index&)>& source, double fill = 0) {
  std::vector<double> out(NumElementsOf(out_shape));
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    int64_t j = source(Unravel(i, out_shape));
    out[i] = j < 0 ? fill : src[j];
  }
  return out;
}

// Random values; integers in [-10, 10) so that sums and casts see signs.
Tensor Rand(DType dt, const Shape& s, std::mt19937_64& rng) {
  return IsInteger(dt) ? RandomTensor(dt, s, rng, -10, 10) : RandomTensor(dt, s, rng);
}

void ExpectExact(const Tensor& out, DType dt, const Shape& shape, const std::vector<double>& want) {
  ASSERT_TRUE(out.defined());
  EXPECT_EQ(out.dtype(), dt);
  EXPECT_EQ(out.shape(), shape);
  EXPECT_EQ(MaxAbsDiff(out, want), 0.0) << out.DebugString();
}

// ----- reshape, reshape_like, expand_dims, squeeze ---------------------------------------------
TEST(ShapeKernelsTest, ReshapeSharesTheBuffer) {
  std::mt19937_64 rng(1);
  for (DType dt : kAll) {
    SCOPED_TRACE(DTypeName(dt));
    Tensor x = Rand(dt, {2, 3, 4}, rng);
    Tensor out = RunOk(PrimId::kReshape, {x}, {{"shape", Ints{4, -1}}});
    ExpectExact(out, dt, {4, 6}, ToDoubles(x));
    EXPECT_EQ(out.raw_data(), x.raw_data());
    Tensor like = RunOk(PrimId::kReshapeLike, {x, Tensor::Zeros(kF32, {24}).value()});
    ExpectExact(like, dt, {24}, ToDoubles(x));
    EXPECT_EQ(like.raw_data(), x.raw_data());
  }
  Tensor s = MakeTensor(kF64, {}, {7});
  ExpectExact(RunOk(PrimId::kReshape, {s}, {{"shape", Ints{1, 1}}}), kF64, {1, 1}, {7});
  Tensor e = Tensor::Zeros(kF32, {0, 3}).value();
  ExpectExact(RunOk(PrimId::kReshape, {e}, {{"shape", Ints{3, 0, 2}}}), kF32, {3, 0, 2}, {});
}

TEST(ShapeKernelsTest, ReshapeErrors) {
  Tensor x = Tensor::Zeros(kF32, {2, 3}).value();
  ExpectRunError(PrimId::kReshape, {x}, {{"shape", Ints{4}}}, "6 elements");
  ExpectRunError(PrimId::kReshape, {x}, {{"shape", Ints{-1, -1}}}, "more than one -1");
  ExpectRunError(PrimId::kReshape, {x}, {{"shape", Ints{4, -1}}}, "cannot hold");
  ExpectRunError(PrimId::kReshape, {x}, {{"shape", Ints{-3, -2}}}, "negative");
  ExpectRunError(PrimId::kReshapeLike, {x, Tensor::Zeros(kF32, {5}).value()}, {},
                 "cannot reshape f32[2,3]");
  ExpectRunError(PrimId::kReshape, {Value(Scalar::Int(3))}, {{"shape", Ints{1}}},
                 "input 0 must be a tensor");
}

TEST(ShapeKernelsTest, ExpandDimsAndSqueeze) {
  std::mt19937_64 rng(2);
  for (DType dt : kAll) {
    SCOPED_TRACE(DTypeName(dt));
    Tensor x = Rand(dt, {2, 1, 3}, rng);
    std::vector<double> v = ToDoubles(x);
    ExpectExact(RunOk(PrimId::kExpandDims, {x}, {{"axis", int64_t{-1}}}), dt, {2, 1, 3, 1}, v);
    ExpectExact(RunOk(PrimId::kExpandDims, {x}, {{"axis", int64_t{0}}}), dt, {1, 2, 1, 3}, v);
    ExpectExact(RunOk(PrimId::kSqueeze, {x}), dt, {2, 3}, v);
    ExpectExact(RunOk(PrimId::kSqueeze, {x}, {{"axes", Ints{-2}}}), dt, {2, 3}, v);
    Tensor sq = RunOk(PrimId::kSqueeze, {x});
    EXPECT_EQ(sq.raw_data(), x.raw_data());
  }
  Tensor one = MakeTensor(kI32, {1, 1}, {5});
  ExpectExact(RunOk(PrimId::kSqueeze, {one}), kI32, {}, {5});
  ExpectExact(RunOk(PrimId::kSqueeze, {one}, {{"axes", Ints{0}}}), kI32, {1}, {5});
  ExpectExact(RunOk(PrimId::kExpandDims, {MakeTensor(kF32, {}, {2})}, {{"axis", int64_t{0}}}), kF32,
              {1}, {2});
}

TEST(ShapeKernelsTest, ExpandDimsAndSqueezeErrors) {
  Tensor x = Tensor::Zeros(kF32, {2, 1}).value();
  ExpectRunError(PrimId::kExpandDims, {x}, {{"axis", int64_t{3}}}, "'axis'");
  ExpectRunError(PrimId::kExpandDims, {x}, {{"axis", int64_t{-4}}}, "out of range");
  ExpectRunError(PrimId::kSqueeze, {x}, {{"axes", Ints{0}}}, "not 1");
  ExpectRunError(PrimId::kSqueeze, {x}, {{"axes", Ints{1, -1}}}, "twice");
  ExpectRunError(PrimId::kSqueeze, {x}, {{"axes", Ints{2}}}, "'axes'");
}

// ----- transpose --------------------------------------------------------------------------------
std::vector<double> TransposeRef(const Tensor& x, const Ints& perm, Shape* out_shape) {
  out_shape->clear();
  for (int64_t p : perm) out_shape->push_back(x.dim(p));
  std::vector<double> v = ToDoubles(x);
  return MapRef(*out_shape, v, [&](const Index& o) {
    Index src(perm.size());
    for (size_t k = 0; k < perm.size(); ++k) src[perm[k]] = o[k];
    return Ravel(src, x.shape());
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
    return Ravel(src, x.shape());
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

// ----- sum_to
// ----------------------------------------------------------------------------------------
std::vector<double> SumToRef(const Tensor& x, const Shape& target) {
  std::vector<double> v = ToDoubles(x);
  std::vector<double> out(NumElementsOf(target), 0.0);
  int shift = x.rank() - static_cast<int>(target.size());
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    Index xi = Unravel(i, x.shape());
    Index oi(target.size(), 0);
    for (size_t k = 0; k < target.size(); ++k) {
      int64_t xk = static_cast<int64_t>(k) + shift;
      oi[k] = target[k] == 1 || xk < 0 ? 0 : xi[xk];
    }
    out[Ravel(oi, target)] += v[i];
  }
  return out;
}

// |out - want| relative to the sum of magnitudes that went into each element.
void ExpectSumClose(const Tensor& out, const Tensor& x, const Shape& target) {
  std::vector<double> want = SumToRef(x, target);
  Tensor abs_x = MakeTensor(kF64, x.shape(), ToDoubles(x));
  for (int64_t i = 0; i < abs_x.NumElements(); ++i) {
    abs_x.mutable_data<double>()[i] = std::abs(abs_x.data<double>()[i]);
  }
  std::vector<double> scale = SumToRef(abs_x, target);
  double tol = x.dtype() == kF32 ? 2e-6 : x.dtype() == kF64 ? 1e-13 : 0.0;
  ASSERT_TRUE(out.defined());
  ASSERT_EQ(out.shape(), target);
  ASSERT_EQ(out.dtype(), x.dtype());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_LE(std::abs(out.ElementAsDouble(i) - want[i]), tol * (1 + scale[i])) << "element " << i;
  }
}

TEST(ShapeKernelsTest, SumToSmallShapes) {
  std::mt19937_64 rng(6);
  std::vector<Shape> targets = {{3, 1}, {1},       {},        {2, 1, 4},       {1, 3, 4},
                                {4},    {1, 1, 1}, {2, 3, 1}, {1, 1, 2, 3, 4}, {2, 1, 1}};
  for (DType dt : kNumeric) {
    Tensor x = Rand(dt, {2, 3, 4}, rng);
    for (const Shape& t : targets) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dt), " to ", ShapeToString(t)));
      ExpectSumClose(RunOk(PrimId::kSumTo, {x}, {{"shape", Ints(t.begin(), t.end())}}), x, t);
      ExpectSumClose(RunOk(PrimId::kSumToLike, {x, Tensor::Zeros(kBool, t).value()}), x, t);
    }
  }
}

TEST(ShapeKernelsTest, SumToLargeShapesUseEveryParallelPath) {
  std::mt19937_64 rng(7);
  struct Case {
    Shape in, target;
  };
  // A wide kept group; a narrow kept group after a long reduced one (private
  // partial sums); a kept leading group; a full reduction; interleaved groups.
  std::vector<Case> cases = {{{300, 200}, {200}},     {{20000, 3}, {3}},
                             {{3, 20000}, {3, 1}},    {{70000}, {}},
                             {{40, 30, 50}, {30, 1}}, {{8, 50, 3, 40}, {8, 1, 3, 1}}};
  for (DType dt : kNumeric) {
    for (const Case& c : cases) {
      SCOPED_TRACE(
          absl::StrCat(DTypeName(dt), ShapeToString(c.in), " to ", ShapeToString(c.target)));
      Tensor x = Rand(dt, c.in, rng);
      Ints t(c.target.begin(), c.target.end());
      ExpectSumClose(RunOk(PrimId::kSumTo, {x}, {{"shape", t}}), x, c.target);
    }
  }
}

// 0.1f added 200,000 times: a float running sum drifts by hundreds of ulps; the
// kernels add floats in double and round once, on every parallel path.
TEST(ShapeKernelsTest, FloatSumsToAreRoundedOnceFromDouble) {
  const float want = static_cast<float>(200000 * static_cast<double>(0.1f));
  struct Case {
    Shape in, target;
  };
  for (const Case& c : {Case{{200000, 2}, {2}}, Case{{2, 200000}, {2, 1}}, Case{{200000}, {}},
                        Case{{400, 500, 2}, {1, 1, 2}}}) {
    SCOPED_TRACE(ShapeToString(c.in));
    Tensor x = Tensor::Full(kF32, c.in, 0.1).value();
    Tensor out = RunOk(PrimId::kSumTo, {x}, {{"shape", Ints(c.target.begin(), c.target.end())}});
    for (int64_t i = 0; i < out.NumElements(); ++i) EXPECT_EQ(out.data<float>()[i], want) << i;
  }
}

TEST(ShapeKernelsTest, SumToEdgeCases) {
  std::mt19937_64 rng(8);
  // Nothing to sum: the buffer is shared.
  Tensor x = Rand(kF32, {1, 3}, rng);
  Tensor same = RunOk(PrimId::kSumTo, {x}, {{"shape", Ints{3}}});
  ExpectExact(same, kF32, {3}, ToDoubles(x));
  EXPECT_EQ(same.raw_data(), x.raw_data());
  // Summing over an empty dim gives zeros.
  Tensor e = Tensor::Zeros(kF64, {0, 3}).value();
  ExpectExact(RunOk(PrimId::kSumTo, {e}, {{"shape", Ints{1, 3}}}), kF64, {1, 3}, {0, 0, 0});
  Tensor s = MakeTensor(kI32, {}, {9});
  ExpectExact(RunOk(PrimId::kSumTo, {s}, {{"shape", Ints{}}}), kI32, {}, {9});
}

TEST(ShapeKernelsTest, SumToErrors) {
  Tensor x = Tensor::Zeros(kF32, {2, 3}).value();
  ExpectRunError(PrimId::kSumTo, {x}, {{"shape", Ints{2}}}, "cannot sum f32[2,3] to [2]");
  ExpectRunError(PrimId::kSumTo, {x}, {{"shape", Ints{3, 2, 3}}}, "must broadcast");
  ExpectRunError(PrimId::kSumTo, {Tensor::Zeros(kF32, {1, 3}).value()}, {{"shape", Ints{5, 3}}},
                 "cannot sum");
  ExpectRunError(PrimId::kSumTo, {Tensor::Zeros(kBool, {2}).value()}, {{"shape", Ints{1}}},
                 "numeric");
  ExpectRunError(PrimId::kSumToLike, {x, Tensor::Zeros(kF32, {4}).value()}, {}, "cannot sum");
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
      Index idx = Unravel(i, x.shape());
      idx[axis] += offset;
      out[Ravel(idx, *out_shape)] = v[i];
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
          return Ravel(src, in);
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
        return Ravel(src, c.in);
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
        return Ravel(o, dy_shape);
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

// ----- gather, scatter_add
// --------------------------------------------------------------------------------
std::vector<double> GatherRef(const Tensor& params, const Tensor& indices, int axis,
                              Shape* out_shape) {
  const Shape& p = params.shape();
  out_shape->assign(p.begin(), p.begin() + axis);
  out_shape->insert(out_shape->end(), indices.shape().begin(), indices.shape().end());
  out_shape->insert(out_shape->end(), p.begin() + axis + 1, p.end());
  std::vector<double> idx = ToDoubles(indices);
  int k = indices.rank();
  return MapRef(*out_shape, ToDoubles(params), [&](const Index& o) {
    Index j(o.begin() + axis, o.begin() + axis + k);
    Index src(o.begin(), o.begin() + axis);
    src.push_back(static_cast<int64_t>(idx[Ravel(j, indices.shape())]));
    src.insert(src.end(), o.begin() + axis + k, o.end());
    return Ravel(src, p);
  });
}

Tensor RandIndices(DType dt, const Shape& s, int64_t dim, std::mt19937_64& rng) {
  return RandomTensor(dt, s, rng, 0, static_cast<double>(dim));
}

TEST(ShapeKernelsTest, Gather) {
  std::mt19937_64 rng(13);
  std::vector<Shape> index_shapes = {{}, {7}, {2, 3}, {0}};
  for (DType dt : kAll) {
    Tensor params = Rand(dt, {4, 5, 3}, rng);
    for (int axis : {0, 1, 2}) {
      for (const Shape& is : index_shapes) {
        for (DType it : {kI32, kI64}) {
          SCOPED_TRACE(absl::StrCat(DTypeName(dt), " axis ", axis, " indices ", DTypeName(it),
                                    ShapeToString(is)));
          Tensor idx = RandIndices(it, is, params.dim(axis), rng);
          Shape shape;
          std::vector<double> want = GatherRef(params, idx, axis, &shape);
          ExpectExact(RunOk(PrimId::kGather, {params, idx}, {{"axis", int64_t{axis - 3}}}), dt,
                      shape, want);
        }
      }
    }
  }
  Tensor big = Rand(kF64, {1000, 40}, rng);
  Tensor idx = RandIndices(kI64, {2000}, 1000, rng);
  Shape shape;
  std::vector<double> want = GatherRef(big, idx, 0, &shape);
  ExpectExact(RunOk(PrimId::kGather, {big, idx}), kF64, shape, want);
}

TEST(ShapeKernelsTest, GatherBadIndicesAreStatusErrors) {
  Tensor params = Tensor::Zeros(kF32, {5, 3}).value();
  ExpectRunError(PrimId::kGather, {params, MakeTensor(kI32, {3}, {0, 5, 1})}, {},
                 "index 5 (at position 1 of the indices) is out of range [0, 5)",
                 absl::StatusCode::kOutOfRange);
  ExpectRunError(PrimId::kGather, {params, MakeTensor(kI64, {2}, {-1, 0})}, {}, "index -1",
                 absl::StatusCode::kOutOfRange);
  ExpectRunError(PrimId::kGather, {params, MakeTensor(kI64, {1}, {3})}, {{"axis", int64_t{1}}},
                 "[0, 3) for dim 1 of f32[5,3]", absl::StatusCode::kOutOfRange);
  ExpectRunError(PrimId::kGather, {params, MakeTensor(kF32, {1}, {0})}, {}, "index tensor");
  ExpectRunError(PrimId::kGather, {params, MakeTensor(kI32, {1}, {0})}, {{"axis", int64_t{2}}},
                 "'axis'");
}

std::vector<double> ScatterAddRef(const Tensor& input, const Tensor& indices, const Tensor& updates,
                                  int axis) {
  std::vector<double> out = ToDoubles(input);
  std::vector<double> idx = ToDoubles(indices), upd = ToDoubles(updates);
  int k = indices.rank();
  for (int64_t i = 0; i < updates.NumElements(); ++i) {
    Index u = Unravel(i, updates.shape());
    Index j(u.begin() + axis, u.begin() + axis + k);
    Index dst(u.begin(), u.begin() + axis);
    dst.push_back(static_cast<int64_t>(idx[Ravel(j, indices.shape())]));
    dst.insert(dst.end(), u.begin() + axis + k, u.end());
    out[Ravel(dst, input.shape())] += upd[i];
  }
  return out;
}

TEST(ShapeKernelsTest, ScatterAddAccumulatesRepeatedIndices) {
  std::mt19937_64 rng(14);
  struct Case {
    Shape input, indices;
    int axis;
  };
  std::vector<Case> cases = {{{5, 3}, {12}, 0},   {{5, 3}, {2, 4}, 1}, {{4, 5, 3}, {6}, 1},
                             {{4, 5, 3}, {}, 2},  {{3, 2}, {0}, 0},    {{2000, 20}, {3000}, 0},
                             {{20, 2000}, {3}, 0}};
  for (DType dt : kNumeric) {
    for (const Case& c : cases) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dt), ShapeToString(c.input), " axis ", c.axis));
      Tensor input = Rand(dt, c.input, rng);
      Tensor idx = RandIndices(kI32, c.indices, c.input[c.axis], rng);
      Shape us(c.input.begin(), c.input.begin() + c.axis);
      us.insert(us.end(), c.indices.begin(), c.indices.end());
      us.insert(us.end(), c.input.begin() + c.axis + 1, c.input.end());
      Tensor upd = Rand(dt, us, rng);
      std::vector<double> before = ToDoubles(input);
      Tensor out = RunOk(PrimId::kScatterAdd, {input, idx, upd}, {{"axis", int64_t{c.axis}}});
      std::vector<double> want = ScatterAddRef(input, idx, upd, c.axis);
      double tol = dt == kF32 ? 1e-5 : dt == kF64 ? 1e-12 : 0.0;
      EXPECT_EQ(out.shape(), c.input);
      EXPECT_LE(MaxAbsDiff(out, want), tol);
      // The caller still holds the input: it must be unchanged.
      EXPECT_EQ(MaxAbsDiff(input, before), 0.0);
    }
  }
}

TEST(ShapeKernelsTest, ScatterAddReusesAUniquelyOwnedInput) {
  Tensor input = MakeTensor(kF64, {3}, {1, 2, 3});
  const void* buffer = input.raw_data();
  std::vector<Value> in;
  in.push_back(Value(std::move(input)));
  in.push_back(Value(MakeTensor(kI64, {3}, {2, 0, 2})));
  in.push_back(Value(MakeTensor(kF64, {3}, {10, 20, 30})));
  Tensor out = RunOk(PrimId::kScatterAdd, std::move(in));
  ExpectExact(out, kF64, {3}, {21, 2, 43});
  EXPECT_EQ(out.raw_data(), buffer);
}

TEST(ShapeKernelsTest, ScatterAddErrors) {
  Tensor input = Tensor::Zeros(kF32, {5, 3}).value();
  Tensor upd = Tensor::Zeros(kF32, {2, 3}).value();
  ExpectRunError(PrimId::kScatterAdd, {input, MakeTensor(kI32, {2}, {0, 7}), upd}, {}, "index 7",
                 absl::StatusCode::kOutOfRange);
  ExpectRunError(PrimId::kScatterAdd, {input, MakeTensor(kI64, {2}, {0, -2}), upd}, {},
                 "out of range [0, 5)", absl::StatusCode::kOutOfRange);
  ExpectRunError(PrimId::kScatterAdd,
                 {input, MakeTensor(kI32, {2}, {0, 1}), Tensor::Zeros(kF32, {3, 3}).value()}, {},
                 "must be f32[2,3]");
  ExpectRunError(PrimId::kScatterAdd,
                 {input, MakeTensor(kI32, {2}, {0, 1}), Tensor::Zeros(kF64, {2, 3}).value()}, {},
                 "updates");
  ExpectRunError(PrimId::kScatterAdd,
                 {Tensor::Zeros(kBool, {2}).value(), MakeTensor(kI32, {1}, {0}),
                  Tensor::Zeros(kBool, {1}).value()},
                 {}, "numeric");
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
            return Ravel(src, c.in);
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

// ----- one_hot, cast, fill
// ------------------------------------------------------------------------------
TEST(ShapeKernelsTest, OneHot) {
  std::mt19937_64 rng(16);
  for (DType it : {kI32, kI64}) {
    for (DType dt : kAll) {
      for (int64_t axis : {-1, 0, 1, -3}) {
        SCOPED_TRACE(absl::StrCat(DTypeName(it), "->", DTypeName(dt), " axis ", axis));
        // Indices in [-2, 6) with depth 4: some are out of range (an all-off row).
        Tensor idx = RandomTensor(it, {3, 5}, rng, -2, 6);
        int a = axis < 0 ? static_cast<int>(axis) + 3 : static_cast<int>(axis);
        Shape out_shape = {3, 5};
        out_shape.insert(out_shape.begin() + a, 4);
        std::vector<double> iv = ToDoubles(idx);
        double on = dt == kBool ? 1 : 3, off = dt == kBool ? 0 : -1;
        std::vector<double> want(NumElementsOf(out_shape));
        for (int64_t i = 0; i < static_cast<int64_t>(want.size()); ++i) {
          Index o = Unravel(i, out_shape);
          int64_t pos = o[a];
          o.erase(o.begin() + a);
          want[i] = iv[Ravel(o, {3, 5})] == pos ? on : off;
        }
        Tensor out = RunOk(PrimId::kOneHot, {idx},
                           {{"depth", int64_t{4}},
                            {"axis", axis},
                            {"dtype", dt},
                            {"on_value", on},
                            {"off_value", off}});
        ExpectExact(out, dt, out_shape, want);
      }
    }
  }
  Tensor idx = MakeTensor(kI32, {2}, {0, 1});
  ExpectExact(RunOk(PrimId::kOneHot, {idx}, {{"depth", int64_t{0}}}), kF32, {2, 0}, {});
  ExpectExact(RunOk(PrimId::kOneHot, {MakeTensor(kI64, {}, {1})}, {{"depth", int64_t{3}}}), kF32,
              {3}, {0, 1, 0});
  ExpectRunError(PrimId::kOneHot, {idx}, {{"depth", int64_t{-1}}}, "'depth'");
  ExpectRunError(PrimId::kOneHot, {idx}, {{"depth", int64_t{2}}, {"axis", int64_t{2}}}, "'axis'");
  ExpectRunError(PrimId::kOneHot, {MakeTensor(kF32, {1}, {0})}, {{"depth", int64_t{2}}},
                 "index tensor");
}

// The reference conversion: truncation toward zero, != 0 for bool.
double RefCast(double v, DType to) {
  if (to == kBool) return v != 0 ? 1 : 0;
  if (IsInteger(to)) return std::trunc(v);
  if (to == kF32) return static_cast<float>(v);
  return v;
}

TEST(ShapeKernelsTest, CastEveryPair) {
  std::mt19937_64 rng(17);
  for (DType from : kAll) {
    Tensor x =
        IsFloating(from) ? RandomTensor(from, {4, 50}, rng, -20, 20) : Rand(from, {4, 50}, rng);
    std::vector<double> v = ToDoubles(x);
    for (DType to : kAll) {
      SCOPED_TRACE(absl::StrCat(DTypeName(from), "->", DTypeName(to)));
      std::vector<double> want(v.size());
      for (size_t i = 0; i < v.size(); ++i) want[i] = RefCast(v[i], to);
      Tensor out = RunOk(PrimId::kCast, {x}, {{"dtype", to}});
      ExpectExact(out, to, {4, 50}, want);
      if (from == to) {
        EXPECT_EQ(out.raw_data(), x.raw_data());
      }
    }
  }
}

TEST(ShapeKernelsTest, CastSaturatesOutOfRangeFloats) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = MakeTensor(kF64, {6}, {1e10, -1e10, nan, -2.9, 2.9, 0.0});
  ExpectExact(RunOk(PrimId::kCast, {x}, {{"dtype", kI32}}), kI32, {6},
              {2147483647.0, -2147483648.0, 0, -2, 2, 0});
  Tensor y = MakeTensor(kF32, {2}, {1e30, -1e30});
  ExpectExact(RunOk(PrimId::kCast, {y}, {{"dtype", kI64}}), kI64, {2},
              {9223372036854775807.0, -9223372036854775808.0});
  ExpectExact(RunOk(PrimId::kCast, {x}, {{"dtype", kBool}}), kBool, {6}, {1, 1, 1, 1, 1, 0});
  ExpectExact(RunOk(PrimId::kCast, {Tensor::Zeros(kI32, {0}).value()}, {{"dtype", kF64}}), kF64,
              {0}, {});
}

TEST(ShapeKernelsTest, Fill) {
  ExpectExact(RunOk(PrimId::kFill, {}, {{"shape", Ints{2, 3}}, {"value", 1.5}}), kF32, {2, 3},
              std::vector<double>(6, 1.5));
  ExpectExact(RunOk(PrimId::kFill, {}, {{"shape", Ints{}}, {"value", -2.5}, {"dtype", kF64}}), kF64,
              {}, {-2.5});
  ExpectExact(RunOk(PrimId::kFill, {}, {{"shape", Ints{3}}, {"value", -2.5}, {"dtype", kI32}}),
              kI32, {3}, {-2, -2, -2});
  ExpectExact(RunOk(PrimId::kFill, {}, {{"shape", Ints{2}}, {"value", 0.5}, {"dtype", kBool}}),
              kBool, {2}, {1, 1});
  ExpectExact(RunOk(PrimId::kFill, {}, {{"shape", Ints{100000}}, {"dtype", kI64}}), kI64, {100000},
              std::vector<double>(100000, 0.0));
  ExpectExact(RunOk(PrimId::kFill, {}, {{"shape", Ints{0, 5}}}), kF32, {0, 5}, {});
  ExpectRunError(PrimId::kFill, {}, {{"shape", Ints{-2}}}, "'shape'");
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
