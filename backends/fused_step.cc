#include "backends/fused_step.h"

#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace kgrad {
namespace {

absl::Status At(const absl::Status& s, const CNode* node, const Primitive* prim) {
  std::string what = prim != nullptr ? absl::StrCat(" (", prim->name(), ")") : "";
  return absl::Status(s.code(), absl::StrCat(node->Location(), what, ": ", s.message()));
}

// The output tensors of a run whose inputs are uniform: an input nothing else
// holds (its last use moved it here) lends its buffer to an output written at or
// after its last read, as a kernel updates in place; the others are new.
absl::StatusOr<std::vector<Tensor>> Outputs(const FusedProgram& p, absl::Span<const Value> args,
                                            const Tensor& first, Device* device) {
  std::vector<bool> lent(args.size(), false);
  std::vector<Tensor> out;
  for (int32_t v : p.outputs) {
    const int32_t at = v - p.num_inputs;
    int found = -1;
    for (size_t j = 0; j < args.size() && found < 0; ++j) {
      const Tensor& t = args[j].tensor();
      if (!lent[j] && p.last_read[j] <= at && t.IsUniquelyOwned() && t.shape() == first.shape() &&
          t.buffer()->allocator() == device->allocator()) {
        found = static_cast<int>(j);
      }
    }
    if (found >= 0) {
      lent[found] = true;
      out.push_back(args[found].tensor());
      continue;
    }
    absl::StatusOr<Tensor> t = Tensor::Create(first.dtype(), first.shape(), device->allocator());
    if (!t.ok()) return t.status();
    out.push_back(*std::move(t));
  }
  return out;
}

// Whether every value of the program has the run's shape when the inputs
// flagged in `full` do and the others are broadcast scalars: each instruction
// must read at least one value of the run's shape (an instruction of scalars
// only would be a scalar, and the evaluator writes every value at full size).
bool EveryValueIsFull(const FusedProgram& p, std::vector<bool> full) {
  for (const FusedInstr& in : p.instrs) {
    bool any = false;
    for (int32_t v : {in.a, in.b, in.c, in.d}) any |= v >= 0 && full[v];
    if (!any) return false;
    full.push_back(true);
  }
  return true;
}

}  // namespace

absl::StatusOr<FusedGroup> MakeFusedGroup(absl::Span<CNode* const> run, FusedRunProgram frp, Device* device) {
  FusedGroup group;
  group.program = std::move(frp.program);
  group.node_operands = std::move(frp.node_operands);
  group.node_outputs = std::move(frp.node_outputs);
  for (CNode* c : run) {
    const Primitive* prim = c->primitive();
    KernelFn kernel = device->kernel(prim->id());
    if (kernel == nullptr) {
      return absl::UnimplementedError(absl::StrCat(c->Location(), ": no ", device->name(),
                                                   " kernel for primitive '", prim->name(), "'"));
    }
    group.nodes.push_back(c);
    group.prims.push_back(prim);
    group.kernels.push_back(kernel);
  }
  return group;
}

absl::StatusOr<std::vector<Value>> RunFusedGroup(const FusedGroup& g, absl::Span<const Value> args,
                                                 Device* device) {
  absl::InlinedVector<const Tensor*, 8> tensors;
  // The run's shape: its first input of rank > 0 (else the first input); the
  // others have that shape or rank 0 (broadcast scalars, e.g. clip bounds).
  const Tensor* first = nullptr;
  bool uniform = !args.empty();
  for (const Value& v : args) {
    if (!v.is_tensor()) {
      uniform = false;
      break;
    }
    const Tensor& t = v.tensor();
    if (first == nullptr || (first->shape().empty() && !t.shape().empty())) first = &t;
    tensors.push_back(&t);
  }
  std::vector<bool> full(tensors.size(), false);
  for (size_t i = 0; uniform && i < tensors.size(); ++i) {
    const Tensor& t = *tensors[i];
    full[i] = t.shape() == first->shape();
    uniform = IsFloating(t.dtype()) && t.dtype() == first->dtype() && t.device() == device->type() &&
              (full[i] || t.shape().empty());
  }
  uniform = uniform && EveryValueIsFull(g.program, std::move(full));
  std::vector<Value> out;
  if (uniform) {
    absl::StatusOr<std::vector<Tensor>> ts = Outputs(g.program, args, *first, device);
    if (ts.ok()) {
      absl::Status s = device->fused_elementwise()(g.program, tensors, absl::MakeSpan(*ts), device);
      if (s.ok()) {
        for (Tensor& t : *ts) out.push_back(Value(std::move(t)));
        return out;
      }
      ts = s;
    }
    return At(ts.status(), g.nodes.front(), nullptr);
  }
  std::vector<Value> vals(args.begin(), args.end());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const std::array<int32_t, 2>& ops = g.node_operands[i];
    absl::InlinedVector<Value, 2> a{vals[ops[0]]};
    if (ops[1] >= 0) a.push_back(vals[ops[1]]);
    KernelContext ctx(*g.prims[i], absl::MakeSpan(a.data(), a.size()), device);
    absl::StatusOr<Value> v = g.kernels[i](ctx);
    if (!v.ok()) return At(v.status(), g.nodes[i], g.prims[i]);
    vals.push_back(*std::move(v));
  }
  for (int32_t id : g.node_outputs) out.push_back(vals[id]);
  return out;
}

}  // namespace kgrad
