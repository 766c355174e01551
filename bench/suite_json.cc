#include "bench/suite_json.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kgrad {
namespace bench {
namespace {

class Reader {
 public:
  Reader(absl::string_view text, absl::string_view source) : text_(text), source_(source) {}

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": at offset ", pos_, ": expected ", what, " (a flat JSON object)"));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ == text_.size();
  }
  char Peek() {
    SkipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }

  absl::StatusOr<std::string> String() {
    if (!Consume('"')) return Error("a string");
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c == '\\') {
        if (pos_ >= text_.size()) break;
        char e = text_[pos_++];
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'u': out += '?'; pos_ += 4; break;  // names here are ASCII
          default: out += e; break;
        }
      } else {
        out += c;
      }
    }
    if (pos_ >= text_.size()) return Error("a closing quote");
    ++pos_;
    return out;
  }

  absl::StatusOr<double> Number() {
    SkipSpace();
    std::string token;
    while (pos_ < text_.size() && std::string("+-.eE0123456789").find(text_[pos_]) != std::string::npos) {
      token += text_[pos_++];
    }
    char* end = nullptr;
    double v = std::strtod(token.c_str(), &end);
    if (token.empty() || end != token.c_str() + token.size()) return Error("a number");
    return v;
  }

  bool Literal(absl::string_view word) {
    SkipSpace();
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

 private:
  absl::string_view text_;
  absl::string_view source_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<FlatJson> ParseFlatJson(absl::string_view text, absl::string_view source) {
  Reader r(text, source);
  FlatJson out;
  if (!r.Consume('{')) return r.Error("'{'");
  if (r.Consume('}')) return out;
  do {
    absl::StatusOr<std::string> key = r.String();
    if (!key.ok()) return key.status();
    if (!r.Consume(':')) return r.Error("':'");
    char c = r.Peek();
    if (c == '"') {
      absl::StatusOr<std::string> s = r.String();
      if (!s.ok()) return s.status();
      out.strings[*key] = *s;
    } else if (r.Literal("null") || r.Literal("NaN")) {
      out.numbers[*key] = std::nan("");
    } else {
      absl::StatusOr<double> v = r.Number();
      if (!v.ok()) return v.status();
      out.numbers[*key] = *v;
    }
  } while (r.Consume(','));
  if (!r.Consume('}')) return r.Error("',' or '}'");
  if (!r.AtEnd()) return r.Error("the end after the object");
  return out;
}

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.6g", v);
}

}  // namespace bench
}  // namespace kgrad
