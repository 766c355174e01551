// The row loops of the tc interpreter (tc_interpreter.cc): a chunk's lanes and
// node values (Lanes, Operand), and the loops that read, select, store and
// combine rows of lanes, vectorised where the strides allow. Kept apart from
// the evaluator and the statement runner, which decide what they run on.
#ifndef KGRAD_BACKENDS_CPU_TC_ROWS_H_
#define KGRAD_BACKENDS_CPU_TC_ROWS_H_

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ops/tc_block.h"

namespace kgrad {
namespace cpu {
namespace tc_rows {

using tc::Op;

#if defined(__AVX2__)
// The even (odd = false) or odd elements of a[0..8) b[0..8), the 16 floats
// from a pair of packets, in order: one in-lane shuffle, then the 64-bit
// quarters 0 2 1 3.
template <bool odd>
inline __m256 EveryOther8(__m256 a, __m256 b) {
  constexpr int kSel = odd ? _MM_SHUFFLE(3, 1, 3, 1) : _MM_SHUFFLE(2, 0, 2, 0);
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, kSel)),
                                                _MM_SHUFFLE(3, 1, 2, 0)));
}
#endif

// dst[j] = src[2 * j] for j < n: for f32 with AVX2 in blocks of 8 and 4, each
// from the contiguous elements up to its last (no read past src[2 * (n - 1)]).
template <typename T>
void EveryOther(const T* src, T* dst, int64_t n) {
  int64_t j = 0;
#if defined(__AVX2__)
  if constexpr (std::is_same_v<T, float>) {
    for (; j + 8 < n; j += 8) {
      const float* p = src + 2 * j;
      _mm256_storeu_ps(dst + j, EveryOther8<false>(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)));
    }
    for (; j + 4 < n; j += 4) {
      const float* p = src + 2 * j;
      _mm_storeu_ps(dst + j,
                    _mm_shuffle_ps(_mm_loadu_ps(p), _mm_loadu_ps(p + 4), _MM_SHUFFLE(2, 0, 2, 0)));
    }
  }
#endif
  for (; j < n; ++j) dst[j] = src[2 * j];
}

// cmp(q, p) for cmp = op(p, q): the same truth, NaN included (always false).
inline tc::Op MirroredComparison(tc::Op op) {
  switch (op) {
    case Op::kLt: return Op::kGt;
    case Op::kLe: return Op::kGe;
    case Op::kGt: return Op::kLt;
    case Op::kGe: return Op::kLe;
    default: return op;  // == and != are symmetric
  }
}

// A reducer's step combine(acc, v) as a functor that names its reducer
// (tc_interpreter.cc's VisitReducer), so that packet loops can combine in
// registers (CombinePacket) what scalar loops combine by calling it. max and
// min propagate NaN (as torch.amax): once a NaN is combined the result stays NaN.
template <tc::Reducer R>
struct ReducerStep {
  static constexpr tc::Reducer kReducer = R;
  template <typename T>
  T operator()(T a, T v) const {
    // `|`, not `||`: no branch in the scalar loops' tails, whose data decide it.
    if constexpr (R == tc::Reducer::kSum) return a + v;
    if constexpr (R == tc::Reducer::kProd) return a * v;
    if constexpr (R == tc::Reducer::kMax) return ((v > a) | (v != v)) ? v : a;
    if constexpr (R == tc::Reducer::kMin) return ((v < a) | (v != v)) ? v : a;
    return v;  // kAssign
  }
};

// Whether C is a ReducerStep (names its reducer).
template <typename C, typename = void>
struct NamesReducer : std::false_type {};
template <typename C>
struct NamesReducer<C, std::void_t<decltype(C::kReducer)>> : std::true_type {};

#if defined(__AVX2__)
// ReducerStep<R> on packets, lane by lane, with the scalar step's results.
template <tc::Reducer R>
inline __m256 CombinePacket(__m256 acc, __m256 v) {
  if constexpr (R == tc::Reducer::kSum) return _mm256_add_ps(acc, v);
  if constexpr (R == tc::Reducer::kProd) return _mm256_mul_ps(acc, v);
  if constexpr (R == tc::Reducer::kMax || R == tc::Reducer::kMin) {
    // max_ps(v, acc) is v > acc ? v : acc (acc when either is NaN), so only a
    // NaN v needs the blend; the chain through acc is two short ops (a packet
    // loop's reductions are latency-bound on it).
    const __m256 better = R == tc::Reducer::kMax ? _mm256_max_ps(v, acc) : _mm256_min_ps(v, acc);
    return _mm256_blendv_ps(better, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  return v;  // kAssign
}
#endif

// o[j] = sink(o[j], op(a[j], b's) ? x's : y) for j < n (b and x a row, or one
// value when nullptr: bu, xu), the select as a comparison node and then a
// select node compute it; sink stores it, or combines it into an accumulator.
template <typename T, typename S>
void CmpSelectRow(Op op, const T* a, const T* b, T bu, const T* x, T xu, T y, T* o, int64_t n,
                  S sink) {
  auto run = [&](auto cmp) {
    if (b != nullptr && x != nullptr) {
      for (int64_t j = 0; j < n; ++j) o[j] = sink(o[j], cmp(a[j], b[j]) ? x[j] : y);
    } else if (b != nullptr) {
      for (int64_t j = 0; j < n; ++j) o[j] = sink(o[j], cmp(a[j], b[j]) ? xu : y);
    } else if (x != nullptr) {
      for (int64_t j = 0; j < n; ++j) o[j] = sink(o[j], cmp(a[j], bu) ? x[j] : y);
    } else {
      for (int64_t j = 0; j < n; ++j) o[j] = sink(o[j], cmp(a[j], bu) ? xu : y);
    }
  };
  switch (op) {
    case Op::kLt: return run([](T p, T q) { return p < q; });
    case Op::kLe: return run([](T p, T q) { return p <= q; });
    case Op::kGt: return run([](T p, T q) { return p > q; });
    case Op::kGe: return run([](T p, T q) { return p >= q; });
    case Op::kEq: return run([](T p, T q) { return p == q; });
    default: return run([](T p, T q) { return p != q; });
  }
}

// The lanes of a chunk that pass the guards: first + step * j for j < count of
// the vector index, in each of `rows` rows, the values row_first + row_step * r
// of the row index (offsets from the chunk's first). A node's lane
// r * width() + x is row r's lane x.
struct Lanes {
  int64_t first = 0, step = 1, count = 0;
  int64_t row_first = 0, row_step = 1, rows = 1;
  int64_t pair = 1;  // lanes of a row per lane of the vector index (tc_program.h)
  int64_t width() const { return count * pair; }  // the lanes of a row
};

// A node's value over a chunk: row r's lanes at p + r * rs (p nullptr: the
// scalar `u` for all).
template <typename T>
struct Operand {
  const T* p = nullptr;
  T u{};
  int64_t rs = 0;
};

// Row r of `v`.
template <typename T>
Operand<T> RowOf(const Operand<T>& v, int64_t r) {
  return v.p != nullptr ? Operand<T>{v.p + r * v.rs, T{}} : v;
}

// Row r of o (r < rows, n lanes each) = sink(o's, cmp(a, b) ? x : y) of the
// operands' row r.
template <typename T, typename S>
void RunCmpSelect(Op op, const Operand<T>& a, const Operand<T>& b, const Operand<T>& x, T y,
                  T* o, int64_t n, int64_t rows, S sink) {
  for (int64_t r = 0; r < rows; ++r) {
    CmpSelectRow(op, a.p + r * a.rs, b.p != nullptr ? b.p + r * b.rs : nullptr, b.u,
                 x.p != nullptr ? x.p + r * x.rs : nullptr, x.u, y, o + r * n, n, sink);
  }
}

// out[2 * j] = v[j] for j < n, never touching the odd elements (another
// thread's, where the items of a lattice substitution interleave): for f32 with
// AVX2 by masked stores of 4 values each.
template <typename T>
void StoreEveryOther(T* out, const T* v, int64_t n) {
  int64_t j = 0;
#if defined(__AVX2__)
  if constexpr (std::is_same_v<T, float>) {
    const __m256i lo = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    const __m256i hi = _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7);
    const __m256i even = _mm256_setr_epi32(-1, 0, -1, 0, -1, 0, -1, 0);
    for (; j + 8 <= n; j += 8) {
      const __m256 x = _mm256_loadu_ps(v + j);
      _mm256_maskstore_ps(out + 2 * j, even, _mm256_permutevar8x32_ps(x, lo));
      _mm256_maskstore_ps(out + 2 * j + 8, even, _mm256_permutevar8x32_ps(x, hi));
    }
  }
#endif
  for (; j < n; ++j) out[2 * j] = v[j];
}

struct Assign;

// out[j * step] = f(out[j * step], v[j]) for j < n.
template <typename T, typename F>
void Store(T* out, int64_t step, int64_t n, const Operand<T>& v, F f) {
  if constexpr (std::is_same_v<F, Assign>) {
    if (v.p != nullptr && step == 2) return StoreEveryOther(out, v.p, n);
  }
  if (v.p != nullptr) {
    if (step == 1) {
      for (int64_t j = 0; j < n; ++j) out[j] = f(out[j], v.p[j]);
    } else if (step == 2) {  // the lanes of a divisibility guard: a loop that vectorises
      for (int64_t j = 0; j < n; ++j) out[2 * j] = f(out[2 * j], v.p[j]);
    } else {
      for (int64_t j = 0; j < n; ++j) out[j * step] = f(out[j * step], v.p[j]);
    }
  } else {
    const T u = v.u;
    for (int64_t j = 0; j < n; ++j) out[j * step] = f(out[j * step], u);
  }
}

#if defined(__AVX512F__)
// The lanes [lo, hi) of a 16-lane packet, clipped to it.
inline __mmask16 LaneMask(int64_t lo, int64_t hi) {
  lo = std::max<int64_t>(lo, 0);
  hi = std::min<int64_t>(hi, 16);
  if (lo >= hi) return 0;
  return static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
}
#endif

// row[j] = src[j - first] for j in [first, first + count), `identity`
// elsewhere in [0, n): a guarded row of an assignment (im2col's rows, zeros at
// the borders). For f32 with AVX-512 each 16 lanes are one masked load (the
// border lanes masked off, so never read) and one masked store: the rows are
// short (a conv's 14) and three loops were mostly scalar tails.
template <typename T>
void StoreBordered(T* row, int64_t n, int64_t first, int64_t count, const T* src, T identity) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    const __m512 id = _mm512_set1_ps(identity);
    const int64_t end = first + count;
    // Lane j's element as an address: src - first lies before src when first > 0.
    const uintptr_t base = reinterpret_cast<uintptr_t>(src) - first * sizeof(float);
    for (int64_t b = 0; b < n; b += 16) {
      const float* at = reinterpret_cast<const float*>(base + b * sizeof(float));
      const __m512 v = _mm512_mask_loadu_ps(id, LaneMask(first - b, end - b), at);
      _mm512_mask_storeu_ps(row + b, LaneMask(0, n - b), v);
    }
    return;
  }
#endif
  std::fill(row, row + first, identity);
  std::copy(src, src + count, row + first);
  std::fill(row + first + count, row + n, identity);
}

// out[j * s + k] = v[k][j] for j < n, k < s: the rows of s items that step the
// output by s, stored as one run. For f32 pairs with AVX2, 8 (or 4) of each at
// a time, the last block overlapping the one before (each element is written
// its own value, so twice is the same) rather than a scalar tail.
template <typename T>
void StoreInterleaved(T* out, const T* const* v, int64_t s, int64_t n) {
#if defined(__AVX2__)
  if constexpr (std::is_same_v<T, float>) {
    if (s == 2 && n >= 8) {  // 8 pairs a block: two in-lane unpacks, two lane swaps
      for (int64_t j = 0;; j += 8) {
        const int64_t at = std::min(j, n - 8);
        const __m256 a = _mm256_loadu_ps(v[0] + at), b = _mm256_loadu_ps(v[1] + at);
        const __m256 l = _mm256_unpacklo_ps(a, b), h = _mm256_unpackhi_ps(a, b);
        _mm256_storeu_ps(out + 2 * at, _mm256_permute2f128_ps(l, h, 0x20));
        _mm256_storeu_ps(out + 2 * at + 8, _mm256_permute2f128_ps(l, h, 0x31));
        if (at == n - 8) return;
      }
    }
    if (s == 2 && n >= 4) {
      for (int64_t j = 0;; j += 4) {
        const int64_t at = std::min(j, n - 4);
        const __m128 a = _mm_loadu_ps(v[0] + at), b = _mm_loadu_ps(v[1] + at);
        _mm_storeu_ps(out + 2 * at, _mm_unpacklo_ps(a, b));
        _mm_storeu_ps(out + 2 * at + 4, _mm_unpackhi_ps(a, b));
        if (at == n - 4) return;
      }
    }
  }
#endif
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t k = 0; k < s; ++k) out[j * s + k] = v[k][j];
  }
}

// One item's root select, cmp(a[j], b) ? x[j] : y (x one value xu when null).
template <typename T>
struct RowSelect {
  const T* a;
  T b;
  const T* x;
  T xu, y;
};

#if defined(__AVX2__)
// StoreSelectPairs' f32 blocks: 8 pairs a block, the last overlapping the one
// before (each element written its own value, twice the same).
template <int kPred, tc::Reducer R>
void StoreSelectPairBlocks(const RowSelect<float>& s0, const RowSelect<float>& s1, float identity,
                           float* out, int64_t n) {
  const __m256 id = _mm256_set1_ps(identity);
  auto value = [&](const RowSelect<float>& s, int64_t j) {
    const __m256 x = s.x != nullptr ? _mm256_loadu_ps(s.x + j) : _mm256_set1_ps(s.xu);
    const __m256 m = _mm256_cmp_ps(_mm256_loadu_ps(s.a + j), _mm256_set1_ps(s.b), kPred);
    return CombinePacket<R>(id, _mm256_blendv_ps(_mm256_set1_ps(s.y), x, m));
  };
  for (int64_t i = 0;; i += 8) {
    const int64_t at = std::min(i, n - 8);
    const __m256 a = value(s0, at), b = value(s1, at);
    const __m256 l = _mm256_unpacklo_ps(a, b), h = _mm256_unpackhi_ps(a, b);
    _mm256_storeu_ps(out + 2 * at, _mm256_permute2f128_ps(l, h, 0x20));
    _mm256_storeu_ps(out + 2 * at + 8, _mm256_permute2f128_ps(l, h, 0x31));
    if (at == n - 8) return;
  }
}
#endif

// out[2 * j + k] = combine(identity, select k at j) for j < n, k < 2: the roots
// of two items that step the output by 1 (a lattice's kw items, RunGroup),
// computed and stored interleaved in one pass, with no accumulator between.
template <typename T, typename C>
void StoreSelectPairs(Op op, const RowSelect<T>& s0, const RowSelect<T>& s1, T identity, T* out,
                      int64_t n, C combine) {
#if defined(__AVX2__)
  if constexpr (std::is_same_v<T, float> && NamesReducer<C>::value) {
    constexpr tc::Reducer R = C::kReducer;
    if (n >= 8) {
      switch (op) {
        case Op::kLt: return StoreSelectPairBlocks<_CMP_LT_OQ, R>(s0, s1, identity, out, n);
        case Op::kLe: return StoreSelectPairBlocks<_CMP_LE_OQ, R>(s0, s1, identity, out, n);
        case Op::kGt: return StoreSelectPairBlocks<_CMP_GT_OQ, R>(s0, s1, identity, out, n);
        case Op::kGe: return StoreSelectPairBlocks<_CMP_GE_OQ, R>(s0, s1, identity, out, n);
        case Op::kEq: return StoreSelectPairBlocks<_CMP_EQ_OQ, R>(s0, s1, identity, out, n);
        default: return StoreSelectPairBlocks<_CMP_NEQ_UQ, R>(s0, s1, identity, out, n);
      }
    }
  }
#endif
  auto run = [&](auto cmp) {
    for (int64_t j = 0; j < n; ++j) {
      const RowSelect<T>* s[2] = {&s0, &s1};
      for (int k = 0; k < 2; ++k) {
        const T x = s[k]->x != nullptr ? s[k]->x[j] : s[k]->xu;
        out[2 * j + k] = combine(identity, cmp(s[k]->a[j], s[k]->b) ? x : s[k]->y);
      }
    }
  };
  switch (op) {
    case Op::kLt: return run([](T p, T q) { return p < q; });
    case Op::kLe: return run([](T p, T q) { return p <= q; });
    case Op::kGt: return run([](T p, T q) { return p > q; });
    case Op::kGe: return run([](T p, T q) { return p >= q; });
    case Op::kEq: return run([](T p, T q) { return p == q; });
    default: return run([](T p, T q) { return p != q; });
  }
}

// The combine of a plain store (a functor, so that the loops inline it).
struct Assign {
  template <typename T>
  T operator()(T, T v) const {
    return v;
  }
};

// row[2 * j] = combine(row[2 * j], v[j]) for j < n (the lanes of a divisibility
// guard by 2), in packets for f32 where AVX2 is there: the odd elements in
// between, read and written back unchanged, are the thread's own (an
// accumulator), so a block of pairs is loaded, blended and stored whole where
// a strided loop would store lane by lane.
template <typename T, typename C>
void CombineEveryOther(T* row, const T* v, int64_t n, C combine) {
  int64_t j = 0;
#if defined(__AVX2__)
  if constexpr (std::is_same_v<T, float>) {
    alignas(32) float e[8], t[8];
    const __m256i lo = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    const __m256i hi = _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7);
    for (; j + 8 < n; j += 8) {  // row[2j, 2j + 16): 8 pairs, all before the last lane
      float* p = row + 2 * j;
      const __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
      _mm256_store_ps(e, EveryOther8<false>(a, b));
      for (int k = 0; k < 8; ++k) t[k] = combine(e[k], v[j + k]);
      const __m256 tv = _mm256_load_ps(t);
      _mm256_storeu_ps(p, _mm256_blend_ps(a, _mm256_permutevar8x32_ps(tv, lo), 0x55));
      _mm256_storeu_ps(p + 8, _mm256_blend_ps(b, _mm256_permutevar8x32_ps(tv, hi), 0x55));
    }
    for (; j + 4 < n; j += 4) {
      for (int k = 0; k < 4; ++k) t[k] = combine(row[2 * (j + k)], v[j + k]);
      const __m128 tv = _mm_load_ps(t);
      float* p = row + 2 * j;
      _mm_storeu_ps(p, _mm_blend_ps(_mm_loadu_ps(p), _mm_unpacklo_ps(tv, tv), 0x5));
      _mm_storeu_ps(p + 4, _mm_blend_ps(_mm_loadu_ps(p + 4), _mm_unpackhi_ps(tv, tv), 0x5));
    }
  }
#endif
  for (; j < n; ++j) row[2 * j] = combine(row[2 * j], v[j]);
}

// acc[j] = combine(combine(acc[j], v[2 * j]), v[2 * j + 1]) for j < n >= 8,
// in packets of 8 for f32 with AVX2 and a combine that names its reducer (the
// even and odd elements split by EveryOther8, combined in registers by
// CombinePacket: arrays of partial results between the shuffles and a combine
// loop stalled on store forwarding); false (nothing done) otherwise. A row
// shorter than two packets (a pooled row: 14) would be mostly a scalar tail:
// the last packet ends at n and overlaps the one before, its result computed
// from acc before any store, so the overlap is stored the same value twice
// (sums too).
template <typename T, typename C>
bool CombinePairBlocks(T* acc, const T* v, int64_t n, C combine) {
#if defined(__AVX2__)
  if constexpr (std::is_same_v<T, float> && NamesReducer<C>::value) {
    constexpr tc::Reducer R = C::kReducer;
    if (n < 8) return false;
    auto block = [&](int64_t j) {
      const __m256 a = _mm256_loadu_ps(v + 2 * j), b = _mm256_loadu_ps(v + 2 * j + 8);
      return CombinePacket<R>(CombinePacket<R>(_mm256_loadu_ps(acc + j), EveryOther8<false>(a, b)),
                              EveryOther8<true>(a, b));
    };
    const __m256 last = block(n - 8);
    for (int64_t j = 0; j + 8 < n; j += 8) _mm256_storeu_ps(acc + j, block(j));
    _mm256_storeu_ps(acc + n - 8, last);
    return true;
  }
#endif
  return false;
}

#if defined(__AVX2__)
// PairSelectRow's f32 pairs with AVX2, n >= 8: 8 outputs a packet, the pairs
// split by EveryOther8, compared by kPred (the comparison's _CMP_ predicate),
// selected and combined in registers; the last packet ends at n and overlaps
// the one before, computed from acc before any store (each element gets the
// same value twice).
template <int kPred, tc::Reducer R>
void PairSelectBlocks(const float* a, const float* b, float x0, float x1, float y, float* acc,
                      int64_t n) {
  const __m256 xs0 = _mm256_set1_ps(x0), xs1 = _mm256_set1_ps(x1), ys = _mm256_set1_ps(y);
  auto block = [&](int64_t j) {
    const __m256 p = _mm256_loadu_ps(a + 2 * j), q = _mm256_loadu_ps(a + 2 * j + 8);
    const __m256 bv = _mm256_loadu_ps(b + j);
    const __m256 v0 = _mm256_blendv_ps(ys, xs0, _mm256_cmp_ps(EveryOther8<false>(p, q), bv, kPred));
    const __m256 v1 = _mm256_blendv_ps(ys, xs1, _mm256_cmp_ps(EveryOther8<true>(p, q), bv, kPred));
    return CombinePacket<R>(CombinePacket<R>(_mm256_loadu_ps(acc + j), v0), v1);
  };
  const __m256 last = block(n - 8);
  for (int64_t j = 0; j + 8 < n; j += 8) _mm256_storeu_ps(acc + j, block(j));
  _mm256_storeu_ps(acc + n - 8, last);
}
#endif

// One inner point of a pair reduction whose points are combined in registers
// (CombinePointPairs, SelectPointPairs): row r's pairs at a + r * a_rs; for a
// pair select also B's row at b + r * b_rs, the values x0, x1 chosen for the
// pair's first and second lane, and y otherwise.
template <typename T>
struct PointPairs {
  const T* a = nullptr;
  int64_t a_rs = 0;
  const T* b = nullptr;
  int64_t b_rs = 0;
  T x0{}, x1{}, y{};
};

// Whether CombinePointPairs and SelectPointPairs run for T and C (f32 with
// AVX2 and a combine that names its reducer); rows of at least 8 outputs.
template <typename T, typename C>
constexpr bool kPointPairs =
#if defined(__AVX2__)
    std::is_same_v<T, float> && NamesReducer<C>::value;
#else
    false;
#endif

#if defined(__AVX2__)
// acc[r * n + j] for r < rows, j < n >= 8: from `identity`, each point's pair
// (2j, 2j + 1) of row r combined in turn, points in order (the order of
// Compute's loop over them, so the same values bit for bit), in registers:
// acc is only stored, once. The last packet ends at n, overlapping the one
// before with the same values. sel(p, r, j, pair0, pair1) gives point p's
// two packets to combine.
template <tc::Reducer R, typename Sel>
void PointPairBlocks(int np, float identity, float* acc, int64_t n, int64_t rows, Sel sel) {
  const __m256 id = _mm256_set1_ps(identity);
  for (int64_t r = 0; r < rows; ++r) {
    float* o = acc + r * n;
    auto block = [&](int64_t j) {
      __m256 v = id;
      for (int p = 0; p < np; ++p) {
        __m256 v0, v1;
        sel(p, r, j, &v0, &v1);
        v = CombinePacket<R>(CombinePacket<R>(v, v0), v1);
      }
      return v;
    };
    for (int64_t j = 0; j + 8 < n; j += 8) _mm256_storeu_ps(o + j, block(j));
    _mm256_storeu_ps(o + n - 8, block(n - 8));
  }
}

template <int kPred, tc::Reducer R>
void SelectPointPairBlocks(const PointPairs<float>* pts, int np, float identity, float* acc,
                           int64_t n, int64_t rows) {
  PointPairBlocks<R>(np, identity, acc, n, rows,
                     [&](int p, int64_t r, int64_t j, __m256* v0, __m256* v1) {
                       const PointPairs<float>& pt = pts[p];
                       const float* a = pt.a + r * pt.a_rs + 2 * j;
                       const __m256 lo = _mm256_loadu_ps(a), hi = _mm256_loadu_ps(a + 8);
                       const __m256 bv = _mm256_loadu_ps(pt.b + r * pt.b_rs + j);
                       const __m256 ys = _mm256_set1_ps(pt.y);
                       *v0 = _mm256_blendv_ps(ys, _mm256_set1_ps(pt.x0),
                                              _mm256_cmp_ps(EveryOther8<false>(lo, hi), bv, kPred));
                       *v1 = _mm256_blendv_ps(ys, _mm256_set1_ps(pt.x1),
                                              _mm256_cmp_ps(EveryOther8<true>(lo, hi), bv, kPred));
                     });
}
#endif

// acc[r * n + j] = combine(... combine(identity, a_0[2j]), a_0[2j + 1]) ...,
// a_last[2j + 1]) over the np points' rows r (n >= 8, kPointPairs<T, C>): a
// pair reduction's inner points (max pooling's kh) combined in registers, acc
// written once instead of read and written per point.
template <typename T, typename C>
void CombinePointPairs(const PointPairs<T>* pts, int np, T identity, T* acc, int64_t n,
                       int64_t rows, C) {
#if defined(__AVX2__)
  if constexpr (kPointPairs<T, C>) {
    PointPairBlocks<C::kReducer>(np, identity, acc, n, rows,
                                 [&](int p, int64_t r, int64_t j, __m256* v0, __m256* v1) {
                                   const float* a = pts[p].a + r * pts[p].a_rs + 2 * j;
                                   const __m256 lo = _mm256_loadu_ps(a);
                                   const __m256 hi = _mm256_loadu_ps(a + 8);
                                   *v0 = EveryOther8<false>(lo, hi);
                                   *v1 = EveryOther8<true>(lo, hi);
                                 });
  }
#endif
}

// CombinePointPairs for the roots of a pair select: point p's pair lanes are
// cmp(a_p[2j + k], b_p[j]) ? x_k : y (x and y point p's).
template <typename T, typename C>
void SelectPointPairs(Op op, const PointPairs<T>* pts, int np, T identity, T* acc, int64_t n,
                      int64_t rows, C) {
#if defined(__AVX2__)
  if constexpr (kPointPairs<T, C>) {
    constexpr tc::Reducer R = C::kReducer;
    switch (op) {
      case Op::kLt: return SelectPointPairBlocks<_CMP_LT_OQ, R>(pts, np, identity, acc, n, rows);
      case Op::kLe: return SelectPointPairBlocks<_CMP_LE_OQ, R>(pts, np, identity, acc, n, rows);
      case Op::kGt: return SelectPointPairBlocks<_CMP_GT_OQ, R>(pts, np, identity, acc, n, rows);
      case Op::kGe: return SelectPointPairBlocks<_CMP_GE_OQ, R>(pts, np, identity, acc, n, rows);
      case Op::kEq: return SelectPointPairBlocks<_CMP_EQ_OQ, R>(pts, np, identity, acc, n, rows);
      default: return SelectPointPairBlocks<_CMP_NEQ_UQ, R>(pts, np, identity, acc, n, rows);
    }
  }
#endif
}

// acc[j] = combine(... combine(acc[j], cmp(a[s*j], bj) ? xs[0] : y) ...,
// cmp(a[s*j + s - 1], bj) ? xs[s - 1] : y) for j < n, bj = b[bstep * j]: the
// root of a pair select (tc_program.h's TcPairSelect) combined into its
// accumulator, each output's pair lanes in order, with A and B read in place.
template <typename T, typename C>
void PairSelectRow(Op op, const T* a, const T* b, int64_t bstep, const T* xs, int64_t s, T y,
                   T* acc, int64_t n, C combine) {
#if defined(__AVX2__)
  if constexpr (std::is_same_v<T, float> && NamesReducer<C>::value) {
    constexpr tc::Reducer R = C::kReducer;
    if (s == 2 && bstep == 1 && n >= 8) {
      switch (op) {
        case Op::kLt: return PairSelectBlocks<_CMP_LT_OQ, R>(a, b, xs[0], xs[1], y, acc, n);
        case Op::kLe: return PairSelectBlocks<_CMP_LE_OQ, R>(a, b, xs[0], xs[1], y, acc, n);
        case Op::kGt: return PairSelectBlocks<_CMP_GT_OQ, R>(a, b, xs[0], xs[1], y, acc, n);
        case Op::kGe: return PairSelectBlocks<_CMP_GE_OQ, R>(a, b, xs[0], xs[1], y, acc, n);
        case Op::kEq: return PairSelectBlocks<_CMP_EQ_OQ, R>(a, b, xs[0], xs[1], y, acc, n);
        default: return PairSelectBlocks<_CMP_NEQ_UQ, R>(a, b, xs[0], xs[1], y, acc, n);
      }
    }
  }
#endif
  auto run = [&](auto cmp) {
    for (int64_t j = 0; j < n; ++j) {
      const T bj = b[bstep * j];
      T v = acc[j];
      for (int64_t k = 0; k < s; ++k) v = combine(v, cmp(a[s * j + k], bj) ? xs[k] : y);
      acc[j] = v;
    }
  };
  switch (op) {
    case Op::kLt: return run([](T p, T q) { return p < q; });
    case Op::kLe: return run([](T p, T q) { return p <= q; });
    case Op::kGt: return run([](T p, T q) { return p > q; });
    case Op::kGe: return run([](T p, T q) { return p >= q; });
    case Op::kEq: return run([](T p, T q) { return p == q; });
    default: return run([](T p, T q) { return p != q; });
  }
}

// acc[j] = combine(... combine(acc[j], v[s * j]) ..., v[s * j + s - 1]) for j < n:
// an output's lanes of the pair index, in order.
template <typename T, typename C>
void CombinePairs(T* acc, const Operand<T>& v, int64_t n, int64_t s, C combine) {
  if (v.p == nullptr) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t k = 0; k < s; ++k) acc[j] = combine(acc[j], v.u);
    }
  } else if (s == 2) {
    if (CombinePairBlocks(acc, v.p, n, combine)) return;
    for (int64_t j = 0; j < n; ++j) acc[j] = combine(combine(acc[j], v.p[2 * j]), v.p[2 * j + 1]);
  } else {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t k = 0; k < s; ++k) acc[j] = combine(acc[j], v.p[s * j + k]);
    }
  }
}

// acc[r * width + first + step * j] = combine(acc[...], v[r * count + j]) over the lanes.
template <typename T, typename C>
void Accumulate(T* acc, int64_t width, const Lanes& l, const Operand<T>& v, C combine) {
  if (l.pair > 1) {  // no guard along the vector index: whole rows
    if (l.rows > 1 && l.row_step == 1 && (v.p == nullptr || v.rs == l.width())) {
      CombinePairs(acc + l.row_first * width, v, width * l.rows, l.pair, combine);
      return;
    }
    for (int64_t r = 0; r < l.rows; ++r) {
      Operand<T> vr = v;
      if (v.p != nullptr) vr.p = v.p + r * v.rs;
      CombinePairs(acc + (l.row_first + r * l.row_step) * width, vr, width, l.pair, combine);
    }
    return;
  }
  if (l.rows > 1 && l.first == 0 && l.step == 1 && l.count == width && l.row_step == 1 &&
      (v.p == nullptr || v.rs == width)) {  // the rows end to end: one loop
    Store(acc + l.row_first * width, 1, width * l.rows, v, combine);
    return;
  }
  for (int64_t r = 0; r < l.rows; ++r) {
    T* row = acc + (l.row_first + r * l.row_step) * width + l.first;
    const Operand<T> vr = RowOf(v, r);
    if (l.step == 2 && vr.p != nullptr) {
      CombineEveryOther(row, vr.p, l.count, combine);
    } else {
      Store(row, l.step, l.count, vr, combine);
    }
  }
}

}  // namespace tc_rows
}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_TC_ROWS_H_
