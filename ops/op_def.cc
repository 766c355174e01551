#include "ops/op_def.h"

#include <utility>

namespace kgrad {
namespace ops {
namespace {

uint32_t InputBits(std::initializer_list<int> inputs) {
  uint32_t bits = 0;
  for (int i : inputs) bits |= uint32_t{1} << i;
  return bits;
}

}  // namespace

OpDef::OpDef(PrimId id, int min_inputs, int max_inputs, InferFn infer,
             std::vector<AttrSpec> attrs) {
  def_.id = id;
  def_.name = PrimIdName(id);
  def_.min_inputs = min_inputs;
  def_.max_inputs = max_inputs;
  def_.infer = infer;
  def_.attrs = std::move(attrs);
}

OpDef& OpDef::ZeroIfAny(std::initializer_list<int> inputs) {
  def_.zero_if_any |= InputBits(inputs);
  return *this;
}

OpDef& OpDef::ZeroIfAll(std::initializer_list<int> inputs) {
  def_.zero_if_all |= InputBits(inputs);
  return *this;
}

}  // namespace ops
}  // namespace kgrad
