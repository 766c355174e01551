#include "ad/residual_policy.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/status_macros.h"

namespace kgrad {
namespace {

constexpr absl::string_view kSaveOnly = "save_only_these_names";

absl::Status ItemError(absl::string_view item, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("residual policy item '", item, "': ", what,
                   " (items: FORM, OP=FORM, @NODE=FORM, save_only_these_names=A|B; forms: "
                   "save_inputs, save_outputs, recompute)"));
}

absl::StatusOr<ResidualForm> FormOf(absl::string_view item, absl::string_view name) {
  std::optional<ResidualForm> f = ParseResidualForm(name);
  if (!f.has_value()) return ItemError(item, absl::StrCat("unknown form '", name, "'"));
  return *f;
}

}  // namespace

absl::StatusOr<ResidualPolicy> ResidualPolicy::Parse(absl::string_view spec,
                                                     const PrimitiveRegistry& registry) {
  ResidualPolicy p;
  p.spec_ = std::string(spec);
  bool has_all = false;
  for (absl::string_view raw : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    const absl::string_view item = absl::StripAsciiWhitespace(raw);
    if (item.find('=') != absl::string_view::npos) {
      KGRAD_RETURN_IF_ERROR(p.ParseKeyed(item, registry));
      continue;
    }
    if (has_all) return ItemError(item, "a second default form");  // FORM
    KGRAD_ASSIGN_OR_RETURN(p.all_, FormOf(item, item));
    has_all = true;
  }
  if (has_all && p.save_only_) {
    return absl::InvalidArgumentError(
        "residual policy: a default form beside save_only_these_names, which sets every "
        "application it does not name to recompute");
  }
  return p;
}

absl::Status ResidualPolicy::ParseKeyed(absl::string_view item, const PrimitiveRegistry& registry) {
  const size_t eq = item.find('=');
  const absl::string_view key = absl::StripAsciiWhitespace(item.substr(0, eq));
  const absl::string_view value = absl::StripAsciiWhitespace(item.substr(eq + 1));
  if (key == kSaveOnly) {  // save_only_these_names=A|B
    if (save_only_) return ItemError(item, "save_only_these_names given twice");
    save_only_ = true;
    for (absl::string_view name : absl::StrSplit(value, '|')) {
      name = absl::StripAsciiWhitespace(name);
      if (name.empty()) return ItemError(item, "an empty node name");
      saved_names_.insert(std::string(name));
    }
    return absl::OkStatus();
  }
  KGRAD_ASSIGN_OR_RETURN(ResidualForm f, FormOf(item, value));
  if (!key.empty() && key[0] == '@') {  // @NODE=FORM
    const std::string node(key.substr(1));
    if (node.empty()) return ItemError(item, "an empty node name");
    if (!by_node_.emplace(node, f).second) return ItemError(item, "the node given twice");
    return absl::OkStatus();
  }
  const PrimitiveDef* def = registry.Find(key);  // OP=FORM
  if (def == nullptr) return ItemError(item, absl::StrCat("unknown primitive '", key, "'"));
  if (!by_op_.emplace(def->id, f).second) return ItemError(item, "the op given twice");
  return absl::OkStatus();
}

ResidualPolicy::Ask ResidualPolicy::For(const CNode& app, const Primitive& prim) const {
  if (auto it = by_node_.find(app.name()); it != by_node_.end()) return {it->second, true};
  if (save_only_ && saved_names_.contains(app.name())) return {ResidualForm::kSaveOutputs, false};
  if (auto it = by_op_.find(prim.id()); it != by_op_.end()) return {it->second, true};
  if (save_only_) return {ResidualForm::kRecompute, false};
  return {all_, false};
}

absl::flat_hash_set<std::string> ResidualPolicy::NodeNames() const {
  absl::flat_hash_set<std::string> names = saved_names_;
  for (const auto& [name, form] : by_node_) names.insert(name);
  return names;
}

}  // namespace kgrad
