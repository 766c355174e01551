"""Macros for kgrad's libraries: a cc_library per source pair.

    load("//:defs.bzl", "kgrad_cc_libraries", "kgrad_cc_library")

    kgrad_cc_library(name = "infer", deps = [":ir"])   # infer.cc and infer.h
    kgrad_cc_libraries({"infer": [":ir"], "printer": [":ir"]})  # one each
"""

def kgrad_cc_library(name, deps = [], **kwargs):
    """A cc_library of `name`.cc and `name`.h, unless `srcs` or `hdrs` say otherwise.

    Other arguments (copts, testonly, target_compatible_with...) pass through.
    """
    native.cc_library(
        name = name,
        srcs = kwargs.pop("srcs", [name + ".cc"]),
        hdrs = kwargs.pop("hdrs", [name + ".h"]),
        deps = deps,
        **kwargs
    )

def kgrad_cc_libraries(deps_by_name, **kwargs):
    """kgrad_cc_library(name = n, deps = d, **kwargs) for each `n: d` of `deps_by_name`."""
    for name, deps in deps_by_name.items():
        kgrad_cc_library(name = name, deps = deps, **kwargs)
