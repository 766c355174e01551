#include "ops/tc_block.h"

#include "absl/strings/str_cat.h"

namespace kgrad {
namespace tc {

const char* ReducerSpelling(Reducer r, bool init) {
  switch (r) {
    case Reducer::kAssign:
      return "=";
    case Reducer::kSum:
      return init ? "+=!" : "+=";
    case Reducer::kProd:
      return init ? "*=!" : "*=";
    case Reducer::kMax:
      return init ? "max=!" : "max=";
    case Reducer::kMin:
      return init ? "min=!" : "min=";
  }
  return "?";
}

int64_t Affine::Coefficient(int index) const {
  for (const auto& [id, coef] : terms) {
    if (id == index) return coef;
  }
  return 0;
}

bool WithinIndexLimits(const Affine& a) {
  auto small = [](int64_t v) { return v <= kMaxIndexConstant && v >= -kMaxIndexConstant; };
  if (static_cast<int>(a.terms.size()) > kMaxIndexTerms || !small(a.constant) || !small(a.divisor)) return false;
  for (const auto& t : a.terms) {
    if (!small(t.second)) return false;
  }
  return true;
}

int OpArity(Op op) {
  switch (op) {
    case Op::kNumber:
    case Op::kRead:
    case Op::kIndex:
    case Op::kSize:
      return 0;
    case Op::kNeg:
    case Op::kNot:
    case Op::kExp:
    case Op::kLog:
    case Op::kTanh:
    case Op::kSqrt:
    case Op::kSigmoid:
    case Op::kAbs:
      return 1;
    case Op::kSelect:
      return 3;
    default:
      return 2;
  }
}

const char* OpName(Op op) {
  switch (op) {
    case Op::kNumber: return "number";
    case Op::kRead: return "read";
    case Op::kIndex: return "index";
    case Op::kSize: return "size";
    case Op::kNeg: return "-";
    case Op::kNot: return "!";
    case Op::kExp: return "exp";
    case Op::kLog: return "log";
    case Op::kTanh: return "tanh";
    case Op::kSqrt: return "sqrt";
    case Op::kSigmoid: return "sigmoid";
    case Op::kAbs: return "abs";
    case Op::kAdd: return "+";
    case Op::kSub: return "-";
    case Op::kMul: return "*";
    case Op::kDiv: return "/";
    case Op::kMax2: return "fmax";
    case Op::kMin2: return "fmin";
    case Op::kLt: return "<";
    case Op::kLe: return "<=";
    case Op::kGt: return ">";
    case Op::kGe: return ">=";
    case Op::kEq: return "==";
    case Op::kNe: return "!=";
    case Op::kAnd: return "&&";
    case Op::kOr: return "||";
    case Op::kSelect: return "?";
  }
  return "?";
}

int Block::FindTensor(absl::string_view n) const {
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].name == n) return static_cast<int>(t);
  }
  return -1;
}

absl::Status StatementError(const Block& b, const Statement& s, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tc block '", b.name, "': statement ", s.number,
                                                 " (`", s.text, "`): ", what));
}

absl::Status BlockError(const Block& b, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tc block '", b.name, "': ", what));
}

}  // namespace tc
}  // namespace kgrad
