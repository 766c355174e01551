// PrintBlock: TC source from a Block, with the fewest parentheses that parse
// back to the same tree (each node's text is built from its children's, in node
// order, so nothing recurses).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ops/tc_block.h"

namespace kgrad {
namespace tc {
namespace {

// The shortest decimal that reads back as `v`.
std::string Number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrCat(static_cast<int64_t>(v));
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// Binding strength of a node's text: 1 ternary .. 7 unary, 8 atoms.
int Level(Op op) {
  switch (op) {
    case Op::kSelect: return 1;
    case Op::kOr: return 2;
    case Op::kAnd: return 3;
    case Op::kLt: case Op::kLe: case Op::kGt: case Op::kGe: case Op::kEq: case Op::kNe: return 4;
    case Op::kAdd: case Op::kSub: return 5;
    case Op::kMul: case Op::kDiv: return 6;
    case Op::kNeg: case Op::kNot: return 7;
    default: return 8;
  }
}

std::string Wrap(const std::string& text, int level, int need) {
  return level < need ? absl::StrCat("(", text, ")") : text;
}

std::string BoundText(const Block& b, const tc::Bound& bound) {
  if (bound.size < 0) return absl::StrCat(bound.offset);
  std::string s = b.sizes[bound.size];
  if (bound.offset > 0) absl::StrAppend(&s, " + ", bound.offset);
  if (bound.offset < 0) absl::StrAppend(&s, " - ", -bound.offset);
  return s;
}

std::string Expression(const Block& b, const ExprList& list) {
  std::vector<std::string> text(list.nodes.size());
  std::vector<int> level(list.nodes.size());
  for (size_t k = 0; k < list.nodes.size(); ++k) {
    const Expr& e = list.nodes[k];
    level[k] = Level(e.op);
    auto child = [&](int n, int need) { return Wrap(text[n], level[n], need); };
    switch (e.op) {
      case Op::kNumber:
        text[k] = Number(e.number);
        if (e.number < 0) level[k] = 7;
        break;
      case Op::kRead: {
        text[k] = b.tensors[e.tensor].name;
        if (!e.args.empty()) {
          std::vector<std::string> args;
          for (const Affine& a : e.args) args.push_back(PrintAffine(b, a));
          absl::StrAppend(&text[k], "(", absl::StrJoin(args, ", "), ")");
        }
        break;
      }
      case Op::kIndex:
        text[k] = b.indices[e.id];
        break;
      case Op::kSize:
        text[k] = b.sizes[e.id];
        break;
      case Op::kNeg:
      case Op::kNot:
        text[k] = absl::StrCat(OpName(e.op), child(e.a, 7));
        break;
      case Op::kSelect:
        text[k] = absl::StrCat(child(e.a, 2), " ? ", text[e.b], " : ", text[e.c]);
        break;
      default:
        if (Level(e.op) == 8) {  // a function
          text[k] = absl::StrCat(OpName(e.op), "(", text[e.a]);
          if (OpArity(e.op) == 2) absl::StrAppend(&text[k], ", ", text[e.b]);
          absl::StrAppend(&text[k], ")");
        } else {  // left-associative binary: the right operand binds tighter
          int l = Level(e.op);
          text[k] = absl::StrCat(child(e.a, l), " ", OpName(e.op), " ", child(e.b, l + 1));
        }
    }
  }
  return text.empty() ? "" : text.back();
}

}  // namespace

std::string PrintAffine(const Block& b, const Affine& a) {
  std::string s;
  // Positive terms first: "h - kh", not "-kh + h".
  std::vector<std::pair<int, int64_t>> terms;
  for (const auto& t : a.terms) {
    if (t.second > 0) terms.push_back(t);
  }
  for (const auto& t : a.terms) {
    if (t.second < 0) terms.push_back(t);
  }
  for (const auto& [id, coef] : terms) {
    int64_t mag = coef < 0 ? -coef : coef;
    if (s.empty()) {
      if (coef < 0) s = "-";
    } else {
      s += coef < 0 ? " - " : " + ";
    }
    if (mag != 1) absl::StrAppend(&s, mag, "*");
    s += b.indices[id];
  }
  if (s.empty()) {
    s = absl::StrCat(a.constant);
  } else if (a.constant != 0) {
    absl::StrAppend(&s, a.constant < 0 ? " - " : " + ", a.constant < 0 ? -a.constant : a.constant);
  }
  if (a.divisor != 1) s = absl::StrCat("(", s, ")/", a.divisor);
  return s;
}

std::string PrintStatement(const Block& b, const Statement& s) {
  std::string out = b.tensors[s.lhs].name;
  if (!s.lhs_indices.empty()) {
    std::vector<std::string> idx;
    for (int i : s.lhs_indices) idx.push_back(b.indices[i]);
    absl::StrAppend(&out, "(", absl::StrJoin(idx, ", "), ")");
  }
  absl::StrAppend(&out, " ", ReducerSpelling(s.reducer, s.init), " ", Expression(b, s.rhs));
  for (size_t c = 0; c < s.where.size(); ++c) {
    const Condition& w = s.where[c];
    absl::StrAppend(&out, c == 0 ? " where " : ", ", PrintAffine(b, w.expr), " in ", BoundText(b, w.lo),
                    ":", BoundText(b, w.hi));
  }
  return out;
}

std::string PrintBlock(const Block& b) {
  std::vector<std::string> params, outputs;
  for (const TensorDecl& t : b.tensors) {
    if (!t.input) {
      outputs.push_back(t.name);
      continue;
    }
    std::string p = t.dtype == DType::kFloat64 ? "double" : "float";
    if (!t.dims.empty()) {
      std::vector<std::string> dims;
      for (int d : t.dims) dims.push_back(b.sizes[d]);
      absl::StrAppend(&p, "(", absl::StrJoin(dims, ","), ")");
    }
    params.push_back(absl::StrCat(p, " ", t.name));
  }
  std::string out = absl::StrCat("def ", b.name, "(", absl::StrJoin(params, ", "), ") -> (",
                                 absl::StrJoin(outputs, ", "), ") {\n");
  for (const Statement& s : b.statements) absl::StrAppend(&out, "  ", PrintStatement(b, s), "\n");
  out += "}\n";
  return out;
}

}  // namespace tc
}  // namespace kgrad
