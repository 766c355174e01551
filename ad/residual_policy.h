// A per-call choice of residual forms (ops/residual_form.h) for the
// K-transform, after JAX's checkpoint policies. A spec is comma-separated items:
//
//   FORM                        every application whose rule has FORM
//   OP=FORM                     every application of primitive OP (sin=save_outputs)
//   @NODE=FORM                  the application named NODE in the graph
//   save_only_these_names=A|B   applications named A or B save_outputs, every
//                               other one recompute, where its rule has the form
//                               (JAX's checkpoint_policies.save_only_these_names)
//
// The most specific item wins: @NODE, then a save_only name, then OP, then
// FORM. An application asked by OP or @NODE for a form its rule lacks is an
// error naming the node (BpropContext::Form); FORM and save_only's defaults
// leave such rules at their default. Every other rule keeps its default.
#ifndef KGRAD_AD_RESIDUAL_POLICY_H_
#define KGRAD_AD_RESIDUAL_POLICY_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/node.h"
#include "core/primitive.h"
#include "ops/residual_form.h"

namespace kgrad {

class ResidualPolicy {
 public:
  // Errors name the item: an unknown form or primitive, an empty name, an item
  // given twice, FORM beside save_only_these_names (which sets the others).
  static absl::StatusOr<ResidualPolicy> Parse(absl::string_view spec,
                                              const PrimitiveRegistry& registry);

  bool empty() const { return spec_.empty(); }
  const std::string& spec() const { return spec_; }

  // What the policy asks of `app` (an application of `prim`); `named`: asked by
  // its op or its name, so that a form the rule lacks is an error.
  struct Ask {
    ResidualForm form = ResidualForm::kDefault;
    bool named = false;
  };
  Ask For(const CNode& app, const Primitive& prim) const;

  // The node names the policy gives (@NODE and save_only's), for the check that
  // each names an application the transform differentiated.
  absl::flat_hash_set<std::string> NodeNames() const;

 private:
  // An item with '=': save_only_these_names=..., @NODE=FORM or OP=FORM.
  absl::Status ParseKeyed(absl::string_view item, const PrimitiveRegistry& registry);

  std::string spec_;
  ResidualForm all_ = ResidualForm::kDefault;
  absl::flat_hash_map<PrimId, ResidualForm> by_op_;
  absl::flat_hash_map<std::string, ResidualForm> by_node_;
  bool save_only_ = false;
  absl::flat_hash_set<std::string> saved_names_;
};

}  // namespace kgrad

#endif  // KGRAD_AD_RESIDUAL_POLICY_H_
