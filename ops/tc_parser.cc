// ParseBlock: a hand-written lexer and precedence-climbing parser for the grammar
// in ops/tc_block.h. Index expressions are parsed as ordinary expressions and
// then folded into Affine form, so that "non-affine" is one check in one place.
#include <cctype>
#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "ops/tc_block.h"

namespace kgrad {
namespace tc {
namespace {

enum class Tok { kName, kNumber, kPunct, kNewline, kEnd };

struct Token {
  Tok kind;
  std::string text;
  size_t pos = 0;  // offset in the source
};

bool IsNameStart(char ch) { return std::isalpha(static_cast<unsigned char>(ch)) || ch == '_'; }
bool IsNameChar(char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; }

// Newlines are tokens only at parenthesis depth 0 inside the braces, where they
// end statements.
absl::StatusOr<std::vector<Token>> Lex(absl::string_view src) {
  static const char* kPuncts[] = {"->", "+=", "*=", "<=", ">=", "==", "!=", "&&", "||", "(",
                                  ")",  "{",  "}",  ",",  ";",  ":",  "?",  "+",  "-",  "*",
                                  "/",  "<",  ">",  "=",  "!"};
  std::vector<Token> out;
  int depth = 0;
  bool in_body = false;
  size_t i = 0;
  while (i < src.size()) {
    char ch = src[i];
    if (ch == '#') {
      while (i < src.size() && src[i] != '\n') ++i;
      continue;
    }
    if (ch == '\n') {
      if (in_body && depth == 0) out.push_back({Tok::kNewline, "\n", i});
      ++i;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(ch))) {
      ++i;
      continue;
    }
    if (src.substr(i, 3) == "\xE2\x86\x92") {  // U+2192, the seed's arrow
      out.push_back({Tok::kPunct, "->", i});
      i += 3;
      continue;
    }
    if (IsNameStart(ch)) {
      size_t j = i;
      while (j < src.size() && IsNameChar(src[j])) ++j;
      out.push_back({Tok::kName, std::string(src.substr(i, j - i)), i});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(ch)) ||
        (ch == '.' && i + 1 < src.size() && std::isdigit(static_cast<unsigned char>(src[i + 1])))) {
      size_t j = i;
      while (j < src.size() && (std::isdigit(static_cast<unsigned char>(src[j])) || src[j] == '.')) ++j;
      if (j < src.size() && (src[j] == 'e' || src[j] == 'E')) {
        size_t k = j + 1;
        if (k < src.size() && (src[k] == '+' || src[k] == '-')) ++k;
        if (k < src.size() && std::isdigit(static_cast<unsigned char>(src[k]))) {
          j = k;
          while (j < src.size() && std::isdigit(static_cast<unsigned char>(src[j]))) ++j;
        }
      }
      out.push_back({Tok::kNumber, std::string(src.substr(i, j - i)), i});
      i = j;
      continue;
    }
    bool matched = false;
    for (const char* p : kPuncts) {
      size_t n = std::char_traits<char>::length(p);
      if (src.substr(i, n) == p) {
        out.push_back({Tok::kPunct, p, i});
        if (*p == '(') ++depth;
        if (*p == ')') depth = depth > 0 ? depth - 1 : 0;
        if (*p == '{') in_body = true;
        if (*p == '}') in_body = false;
        i += n;
        matched = true;
        break;
      }
    }
    if (!matched) {
      return absl::InvalidArgumentError(
          absl::StrCat("tc block: unexpected character '", std::string(1, ch), "' at offset ", i));
    }
  }
  out.push_back({Tok::kEnd, "", src.size()});
  return out;
}

// A node and its depth, for the depth bound.
struct Built {
  int node;
  int depth;
};

class Parser {
 public:
  Parser(absl::string_view src, std::vector<Token> toks) : src_(src), toks_(std::move(toks)) {}

  absl::StatusOr<Block> Run() {
    KGRAD_RETURN_IF_ERROR(Signature());
    KGRAD_RETURN_IF_ERROR(Expect("{"));
    int number = 0;
    while (true) {
      SkipSeparators();
      if (Is("}")) break;
      if (Peek().kind == Tok::kEnd) return Error("missing '}' at the end of the block");
      KGRAD_RETURN_IF_ERROR(ParseStatement(++number));
    }
    Next();
    if (Peek().kind != Tok::kEnd) return Error("text after the block's closing '}'");
    if (b_.statements.empty()) return Error("the block has no statements");
    return std::move(b_);
  }

 private:
  // ----- Tokens ---------------------------------------------------------------------------
  const Token& Peek(int ahead = 0) const {
    size_t k = std::min(pos_ + ahead, toks_.size() - 1);
    return toks_[k];
  }
  const Token& Next() { return toks_[std::min(pos_++, toks_.size() - 1)]; }
  bool Is(absl::string_view punct) const {
    return Peek().kind == Tok::kPunct && Peek().text == punct;
  }
  bool Accept(absl::string_view punct) {
    if (!Is(punct)) return false;
    ++pos_;
    return true;
  }
  void SkipNewlines() {
    while (Peek().kind == Tok::kNewline) ++pos_;
  }
  void SkipSeparators() {
    while (Peek().kind == Tok::kNewline || Is(";")) ++pos_;
  }
  std::string Describe(const Token& t) const {
    if (t.kind == Tok::kEnd) return "the end";
    if (t.kind == Tok::kNewline) return "a line end";
    return absl::StrCat("'", t.text, "'");
  }
  absl::Status Error(absl::string_view what) const {
    std::string where = b_.name.empty() ? "tc block" : absl::StrCat("tc block '", b_.name, "'");
    if (in_statement_) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": statement ", stmt_.number, " (`", StatementText(), "`): ", what));
    }
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
  }
  absl::Status Expect(absl::string_view punct) {
    if (Accept(punct)) return absl::OkStatus();
    return Error(absl::StrCat("expected '", punct, "', got ", Describe(Peek())));
  }
  absl::StatusOr<std::string> ExpectName(absl::string_view what) {
    if (Peek().kind != Tok::kName) {
      return Error(absl::StrCat("expected ", what, ", got ", Describe(Peek())));
    }
    return Next().text;
  }
  // The source of the current statement, from its first token to the line end.
  std::string StatementText() const {
    size_t begin = toks_[stmt_begin_].pos, end = begin;
    for (size_t k = stmt_begin_; k < toks_.size(); ++k) {
      const Token& t = toks_[k];
      if (t.kind == Tok::kNewline || t.kind == Tok::kEnd || (t.kind == Tok::kPunct && (t.text == ";" || t.text == "}"))) {
        break;
      }
      end = t.pos + t.text.size();
    }
    return std::string(src_.substr(begin, end - begin));
  }

  // ----- Signature -------------------------------------------------------------------------
  int SizeId(const std::string& name) {
    for (size_t s = 0; s < b_.sizes.size(); ++s) {
      if (b_.sizes[s] == name) return static_cast<int>(s);
    }
    b_.sizes.push_back(name);
    return static_cast<int>(b_.sizes.size()) - 1;
  }
  int FindSize(const std::string& name) const {
    for (size_t s = 0; s < b_.sizes.size(); ++s) {
      if (b_.sizes[s] == name) return static_cast<int>(s);
    }
    return -1;
  }
  int IndexId(const std::string& name) {
    for (size_t s = 0; s < b_.indices.size(); ++s) {
      if (b_.indices[s] == name) return static_cast<int>(s);
    }
    b_.indices.push_back(name);
    return static_cast<int>(b_.indices.size()) - 1;
  }
  absl::Status CheckNewName(const std::string& name) {
    if (b_.FindTensor(name) >= 0 || FindSize(name) >= 0) {
      return Error(absl::StrCat("'", name, "' is declared twice"));
    }
    if (IsFunction(name) || name == "where" || name == "in" || name == "float" || name == "double" ||
        name == "max" || name == "min" || name == "def") {
      return Error(absl::StrCat("'", name, "' is a reserved word"));
    }
    return absl::OkStatus();
  }
  static bool IsFunction(absl::string_view n) {
    return n == "exp" || n == "log" || n == "tanh" || n == "sqrt" || n == "sigmoid" || n == "abs" ||
           n == "fmax" || n == "fmin";
  }

  absl::Status Param() {
    KGRAD_ASSIGN_OR_RETURN(std::string type, ExpectName("a type (float or double)"));
    TensorDecl d;
    d.input = true;
    if (type == "float") {
      d.dtype = DType::kFloat32;
    } else if (type == "double") {
      d.dtype = DType::kFloat64;
    } else {
      return Error(absl::StrCat("parameter type '", type, "': expected float or double"));
    }
    if (Accept("(")) {
      do {
        KGRAD_ASSIGN_OR_RETURN(std::string size, ExpectName("a size name"));
        if (b_.FindTensor(size) >= 0) return Error(absl::StrCat("size '", size, "' is also a tensor"));
        d.dims.push_back(SizeId(size));
      } while (Accept(","));
      KGRAD_RETURN_IF_ERROR(Expect(")"));
    }
    KGRAD_ASSIGN_OR_RETURN(d.name, ExpectName("a parameter name"));
    KGRAD_RETURN_IF_ERROR(CheckNewName(d.name));
    b_.tensors.push_back(std::move(d));
    return absl::OkStatus();
  }

  absl::Status Signature() {
    if (Peek().kind != Tok::kName || Peek().text != "def") return Error("a block starts with 'def'");
    Next();
    KGRAD_ASSIGN_OR_RETURN(b_.name, ExpectName("the block's name"));
    KGRAD_RETURN_IF_ERROR(Expect("("));
    if (!Is(")")) {
      do {
        KGRAD_RETURN_IF_ERROR(Param());
      } while (Accept(","));
    }
    KGRAD_RETURN_IF_ERROR(Expect(")"));
    b_.num_inputs = static_cast<int>(b_.tensors.size());
    KGRAD_RETURN_IF_ERROR(Expect("->"));
    KGRAD_RETURN_IF_ERROR(Expect("("));
    do {
      TensorDecl d;
      KGRAD_ASSIGN_OR_RETURN(d.name, ExpectName("an output name"));
      KGRAD_RETURN_IF_ERROR(CheckNewName(d.name));
      b_.tensors.push_back(std::move(d));
    } while (Accept(","));
    return Expect(")");
  }

  // ----- Statements -------------------------------------------------------------------------
  absl::StatusOr<Reducer> ParseReducer(bool* init) {
    Reducer r;
    if (Accept("=")) {
      *init = true;
      return Reducer::kAssign;
    }
    if (Accept("+=")) {
      r = Reducer::kSum;
    } else if (Accept("*=")) {
      r = Reducer::kProd;
    } else if (Peek().kind == Tok::kName && (Peek().text == "max" || Peek().text == "min") &&
               Peek(1).kind == Tok::kPunct && Peek(1).text == "=") {
      r = Next().text == "max" ? Reducer::kMax : Reducer::kMin;
      Next();
    } else {
      return Error(absl::StrCat("expected an assignment (=, +=!, *=!, max=!, min=!, +=, *=, max=, min=), got ",
                                Describe(Peek())));
    }
    *init = Accept("!");
    return r;
  }

  absl::Status ParseStatement(int number) {
    stmt_ = Statement();
    stmt_.number = number;
    stmt_begin_ = pos_;
    in_statement_ = true;
    KGRAD_ASSIGN_OR_RETURN(std::string lhs, ExpectName("an output name"));
    stmt_.lhs = b_.FindTensor(lhs);
    if (stmt_.lhs < 0) return Error(absl::StrCat("'", lhs, "' is not an output of the block"));
    if (b_.tensors[stmt_.lhs].input) {
      return Error(absl::StrCat("'", lhs, "' is an input; statements write outputs"));
    }
    if (Accept("(")) {
      if (!Is(")")) {
        do {
          KGRAD_ASSIGN_OR_RETURN(std::string idx, ExpectName("an index name"));
          if (b_.FindTensor(idx) >= 0 || FindSize(idx) >= 0) {
            return Error(absl::StrCat("'", idx, "' on the left side is not an index name"));
          }
          int id = IndexId(idx);
          for (int other : stmt_.lhs_indices) {
            if (other == id) return Error(absl::StrCat("index '", idx, "' appears twice on the left side"));
          }
          stmt_.lhs_indices.push_back(id);
        } while (Accept(","));
      }
      KGRAD_RETURN_IF_ERROR(Expect(")"));
    }
    KGRAD_ASSIGN_OR_RETURN(stmt_.reducer, ParseReducer(&stmt_.init));
    KGRAD_ASSIGN_OR_RETURN(Built root, ParseExpr(stmt_.rhs, 0));
    (void)root;
    if (Peek().kind == Tok::kNewline && Peek(1).kind == Tok::kName && Peek(1).text == "where") SkipNewlines();
    if (Peek().kind == Tok::kName && Peek().text == "where") {
      Next();
      do {
        SkipNewlines();
        KGRAD_RETURN_IF_ERROR(ParseCondition());
      } while (Accept(","));
    }
    if (!(Peek().kind == Tok::kNewline || Is(";") || Is("}"))) {
      return Error(absl::StrCat("unexpected ", Describe(Peek()), " after the statement"));
    }
    stmt_.text = StatementText();
    in_statement_ = false;
    b_.statements.push_back(std::move(stmt_));
    return absl::OkStatus();
  }

  absl::StatusOr<Bound> ParseBound() {
    Bound bound;
    bool negative = Accept("-");
    if (Peek().kind == Tok::kNumber) {
      KGRAD_ASSIGN_OR_RETURN(int64_t v, IntLiteral(Next().text));
      bound.offset = negative ? -v : v;
      return bound;
    }
    if (negative || Peek().kind != Tok::kName || FindSize(Peek().text) < 0) {
      return Error(absl::StrCat("a range bound is an integer or a size (optionally +/- an integer), got ",
                                Describe(Peek())));
    }
    bound.size = FindSize(Next().text);
    if (Is("+") || Is("-")) {
      bool minus = Next().text == "-";
      if (Peek().kind != Tok::kNumber) return Error("expected an integer after the size in a range bound");
      KGRAD_ASSIGN_OR_RETURN(int64_t v, IntLiteral(Next().text));
      bound.offset = minus ? -v : v;
    }
    return bound;
  }

  absl::Status ParseCondition() {
    ExprList scratch;
    index_context_ = true;
    absl::StatusOr<Built> e = ParseBinary(scratch, 5, 0);  // a sum: 'in' ends it
    index_context_ = false;
    KGRAD_RETURN_IF_ERROR(e.status());
    Condition c;
    KGRAD_ASSIGN_OR_RETURN(c.expr, ToAffine(scratch, scratch.root(), "a where condition"));
    if (Peek().kind != Tok::kName || Peek().text != "in") {
      return Error(absl::StrCat("expected 'in' in the where condition, got ", Describe(Peek())));
    }
    Next();
    KGRAD_ASSIGN_OR_RETURN(c.lo, ParseBound());
    KGRAD_RETURN_IF_ERROR(Expect(":"));
    KGRAD_ASSIGN_OR_RETURN(c.hi, ParseBound());
    stmt_.where.push_back(std::move(c));
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> IntLiteral(const std::string& text) {
    char* end = nullptr;
    long long v = std::strtoll(text.c_str(), &end, 10);
    if (end == nullptr || *end != '\0' || v > (int64_t{1} << 31)) {
      return Error(absl::StrCat("expected an integer below 2^31, got '", text, "'"));
    }
    return static_cast<int64_t>(v);
  }

  // ----- Expressions ------------------------------------------------------------------------
  // Precedence: 1 ternary, 2 ||, 3 &&, 4 comparisons, 5 + -, 6 * /, 7 unary.
  static int BinaryLevel(const Token& t, Op* op) {
    if (t.kind != Tok::kPunct) return 0;
    static const struct {
      const char* text;
      Op op;
      int level;
    } kTable[] = {{"||", Op::kOr, 2}, {"&&", Op::kAnd, 3}, {"<", Op::kLt, 4},  {"<=", Op::kLe, 4},
                  {">", Op::kGt, 4},  {">=", Op::kGe, 4},  {"==", Op::kEq, 4}, {"!=", Op::kNe, 4},
                  {"+", Op::kAdd, 5}, {"-", Op::kSub, 5},  {"*", Op::kMul, 6}, {"/", Op::kDiv, 6}};
    for (const auto& row : kTable) {
      if (t.text == row.text) {
        *op = row.op;
        return row.level;
      }
    }
    return 0;
  }

  absl::StatusOr<Built> Push(ExprList& list, Expr e, int depth) {
    if (depth > kMaxExprDepth) {
      return Error(absl::StrCat("expression nested deeper than ", kMaxExprDepth));
    }
    return Built{list.Add(std::move(e)), depth};
  }

  absl::StatusOr<Built> ParseExpr(ExprList& list, int nesting) {
    KGRAD_ASSIGN_OR_RETURN(Built cond, ParseBinary(list, 2, nesting));
    if (!Accept("?")) return cond;
    SkipNewlines();
    KGRAD_ASSIGN_OR_RETURN(Built a, ParseExpr(list, nesting + 1));
    SkipNewlines();
    KGRAD_RETURN_IF_ERROR(Expect(":"));
    SkipNewlines();
    KGRAD_ASSIGN_OR_RETURN(Built b, ParseExpr(list, nesting + 1));
    Expr e;
    e.op = Op::kSelect;
    e.a = cond.node;
    e.b = a.node;
    e.c = b.node;
    return Push(list, std::move(e), 1 + std::max({cond.depth, a.depth, b.depth}));
  }

  absl::StatusOr<Built> ParseBinary(ExprList& list, int min_level, int nesting) {
    if (nesting > kMaxExprDepth) return Error(absl::StrCat("expression nested deeper than ", kMaxExprDepth));
    KGRAD_ASSIGN_OR_RETURN(Built lhs, ParseUnary(list, nesting));
    while (true) {
      Op op;
      int level = BinaryLevel(Peek(), &op);
      if (level == 0 || level < min_level) return lhs;
      Next();
      SkipNewlines();
      KGRAD_ASSIGN_OR_RETURN(Built rhs, ParseBinary(list, level + 1, nesting + 1));
      Expr e;
      e.op = op;
      e.a = lhs.node;
      e.b = rhs.node;
      KGRAD_ASSIGN_OR_RETURN(lhs, Push(list, std::move(e), 1 + std::max(lhs.depth, rhs.depth)));
    }
  }

  absl::StatusOr<Built> ParseUnary(ExprList& list, int nesting) {
    if (nesting > kMaxExprDepth) return Error(absl::StrCat("expression nested deeper than ", kMaxExprDepth));
    if (Is("-") || Is("!")) {
      Op op = Next().text == "-" ? Op::kNeg : Op::kNot;
      KGRAD_ASSIGN_OR_RETURN(Built a, ParseUnary(list, nesting + 1));
      Expr e;
      e.op = op;
      e.a = a.node;
      return Push(list, std::move(e), a.depth + 1);
    }
    return ParsePrimary(list, nesting);
  }

  absl::StatusOr<Built> ParsePrimary(ExprList& list, int nesting) {
    const Token& t = Peek();
    if (t.kind == Tok::kNumber) {
      Next();
      Expr e;
      e.op = Op::kNumber;
      char* end = nullptr;
      e.number = std::strtod(t.text.c_str(), &end);
      if (end == nullptr || *end != '\0' || !std::isfinite(e.number)) {
        return Error(absl::StrCat("bad number '", t.text, "'"));
      }
      return Push(list, std::move(e), 1);
    }
    if (Accept("(")) {
      SkipNewlines();
      KGRAD_ASSIGN_OR_RETURN(Built inner, ParseExpr(list, nesting + 1));
      SkipNewlines();
      KGRAD_RETURN_IF_ERROR(Expect(")"));
      return inner;
    }
    if (t.kind != Tok::kName) return Error(absl::StrCat("expected a value, got ", Describe(t)));
    std::string name = Next().text;
    int tensor = b_.FindTensor(name);
    if (tensor >= 0 && !index_context_) return ParseRead(list, tensor, nesting);
    if (IsFunction(name) && tensor < 0 && !index_context_) return ParseCall(list, name, nesting);
    Expr e;
    if (int size = FindSize(name); size >= 0) {
      e.op = Op::kSize;
      e.id = size;
    } else if (tensor >= 0 || IsFunction(name)) {
      return Error(absl::StrCat("'", name, "' cannot appear in an index expression"));
    } else {
      e.op = Op::kIndex;
      e.id = IndexId(name);
    }
    return Push(list, std::move(e), 1);
  }

  absl::StatusOr<Built> ParseCall(ExprList& list, const std::string& name, int nesting) {
    KGRAD_RETURN_IF_ERROR(Expect("("));
    static const struct {
      const char* name;
      Op op;
    } kFns[] = {{"exp", Op::kExp},         {"log", Op::kLog}, {"tanh", Op::kTanh},  {"sqrt", Op::kSqrt},
                {"sigmoid", Op::kSigmoid}, {"abs", Op::kAbs}, {"fmax", Op::kMax2}, {"fmin", Op::kMin2}};
    Expr e;
    for (const auto& f : kFns) {
      if (name == f.name) e.op = f.op;
    }
    KGRAD_ASSIGN_OR_RETURN(Built a, ParseExpr(list, nesting + 1));
    e.a = a.node;
    int depth = a.depth;
    if (OpArity(e.op) == 2) {
      KGRAD_RETURN_IF_ERROR(Expect(","));
      KGRAD_ASSIGN_OR_RETURN(Built b, ParseExpr(list, nesting + 1));
      e.b = b.node;
      depth = std::max(depth, b.depth);
    }
    KGRAD_RETURN_IF_ERROR(Expect(")"));
    return Push(list, std::move(e), depth + 1);
  }

  absl::StatusOr<Built> ParseRead(ExprList& list, int tensor, int nesting) {
    Expr e;
    e.op = Op::kRead;
    e.tensor = tensor;
    const std::string& name = b_.tensors[tensor].name;
    if (Accept("(")) {
      if (!Is(")")) {
        do {
          ExprList scratch;
          index_context_ = true;
          absl::StatusOr<Built> arg = ParseExpr(scratch, nesting + 1);
          index_context_ = false;
          KGRAD_RETURN_IF_ERROR(arg.status());
          KGRAD_ASSIGN_OR_RETURN(Affine a, ToAffine(scratch, scratch.root(), absl::StrCat("the read of ", name)));
          e.args.push_back(std::move(a));
        } while (Accept(","));
      }
      KGRAD_RETURN_IF_ERROR(Expect(")"));
    }
    return Push(list, std::move(e), 1);
  }

  // Folds an index expression to Affine: integers, indices, sums, differences,
  // products with an integer, and one exact division of the whole by an integer.
  absl::StatusOr<Affine> ToAffine(const ExprList& list, int root, const std::string& where) {
    std::vector<Affine> value(list.nodes.size());
    std::vector<bool> divided(list.nodes.size(), false);
    auto nonaffine = [&](absl::string_view why) {
      return Error(absl::StrCat("non-affine index in ", where, ": ", why,
                                " (indices combine by +, -, integer * and one final / integer)"));
    };
    for (size_t k = 0; k < list.nodes.size(); ++k) {
      const Expr& e = list.nodes[k];
      Affine& v = value[k];
      auto constant = [&](int n) -> std::optional<int64_t> {
        if (value[n].terms.empty() && value[n].divisor == 1) return value[n].constant;
        return std::nullopt;
      };
      if ((e.a >= 0 && divided[e.a]) || (e.b >= 0 && divided[e.b])) {
        return nonaffine("a division must be the last operation");
      }
      switch (e.op) {
        case Op::kNumber:
          if (e.number != std::floor(e.number) || std::fabs(e.number) > 1e12) {
            return nonaffine("a non-integer constant");
          }
          v.constant = static_cast<int64_t>(e.number);
          break;
        case Op::kIndex:
          v.terms.push_back({e.id, 1});
          break;
        case Op::kSize:
          return nonaffine(absl::StrCat("size '", b_.sizes[e.id], "' (use an integer)"));
        case Op::kNeg:
          v = value[e.a];
          for (auto& t : v.terms) t.second = -t.second;
          v.constant = -v.constant;
          break;
        case Op::kAdd:
        case Op::kSub: {
          int64_t sign = e.op == Op::kAdd ? 1 : -1;
          v = value[e.a];
          for (auto [id, coef] : value[e.b].terms) AddTerm(v, id, sign * coef);
          v.constant += sign * value[e.b].constant;
          break;
        }
        case Op::kMul: {
          std::optional<int64_t> ca = constant(e.a), cb = constant(e.b);
          if (!ca && !cb) return nonaffine("a product of two indices");
          int64_t c = ca ? *ca : *cb;
          v = value[ca ? e.b : e.a];
          for (auto& t : v.terms) t.second *= c;
          v.constant *= c;
          std::vector<std::pair<int, int64_t>> kept;
          for (auto t : v.terms) {
            if (t.second != 0) kept.push_back(t);
          }
          v.terms = std::move(kept);
          break;
        }
        case Op::kDiv: {
          std::optional<int64_t> cb = constant(e.b);
          if (!cb || *cb <= 0) return nonaffine("a division by something other than a positive integer");
          v = value[e.a];
          v.divisor = *cb;
          divided[k] = true;
          break;
        }
        default:
          return nonaffine(absl::StrCat("'", OpName(e.op), "'"));
      }
      if (!WithinIndexLimits(v)) {
        return Error(absl::StrCat("index expression in ", where, " beyond ", kMaxIndexTerms,
                                  " terms or constants of magnitude ", kMaxIndexConstant));
      }
    }
    return value[root];
  }

  static void AddTerm(Affine& v, int id, int64_t coef) {
    for (size_t t = 0; t < v.terms.size(); ++t) {
      if (v.terms[t].first == id) {
        v.terms[t].second += coef;
        if (v.terms[t].second == 0) v.terms.erase(v.terms.begin() + t);
        return;
      }
    }
    if (coef == 0) return;
    v.terms.push_back({id, coef});
    std::sort(v.terms.begin(), v.terms.end());
  }

  absl::string_view src_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  Block b_;
  Statement stmt_;
  size_t stmt_begin_ = 0;
  bool in_statement_ = false;
  bool index_context_ = false;
};

}  // namespace

absl::StatusOr<Block> ParseBlock(absl::string_view def) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<Token> toks, Lex(def));
  return Parser(def, std::move(toks)).Run();
}

}  // namespace tc
}  // namespace kgrad
