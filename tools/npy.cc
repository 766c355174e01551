#include "tools/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/status_macros.h"

namespace kgrad {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMaxHeader = 1 << 16;

absl::Status Bad(absl::string_view source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
}

// The NumPy type descriptors kgrad reads and writes: the byte order ('<' little
// endian, '|' single bytes) and the type code.
struct NpyType {
  DType dtype;
  const char* descr;
};
constexpr NpyType kNpyTypes[] = {
    {DType::kFloat32, "<f4"}, {DType::kFloat64, "<f8"}, {DType::kInt32, "<i4"},   {DType::kInt64, "<i8"},
    {DType::kBool, "|b1"},    {DType::kUInt8, "|u1"},   {DType::kInt8, "|i1"},    {DType::kInt16, "<i2"},
    {DType::kUInt16, "<u2"},  {DType::kUInt32, "<u4"},  {DType::kUInt64, "<u8"},  {DType::kFloat16, "<f2"},
    // NumPy has no bfloat16: its 2-byte records (ml_dtypes views them as bfloat16).
    {DType::kBFloat16, "|V2"},
};

const char* Descr(DType t) {
  for (const NpyType& n : kNpyTypes) {
    if (n.dtype == t) return n.descr;
  }
  return "?";
}

absl::StatusOr<DType> ParseDescr(absl::string_view d, absl::string_view source) {
  if (d.size() == 3 && (d[0] == '<' || d[0] == '|' || d[0] == '=')) {
    for (const NpyType& n : kNpyTypes) {
      if (d.substr(1) == n.descr + 1) return n.dtype;  // any byte order but '>'
    }
  }
  if (!d.empty() && d[0] == '>') return Bad(source, absl::StrCat("big-endian data ('", d, "') is not supported"));
  return Bad(source, absl::StrCat("unsupported dtype '", d,
                                  "' (expected <f4, <f8, <i4, <i8, |b1, |u1, |i1, <i2, <u2, <u4, <u8, <f2 or |V2 for bfloat16)"));
}

// The value text following `'key':` in the header dict.
absl::StatusOr<absl::string_view> Field(absl::string_view header, absl::string_view key,
                                        absl::string_view source) {
  std::string quoted = absl::StrCat("'", key, "'");
  size_t at = header.find(quoted);
  if (at == absl::string_view::npos) return Bad(source, absl::StrCat("header has no '", key, "'"));
  absl::string_view rest = header.substr(at + quoted.size());
  rest = absl::StripLeadingAsciiWhitespace(rest);
  if (!absl::ConsumePrefix(&rest, ":")) return Bad(source, "malformed header");
  return absl::StripLeadingAsciiWhitespace(rest);
}

absl::StatusOr<Shape> ParseShape(absl::string_view v, absl::string_view source) {
  if (!absl::ConsumePrefix(&v, "(")) return Bad(source, "malformed shape");
  size_t close = v.find(')');
  if (close == absl::string_view::npos) return Bad(source, "malformed shape");
  Shape shape;
  for (absl::string_view part : absl::StrSplit(v.substr(0, close), ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) continue;
    int64_t d;
    if (!absl::SimpleAtoi(part, &d) || d < 0) {
      return Bad(source, absl::StrCat("bad dimension '", part, "' in shape"));
    }
    shape.push_back(d);
    if (shape.size() > static_cast<size_t>(kMaxRank)) {
      return Bad(source, absl::StrCat("rank exceeds ", kMaxRank));
    }
  }
  return shape;
}

}  // namespace

absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes, absl::string_view source) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != absl::string_view(kMagic, 6)) {
    return Bad(source, "not a .npy file (bad magic)");
  }
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return Bad(source, "truncated header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    offset = 12;
  } else {
    return Bad(source, absl::StrCat("unsupported .npy version ", major));
  }
  if (header_len > kMaxHeader || offset + header_len > bytes.size()) {
    return Bad(source, "truncated or oversized header");
  }
  absl::string_view header = bytes.substr(offset, header_len);
  KGRAD_ASSIGN_OR_RETURN(absl::string_view descr_v, Field(header, "descr", source));
  if (descr_v.size() < 5 || descr_v[0] != '\'') return Bad(source, "malformed descr");
  size_t q = descr_v.find('\'', 1);
  if (q == absl::string_view::npos) return Bad(source, "malformed descr");
  KGRAD_ASSIGN_OR_RETURN(DType dtype, ParseDescr(descr_v.substr(1, q - 1), source));
  KGRAD_ASSIGN_OR_RETURN(absl::string_view order, Field(header, "fortran_order", source));
  if (absl::StartsWith(order, "True")) return Bad(source, "Fortran-order arrays are not supported (save with C order)");
  if (!absl::StartsWith(order, "False")) return Bad(source, "malformed fortran_order");
  KGRAD_ASSIGN_OR_RETURN(absl::string_view shape_v, Field(header, "shape", source));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, ParseShape(shape_v, source));
  absl::StatusOr<int64_t> n = CheckedNumElements(shape);
  if (!n.ok()) return Bad(source, n.status().message());
  size_t data_bytes = static_cast<size_t>(*n) * DTypeSize(dtype);
  size_t avail = bytes.size() - offset - header_len;
  if (avail != data_bytes) {
    return Bad(source, absl::StrCat("data is ", avail, " bytes, ", DTypeName(dtype), ShapeToString(shape),
                                    " needs ", data_bytes));
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(dtype, shape));
  const char* src = bytes.data() + offset + header_len;
  if (dtype == DType::kBool) {
    bool* dst = t.mutable_data<bool>();
    for (int64_t i = 0; i < *n; ++i) dst[i] = src[i] != 0;
  } else if (data_bytes > 0) {
    std::memcpy(t.raw_data(), src, data_bytes);
  }
  return t;
}

std::string SerializeNpy(const Tensor& t) {
  // NumPy writes "(2, 3)", "(3,)" and "()".
  std::string shape = "(";
  for (int i = 0; i < t.rank(); ++i) {
    absl::StrAppend(&shape, t.dim(i));
    if (t.rank() == 1) shape += ",";
    else if (i + 1 < t.rank()) shape += ", ";
  }
  shape += ")";
  std::string dict = absl::StrCat("{'descr': '", Descr(t.dtype()),
                                  "', 'fortran_order': False, 'shape': ", shape, ", }");
  size_t total = 10 + dict.size() + 1;
  size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict += '\n';
  std::string out(kMagic, 6);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>((dict.size() >> 8) & 0xff);
  out += dict;
  out.append(static_cast<const char*>(t.raw_data()), t.nbytes());
  return out;
}

absl::StatusOr<Tensor> ReadNpyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  std::ostringstream buf;
  buf << in.rdbuf();
  return ParseNpy(buf.str(), path);
}

absl::Status WriteNpyFile(const Tensor& t, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot write"));
  std::string bytes = SerializeNpy(t);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace kgrad
