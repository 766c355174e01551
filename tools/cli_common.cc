#include "tools/cli_common.h"

#include <algorithm>
#include <cmath>
#include <sys/stat.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/constant_evaluator.h"
#include "core/status_macros.h"
#include "ops/registry.h"
#include "proto/model_io.h"
#include "proto/onnx/onnx_import.h"
#include "tools/npy.h"

namespace kgrad {
namespace cli {
namespace {

absl::StatusOr<std::pair<std::string, std::string>> SplitAssignment(const std::string& s,
                                                                   const char* flag) {
  size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " wants NAME=VALUE, got '", s, "'"));
  }
  return std::make_pair(s.substr(0, eq), s.substr(eq + 1));
}

absl::StatusOr<Value> ParseLiteral(const std::string& text, const AbstractScalar* want,
                                   const std::string& param) {
  DType t = want->dtype();
  if (t == DType::kBool) {
    if (text == "true" || text == "1") return Value(Scalar::Bool(true));
    if (text == "false" || text == "0") return Value(Scalar::Bool(false));
  } else if (IsFloating(t)) {
    double d;
    if (absl::SimpleAtod(text, &d)) return Value(Scalar::Float(d, t));
  } else {
    int64_t i;
    if (absl::SimpleAtoi(text, &i)) return Value(Scalar::Int(i, t));
  }
  return absl::InvalidArgumentError(absl::StrCat("input '", param, "' is a ", DTypeName(t),
                                                 " scalar; '", text, "' is not one"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Module>> LoadModule(const std::string& path) {
  if (absl::EndsWith(path, ".onnx")) {
    static CpuConstantEvaluator* const evaluator = new CpuConstantEvaluator;
    OnnxImportOptions o;
    o.evaluator = evaluator;
    return ImportOnnxFile(path, DefaultRegistry(), o);
  }
  return LoadModelFile(path, DefaultRegistry());
}

absl::StatusOr<FuncGraph*> SelectGraph(Module& m, const ParsedArgs& args) {
  if (args.Has("graph")) {
    FuncGraph* g = m.FindGraph(args.Get("graph"));
    if (g == nullptr) return absl::NotFoundError(absl::StrCat("no graph named '", args.Get("graph"), "'"));
    return g;
  }
  if (m.entry() == nullptr) return absl::NotFoundError("the model names no entry graph");
  return m.entry();
}

absl::StatusOr<Value> ReadOneInput(const Parameter* p, const std::string& text) {
  const AbstractScalar* scalar = AsScalar(p->declared());
  if (scalar != nullptr && !absl::EndsWith(text, ".npy")) return ParseLiteral(text, scalar, p->name());
  KGRAD_ASSIGN_OR_RETURN(Tensor t, ReadNpyFile(text));
  return Value(std::move(t));
}

Value WidenToFloat64(const Value& v) {
  if (v.is_scalar() && v.scalar().dtype() == DType::kFloat32) return Value(Scalar::Float(v.scalar().AsDouble()));
  if (!v.is_tensor() || v.tensor().dtype() != DType::kFloat32) return v;
  Tensor t = Tensor::Create(DType::kFloat64, v.tensor().shape()).value();
  for (int64_t k = 0; k < t.NumElements(); ++k) t.mutable_data<double>()[k] = v.tensor().ElementAsDouble(k);
  return Value(std::move(t));
}

absl::StatusOr<std::vector<Value>> ReadInputs(FuncGraph* g, const ParsedArgs& args) {
  absl::flat_hash_map<std::string, std::string> given;
  auto it = args.options.find("input");
  if (it != args.options.end()) {
    for (const std::string& s : it->second) {
      KGRAD_ASSIGN_OR_RETURN(auto kv, SplitAssignment(s, "input"));
      given[kv.first] = kv.second;
    }
  }
  std::vector<Value> values;
  for (Parameter* p : g->parameters()) {
    auto v = given.find(p->name());
    if (v == given.end()) {
      return absl::InvalidArgumentError(absl::StrCat("graph '", g->name(), "' needs input '", p->name(),
                                                     "': pass --input ", p->name(), "=FILE.npy"));
    }
    KGRAD_ASSIGN_OR_RETURN(Value x, ReadOneInput(p, v->second));
    values.push_back(std::move(x));
    given.erase(v);
  }
  if (!given.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", g->name(), "' has no parameter named '",
                                                   given.begin()->first, "'"));
  }
  return values;
}

absl::StatusOr<absl::flat_hash_map<std::string, Tensor>> ReadWeightOverrides(const ParsedArgs& args) {
  absl::flat_hash_map<std::string, Tensor> out;
  auto it = args.options.find("weight");
  if (it == args.options.end()) return out;
  for (const std::string& s : it->second) {
    KGRAD_ASSIGN_OR_RETURN(auto kv, SplitAssignment(s, "weight"));
    KGRAD_ASSIGN_OR_RETURN(Tensor t, ReadNpyFile(kv.second));
    out[kv.first] = std::move(t);
  }
  return out;
}

void PrintSummary(const Value& v, const std::string& name, std::ostream& out) {
  if (v.is_tuple()) {
    for (size_t i = 0; i < v.tuple().size(); ++i) PrintSummary(v.tuple()[i], absl::StrCat(name, "_", i), out);
    return;
  }
  if (!v.is_tensor()) {
    out << name << ": " << v.ToString() << "\n";
    return;
  }
  const Tensor& t = v.tensor();
  out << name << ": " << t.TypeString();
  int64_t n = t.NumElements();
  if (n > 0 && t.dtype() != DType::kBool) {
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      double x = t.ElementAsDouble(i);
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      sum += x;
    }
    out << " min=" << lo << " max=" << hi << " mean=" << sum / n;
  }
  std::string values = t.DebugString(6);
  out << " " << values.substr(values.find('{')) << "\n";
}

absl::Status WriteOutputs(const Value& v, const std::string& dir, const std::string& name) {
  mkdir(dir.c_str(), 0755);  // exists already: fine; cannot create: the write fails below
  if (v.is_tuple()) {
    for (size_t i = 0; i < v.tuple().size(); ++i) {
      KGRAD_RETURN_IF_ERROR(WriteOutputs(v.tuple()[i], dir, absl::StrCat(name, "_", i)));
    }
    return absl::OkStatus();
  }
  if (v.is_scalar()) {
    KGRAD_ASSIGN_OR_RETURN(Tensor t, Tensor::Full(v.scalar().dtype(), {}, v.scalar().AsDouble()));
    return WriteNpyFile(t, absl::StrCat(dir, "/", name, ".npy"));
  }
  if (!v.is_tensor()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is a ", v.TypeString(), ", not a tensor"));
  }
  return WriteNpyFile(v.tensor(), absl::StrCat(dir, "/", name, ".npy"));
}

int Fail(const absl::Status& s, std::ostream& err) {
  err << "error: " << s.message() << "\n";
  return 1;
}

}  // namespace cli
}  // namespace kgrad
