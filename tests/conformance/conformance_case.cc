#include "tests/conformance/conformance_case.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <tuple>
#include <type_traits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/executor.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/registry.h"
#include "proto/onnx/onnx_import.h"
#include "proto/onnx/onnx_tensor.h"
#include "tests/conformance/onnx_sequence_data.h"
#include "tools/cli_common.h"
#include "tools/float64.h"
#include "tools/grad_check.h"

namespace kgrad {
namespace conformance {
namespace {

// The first line of a Status message (import errors list every node; the table
// shows one line).
std::string FirstLine(const absl::Status& s) {
  std::string m(s.message());
  size_t nl = m.find('\n');
  return nl == std::string::npos ? m : m.substr(0, nl);
}

Verdict Refused(const absl::Status& s, const std::string& prefix = "") {
  return Verdict{Outcome::kRefused, prefix + FirstLine(s)};
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

template <typename Proto>
absl::StatusOr<Proto> ReadProto(const std::string& path) {
  KGRAD_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  Proto p;
  if (!p.ParseFromString(bytes)) return absl::InvalidArgumentError(absl::StrCat(path, ": protobuf parse failed"));
  return p;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// test_data_set_0, test_data_set_1, ... in numeric order.
std::vector<std::string> DataSets(const std::string& dir) {
  std::vector<std::string> sets;
  for (int i = 0;; ++i) {
    std::string d = absl::StrCat(dir, "/test_data_set_", i);
    if (!Exists(d)) break;
    sets.push_back(d);
  }
  return sets;
}

// A scalar result as the rank-0 tensor ONNX would hold.
absl::StatusOr<Tensor> AsTensor(const Value& v) {
  if (v.is_tensor()) return v.tensor();
  if (!v.is_scalar()) return absl::InvalidArgumentError(absl::StrCat("got a ", v.TypeString(), ", not a tensor"));
  const Scalar& s = v.scalar();
  KGRAD_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(s.dtype(), {}));
  switch (s.dtype()) {
    case DType::kFloat32: *t.mutable_data<float>() = static_cast<float>(s.AsDouble()); break;
    case DType::kFloat64: *t.mutable_data<double>() = s.AsDouble(); break;
    case DType::kInt32: *t.mutable_data<int32_t>() = static_cast<int32_t>(s.AsInt()); break;
    case DType::kInt64: *t.mutable_data<int64_t>() = s.AsInt(); break;
    case DType::kBool: *t.mutable_data<bool>() = s.AsBool(); break;
    default:  // scalars hold the compute types only
      return absl::InternalError(absl::StrCat("a ", DTypeName(s.dtype()), " scalar"));
  }
  return t;
}

// Integer element i exactly (a u64 above 2^63 wraps, the same on both sides).
int64_t IntElement(const Tensor& t, int64_t i) {
  return DispatchDType(t.dtype(), [&](auto zero) -> int64_t {
    using T = decltype(zero);
    if constexpr (std::is_integral_v<T>) {
      return static_cast<int64_t>(t.data<T>()[i]);
    } else {
      return static_cast<int64_t>(static_cast<double>(t.data<T>()[i]));
    }
  });
}

// The multi-index of flat element i, for messages.
std::string IndexString(const Shape& shape, int64_t i) {
  std::vector<int64_t> idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] > 0) {
      idx[d] = i % shape[d];
      i /= shape[d];
    }
  }
  return absl::StrCat("[", absl::StrJoin(idx, ","), "]");
}

// assert_allclose's test, with NaN equal to NaN and infinities equal only to
// themselves.
bool Close(double got, double want, const Tolerance& tol) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (std::isinf(got) || std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol.atol + tol.rtol * std::fabs(want);
}

// The 16-bit floats cannot hold a value closer than half a unit in the last place
// of their own precision, so their tolerance is at least one such unit (f16:
// 2^-10, bf16: 2^-7, relative); the other types keep `tol`.
Tolerance ForDType(DType t, Tolerance tol) {
  if (t == DType::kFloat16) tol.rtol = std::max(tol.rtol, std::ldexp(1.0, -10));
  if (t == DType::kBFloat16) tol.rtol = std::max(tol.rtol, std::ldexp(1.0, -7));
  return tol;
}

std::string CompareValues(const Tensor& got, const Tensor& want, const Tolerance& given) {
  const Tolerance tol = ForDType(want.dtype(), given);
  bool floating = IsFloating(want.dtype()) || IsHalf(want.dtype());
  int64_t bad = 0, first = -1;
  double max_diff = 0;
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    bool ok;
    if (floating) {
      double g = got.ElementAsDouble(i), w = want.ElementAsDouble(i);
      ok = Close(g, w, tol);
      if (!ok && !std::isnan(g - w)) max_diff = std::max(max_diff, std::fabs(g - w));
    } else {
      ok = IntElement(got, i) == IntElement(want, i);
    }
    if (!ok && bad++ == 0) first = i;
  }
  if (bad == 0) return "";
  auto element = [&](const Tensor& t) {
    return floating ? absl::StrCat(t.ElementAsDouble(first)) : absl::StrCat(IntElement(t, first));
  };
  std::string s = absl::StrCat("values: ", bad, " of ", want.NumElements(), " differ (first at ",
                               IndexString(want.shape(), first), ": expected ", element(want), ", got ",
                               element(got));
  if (floating) absl::StrAppend(&s, "; max abs diff ", max_diff);
  return s + ")";
}

// NumPy has no bfloat16: ONNX's test data carries a BFLOAT16 input or output as a
// UINT16 tensor of its bits (the same layout in raw_data and int32_data).
void AsDeclaredBFloat16(const onnx::TypeProto& declared, onnx::TensorProto& p) {
  if (declared.has_tensor_type() && declared.tensor_type().elem_type() == onnx::TensorProto::BFLOAT16 &&
      p.data_type() == onnx::TensorProto::UINT16) {
    p.set_data_type(onnx::TensorProto::BFLOAT16);
  }
}

// One data set's inputs, in order: the tensors as protos (an empty proto, of
// UNDEFINED type, for a sequence or optional), and the sequences and optionals
// as kgrad lists (None for a tensor).
struct DataSetInputs {
  std::vector<onnx::TensorProto> protos;
  std::vector<Value> lists;
  // The lists' types by input name, for the importer (ONNX may leave a sequence's
  // element shape out; kgrad types a list's elements).
  absl::flat_hash_map<std::string, AbstractPtr> list_types;
};

bool IsListType(const onnx::TypeProto& t) { return t.has_sequence_type() || t.has_optional_type(); }

absl::StatusOr<DataSetInputs> ReadInputs(const onnx::GraphProto& graph, const std::string& set) {
  DataSetInputs in;
  for (int i = 0; i < graph.input_size(); ++i) {
    std::string path = absl::StrCat(set, "/input_", i, ".pb");
    if (!Exists(path)) break;
    auto fail = [i](const absl::Status& s) {
      return absl::Status(s.code(), absl::StrCat("input ", i, ": ", s.message()));
    };
    in.protos.emplace_back();
    in.lists.emplace_back();
    if (IsListType(graph.input(i).type())) {
      absl::StatusOr<std::string> bytes = ReadFile(path);
      absl::StatusOr<Value> list = bytes.ok() ? ListFromOnnxData(*bytes) : bytes.status();
      if (!list.ok()) return fail(list.status());
      AbstractPtr type = AbstractOfValue(*list);
      if (type == nullptr) return fail(absl::InvalidArgumentError("its elements have different types"));
      in.list_types[graph.input(i).name()] = type;
      in.lists.back() = *std::move(list);
      continue;
    }
    if (!graph.input(i).type().has_tensor_type()) continue;  // left to the importer to refuse
    absl::StatusOr<onnx::TensorProto> p = ReadProto<onnx::TensorProto>(path);
    if (!p.ok()) return fail(p.status());
    AsDeclaredBFloat16(graph.input(i).type(), *p);
    in.protos.back() = *std::move(p);
  }
  return in;
}

bool IsIntegerInput(const onnx::TensorProto& p) {
  return p.data_type() == onnx::TensorProto::INT64 || p.data_type() == onnx::TensorProto::INT32;
}

// Runs `module` on `protos` (less those folded into it) and compares the outputs.
Verdict RunAndCompare(Module& module, const onnx::GraphProto& graph, const DataSetInputs& data,
                      bool skip_integer, const std::string& set, const Tolerance& tol,
                      std::vector<Value>* inputs_out) {
  const std::vector<onnx::TensorProto>& protos = data.protos;
  std::vector<Value> inputs;
  for (size_t i = 0; i < protos.size(); ++i) {
    if (skip_integer && IsIntegerInput(protos[i])) continue;
    if (data.lists[i].is_list()) {
      inputs.push_back(data.lists[i]);
      continue;
    }
    if (protos[i].data_type() == onnx::TensorProto::UNDEFINED) {
      return Verdict{Outcome::kRefused, absl::StrCat("input ", i, ": neither a tensor, a sequence nor an optional")};
    }
    absl::StatusOr<Tensor> t = TensorFromOnnx(protos[i], LoadLimits{});
    if (!t.ok()) return Refused(t.status(), absl::StrCat("input ", i, ": "));
    inputs.push_back(Value(*std::move(t)));
  }
  if (inputs_out != nullptr) *inputs_out = inputs;
  absl::StatusOr<std::unique_ptr<Executor>> e = Executor::Create(module.entry());
  if (!e.ok()) return Refused(e.status());
  absl::StatusOr<Value> result = (*e)->Run(std::move(inputs));
  if (!result.ok()) return Refused(result.status());
  int n = graph.output_size();
  if (n != 1 && (!result->is_tuple() || static_cast<int>(result->tuple().size()) != n)) {
    return Verdict{Outcome::kWrong, absl::StrCat("expected ", n, " outputs, got a ", result->TypeString())};
  }
  for (int j = 0; j < n; ++j) {
    const Value& got = n == 1 ? *result : result->tuple()[j];
    std::string diff = CompareOutput(got, absl::StrCat(set, "/output_", j, ".pb"), graph.output(j).type(), tol);
    if (diff.empty()) continue;
    if (absl::StartsWith(diff, "refused: ")) return Verdict{Outcome::kRefused, diff.substr(9)};
    return Verdict{Outcome::kWrong, absl::StrCat("output ", j, " (", graph.output(j).name(), "): ", diff)};
  }
  return Verdict{};
}

// Tests whose expected values ONNX's generators draw from numpy's random
// generator where the op leaves the values to the implementation: Dropout's mask
// in training mode with ratio > 0 (onnx/backend/test/case/node/dropout.py) and
// Bernoulli's draws (bernoulli.py: np.random.binomial). kgrad's draws are its
// own counter-based hash, so differing values there are not wrong: such a run
// counts as refused (a shape or dtype difference stays wrong). ONNX Runtime
// lists the same tests as not comparable.
constexpr const char* kRandomExpectedValues[] = {
    "test_training_dropout", "test_training_dropout_default", "test_training_dropout_default_mask",
    "test_training_dropout_mask", "test_bernoulli", "test_bernoulli_double", "test_bernoulli_seed",
    "test_bernoulli_expanded", "test_bernoulli_double_expanded", "test_bernoulli_seed_expanded"};

bool HasRandomExpectedValues(const std::string& dir) {
  const size_t slash = dir.find_last_of('/');
  const std::string name = slash == std::string::npos ? dir : dir.substr(slash + 1);
  for (const char* t : kRandomExpectedValues) {
    if (name == t) return true;
  }
  return false;
}

// The importer names the file first; the table groups by the rest.
Verdict ImportRefused(const absl::Status& s, const std::string& model_path) {
  std::string m = FirstLine(s);
  if (absl::StartsWith(m, model_path + ": ")) m = m.substr(model_path.size() + 2);
  return Verdict{Outcome::kRefused, m};
}

// `model` with the integer inputs of one data set as initializers of the same
// name (the importer takes an initializer listed as an input as a constant).
onnx::ModelProto WithIntegerInputsFolded(const onnx::ModelProto& model,
                                         const std::vector<onnx::TensorProto>& protos) {
  onnx::ModelProto folded = model;
  for (size_t i = 0; i < protos.size(); ++i) {
    if (!IsIntegerInput(protos[i])) continue;
    onnx::TensorProto* init = folded.mutable_graph()->add_initializer();
    *init = protos[i];
    init->set_name(model.graph().input(static_cast<int>(i)).name());
  }
  return folded;
}

}  // namespace

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kPass: return "pass";
    case Outcome::kWrong: return "wrong";
    case Outcome::kRefused: return "refused";
    case Outcome::kCrash: return "crash";
  }
  return "?";
}

const char* CheckOutcomeName(CheckOutcome o) {
  switch (o) {
    case CheckOutcome::kNotRun: return "-";
    case CheckOutcome::kPass: return "pass";
    case CheckOutcome::kFail: return "fail";
    case CheckOutcome::kRefused: return "refused";
    case CheckOutcome::kCrash: return "crash";
  }
  return "?";
}

std::string CompareTensor(const Value& got_value, const onnx::TensorProto& want_proto, const Tolerance& tol) {
  absl::StatusOr<Tensor> got = AsTensor(got_value);
  if (!got.ok()) return std::string(got.status().message());
  absl::StatusOr<DType> want_dtype = DTypeFromOnnx(want_proto.data_type());
  if (!want_dtype.ok()) {
    // kgrad has no such dtype, so whatever it returned differs.
    std::string name = onnx::TensorProto::DataType_IsValid(want_proto.data_type())
                           ? onnx::TensorProto::DataType_Name(
                                 static_cast<onnx::TensorProto::DataType>(want_proto.data_type()))
                           : absl::StrCat(want_proto.data_type());
    return absl::StrCat("dtype: expected ", name, ", got ", DTypeName(got->dtype()));
  }
  if (*want_dtype != got->dtype()) {
    return absl::StrCat("dtype: expected ", DTypeName(*want_dtype), ", got ", DTypeName(got->dtype()));
  }
  Shape want_shape(want_proto.dims().begin(), want_proto.dims().end());
  if (want_shape != got->shape()) {
    return absl::StrCat("shape: expected ", ShapeToString(want_shape), ", got ", ShapeToString(got->shape()));
  }
  absl::StatusOr<Tensor> want = TensorFromOnnx(want_proto, LoadLimits{});
  if (!want.ok()) return absl::StrCat("refused: expected output: ", FirstLine(want.status()));
  return CompareValues(*got, *want, tol);
}

std::string CompareOutput(const Value& got, const std::string& want_file, const onnx::TypeProto& type,
                          const Tolerance& tol) {
  if (IsListType(type)) {
    absl::StatusOr<std::string> bytes = ReadFile(want_file);
    absl::StatusOr<Value> want = bytes.ok() ? ListFromOnnxData(*bytes) : bytes.status();
    if (!want.ok()) return absl::StrCat("refused: expected output: ", FirstLine(want.status()));
    return CompareLists(got, *want, tol);
  }
  if (!type.has_tensor_type()) return absl::StrCat("refused: the runner compares only tensor, sequence and ",
                                                       "optional outputs (", want_file, " is none)");
  absl::StatusOr<onnx::TensorProto> want = ReadProto<onnx::TensorProto>(want_file);
  if (!want.ok()) return absl::StrCat("refused: ", FirstLine(want.status()));
  AsDeclaredBFloat16(type, *want);
  return CompareTensor(got, *want, tol);
}

std::string CompareLists(const Value& got, const Value& want, const Tolerance& tol) {
  // Element by element, with an explicit stack of (got, want, path) triples.
  std::vector<std::tuple<const Value*, const Value*, std::string>> work{{&got, &want, ""}};
  while (!work.empty()) {
    auto [g, w, path] = work.back();
    work.pop_back();
    const std::string at = path.empty() ? "" : absl::StrCat("element ", path, ": ");
    if (w->is_tensor()) {
      absl::StatusOr<Tensor> t = AsTensor(*g);
      if (!t.ok()) return at + std::string(t.status().message());
      if (t->dtype() != w->tensor().dtype()) {
        return absl::StrCat(at, "dtype: expected ", DTypeName(w->tensor().dtype()), ", got ", DTypeName(t->dtype()));
      }
      if (t->shape() != w->tensor().shape()) {
        return absl::StrCat(at, "shape: expected ", ShapeToString(w->tensor().shape()), ", got ",
                            ShapeToString(t->shape()));
      }
      std::string diff = CompareValues(*t, w->tensor(), tol);
      if (!diff.empty()) return at + diff;
      continue;
    }
    if (!g->is_list()) return absl::StrCat(at, "expected a list, got a ", g->TypeString());
    if (g->list().size() != w->list().size()) {
      return absl::StrCat(at, "length: expected ", w->list().size(), ", got ", g->list().size());
    }
    for (size_t k = w->list().size(); k-- > 0;) {
      work.emplace_back(&g->list()[k], &w->list()[k], path.empty() ? absl::StrCat(k) : absl::StrCat(path, ".", k));
    }
  }
  return "";
}

CaseRun RunTest(const std::string& dir, const Tolerance& tol, bool fold_integer_inputs) {
  CaseRun run;
  std::string model_path = dir + "/model.onnx";
  absl::StatusOr<onnx::ModelProto> model = ReadProto<onnx::ModelProto>(model_path);
  if (!model.ok()) {
    run.verdict = Refused(model.status());
    return run;
  }
  std::vector<std::string> sets = DataSets(dir);
  if (sets.empty()) {
    run.verdict = Verdict{Outcome::kRefused, "runner: no test_data_set_* directory"};
    return run;
  }
  // Plain: the file imported once, as `kgrad run` imports it. Folded: each data
  // set's integers are part of the model, so each set is imported anew.
  std::unique_ptr<Module> plain;
  for (size_t i = 0; i < sets.size(); ++i) {
    std::string where = sets.size() > 1 ? absl::StrCat("test_data_set_", i, ": ") : "";
    absl::StatusOr<DataSetInputs> data = ReadInputs(model->graph(), sets[i]);
    if (!data.ok()) {
      run.verdict = Refused(data.status(), where);
      return run;
    }
    std::unique_ptr<Module> folded;
    if (fold_integer_inputs || plain == nullptr) {
      // Sequences and optionals are typed by the data (the first set's, for a
      // plain import).
      OnnxImportOptions options;
      options.input_types = data->list_types;
      absl::StatusOr<std::unique_ptr<Module>> imported =
          fold_integer_inputs ? ImportOnnx(WithIntegerInputsFolded(*model, data->protos), DefaultRegistry(),
                                           options, model_path)
          : data->list_types.empty() ? cli::LoadModule(model_path)
                                     : ImportOnnx(*model, DefaultRegistry(), options, model_path);
      if (!imported.ok()) {
        run.verdict = ImportRefused(imported.status(), model_path);
        return run;
      }
      (fold_integer_inputs ? folded : plain) = *std::move(imported);
    }
    Module& m = fold_integer_inputs ? *folded : *plain;
    Verdict v = RunAndCompare(m, model->graph(), *data, fold_integer_inputs, sets[i], tol,
                              i == 0 ? &run.first_inputs : nullptr);
    if (v.outcome == Outcome::kWrong && HasRandomExpectedValues(dir) &&
        absl::StrContains(v.detail, ": values: ")) {
      v = Verdict{Outcome::kRefused, absl::StrCat("expected values drawn from numpy's random generator (",
                                                  v.detail, ")")};
    }
    if (v.outcome != Outcome::kPass) {
      v.detail = where + v.detail;
      run.verdict = v;
      return run;
    }
    if (i == 0 && fold_integer_inputs) run.module = std::move(folded);
  }
  if (!fold_integer_inputs) run.module = std::move(plain);
  return run;
}

CheckVerdict CheckTest(CaseRun& run) {
  if (run.verdict.outcome != Outcome::kPass || run.module == nullptr || run.first_inputs.empty()) return {};
  std::vector<Value> args;
  for (const Value& v : run.first_inputs) {
    if (!v.is_tensor() || !IsFloating(v.tensor().dtype())) return {};
    args.push_back(WidenToFloat64(v));
  }
  absl::StatusOr<std::unique_ptr<Module>> m64 = ToFloat64(*run.module);
  if (!m64.ok()) return CheckVerdict{CheckOutcome::kRefused, FirstLine(m64.status())};
  GradCheckOptions options;  // kgrad check's defaults, with a fixed seed
  options.seed = 1;
  absl::StatusOr<GradCheckReport> report = CheckGradients(**m64, (*m64)->entry(), args, options);
  if (!report.ok()) return CheckVerdict{CheckOutcome::kRefused, FirstLine(report.status())};
  if (report->passed()) return CheckVerdict{CheckOutcome::kPass, ""};
  for (const GradCheckEntry& entry : report->entries) {
    if (entry.passed) continue;
    return CheckVerdict{CheckOutcome::kFail,
                        absl::StrCat(entry.forward ? "forward" : "reverse", " mode, input '", entry.input,
                                     "': max abs error ", entry.max_abs_error, ", max rel error ",
                                     entry.max_rel_error, ", NaN numeric/derivative ", entry.nan_numeric,
                                     "/", entry.nan_derivative, " of ", entry.directions)};
  }
  return CheckVerdict{CheckOutcome::kFail, FirstLine(absl::UnknownError(report->ToString()))};
}

}  // namespace conformance
}  // namespace kgrad
