// RunTcContraction (tc_contraction.h): the gathers, the GEMMs and the
// coefficient of a planned contraction.
#include "backends/cpu/tc_contraction.h"

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "backends/cpu/gemm.h"
#include "backends/cpu/parallel.h"
#include "core/dtype.h"
#include "core/status_macros.h"
#include "core/tensor.h"

namespace kgrad {
namespace cpu {

namespace {

using tc::Op;
using Operand = TcContractionPlan::Operand;

// Matrices with at least this many multiply-adds are cut into fixed output
// tiles over the threads; smaller ones run whole, spread over the threads by
// prefix (linalg_kernels.cc's matmul takes the same thresholds).
inline constexpr int64_t kBigGemm = int64_t{1} << 21;
// A thread gets at least this many multiply-adds of a batch of matrices.
inline constexpr int64_t kMinParallelGemm = int64_t{1} << 16;
// Elements of a gathered operand per block of the outermost prefix index.
inline constexpr int64_t kGatherBlock = int64_t{1} << 16;
// Groups of a split depth index's points (TcContractionPlan::split): fixed, so
// that the partial sums and their order depend on the shapes only.
inline constexpr int64_t kSplitGroups = 8;

// The points of `positions` in `d`.
int64_t Points(const std::vector<int>& positions, const tc::Domain& d) {
  int64_t n = 1;
  for (int q : positions) n *= d.hi[q] - d.lo[q];
  return n;
}

// Runs one plan in blocks of the outermost prefix index p0: each block gathers
// what depends on p0 (conv: a few images of im2col) and multiplies it while it
// is in cache. Blocks run in turn, each spread over the threads, or, when there
// are enough of them, several at once, each on one thread (its GEMMs are then
// the same calls: the bits do not depend on the choice).
template <typename T>
class ContractionRunner {
 public:
  ContractionRunner(const KernelContext& ctx, const TcStatement& s, const TcContractionPlan& plan,
                    absl::Span<const TcTensor<T>> tensors)
      : ctx_(ctx), s_(s), d_(*s.domain), plan_(plan), table_(tensors.begin(), tensors.end()) {}

  absl::Status Run() {
    // Step 1. The shape of the products and the blocks.
    gemm_.m = plan_.m;
    gemm_.n = plan_.n;
    gemm_.k = plan_.k;
    gemm_.ta = plan_.a.trans;
    gemm_.tb = plan_.b.trans;
    gemm_.lda = plan_.a.ld;
    gemm_.ldb = plan_.b.ld;
    gemm_.ldc = plan_.ldc;
    gemm_.accumulate = !plan_.temp_out && !s_.init;
    p0_ = plan_.split >= 0 ? plan_.split : plan_.prefix.empty() ? -1 : plan_.prefix[0];
    block_ = p0_ < 0 ? 1 : BlockSize();
    // Step 2. The operands in place, or gathered: whole now, or per block later.
    KGRAD_RETURN_IF_ERROR(Prepare(plan_.a, &a_));
    KGRAD_RETURN_IF_ERROR(Prepare(plan_.b, &b_));
    c_ = table_[s_.out].data;
    int temp = -1;
    if (plan_.temp_out) {
      KGRAD_ASSIGN_OR_RETURN(temp, AddTemporary(table_, ProductLayout()));
      c_ = table_[temp].data;
    }
    // Step 3. The blocks.
    const int64_t blocks = p0_ < 0 ? 1 : (Size(d_, p0_) + block_ - 1) / block_;
    if (plan_.split >= 0) {
      KGRAD_RETURN_IF_ERROR(RunGroups(blocks));
    } else if ((a_.per_block || b_.per_block) && MaxThreads() > 1 && blocks >= MaxThreads()) {
      std::vector<absl::Status> errors(blocks);
      ParallelForOneThreadEach(blocks, 1, [&](int64_t begin, int64_t end) {
        Worker w(*this);
        for (int64_t i = begin; i < end; ++i) errors[i] = w.Block(i);
      });
      for (const absl::Status& e : errors) KGRAD_RETURN_IF_ERROR(e);
    } else {
      Worker w(*this);
      for (int64_t i = 0; i < blocks; ++i) KGRAD_RETURN_IF_ERROR(w.Block(i));
    }
    // Step 4. The coefficient: scaling in place, or with the temporary's addition.
    const T coef = Coefficient();
    const bool scaled = !plan_.times.empty() || !plan_.over.empty() || plan_.negate;
    if (temp >= 0) {
      AddInto(temp, coef, scaled);
    } else if (scaled) {
      T* out = table_[s_.out].data;
      ParallelFor(table_[s_.out].num_elements, kParallelGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) out[i] *= coef;
      });
    }
    return absl::OkStatus();
  }

 private:
  // Where an operand's data is: the tensor (base applied) or a temporary
  // gathered whole, or (per_block) a temporary each worker gathers per block.
  struct Slot {
    const T* data = nullptr;
    bool per_block = false;
  };

  // One thread's blocks: its tensor table (the temporaries added), its block's
  // domain and its per-block temporaries.
  class Worker {
   public:
    explicit Worker(ContractionRunner& r) : r_(r), table_(r.table_), dom_(r.d_) {}

    // Block i; with `partial`, of a split index, summed into *partial (written
    // by its first product when `first`).
    absl::Status Block(int64_t i, T* partial = nullptr, bool first = false) {
      int64_t offset = 0;
      if (r_.p0_ >= 0) {
        offset = i * r_.block_;
        dom_.lo[r_.p0_] = r_.d_.lo[r_.p0_] + offset;
        dom_.hi[r_.p0_] = std::min(r_.d_.hi[r_.p0_], dom_.lo[r_.p0_] + r_.block_);
      }
      KGRAD_ASSIGN_OR_RETURN(const T* a, Data(r_.plan_.a, r_.a_, offset, &temp_a_));
      KGRAD_ASSIGN_OR_RETURN(const T* b, Data(r_.plan_.b, r_.b_, offset, &temp_b_));
      if (partial != nullptr) {
        r_.SplitGemms(a, b, partial, dom_, first);
      } else {
        r_.Gemms(a, b, r_.c_ + (r_.p0_ < 0 ? 0 : offset * r_.plan_.out_strides[r_.p0_]), dom_);
      }
      return absl::OkStatus();
    }

   private:
    absl::StatusOr<const T*> Data(const Operand& op, const Slot& slot, int64_t offset, int* temp) {
      if (!slot.per_block) return slot.data + (r_.p0_ < 0 ? 0 : offset * op.strides[r_.p0_]);
      if (*temp < 0) {
        KGRAD_ASSIGN_OR_RETURN(*temp, r_.AddTemporary(table_, Shape{r_.Elements(op, r_.block_)}));
      }
      r_.Gather(op, *temp, dom_, table_);
      return table_[*temp].data;
    }

    ContractionRunner& r_;
    std::vector<TcTensor<T>> table_;
    tc::Domain dom_;
    int temp_a_ = -1, temp_b_ = -1;
  };

  static int64_t Size(const tc::Domain& d, int q) { return d.hi[q] - d.lo[q]; }

  bool Names(const Operand& op, int q) const {
    return std::find(op.layout.begin(), op.layout.end(), q) != op.layout.end();
  }

  // A gathered operand's elements (its outermost dim times that dim's stride,
  // padding included), with `block` points of p0 when it names p0.
  int64_t Elements(const Operand& op, int64_t block) const {
    if (op.layout.empty()) return 1;
    const int q = op.layout[0];
    return op.strides[q] * (q == p0_ ? block : Size(d_, q));
  }

  // Points of p0 per block: a gathered operand's block within kGatherBlock
  // elements, and enough products per block to keep the threads busy.
  int64_t BlockSize() const {
    const int64_t all = Size(d_, p0_);
    int64_t block = all;
    for (const Operand* op : {&plan_.a, &plan_.b}) {
      if (!op->gathered || !Names(*op, p0_)) continue;
      block = std::min(block, std::max<int64_t>(1, kGatherBlock * block / Elements(*op, block)));
    }
    if (plan_.split >= 0) {  // at least kSplitGroups blocks, where there are points for them
      block = std::min(block, (all + kSplitGroups - 1) / kSplitGroups);
    } else {
      const int64_t work = std::max<int64_t>(
          1, gemm_.m * gemm_.n * std::max<int64_t>(gemm_.k, 1) * (Points(plan_.prefix, d_) / all));
      if (work < kBigGemm) block = std::max(block, kBigGemm * 8 / work);
    }
    block = std::min(block, all);
    const int64_t blocks = (all + block - 1) / block;
    return (all + blocks - 1) / blocks;  // as even as the count allows
  }

  absl::Status Prepare(const Operand& op, Slot* slot) {
    if (!op.gathered) {
      slot->data = table_[s_.rhs->nodes[op.node].tensor].data + op.base;
      return absl::OkStatus();
    }
    slot->per_block = p0_ >= 0 && block_ < Size(d_, p0_) && Names(op, p0_);
    if (slot->per_block) return absl::OkStatus();
    KGRAD_ASSIGN_OR_RETURN(int id,
                           AddTemporary(table_, Shape{Elements(op, p0_ < 0 ? 1 : Size(d_, p0_))}));
    Gather(op, id, d_, table_);
    slot->data = table_[id].data;
    return absl::OkStatus();
  }

  absl::StatusOr<int> AddTemporary(std::vector<TcTensor<T>>& table,
                                   const std::vector<int>& layout) {
    Shape dims;
    for (int q : layout) dims.push_back(Size(d_, q));
    return AddTemporary(table, dims);
  }
  absl::StatusOr<int> AddTemporary(std::vector<TcTensor<T>>& table, const Shape& dims) {
    KGRAD_ASSIGN_OR_RETURN(Tensor t, ctx_.Allocate(DTypeOf<T>::value, dims));
    table.push_back(TcTensor<T>{t.mutable_data<T>(), RowMajorStrides(dims), t.NumElements()});
    std::lock_guard<std::mutex> lock(mu_);
    temps_.push_back(std::move(t));
    return static_cast<int>(table.size()) - 1;
  }

  // prefix, rows, cols: the temporary product's dims.
  std::vector<int> ProductLayout() const {
    std::vector<int> v = plan_.prefix;
    v.insert(v.end(), plan_.rows.begin(), plan_.rows.end());
    v.insert(v.end(), plan_.cols.begin(), plan_.cols.end());
    return v;
  }

  // A domain of `positions` of `from` (the left side first), with `guards`.
  static tc::Domain SubDomain(const tc::Domain& from, const std::vector<int>& positions,
                              int num_lhs, const std::vector<int>& guards) {
    tc::Domain sub;
    sub.num_lhs = num_lhs;
    sub.position.assign(from.position.size(), -1);
    for (int q : positions) {
      sub.position[from.indices[q]] = static_cast<int>(sub.indices.size());
      sub.indices.push_back(from.indices[q]);
      sub.lo.push_back(from.lo[q]);
      sub.hi.push_back(from.hi[q]);
    }
    for (int g : guards) sub.guards.push_back(from.guards[g]);
    return sub;
  }

  // The operand over `dom` into temporary `id` of `table` by the interpreter:
  //   G(layout) = read (+=! over the summed indices) where its guards.
  void Gather(const Operand& op, int id, const tc::Domain& dom,
              const std::vector<TcTensor<T>>& table) const {
    std::vector<int> positions = op.layout;
    positions.insert(positions.end(), op.summed.begin(), op.summed.end());
    const tc::Domain sub = SubDomain(dom, positions, static_cast<int>(op.layout.size()), op.guards);
    tc::ExprList rhs;
    rhs.Add(s_.rhs->nodes[op.node]);
    TcStatement g;
    g.rhs = &rhs;
    g.domain = &sub;
    g.reducer = op.summed.empty() ? tc::Reducer::kAssign : tc::Reducer::kSum;
    g.out = id;
    g.covers_out = true;
    g.sizes = s_.sizes;
    g.out_strides.assign(sub.indices.size(), 0);
    for (size_t i = 0; i < op.layout.size(); ++i) {
      g.out_strides[i] = op.strides[op.layout[i]];
      g.out_offset -= g.out_strides[i] * sub.lo[i];
    }
    RunTcStatement<T>(g, table);
  }

  // The constant factors' product (their nodes evaluated in order).
  T Coefficient() const {
    const tc::ExprList& e = *s_.rhs;
    std::vector<T> v(e.nodes.size(), T{0});
    for (int i : plan_.constants) {
      const tc::Expr& x = e.nodes[i];
      switch (x.op) {
        case Op::kNumber: v[i] = static_cast<T>(x.number); break;
        case Op::kSize: v[i] = static_cast<T>(s_.sizes[x.id]); break;
        case Op::kRead: v[i] = table_[x.tensor].data[0]; break;
        default:
          v[i] = ApplyTcOp<T>(x.op, v[x.a], x.b >= 0 ? v[x.b] : T{0}, x.c >= 0 ? v[x.c] : T{0});
      }
    }
    T coef{1};
    for (int i : plan_.times) coef *= v[i];
    for (int i : plan_.over) coef /= v[i];
    return plan_.negate ? -coef : coef;
  }

  // c[prefix] (+)= a[prefix] * b[prefix] for every prefix point of `dom`, each
  // product by the same call however the threads are used (gemm.h).
  void Gemms(const T* a, const T* b, T* c, const tc::Domain& dom) const {
    const GemmShape& g = gemm_;
    const int64_t count = Points(plan_.prefix, dom);
    const int64_t work = g.m * g.n * std::max<int64_t>(g.k, 1);
    auto at = [&](int64_t item, auto&& fn) {
      int64_t oa = 0, ob = 0, oc = 0;
      for (int i = static_cast<int>(plan_.prefix.size()) - 1; i >= 0; --i) {
        const int q = plan_.prefix[i];
        const int64_t r = item % Size(dom, q);
        item /= Size(dom, q);
        oa += r * plan_.a.strides[q];
        ob += r * plan_.b.strides[q];
        oc += r * plan_.out_strides[q];
      }
      fn(a + oa, b + ob, c + oc);
    };
    if (work >= kBigGemm) {  // the fixed tiles of every product, over the threads
      const int64_t tm = (g.m + kGemmTileRows - 1) / kGemmTileRows;
      const int64_t tn = (g.n + kGemmTileCols - 1) / kGemmTileCols;
      ParallelForOneThreadEach(count * tm * tn, 2, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const int64_t i = t % (tm * tn) / tn, j = t % tn;
          at(t / (tm * tn), [&](const T* pa, const T* pb, T* pc) {
            GemmTile(pa, pb, pc, g, i * kGemmTileRows, std::min(g.m, (i + 1) * kGemmTileRows),
                     j * kGemmTileCols, std::min(g.n, (j + 1) * kGemmTileCols));
          });
        }
      });
      return;
    }
    ParallelForOneThreadEach(
        count, std::max<int64_t>(1, kMinParallelGemm / std::max<int64_t>(work, 1)),
        [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            at(i, [&](const T* pa, const T* pb, T* pc) { SerialGemm(pa, pb, pc, g); });
          }
        });
  }

  // The blocks of a split index in at most kSplitGroups groups of consecutive
  // blocks, each summed into its own partial product (the first into c_), the
  // groups in parallel when there are enough of them; then c_ += the others in
  // order.
  absl::Status RunGroups(int64_t blocks) {
    const int64_t groups = std::min(blocks, kSplitGroups), size = plan_.m * plan_.ldc;
    std::vector<T*> partial = {c_};
    for (int64_t g = 1; g < groups; ++g) {
      KGRAD_ASSIGN_OR_RETURN(const int id, AddTemporary(table_, Shape{size}));
      partial.push_back(table_[id].data);
    }
    std::vector<absl::Status> errors(groups);
    auto run = [&](Worker& w, int64_t g) {
      const int64_t first = g * blocks / groups, end = (g + 1) * blocks / groups;
      for (int64_t i = first; i < end && errors[g].ok(); ++i) {
        errors[g] = w.Block(i, partial[g], i == first);
      }
    };
    if (MaxThreads() > 1 && groups >= MaxThreads()) {
      ParallelForOneThreadEach(groups, 1, [&](int64_t begin, int64_t end) {
        Worker w(*this);
        for (int64_t g = begin; g < end; ++g) run(w, g);
      });
    } else {
      Worker w(*this);
      for (int64_t g = 0; g < groups; ++g) run(w, g);
    }
    for (const absl::Status& e : errors) KGRAD_RETURN_IF_ERROR(e);
    ParallelFor(size, kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t g = 1; g < groups; ++g) {
        const T* p = partial[g];
        for (int64_t j = begin; j < end; ++j) c_[j] += p[j];
      }
    });
    return absl::OkStatus();
  }

  // c (+)= the sum over the split index's points of `dom` of a * b at each, in
  // order, the first written when `first`; each product as Gemms would.
  void SplitGemms(const T* a, const T* b, T* c, const tc::Domain& dom, bool first) const {
    const int q = plan_.split;
    GemmShape g = gemm_;
    const int64_t work = g.m * g.n * std::max<int64_t>(g.k, 1);
    const int64_t tm = (g.m + kGemmTileRows - 1) / kGemmTileRows;
    const int64_t tn = (g.n + kGemmTileCols - 1) / kGemmTileCols;
    for (int64_t r = 0; r < Size(dom, q); ++r) {
      g.accumulate = !(first && r == 0);
      const T* pa = a + r * plan_.a.strides[q];
      const T* pb = b + r * plan_.b.strides[q];
      if (work < kBigGemm) {
        SerialGemm(pa, pb, c, g);
        continue;
      }
      ParallelForOneThreadEach(tm * tn, 2, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const int64_t i = t / tn, j = t % tn;
          GemmTile(pa, pb, c, g, i * kGemmTileRows, std::min(g.m, (i + 1) * kGemmTileRows),
                   j * kGemmTileCols, std::min(g.n, (j + 1) * kGemmTileCols));
        }
      });
    }
  }

  // out(lhs) (= or +=) coef * temp(prefix, rows, cols), by the interpreter.
  void AddInto(int temp, T coef, bool scaled) {
    std::vector<int> lhs;
    for (int q = 0; q < d_.num_lhs; ++q) lhs.push_back(q);
    const tc::Domain sub = SubDomain(d_, lhs, d_.num_lhs, {});
    tc::Expr read;
    read.op = Op::kRead;
    read.tensor = temp;
    for (int q : ProductLayout()) {
      tc::Affine a;
      a.terms.push_back({d_.indices[q], 1});
      read.args.push_back(std::move(a));
    }
    tc::ExprList rhs;
    const int r = rhs.Add(std::move(read));
    if (scaled) {
      tc::Expr k, mul;
      k.number = static_cast<double>(coef);
      mul.op = Op::kMul;
      mul.a = rhs.Add(k);
      mul.b = r;
      rhs.Add(mul);
    }
    TcStatement st;
    st.rhs = &rhs;
    st.domain = &sub;
    st.reducer = s_.init ? tc::Reducer::kAssign : tc::Reducer::kSum;
    st.init = s_.init;
    st.out = s_.out;
    st.out_strides.assign(s_.out_strides.begin(), s_.out_strides.begin() + d_.num_lhs);
    st.covers_out = s_.covers_out;
    st.sizes = s_.sizes;
    RunTcStatement<T>(st, table_);
  }

  const KernelContext& ctx_;
  const TcStatement& s_;
  const tc::Domain& d_;
  const TcContractionPlan& plan_;
  std::vector<TcTensor<T>> table_;  // the statement's tensors, then the shared temporaries
  std::mutex mu_;                   // guards temps_
  std::vector<Tensor> temps_;       // every temporary's buffer
  GemmShape gemm_;
  int p0_ = -1;
  int64_t block_ = 1;
  Slot a_, b_;
  T* c_ = nullptr;
};

}  // namespace

template <typename T>
absl::Status RunTcContraction(const KernelContext& ctx, const TcStatement& s,
                              const TcContractionPlan& plan,
                              absl::Span<const TcTensor<T>> tensors) {
  return ContractionRunner<T>(ctx, s, plan, tensors).Run();
}

template absl::Status RunTcContraction<float>(const KernelContext&, const TcStatement&,
                                              const TcContractionPlan&,
                                              absl::Span<const TcTensor<float>>);
template absl::Status RunTcContraction<double>(const KernelContext&, const TcStatement&,
                                               const TcContractionPlan&,
                                               absl::Span<const TcTensor<double>>);

}  // namespace cpu
}  // namespace kgrad
