#include "tests/cuda/cuda_test_util.h"

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

::testing::AssertionResult MatchesCpu(Device* cuda, PrimId id, const std::vector<Value>& inputs,
                                      AttrMap attrs, const Tolerance* tol) {
  const std::string what = absl::StrCat(PrimIdName(id), ": ");
  absl::StatusOr<Value> want = RunOnDevice(CpuDevice(), id, inputs, attrs);
  if (!want.ok()) {
    return ::testing::AssertionFailure() << what << "the CPU kernel failed: " << want.status();
  }
  absl::StatusOr<Value> got = RunOnDevice(cuda, id, inputs, attrs);
  if (!got.ok()) return ::testing::AssertionFailure() << what << "CUDA failed: " << got.status();
  const Tolerance t = tol != nullptr ? *tol : DefaultTolerance(FirstFloatDType(inputs));
  ::testing::AssertionResult r = ValuesClose(*got, *want, t);
  if (!r) return ::testing::AssertionFailure() << what << r.message();
  return r;
}

::testing::AssertionResult FailsLikeCpu(Device* cuda, PrimId id, const std::vector<Value>& inputs,
                                        AttrMap attrs) {
  const std::string what = absl::StrCat(PrimIdName(id), ": ");
  absl::StatusOr<Value> want = RunOnDevice(CpuDevice(), id, inputs, attrs);
  if (want.ok()) return ::testing::AssertionFailure() << what << "the CPU kernel succeeded";
  absl::StatusOr<Value> got = RunOnDevice(cuda, id, inputs, attrs);
  if (got.ok()) {
    return ::testing::AssertionFailure() << what << "CUDA succeeded where the CPU failed with "
                                         << want.status();
  }
  if (got.status() != want.status()) {
    return ::testing::AssertionFailure() << what << "CPU error " << want.status()
                                         << " but CUDA error " << got.status();
  }
  return ::testing::AssertionSuccess();
}

Value Rand(DType dtype, Shape shape, std::mt19937_64& rng, double lo, double hi) {
  return Value(RandomTensor(dtype, std::move(shape), rng, lo, hi));
}

Value CudaDTypeTest::R(Shape s, double lo, double hi) {
  return Rand(GetParam(), std::move(s), rng_, lo, hi);
}

Value IntTensor(DType dtype, Shape shape, const std::vector<int64_t>& values) {
  std::vector<double> d(values.begin(), values.end());
  return Value(MakeTensor(dtype, std::move(shape), d));
}

std::string DTypeParamName(const ::testing::TestParamInfo<DType>& info) {
  return DTypeName(info.param);
}

}  // namespace testing
}  // namespace kgrad
