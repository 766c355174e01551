// A tensor comprehension block in Tensor Comprehensions' own syntax (Vasilache et
// al. 2018), the `def` attribute of the `tc` primitive:
//
//   def mv(float(M,N) A, float(N) B) -> (C) {
//     C(i) +=! A(i,j) * B(j)
//   }
//
// parsed once into this form, which inference, the kernels of every backend and
// the gradient rule share (ops/tc_analysis.h checks it against input types;
// ops/tc_adjoint.h derives the adjoint block). Grammar:
//
//   block     := 'def' NAME '(' param (',' param)* ')' ('->' | '→') '(' NAME (',' NAME)* ')'
//                '{' statement ((';' | newline) statement)* '}'
//   param     := ('float' | 'double') ['(' SIZE (',' SIZE)* ')'] NAME
//   statement := NAME ['(' [INDEX (',' INDEX)*] ')'] op expr ['where' cond (',' cond)*]
//   op        := '=' | '+=!' | '*=!' | 'max=!' | 'min=!' | '+=' | '*=' | 'max=' | 'min='
//   cond      := affine 'in' bound ':' bound          bound := INT | SIZE
//   expr      := or ['?' expr ':' expr]
//   or, and   := '||', '&&' of comparisons (< <= > >= == !=) of sums (+ -) of
//                products (* /) of unary minus, '!' and primaries
//   primary   := NUMBER | NAME '(' affine, ... ')' (a read) | NAME (a rank-0 input,
//                an index or a size as a number) | FN '(' expr [',' expr] ')' | '(' expr ')'
//   affine    := sums and differences of INT, INDEX and INT*INDEX, optionally the
//                whole '(' affine ')' '/' INT (exact division: points where it does
//                not divide are outside the statement's domain)
//
// Comments run from '#' to the end of the line. Expressions are held as node
// lists in evaluation order (children before parents), so that nothing walks
// them recursively; their depth is bounded by the parser.
#ifndef KGRAD_OPS_TC_BLOCK_H_
#define KGRAD_OPS_TC_BLOCK_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/dtype.h"

namespace kgrad {
namespace tc {

// How a statement combines its right-hand side over the reduction indices (the
// indices the left side does not name) and with what the output held.
enum class Reducer { kAssign, kSum, kProd, kMax, kMin };
const char* ReducerSpelling(Reducer r, bool init);  // "+=!", "max=", ...

// (sum of coefficient * index + constant) / divisor; the division is exact.
struct Affine {
  std::vector<std::pair<int, int64_t>> terms;  // (index id, coefficient != 0), by id
  int64_t constant = 0;
  int64_t divisor = 1;

  bool IsPlainIndex() const {
    return divisor == 1 && constant == 0 && terms.size() == 1 && terms[0].second == 1;
  }
  int64_t Coefficient(int index) const;  // 0 when absent
  bool operator==(const Affine& o) const {
    return terms == o.terms && constant == o.constant && divisor == o.divisor;
  }
};

enum class Op : uint8_t {
  kNumber, kRead, kIndex, kSize,                 // leaves
  kNeg, kNot, kExp, kLog, kTanh, kSqrt, kSigmoid, kAbs,  // unary (a)
  kAdd, kSub, kMul, kDiv, kMax2, kMin2,          // binary (a, b); fmax, fmin
  kLt, kLe, kGt, kGe, kEq, kNe, kAnd, kOr,       // 1 or 0
  kSelect,                                       // a ? b : c
};
int OpArity(Op op);
const char* OpName(Op op);  // the spelling: "+", "exp", "fmax", "?"

struct Expr {
  Op op = Op::kNumber;
  double number = 0;          // kNumber
  int tensor = -1;            // kRead
  std::vector<Affine> args;   // kRead: one per dim of the tensor
  int id = -1;                // kIndex: index id; kSize: size id
  int a = -1, b = -1, c = -1;  // operands: earlier node positions
};

// The nodes of one expression, children before parents; the root is last.
struct ExprList {
  std::vector<Expr> nodes;
  int root() const { return static_cast<int>(nodes.size()) - 1; }
  int Add(Expr e) {
    nodes.push_back(std::move(e));
    return root();
  }
  // Per node: whether `from`'s subtree holds it (children come before parents,
  // so one backward pass finds them).
  std::vector<bool> Reaches(int from) const {
    std::vector<bool> in(nodes.size(), false);
    in[from] = true;
    for (int k = from; k >= 0; --k) {
      if (!in[k]) continue;
      for (int c : {nodes[k].a, nodes[k].b, nodes[k].c}) {
        if (c >= 0) in[c] = true;
      }
    }
    return in;
  }
};

// A range bound: an integer, or a size symbol plus an integer.
struct Bound {
  int size = -1;  // size id, or -1 for a plain integer
  int64_t offset = 0;
};

// `where expr in lo:hi`: a plain index gets its range; any other affine
// expression restricts the statement's domain to the points where it holds.
struct Condition {
  Affine expr;
  Bound lo, hi;
};

struct Statement {
  int number = 0;      // 1-based, for errors
  std::string text;    // as written, for errors
  int lhs = -1;        // tensor id (an output)
  std::vector<int> lhs_indices;
  Reducer reducer = Reducer::kAssign;
  bool init = true;    // '!' forms and '=' initialise; the others update
  ExprList rhs;
  std::vector<Condition> where;
};

struct TensorDecl {
  std::string name;
  bool input = false;
  DType dtype = DType::kFloat32;  // declared for inputs; outputs take the block's
  std::vector<int> dims;          // inputs: size ids, one per dim
};

struct Block {
  std::string name;
  std::vector<TensorDecl> tensors;  // inputs in signature order, then outputs
  int num_inputs = 0;
  std::vector<std::string> indices;  // by id
  std::vector<std::string> sizes;    // by id
  std::vector<Statement> statements;

  int num_outputs() const { return static_cast<int>(tensors.size()) - num_inputs; }
  int FindTensor(absl::string_view name) const;  // -1 when absent
};

// Deepest expression the parser accepts (bounds every walk over one).
inline constexpr int kMaxExprDepth = 200;
// Bounds on index arithmetic, so that offsets over dims below kMaxTcDim never
// overflow int64: coefficients, constants and divisors, and terms per index.
inline constexpr int64_t kMaxIndexConstant = int64_t{1} << 24;
inline constexpr int kMaxIndexTerms = 64;
inline constexpr int64_t kMaxTcDim = int64_t{1} << 31;
bool WithinIndexLimits(const Affine& a);

// Parses `def`; errors are InvalidArgument "tc block 'NAME': statement N (`text`):
// what" (or "tc block: what" before the name is read).
absl::StatusOr<Block> ParseBlock(absl::string_view def);

// The block as TC source, one statement per line; ParseBlock(PrintBlock(b)) is b.
std::string PrintBlock(const Block& b);
std::string PrintStatement(const Block& b, const Statement& s);
std::string PrintAffine(const Block& b, const Affine& a);

// "tc block 'NAME': statement N (`text`): what" as an InvalidArgument error.
absl::Status StatementError(const Block& b, const Statement& s, absl::string_view what);
absl::Status BlockError(const Block& b, absl::string_view what);

}  // namespace tc
}  // namespace kgrad

#endif  // KGRAD_OPS_TC_BLOCK_H_
