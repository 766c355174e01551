#include "examples/programs.h"

#include <cmath>
#include <random>
#include <string>

#include "core/builder.h"

namespace kgrad {
namespace programs {
namespace {

Tensor Uniform(DType dtype, Shape shape, double scale, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-scale, scale);
  return FloatTensor(dtype, std::move(shape), [&](int64_t) { return u(rng); });
}

AnfNode* Weight(GraphBuilder& b, const std::string& name, DType dtype, Shape shape, double scale,
                std::mt19937_64& rng) {
  return b.Weight(name, Uniform(dtype, std::move(shape), scale, rng));
}

AnfNode* Loss(GraphBuilder& b, AnfNode* logits, AnfNode* labels) {
  return b.Op(PrimId::kReduceMean, {b.Op(PrimId::kSoftmaxCrossEntropy, {logits, labels})});
}

}  // namespace

FuncGraph* Mlp(Module* m, int64_t batch, const std::vector<int64_t>& sizes, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  GraphBuilder b(m, "mlp");
  AnfNode* h = b.Param("x", dtype, {batch, sizes.front()});
  AnfNode* labels = b.Param("labels", dtype, {batch, sizes.back()});
  for (size_t l = 0; l + 1 < sizes.size(); ++l) {
    double scale = 1.0 / std::sqrt(static_cast<double>(sizes[l]));
    AnfNode* w = Weight(b, "w" + std::to_string(l + 1), dtype, {sizes[l], sizes[l + 1]}, scale, rng);
    AnfNode* bias = Weight(b, "b" + std::to_string(l + 1), dtype, {sizes[l + 1]}, 0.1, rng);
    h = b.Op(PrimId::kAdd, {b.Op(PrimId::kMatMul, {h, w}), bias});
    if (l + 2 < sizes.size()) h = b.Op(PrimId::kTanh, {h});
  }
  return b.Return(Loss(b, h, labels)).value();
}

FuncGraph* ConvNet(Module* m, int64_t batch, int64_t hw, int64_t c1, int64_t c2, int64_t classes,
                   DType dtype, bool batch_norm, uint64_t seed) {
  std::mt19937_64 rng(seed);
  GraphBuilder b(m, "convnet");
  AnfNode* x = b.Param("x", dtype, {batch, 1, hw, hw});
  AnfNode* labels = b.Param("labels", dtype, {batch, classes});
  AttrMap same{{"padding", std::vector<int64_t>{1, 1}}};
  AttrMap pool{{"kernel", std::vector<int64_t>{2, 2}}};
  AnfNode* k1 = Weight(b, "conv1", dtype, {c1, 1, 3, 3}, 1.0 / 3, rng);
  AnfNode* h = b.Op(PrimId::kConv2d, {x, k1}, same);
  if (batch_norm) {
    AnfNode* gamma = b.Weight("bn_scale", Tensor::Full(dtype, {c1}, 1.0).value());
    AnfNode* beta = b.Weight("bn_bias", Tensor::Full(dtype, {c1}, 0.0).value());
    h = b.Op(PrimId::kBatchNorm, {h, gamma, beta});
  }
  h = b.Op(PrimId::kMaxPool2d, {b.Op(PrimId::kRelu, {h})}, pool);
  AnfNode* k2 = Weight(b, "conv2", dtype, {c2, c1, 3, 3}, 1.0 / std::sqrt(9.0 * c1), rng);
  h = b.Op(PrimId::kMaxPool2d, {b.Op(PrimId::kRelu, {b.Op(PrimId::kConv2d, {h, k2}, same)})}, pool);
  int64_t features = c2 * (hw / 4) * (hw / 4);
  h = b.Op(PrimId::kReshape, {h}, {{"shape", std::vector<int64_t>{batch, features}}});
  AnfNode* w = Weight(b, "dense", dtype, {features, classes}, 1.0 / std::sqrt(static_cast<double>(features)), rng);
  AnfNode* bias = Weight(b, "dense_bias", dtype, {classes}, 0.1, rng);
  AnfNode* logits = b.Op(PrimId::kAdd, {b.Op(PrimId::kMatMul, {h, w}), bias});
  return b.Return(Loss(b, logits, labels)).value();
}

FuncGraph* TanhRnn(Module* m, int64_t steps, int64_t batch, int64_t input, int64_t hidden, DType dtype,
                   uint64_t seed) {
  std::mt19937_64 rng(seed);
  GraphBuilder b(m, "rnn");
  AnfNode* xs = b.Param("xs", dtype, {steps, batch, input});
  AnfNode* h0 = b.Param("h0", dtype, {batch, hidden});
  AnfNode* wx = Weight(b, "wx", dtype, {input, hidden}, 1.0 / std::sqrt(static_cast<double>(input)), rng);
  AnfNode* wh = Weight(b, "wh", dtype, {hidden, hidden}, 1.0 / std::sqrt(static_cast<double>(hidden)), rng);
  AnfNode* bias = Weight(b, "b", dtype, {hidden}, 0.1, rng);
  std::vector<AnfNode*> out = b.While(
      {b.Int(0), h0},
      [&](GraphBuilder& c, absl::Span<AnfNode* const> s) { return c.Op(PrimId::kScalarLt, {s[0], c.Int(steps)}); },
      [&](GraphBuilder& c, absl::Span<AnfNode* const> s) {
        AnfNode* t = c.Op(PrimId::kScalarToTensor, {s[0]}, {{"dtype", DType::kInt64}});
        AnfNode* x = c.Op(PrimId::kGather, {xs, t});  // xs[t]: [batch, input]
        AnfNode* pre = c.Op(PrimId::kAdd, {c.Op(PrimId::kAdd, {c.Op(PrimId::kMatMul, {x, wx}),
                                                               c.Op(PrimId::kMatMul, {s[1], wh})}),
                                           bias});
        return std::vector<AnfNode*>{c.Op(PrimId::kScalarAdd, {s[0], c.Int(1)}), c.Op(PrimId::kTanh, {pre})};
      },
      "rnn_loop");
  return b.Return(b.Op(PrimId::kReduceSum, {out[1]})).value();
}

Tensor FloatTensor(DType dtype, Shape shape, const std::function<double(int64_t)>& f) {
  Tensor t = Tensor::Create(dtype, shape).value();
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    if (dtype == DType::kFloat32) {
      t.mutable_data<float>()[i] = static_cast<float>(f(i));
    } else {
      t.mutable_data<double>()[i] = f(i);
    }
  }
  return t;
}

FuncGraph* LayeredTanhMlp(Module* m, int layers, int64_t batch, int64_t width, DType dtype) {
  GraphBuilder lb(m, "layer");
  AnfNode* x = lb.Param("x", dtype, {batch, width});
  AnfNode* w = lb.Param("w", dtype, {width, width});
  AnfNode* bias = lb.Param("b", dtype, {width});
  FuncGraph* layer =
      lb.Return(lb.Op(PrimId::kTanh, {lb.Op(PrimId::kAdd, {lb.Op(PrimId::kMatMul, {x, w}), bias})})).value();
  GraphBuilder b(m, "mlp");
  AnfNode* h = b.Param("x", dtype, {batch, width});
  for (int i = 0; i < layers; ++i) {
    AnfNode* wi = b.Param("w" + std::to_string(i), dtype, {width, width});
    AnfNode* bi = b.Param("b" + std::to_string(i), dtype, {width});
    h = b.Call(layer, {h, wi, bi});
  }
  return b.Return(b.Op(PrimId::kReduceSum, {h})).value();
}

FuncGraph* HornerLoop(Module* m, int64_t k, DType dtype) {
  GraphBuilder b(m, "horner");
  AnfNode* x = b.Param("x", dtype, {k});
  AnfNode* n = b.Param("n", MakeAbstractScalar(DType::kInt64));
  AnfNode* one = b.Const(Value(Tensor::Full(dtype, {}, 1.0).value()));
  std::vector<AnfNode*> out = b.While(
      {b.Int(0), b.Op(PrimId::kZerosLike, {x})},
      [&](GraphBuilder& c, absl::Span<AnfNode* const> s) { return c.Op(PrimId::kScalarLt, {s[0], n}); },
      [&](GraphBuilder& c, absl::Span<AnfNode* const> s) {
        AnfNode* acc = c.Op(PrimId::kAdd, {c.Op(PrimId::kMul, {s[1], x}), one});
        return std::vector<AnfNode*>{c.Op(PrimId::kScalarAdd, {s[0], c.Int(1)}), acc};
      },
      "horner_loop");
  return b.Return(b.Op(PrimId::kReduceSum, {out[1]})).value();
}

FuncGraph* WrappingLoop(Module* m, bool partial) {
  GraphBuilder fb(m, "wrapped");
  FuncGraph* wrapped = fb.Return(fb.Param("a")).value();
  GraphBuilder b(m, partial ? "partial_chain" : "tuple_chain");
  AnfNode* n = b.Param("n", MakeAbstractScalar(DType::kInt64));
  std::vector<AnfNode*> out = b.While(
      {b.Int(0), b.Int(0)},
      [&](GraphBuilder& c, absl::Span<AnfNode* const> s) { return c.Op(PrimId::kScalarLt, {s[0], n}); },
      [&](GraphBuilder& c, absl::Span<AnfNode* const> s) {
        AnfNode* next = partial ? c.Op(PrimId::kPartial, {c.GraphRef(wrapped), s[1]}) : c.Tuple({s[1]});
        return std::vector<AnfNode*>{c.Op(PrimId::kScalarAdd, {s[0], c.Int(1)}), next};
      });
  return b.Return(out[0]).value();
}

std::vector<Value> RandomInputs(FuncGraph* g, uint64_t seed, double scale) {
  std::mt19937_64 rng(seed);
  std::vector<Value> out;
  for (Parameter* p : g->parameters()) {
    const AbstractTensor* t = AsTensor(p->declared());
    if (p->name() == "labels") {
      Tensor l = Tensor::Zeros(t->dtype(), t->shape()).value();
      int64_t classes = t->shape().back();
      for (int64_t r = 0; r < t->shape()[0]; ++r) {
        int64_t k = static_cast<int64_t>(rng() % classes);
        if (t->dtype() == DType::kFloat32) {
          l.mutable_data<float>()[r * classes + k] = 1.0f;
        } else {
          l.mutable_data<double>()[r * classes + k] = 1.0;
        }
      }
      out.push_back(Value(std::move(l)));
    } else {
      out.push_back(Value(Uniform(t->dtype(), t->shape(), scale, rng)));
    }
  }
  return out;
}


}  // namespace programs
}  // namespace kgrad
