#include "core/dim_symbol.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kgrad {
namespace {

// Layout of a symbol's 61 payload bits (the value minus kSymbolBase; 0 is
// kUnknownValue): bit 60 clear, ten 6-bit character codes from bit 54 down
// (exact names); or bit 60 set, four codes from bit 54 down, then a 36-bit hash.
constexpr int kChars = 10;
constexpr int kHashedChars = 4;
constexpr int kHashBits = 36;
constexpr int64_t kHashedFlag = int64_t{1} << 60;
constexpr int64_t kHashMask = (int64_t{1} << kHashBits) - 1;
constexpr char kAlphabet[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";  // codes 1..63

int CodeOf(char ch) {
  for (int i = 0; kAlphabet[i] != '\0'; ++i) {
    if (kAlphabet[i] == ch) return i + 1;
  }
  return 0;
}

int64_t PutCode(int64_t payload, int position, int code) {
  return payload | (static_cast<int64_t>(code) << (54 - 6 * position));
}

std::string Characters(int64_t payload, int count) {
  std::string s;
  for (int i = 0; i < count; ++i) {
    const int code = static_cast<int>((payload >> (54 - 6 * i)) & 63);
    if (code == 0) break;
    s += kAlphabet[code - 1];
  }
  return s;
}

bool IsExactName(absl::string_view name) {
  if (name.empty() || name.size() > kChars || absl::ascii_isdigit(name[0])) return false;
  for (char ch : name) {
    if (CodeOf(ch) == 0) return false;
  }
  return true;
}

uint64_t Fnv1a(absl::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char ch : s) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  return h;
}

// The 4-character prefix of a hashed name: its first characters from the alphabet.
int64_t HashedPrefix(absl::string_view name) {
  int64_t payload = 0;
  int n = 0;
  for (char ch : name) {
    const int code = CodeOf(ch);
    if (code != 0 && n < kHashedChars) payload = PutCode(payload, n++, code);
  }
  return payload;
}

}  // namespace

bool IsSymbolDim(int64_t d) { return d > kSymbolBase && d < kSymbolBase / 2; }

int64_t DimSymbol(absl::string_view name) {
  int64_t payload = 0;
  if (IsExactName(name)) {
    for (size_t i = 0; i < name.size(); ++i) payload = PutCode(payload, i, CodeOf(name[i]));
    return kSymbolBase + payload;
  }
  int64_t hash = static_cast<int64_t>(Fnv1a(name) & kHashMask);
  if (hash == 0) hash = 1;
  return kSymbolBase + (kHashedFlag | HashedPrefix(name) | hash);
}

std::string DimToString(int64_t d) {
  if (d >= 0) return absl::StrCat(d);
  if (!IsSymbolDim(d)) return d == kUnknownDim || d == kUnknownValue ? "?" : absl::StrCat(d);
  const int64_t payload = d - kSymbolBase;
  if ((payload & kHashedFlag) == 0) return Characters(payload, kChars);
  char hex[16];
  snprintf(hex, sizeof(hex), "%09llx", static_cast<unsigned long long>(payload & kHashMask));
  return absl::StrCat(Characters(payload, kHashedChars), "~", hex);
}

std::optional<int64_t> UnifyDims(int64_t a, int64_t b) {
  if (a == b || b == kUnknownDim) return a;
  if (a == kUnknownDim) return b;
  if (a >= 0 && b >= 0) return std::nullopt;
  return a >= 0 ? a : b >= 0 ? b : a;  // two symbols: equal at run time, keep one
}

std::string ValueElementToString(int64_t v) {
  return IsValueNumber(v) ? absl::StrCat(v) : DimToString(v);
}

std::string ValueToString(const int64_t* v, size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) absl::StrAppend(&s, i ? "," : "", ValueElementToString(v[i]));
  return s + "]";
}

absl::StatusOr<int64_t> ParseDim(absl::string_view text) {
  if (text == "?") return kUnknownDim;
  int64_t n = 0;
  const size_t tilde = text.find('~');
  if (tilde == absl::string_view::npos && !text.empty() && absl::ascii_isdigit(text[0])) {
    if (absl::SimpleAtoi(text, &n) && n >= 0) return n;
    return absl::InvalidArgumentError(
        absl::StrCat("bad dimension '", text, "' (a size, ? or a name)"));
  }
  if (tilde == absl::string_view::npos) {
    if (IsExactName(text)) return DimSymbol(text);
    return absl::InvalidArgumentError(absl::StrCat(
        "bad dimension name '", text, "' (letters, digits and _, at most ", kChars,
        " characters, not starting with a digit)"));
  }
  // The printed form of a hashed name: up to 4 characters, '~', 9 hex digits.
  absl::string_view prefix = text.substr(0, tilde);
  absl::string_view hex = text.substr(tilde + 1);
  uint64_t hash = 0;
  bool ok = prefix.size() <= kHashedChars && hex.size() == 9;
  for (char ch : prefix) ok = ok && CodeOf(ch) != 0;
  ok = ok && absl::SimpleHexAtoi(hex, &hash) && hash != 0;
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad dimension name '", text, "'"));
  return kSymbolBase + (kHashedFlag | HashedPrefix(prefix) | static_cast<int64_t>(hash));
}

}  // namespace kgrad
