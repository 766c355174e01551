// The one place the CPU kernels include Eigen. GCC 12 reports -Wuninitialized and
// -Wmaybe-uninitialized inside its own AVX-512 intrinsics (avx512fintrin.h's
// `__m512 __Y = __Y;` idiom for an undefined register) wherever Eigen's packet
// maths is inlined: false positives in a system header, which GCC does not treat
// as one once the code is inlined into ours. The intrinsics are included here
// first, inside the pragmas, so the diagnostics are off for their text only;
// kgrad's own code keeps every warning. Clang (the fuzz build) also reports unused
// variables in Eigen's packet maths: the same treatment.
//
// EIGEN_FAST_MATH stays on (Eigen's default): it gives the vectorised float sin,
// cos, tanh and erf, and 2-4x slower chains and MLP forwards without it. It also
// makes float sqrt an approximation, so the sqrt kernels do not use Eigen's.
#ifndef KGRAD_BACKENDS_CPU_EIGEN_H_
#define KGRAD_BACKENDS_CPU_EIGEN_H_

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <immintrin.h>

#include "Eigen/Core"
#include "unsupported/Eigen/SpecialFunctions"
#pragma GCC diagnostic pop

#endif  // KGRAD_BACKENDS_CPU_EIGEN_H_
