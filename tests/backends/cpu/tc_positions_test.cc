// SimplifyTcPositions (backends/cpu/tc_positions.h), Before/Expected on hand-
// written programs: lattice substitution of a divisibility guard, dropped
// guards and exact quotients, merged left-side positions, and the cases each
// rewrite must refuse (a reduction range other than the divisor, an image that
// does not cover the written range exactly, positions read as values, steps
// that do not chain).
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/cpu/tc_positions.h"
#include "backends/cpu/tc_program.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kgrad {
namespace cpu {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A program over positions with ranges [lo, hi), the first num_lhs written.
TcProgram Box(int num_lhs, std::vector<int64_t> lo, std::vector<int64_t> hi) {
  TcProgram p;
  p.num_pos = static_cast<int>(lo.size());
  p.num_lhs = num_lhs;
  p.lo = std::move(lo);
  p.hi = std::move(hi);
  for (int q = 0; q < p.num_pos; ++q) p.origin.push_back(q);
  return p;
}

TcGuardPlan Guard(int form, int64_t divisor, int64_t lo, int64_t hi) {
  TcGuardPlan g;
  g.form = form;
  g.divisor = divisor;
  g.lo = lo;
  g.hi = hi;
  return g;
}

// The max-pool adjoint's gather Ix(h) += Ox((h - k)/2) where (h - k) % 2 == 0,
// 0 <= h - k < 8, for h in 0:8 and k in 0:2.
struct PoolGather {
  TcForms forms;
  TcProgram p;
  int out, read, num, guard;
  PoolGather(int64_t h_hi, int64_t k_hi) : p(Box(1, {0, 0}, {h_hi, k_hi})) {
    out = forms.Add({1, 0}, 0);
    read = forms.Add({0, 0}, 0);
    num = forms.Add({1, -1}, 0);    // the read's divided numerator
    guard = forms.Add({1, -1}, 0);  // the guard's: each has a form of its own
    p.out_form = out;
    TcReadPlan r;
    r.tensor = 1;
    r.form = read;
    r.divided.push_back({num, 2, 1, 1});
    p.reads.push_back(r);
    p.guards.push_back(Guard(guard, 2, 0, 8));
  }
};

TEST(TcPositionsTest, LatticeSubstitutionTurnsAGatherIntoTheForwardLattice) {
  PoolGather g(8, 2);
  SimplifyTcPositions({false, false}, g.forms, g.p);
  // Expected: Ix(2*i + k) = Ox(i) over i in 0:4, k in 0:2, both written, no
  // guard, the quotient a plain term.
  EXPECT_EQ(g.p.num_pos, 2);
  EXPECT_EQ(g.p.num_lhs, 2);
  EXPECT_THAT(g.p.lo, ElementsAre(0, 0));
  EXPECT_THAT(g.p.hi, ElementsAre(4, 2));
  EXPECT_THAT(g.forms.coef[g.out], ElementsAre(2, 1));
  EXPECT_EQ(g.forms.constant[g.out], 0);
  EXPECT_THAT(g.forms.coef[g.read], ElementsAre(1, 0));
  EXPECT_THAT(g.p.reads[0].divided, IsEmpty());
  EXPECT_THAT(g.p.guards, IsEmpty());
  EXPECT_THAT(g.p.origin, ElementsAre(-1, 1));  // h is gone; k is position 1
}

TEST(TcPositionsTest, LatticeSubstitutionCarriesTheGuardsConstant) {
  // (h - k + 1) % 2 == 0 over h in 1:7, k in 0:2: h = 2*i + k - 1.
  TcForms forms;
  TcProgram p = Box(1, {1, 0}, {7, 2});
  const int out = forms.Add({1, 0}, 0);
  const int num = forms.Add({1, -1}, 1);
  p.out_form = out;
  p.guards.push_back(Guard(num, 2, std::numeric_limits<int64_t>::min(),
                           std::numeric_limits<int64_t>::max()));
  SimplifyTcPositions({false, false}, forms, p);
  // h = 2*i + k - 1 with i in 1:4 covers 1..6 exactly; with no other form
  // the steps of i and k chain, so they merge back into one run m = 2*i + k
  // over 2:8, written at m - 1: the guard is gone and h's points are kept.
  EXPECT_EQ(p.num_pos, 1);
  EXPECT_EQ(p.num_lhs, 1);
  EXPECT_THAT(p.lo, ElementsAre(2));
  EXPECT_THAT(p.hi, ElementsAre(8));
  EXPECT_THAT(forms.coef[out], ElementsAre(1));
  EXPECT_EQ(forms.constant[out], -1);
  EXPECT_THAT(p.guards, IsEmpty());
}

TEST(TcPositionsTest, NoSubstitutionWhenTheReductionRangeIsNotTheDivisor) {
  PoolGather g(8, 3);  // k in 0:3: several k may divide, or none
  SimplifyTcPositions({false, false}, g.forms, g.p);
  EXPECT_EQ(g.p.num_lhs, 1);
  EXPECT_THAT(g.p.hi, ElementsAre(8, 3));
  ASSERT_EQ(g.p.guards.size(), 1u);
  EXPECT_EQ(g.p.guards[0].divisor, 2);
  EXPECT_EQ(g.p.reads[0].divided.size(), 1u);
  EXPECT_THAT(g.p.origin, ElementsAre(0, 1));
}

TEST(TcPositionsTest, NoSubstitutionWhenTheImageMissesTheWrittenRange) {
  PoolGather g(7, 2);  // h in 0:7: the lattice 2*i + k would also write h = 7
  SimplifyTcPositions({false, false}, g.forms, g.p);
  EXPECT_EQ(g.p.num_lhs, 1);
  EXPECT_THAT(g.p.hi, ElementsAre(7, 2));
  ASSERT_EQ(g.p.guards.size(), 1u);
  EXPECT_EQ(g.p.guards[0].divisor, 2);
}

TEST(TcPositionsTest, NoSubstitutionOfAPositionReadAsAValue) {
  PoolGather g(8, 2);
  SimplifyTcPositions({true, false}, g.forms, g.p);  // h also read as a number
  EXPECT_EQ(g.p.num_lhs, 1);
  EXPECT_THAT(g.p.origin, ElementsAre(0, 1));
  ASSERT_EQ(g.p.guards.size(), 1u);
}

TEST(TcPositionsTest, NoSubstitutionOfACoefficientOtherThanOne) {
  // (2*h - k) % 2: not of the form h - k.
  PoolGather g(8, 2);
  g.forms.coef[g.guard] = {2, -1};
  SimplifyTcPositions({false, false}, g.forms, g.p);
  EXPECT_EQ(g.p.num_lhs, 1);
  ASSERT_EQ(g.p.guards.size(), 1u);
}

TEST(TcPositionsTest, GuardsThatHoldEverywhereGoAndOthersStay) {
  TcForms forms;
  TcProgram p = Box(1, {0}, {8});
  p.out_form = forms.Add({1}, 0);
  const int wide = forms.Add({1}, 0);
  const int cut = forms.Add({1}, -1);
  const int even = forms.Add({2}, 4);
  p.guards.push_back(Guard(wide, 1, 0, 8));  // 0 <= h < 8: always
  p.guards.push_back(Guard(cut, 1, 0, 100));  // h - 1 >= 0: not at h = 0
  p.guards.push_back(Guard(even, 2, 0, 100));  // (2h + 4) % 2: always
  SimplifyTcPositions({false}, forms, p);
  ASSERT_EQ(p.guards.size(), 1u);
  EXPECT_EQ(p.guards[0].form, cut);
  EXPECT_THAT(forms.coef[wide], ElementsAre(0));  // forgotten
  EXPECT_THAT(forms.coef[even], ElementsAre(0));
}

TEST(TcPositionsTest, DivisibilityThatHoldsEverywhereBecomesABound) {
  TcForms forms;
  TcProgram p = Box(1, {0}, {8});
  p.out_form = forms.Add({1}, 0);
  const int even = forms.Add({2}, 0);
  p.guards.push_back(Guard(even, 2, 2, 100));  // 2h even always; 2h >= 2 not at h = 0
  SimplifyTcPositions({false}, forms, p);
  ASSERT_EQ(p.guards.size(), 1u);
  EXPECT_EQ(p.guards[0].divisor, 1);
  EXPECT_EQ(p.guards[0].lo, 2);
}

TEST(TcPositionsTest, ExactQuotientsBecomePlainTerms) {
  // X(i, (2*j + 4) / 2) with X's rows of 5: offset 5*i + ((2j + 4)/2) = 5i + j + 2.
  TcForms forms;
  TcProgram p = Box(2, {0, 0}, {3, 4});
  p.out_form = forms.Add({4, 1}, 0);
  TcReadPlan r;
  r.tensor = 0;
  r.form = forms.Add({5, 0}, 0);
  const int num = forms.Add({0, 2}, 4);
  r.divided.push_back({num, 2, 1, 1});
  p.reads.push_back(r);
  SimplifyTcPositions({false, false}, forms, p);
  EXPECT_THAT(p.reads[0].divided, IsEmpty());
  EXPECT_THAT(forms.coef[p.reads[0].form], ElementsAre(5, 1));
  EXPECT_EQ(forms.constant[p.reads[0].form], 2);
  EXPECT_THAT(forms.coef[num], ElementsAre(0, 0));
}

TEST(TcPositionsTest, AdjacentPositionsWhoseStepsChainMerge) {
  // O(b, c, r) over 2 x 3 x 4 with every form contiguous in (b, c, r): one run.
  TcForms forms;
  TcProgram p = Box(3, {0, 0, 0}, {2, 3, 4});
  p.out_form = forms.Add({12, 4, 1}, 0);
  TcReadPlan r;
  r.form = forms.Add({24, 8, 2}, 1);  // every other element of a wider tensor
  p.reads.push_back(r);
  SimplifyTcPositions({false, false, false}, forms, p);
  EXPECT_EQ(p.num_pos, 1);
  EXPECT_EQ(p.num_lhs, 1);
  EXPECT_THAT(p.lo, ElementsAre(0));
  EXPECT_THAT(p.hi, ElementsAre(24));
  EXPECT_THAT(forms.coef[p.out_form], ElementsAre(1));
  EXPECT_THAT(forms.coef[r.form], ElementsAre(2));
  EXPECT_THAT(p.origin, ElementsAre(-1, -1, -1));
}

TEST(TcPositionsTest, MergeKeepsOffsetRangesOfShiftedBoxes) {
  // c in 1:3 (a border cut) under b in 0:2: the merged index b * 2 + c runs
  // over 1:5, and the form's values are those of the pairs (b, c).
  TcForms forms;
  TcProgram p = Box(2, {0, 1}, {2, 3});
  p.out_form = forms.Add({2, 1}, 0);
  SimplifyTcPositions({false, false}, forms, p);
  ASSERT_EQ(p.num_pos, 1);
  EXPECT_EQ(p.lo[0], 1);
  EXPECT_EQ(p.hi[0], 5);
  EXPECT_THAT(forms.coef[p.out_form], ElementsAre(1));
}

TEST(TcPositionsTest, NoMergeWhenAFormsStepsDoNotChain) {
  // O(b, c) += X(c, b): the read's steps are transposed.
  TcForms forms;
  TcProgram p = Box(2, {0, 0}, {2, 3});
  p.out_form = forms.Add({3, 1}, 0);
  TcReadPlan r;
  r.form = forms.Add({1, 2}, 0);
  p.reads.push_back(r);
  SimplifyTcPositions({false, false}, forms, p);
  EXPECT_EQ(p.num_pos, 2);
  EXPECT_THAT(p.origin, ElementsAre(0, 1));
}

TEST(TcPositionsTest, NoMergeOfPositionsReadAsValues) {
  TcForms forms;
  TcProgram p = Box(2, {0, 0}, {2, 3});
  p.out_form = forms.Add({3, 1}, 0);
  SimplifyTcPositions({false, true}, forms, p);
  EXPECT_EQ(p.num_pos, 2);
  EXPECT_THAT(p.origin, ElementsAre(0, 1));
}

TEST(TcPositionsTest, AnEmptyBoxIsLeftAlone) {
  PoolGather g(0, 2);
  SimplifyTcPositions({false, false}, g.forms, g.p);
  EXPECT_EQ(g.p.num_lhs, 1);
  ASSERT_EQ(g.p.guards.size(), 1u);
}

}  // namespace
}  // namespace cpu
}  // namespace kgrad
