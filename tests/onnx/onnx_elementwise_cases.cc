#include "tests/onnx/onnx_elementwise_cases.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "core/builder.h"
#include "ops/elementwise_table.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace onnx_test {
namespace {

using kgrad::testing::MakeTensor;

constexpr int64_t kSize = 48;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const char* ShortName(DType t) {
  switch (t) {
    case DType::kFloat32: return "f32";
    case DType::kFloat64: return "f64";
    case DType::kInt32: return "i32";
    case DType::kBool: return "bool";
    case DType::kUInt8: return "u8";
    case DType::kUInt32: return "u32";
    default: return DTypeName(t);
  }
}

std::vector<DType> CaseDTypes(const ElementwiseRow& row) {
  const DTypeSet s = ops::ElementwiseDTypes(row.id);
  std::vector<DType> out;
  for (DType t : {DType::kFloat32, DType::kFloat64}) {
    if (Allows(s, t)) out.push_back(t);
  }
  if (out.empty()) {
    for (DType t : {DType::kBool, DType::kUInt8, DType::kUInt32}) {
      if (Allows(s, t)) out.push_back(t);
    }
  } else if (!row.onnx_twin) {
    for (DType t : {DType::kInt32, DType::kBool}) {
      if (Allows(s, t)) out.push_back(t);
    }
  }
  return out;
}

// Operand `k` (0 or 1) of a float case. With specials, the first entries pair
// NaN, +-0, exact multiples (mod's zero results and their signs), halves (round's
// ties) and the thresholds 0.5 and -1 with each other; the rest is uniform in
// [-3, 3]. Without, everything lies in the domain of every op (|x| < 0.9, and
// positive or above 1 where the op needs it).
std::vector<double> FloatValues(PrimId id, int k, bool specials, std::mt19937_64& rng) {
  static const std::vector<double> kX = {kNaN, 0.0, -0.0, 0.0, -0.0, 3, -3, 3, -3, 1, -1, 0.5, -1, 2.5, -2.5, 1.5};
  static const std::vector<double> kY = {1.5, 0.0, 0.0, -0.0, -0.0, 1.5, 1.5, -1.5, -1.5, kNaN, 2, 0.5, -1, 0.5, 0.5, -0.0};
  std::uniform_real_distribution<double> u(specials ? -3.0 : -0.9, specials ? 3.0 : 0.9);
  std::vector<double> v(kSize);
  for (double& e : v) e = u(rng);
  if (specials) {
    const std::vector<double>& s = k == 0 ? kX : kY;
    std::copy(s.begin(), s.end(), v.begin());
    return v;
  }
  const bool positive = k == 0 && (id == PrimId::kLog || id == PrimId::kSqrt || id == PrimId::kRsqrt ||
                                   id == PrimId::kPow);
  for (double& e : v) {
    if (positive) e = std::abs(e) + 0.05;
    if (id == PrimId::kAcosh) e = std::abs(e) + 1.05;
  }
  return v;
}

// int32: operand 0 in [-20, 20], operand 1 non-zero in [-7, 7] (division and mod
// refuse 0), with exact multiples and sign mixes first.
std::vector<double> IntValues(int k, std::mt19937_64& rng) {
  static const std::vector<double> kA = {-6, 6, 7, -7, 0, 0, 5, -5};
  static const std::vector<double> kB = {3, -3, -3, 3, 5, -5, 5, -5};
  std::uniform_int_distribution<int> a(-20, 20), b(1, 7), sign(0, 1);
  std::vector<double> v(kSize);
  for (double& e : v) e = k == 0 ? a(rng) : b(rng) * (sign(rng) ? 1 : -1);
  const std::vector<double>& s = k == 0 ? kA : kB;
  std::copy(s.begin(), s.end(), v.begin());
  return v;
}

// Unsigned: values across the range; shifts from 0 to width + 2 (by the width or
// more: 0).
std::vector<double> UnsignedValues(DType t, int k, std::mt19937_64& rng) {
  const int width = static_cast<int>(DTypeSize(t) * 8);
  std::uniform_real_distribution<double> a(0, std::ldexp(1.0, width) - 1);
  std::uniform_int_distribution<int> b(0, width + 2);
  std::vector<double> v(kSize);
  for (double& e : v) e = k == 0 ? std::floor(a(rng)) : b(rng);
  if (k == 1) {
    const double w = width;
    const std::vector<double> s = {0, 1, w - 1, w, w + 1};
    std::copy(s.begin(), s.end(), v.begin());
  }
  return v;
}

std::vector<double> BoolValues(std::mt19937_64& rng) {
  std::bernoulli_distribution b(0.5);
  std::vector<double> v(kSize);
  for (double& e : v) e = b(rng) ? 1 : 0;
  return v;
}

std::vector<Tensor> Inputs(const ElementwiseRow& row, DType t, bool specials, std::mt19937_64& rng) {
  std::vector<Tensor> in;
  if (row.arity == 3) in.push_back(MakeTensor(DType::kBool, {kSize}, BoolValues(rng)));
  const int values = row.arity == 3 ? 2 : row.arity;
  for (int k = 0; k < values; ++k) {
    std::vector<double> v = IsFloating(t)         ? FloatValues(row.id, k, specials, rng)
                            : t == DType::kInt32  ? IntValues(k, rng)
                            : t == DType::kBool   ? BoolValues(rng)
                                                  : UnsignedValues(t, k, rng);
    in.push_back(MakeTensor(t, {kSize}, v));
  }
  return in;
}

}  // namespace

std::vector<ElementwiseRow> ElementwiseRows() {
  return {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  {PrimId::k##Name, wire, arity, sizeof(onnx) > 1},
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
  };
}

std::vector<std::pair<std::string, AttrMap>> AttrModes(PrimId id) {
  switch (id) {
    case PrimId::kGelu:
      return {{"exact", {{"approximate", false}}}, {"tanh", {{"approximate", true}}}};
    case PrimId::kMod:
      return {{"python", {{"fmod", false}}}, {"fmod", {{"fmod", true}}}};
    case PrimId::kBitShift:
      return {{"left", {{"direction", std::string("left")}}},
              {"right", {{"direction", std::string("right")}}}};
    case PrimId::kThresholdedRelu:
      return {{"alpha_half", {{"alpha", 0.5}}}, {"alpha_minus_one", {{"alpha", -1.0}}}};
    default:
      return {{"", {}}};
  }
}

std::vector<ElementwiseCase> ElementwiseCases(bool specials) {
  std::vector<ElementwiseCase> cases;
  std::mt19937_64 rng(20261128);
  for (const ElementwiseRow& row : ElementwiseRows()) {
    for (DType t : CaseDTypes(row)) {
      for (const auto& [mode, attrs] : AttrModes(row.id)) {
        ElementwiseCase c;
        c.name = absl::StrCat(row.wire, "_", ShortName(t), mode.empty() ? "" : "_", mode);
        c.row = row;
        c.dtype = t;
        c.attrs = attrs;
        c.inputs = Inputs(row, t, specials, rng);
        cases.push_back(std::move(c));
      }
    }
  }
  return cases;
}

void PrintTo(const ElementwiseCase& c, std::ostream* os) { *os << c.name; }

absl::StatusOr<FuncGraph*> BuildCase(Module& m, const ElementwiseCase& c) {
  GraphBuilder b(&m, c.name);
  std::vector<AnfNode*> params;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    params.push_back(b.Param(absl::StrCat("x", i), c.inputs[i].dtype(), c.inputs[i].shape()));
  }
  return b.Return(b.Op(c.row.id, params, c.attrs));
}

}  // namespace onnx_test
}  // namespace kgrad
