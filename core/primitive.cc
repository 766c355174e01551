#include "core/primitive.h"

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

namespace kgrad {
namespace {

constexpr const char* kPrimNames[] = {
#define KGRAD_PRIM(id, name) name,
#include "core/primitive_ids.inc"
#undef KGRAD_PRIM
};

// Ints convert to floats where a float attribute is expected (files written by
// other tools often say `1` for `1.0`).
std::optional<AttrValue> Coerce(const AttrValue& v, AttrType want) {
  AttrType have = AttrValueType(v);
  if (have == want) return v;
  if (want == AttrType::kFloat && have == AttrType::kInt) {
    return AttrValue(static_cast<double>(std::get<int64_t>(v)));
  }
  if (want == AttrType::kFloats && have == AttrType::kInts) {
    const auto& ints = std::get<std::vector<int64_t>>(v);
    return AttrValue(std::vector<double>(ints.begin(), ints.end()));
  }
  return std::nullopt;
}

}  // namespace

const char* PrimIdName(PrimId id) {
  int i = static_cast<int>(id);
  return i >= 0 && i < kNumPrimIds ? kPrimNames[i] : "?";
}

const char* AttrTypeName(AttrType t) {
  switch (t) {
    case AttrType::kInt: return "int";
    case AttrType::kFloat: return "float";
    case AttrType::kBool: return "bool";
    case AttrType::kString: return "string";
    case AttrType::kInts: return "ints";
    case AttrType::kFloats: return "floats";
    case AttrType::kDType: return "dtype";
  }
  return "?";
}

AttrType AttrValueType(const AttrValue& v) {
  return static_cast<AttrType>(v.index());
}

std::string AttrValueToString(const AttrValue& v) {
  switch (AttrValueType(v)) {
    case AttrType::kInt: return absl::StrCat(std::get<int64_t>(v));
    case AttrType::kFloat: return Scalar::Float(std::get<double>(v)).ToString();
    case AttrType::kBool: return std::get<bool>(v) ? "true" : "false";
    case AttrType::kString: return absl::StrCat("\"", std::get<std::string>(v), "\"");
    case AttrType::kInts:
      return absl::StrCat("[", absl::StrJoin(std::get<std::vector<int64_t>>(v), ","), "]");
    case AttrType::kFloats: {
      std::vector<std::string> parts;
      for (double d : std::get<std::vector<double>>(v)) {
        parts.push_back(Scalar::Float(d).ToString());
      }
      return absl::StrCat("[", absl::StrJoin(parts, ","), "]");
    }
    case AttrType::kDType: return DTypeName(std::get<DType>(v));
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<const PrimitiveRegistry>> PrimitiveRegistry::Create(
    std::vector<PrimitiveDef> defs) {
  std::unique_ptr<PrimitiveRegistry> r(new PrimitiveRegistry());
  r->defs_ = std::move(defs);
  r->by_id_.assign(kNumPrimIds, nullptr);
  for (const PrimitiveDef& d : r->defs_) {
    int i = static_cast<int>(d.id);
    if (i < 0 || i >= kNumPrimIds) {
      return absl::InternalError(absl::StrCat("primitive '", d.name, "' has a bad id"));
    }
    if (r->by_id_[i] != nullptr) {
      return absl::InternalError(absl::StrCat("primitive '", d.name, "' registered twice"));
    }
    if (d.name != kPrimNames[i]) {
      return absl::InternalError(absl::StrCat("primitive id ", i, " is named '",
                                              kPrimNames[i], "', not '", d.name, "'"));
    }
    r->by_id_[i] = &d;
    r->by_name_[d.name] = &d;
  }
  return std::unique_ptr<const PrimitiveRegistry>(std::move(r));
}

const PrimitiveDef* PrimitiveRegistry::Find(absl::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::string PrimitiveRegistry::KnownNames() const {
  std::vector<std::string> names;
  for (const PrimitiveDef& d : defs_) names.push_back(d.name);
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<PrimitivePtr> PrimitiveRegistry::Make(PrimId id, AttrMap attrs) const {
  const PrimitiveDef* def = Find(id);
  if (def == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("primitive '", PrimIdName(id), "' is not registered"));
  }
  AttrMap full;
  for (const AttrSpec& spec : def->attrs) {
    auto it = attrs.find(spec.name);
    if (it == attrs.end()) {
      if (!spec.default_value.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "primitive '", def->name, "' needs attribute '", spec.name, "' (",
            AttrTypeName(spec.type), ")"));
      }
      full.emplace(spec.name, *spec.default_value);
      continue;
    }
    std::optional<AttrValue> v = Coerce(it->second, spec.type);
    if (!v.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "attribute '", spec.name, "' of primitive '", def->name, "' must be ",
          AttrTypeName(spec.type), ", got ", AttrTypeName(AttrValueType(it->second)),
          " ", AttrValueToString(it->second)));
    }
    full.emplace(spec.name, std::move(*v));
    attrs.erase(it);
  }
  if (!attrs.empty()) {
    std::vector<std::string> known;
    for (const AttrSpec& spec : def->attrs) known.push_back(spec.name);
    return absl::InvalidArgumentError(absl::StrCat(
        "primitive '", def->name, "' has no attribute '", attrs.begin()->first,
        "' (known: ", known.empty() ? "none" : absl::StrJoin(known, ", "), ")"));
  }
  return std::make_shared<const Primitive>(def, std::move(full));
}

absl::StatusOr<PrimitivePtr> PrimitiveRegistry::Make(absl::string_view name,
                                                     AttrMap attrs) const {
  const PrimitiveDef* def = Find(name);
  if (def == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown primitive '", name,
                                            "'; known primitives: ", KnownNames()));
  }
  return Make(def->id, std::move(attrs));
}

int64_t Primitive::GetInt(const std::string& n) const { return std::get<int64_t>(attrs_.at(n)); }
double Primitive::GetFloat(const std::string& n) const { return std::get<double>(attrs_.at(n)); }
bool Primitive::GetBool(const std::string& n) const { return std::get<bool>(attrs_.at(n)); }
const std::string& Primitive::GetString(const std::string& n) const {
  return std::get<std::string>(attrs_.at(n));
}
const std::vector<int64_t>& Primitive::GetInts(const std::string& n) const {
  return std::get<std::vector<int64_t>>(attrs_.at(n));
}
const std::vector<double>& Primitive::GetFloats(const std::string& n) const {
  return std::get<std::vector<double>>(attrs_.at(n));
}
DType Primitive::GetDType(const std::string& n) const { return std::get<DType>(attrs_.at(n)); }

std::string Primitive::ToString() const {
  if (attrs_.empty()) return name();
  std::vector<std::string> parts;
  for (const auto& [k, v] : attrs_) parts.push_back(absl::StrCat(k, "=", AttrValueToString(v)));
  return absl::StrCat(name(), "{", absl::StrJoin(parts, ", "), "}");
}

size_t AttrMapHash(const AttrMap& attrs) {
  size_t h = attrs.size();
  for (const auto& [name, v] : attrs) {
    h = absl::HashOf(h, name, v.index());
    switch (AttrValueType(v)) {
      case AttrType::kInt: h = absl::HashOf(h, std::get<int64_t>(v)); break;
      case AttrType::kFloat: h = absl::HashOf(h, std::get<double>(v)); break;
      case AttrType::kBool: h = absl::HashOf(h, std::get<bool>(v)); break;
      case AttrType::kString: h = absl::HashOf(h, std::get<std::string>(v)); break;
      case AttrType::kInts: h = absl::HashOf(h, std::get<std::vector<int64_t>>(v)); break;
      case AttrType::kFloats: h = absl::HashOf(h, std::get<std::vector<double>>(v)); break;
      case AttrType::kDType: h = absl::HashOf(h, static_cast<int>(std::get<DType>(v))); break;
    }
  }
  return h;
}

absl::Status CheckArity(const PrimitiveDef& def, size_t num_inputs) {
  int n = static_cast<int>(num_inputs);
  if (n >= def.min_inputs && (def.max_inputs < 0 || n <= def.max_inputs)) return absl::OkStatus();
  std::string want = def.max_inputs < 0 ? absl::StrCat("at least ", def.min_inputs)
                     : def.min_inputs == def.max_inputs
                         ? absl::StrCat(def.min_inputs)
                         : absl::StrCat(def.min_inputs, " to ", def.max_inputs);
  return absl::InvalidArgumentError(absl::StrCat(def.name, " takes ", want, " inputs, got ", n));
}

bool PrimitivesEqual(const Primitive& a, const Primitive& b) {
  return &a.def() == &b.def() && a.attrs() == b.attrs();
}

}  // namespace kgrad
