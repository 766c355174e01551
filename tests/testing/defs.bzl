"""Macros for kgrad's tests: the deps every test has, and one target per name.

    load("//tests/testing:defs.bzl", "kgrad_cc_test", "kgrad_cc_tests")

    kgrad_cc_test(name = "foo_test", deps = ["//core:ir"])   # srcs: foo_test.cc
    kgrad_cc_tests(["a_test", "b_test"], deps = [...])      # one cc_test each
"""

load("//:defs.bzl", "kgrad_cc_library")

# GoogleTest with its main, and the shared helpers (tests/testing/op_test_util.h).
TEST_DEPS = [
    "//third_party:gtest_main",
    "//tests/testing:op_test_util",
]

# What a test of whole programs links: building, inferring, differentiating,
# optimising, printing and running graphs, and the example programs.
PROGRAM_DEPS = [
    "//ad:forward",
    "//ad:reverse",
    "//backends:executor",
    "//backends/cpu:constant_evaluator",
    "//core:builder",
    "//core:infer",
    "//core:ir",
    "//core:printer",
    "//core:verifier",
    "//core/passes",
    "//examples:programs",
    "//ops:registry",
]

# The op families (ops/): tests/ops, tests/backends/cpu, tests/ad and tests/cuda
# have a test per family (tests/ops names the shape family shape_ops).
OP_FAMILIES = ["elementwise", "reduce", "shape", "linalg", "nn", "conv"]

# Test sources build at -O1 (after the -O3 of .bazelrc, so it wins): a test's own
# code is assertions and small naive references, its heavy work runs in the
# libraries it links (still -O3). -O1 compiles a test file 25-35% faster, and
# tests are most of the files a cold CI compiles.
TEST_COPTS = ["-O1"]

def _with(deps, more):
    return deps + [d for d in more if d not in deps]

def kgrad_cc_test(name, srcs = None, deps = [], **kwargs):
    """A cc_test of `srcs` (default: `name`.cc) with TEST_DEPS added to `deps`.

    Other arguments (size, data, tags, target_compatible_with...) pass through.
    """
    native.cc_test(
        name = name,
        srcs = srcs if srcs != None else [name + ".cc"],
        deps = _with(deps, TEST_DEPS),
        copts = kwargs.pop("copts", []) + TEST_COPTS,
        **kwargs
    )

def kgrad_cc_tests(names, **kwargs):
    """kgrad_cc_test(name = n, **kwargs) for each n in `names`."""
    for n in names:
        kgrad_cc_test(name = n, **kwargs)

def kgrad_test_library(name, deps = [], **kwargs):
    """A testonly kgrad_cc_library: `name`.cc and `name`.h (as tests/testing/ lays them out)."""
    kgrad_cc_library(
        name = name,
        deps = deps,
        testonly = True,
        copts = kwargs.pop("copts", []) + TEST_COPTS,
        **kwargs
    )
