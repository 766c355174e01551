#include "tests/cuda/cuda_test_util.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_device.h"
#include "backends/cuda/cuda_device.h"
#include "core/status_macros.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {

Device* CudaOrNull(std::string* why) {
  absl::StatusOr<Device*> d = CudaDevice();
  if (!d.ok()) {
    *why = std::string(d.status().message());
    return nullptr;
  }
  return *d;
}

namespace {

absl::StatusOr<Value> Move(const Value& v, Device* device, bool to_device) {
  if (v.is_tensor()) {
    absl::StatusOr<Tensor> t =
        to_device ? device->CopyToDevice(v.tensor()) : device->CopyToHost(v.tensor());
    if (!t.ok()) return t.status();
    return Value(*std::move(t));
  }
  if (v.is_tuple()) {
    std::vector<Value> elems;
    for (const Value& e : v.tuple()) {
      KGRAD_ASSIGN_OR_RETURN(Value m, Move(e, device, to_device));
      elems.push_back(std::move(m));
    }
    return Value::Tuple(std::move(elems));
  }
  return v;
}

DType FirstFloatDType(const std::vector<Value>& inputs) {
  for (const Value& v : inputs) {
    if (v.is_tensor() && IsFloating(v.tensor().dtype())) return v.tensor().dtype();
  }
  return DType::kFloat64;
}

bool Close(double a, double e, Tolerance tol) {
  if (std::isnan(a) || std::isnan(e)) return std::isnan(a) && std::isnan(e);
  if (std::isinf(a) || std::isinf(e)) return a == e;
  return std::abs(a - e) <= tol.atol + tol.rtol * std::abs(e);
}

}  // namespace

absl::StatusOr<Value> RunOnDevice(Device* device, PrimId id, std::vector<Value> inputs,
                                  AttrMap attrs) {
  KGRAD_ASSIGN_OR_RETURN(PrimitivePtr p, DefaultRegistry().Make(id, std::move(attrs)));
  KernelFn fn = device->kernel(id);
  if (fn == nullptr) {
    return absl::UnimplementedError(absl::StrCat("no ", device->name(), " kernel for ", p->name()));
  }
  for (Value& v : inputs) {
    KGRAD_ASSIGN_OR_RETURN(v, Move(v, device, /*to_device=*/true));
  }
  KernelContext ctx(*p, absl::MakeSpan(inputs), device);
  KGRAD_ASSIGN_OR_RETURN(Value out, fn(ctx));
  KGRAD_RETURN_IF_ERROR(device->Synchronize());
  return Move(out, device, /*to_device=*/false);
}

Tolerance DefaultTolerance(DType dtype) {
  if (dtype == DType::kFloat32) return {1e-4, 1e-5};
  return {1e-9, 1e-11};
}

::testing::AssertionResult ValuesClose(const Value& actual, const Value& expected,
                                       Tolerance tol) {
  if (actual.kind() != expected.kind()) {
    return ::testing::AssertionFailure()
           << "kinds differ: " << actual.TypeString() << " vs " << expected.TypeString();
  }
  if (actual.is_tuple()) {
    if (actual.tuple().size() != expected.tuple().size()) {
      return ::testing::AssertionFailure() << "tuple sizes differ";
    }
    for (size_t i = 0; i < actual.tuple().size(); ++i) {
      ::testing::AssertionResult r = ValuesClose(actual.tuple()[i], expected.tuple()[i], tol);
      if (!r) return ::testing::AssertionFailure() << "element " << i << ": " << r.message();
    }
    return ::testing::AssertionSuccess();
  }
  if (!actual.is_tensor()) {
    if (ValuesEqual(actual, expected)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << actual.ToString() << " != " << expected.ToString();
  }
  const Tensor& a = actual.tensor();
  const Tensor& e = expected.tensor();
  if (a.dtype() != e.dtype() || a.shape() != e.shape()) {
    return ::testing::AssertionFailure()
           << "got " << a.TypeString() << ", expected " << e.TypeString();
  }
  const bool exact = !IsFloating(a.dtype());
  int bad = 0;
  std::string first;
  for (int64_t i = 0; i < a.NumElements(); ++i) {
    const double x = a.ElementAsDouble(i), y = e.ElementAsDouble(i);
    const bool ok = exact ? x == y : Close(x, y, tol);
    if (!ok && bad++ == 0) {
      first = absl::StrCat("element ", i, ": got ", x, ", expected ", y);
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << a.NumElements() << " elements of "
                                       << a.TypeString() << " differ; first " << first;
}

::testing::AssertionResult MatchesCpu(Device* cuda, PrimId id, const std::vector<Value>& inputs,
                                      AttrMap attrs, const Tolerance* tol) {
  absl::StatusOr<Value> want = RunOnDevice(CpuDevice(), id, inputs, attrs);
  absl::StatusOr<Value> got = RunOnDevice(cuda, id, inputs, attrs);
  const std::string what = absl::StrCat(PrimIdName(id), ": ");
  if (!want.ok() || !got.ok()) {
    if (want.ok() != got.ok()) {
      return ::testing::AssertionFailure()
             << what << "CPU " << (want.ok() ? "succeeded" : want.status().ToString())
             << " but CUDA " << (got.ok() ? "succeeded" : got.status().ToString());
    }
    if (want.status() != got.status()) {
      return ::testing::AssertionFailure() << what << "CPU error " << want.status()
                                           << " but CUDA error " << got.status();
    }
    return ::testing::AssertionSuccess();
  }
  const Tolerance t = tol != nullptr ? *tol : DefaultTolerance(FirstFloatDType(inputs));
  ::testing::AssertionResult r = ValuesClose(*got, *want, t);
  if (!r) return ::testing::AssertionFailure() << what << r.message();
  return r;
}

Value Rand(DType dtype, Shape shape, std::mt19937_64& rng, double lo, double hi) {
  return Value(RandomTensor(dtype, std::move(shape), rng, lo, hi));
}

Value IntTensor(DType dtype, Shape shape, const std::vector<int64_t>& values) {
  std::vector<double> d(values.begin(), values.end());
  return Value(MakeTensor(dtype, std::move(shape), d));
}

Value F64(Shape shape, const std::vector<double>& values) {
  return Value(MakeTensor(DType::kFloat64, std::move(shape), values));
}

std::string DTypeParamName(const ::testing::TestParamInfo<DType>& info) {
  return DTypeName(info.param);
}

}  // namespace testing
}  // namespace kgrad
