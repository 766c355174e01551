// CPU kernel tests for the shape family against naive float64 references
// (shape_test_util.h): the views (reshape, expand_dims, squeeze), sum_to,
// gather and scatter_add, one_hot, cast and fill. The data-movement kernels
// (transpose, broadcast_to, concat, split, slice, pad) are in
// data_movement_kernels_test.cc. Data movement is exact in every dtype; sums are
// compared with tight tolerances.
#include <cmath>
#include <cstdint>
#include <limits>
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

// ----- sum_to
// ----------------------------------------------------------------------------------------
std::vector<double> SumToRef(const Tensor& x, const Shape& target) {
  std::vector<double> v = ToDoubles(x);
  std::vector<double> out(NumElementsOf(target), 0.0);
  int shift = x.rank() - static_cast<int>(target.size());
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    Index xi = Unravel(x.shape(), i);
    Index oi(target.size(), 0);
    for (size_t k = 0; k < target.size(); ++k) {
      int64_t xk = static_cast<int64_t>(k) + shift;
      oi[k] = target[k] == 1 || xk < 0 ? 0 : xi[xk];
    }
    out[Ravel(target, oi)] += v[i];
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
    src.push_back(static_cast<int64_t>(idx[Ravel(indices.shape(), j)]));
    src.insert(src.end(), o.begin() + axis + k, o.end());
    return Ravel(p, src);
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
    Index u = Unravel(updates.shape(), i);
    Index j(u.begin() + axis, u.begin() + axis + k);
    Index dst(u.begin(), u.begin() + axis);
    dst.push_back(static_cast<int64_t>(idx[Ravel(indices.shape(), j)]));
    dst.insert(dst.end(), u.begin() + axis + k, u.end());
    out[Ravel(input.shape(), dst)] += upd[i];
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
          Index o = Unravel(out_shape, i);
          int64_t pos = o[a];
          o.erase(o.begin() + a);
          want[i] = iv[Ravel({3, 5}, o)] == pos ? on : off;
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
