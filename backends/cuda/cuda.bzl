"""Build helpers for the optional CUDA backend (TOOLCHAIN.md: CUDA 13 at /usr/local/cuda).

Targets that need CUDA are incompatible unless --config=cuda (--define=cuda=1), so a
plain `bazel build //...` skips them, and their @local_cuda deps sit behind select()
so that a machine without /usr/local/cuda never reads that repository.
"""

CUDA_ONLY = select({
    "//third_party:cuda_enabled": [],
    "//conditions:default": ["//third_party:incompatible"],
})

def cuda_deps(deps):
    """`deps` under --config=cuda, nothing otherwise."""
    return select({
        "//third_party:cuda_enabled": deps,
        "//conditions:default": [],
    })

_NVCC = "/usr/local/cuda/bin/nvcc"

# H100/H200 code (sm_90) plus compute_90 PTX that newer GPUs JIT-compile.
_NVCC_FLAGS = " ".join([
    "-std=c++17",
    "-O3",
    "-Xcompiler -fPIC",
    "--expt-relaxed-constexpr",
    "-gencode arch=compute_90,code=sm_90",
    "-gencode arch=compute_90,code=compute_90",
])

def cuda_static_library(name, src, hdrs, anchor):
    """nvcc compiles one .cu file into a static library `lib<name>.a`.

    Args:
      name: the genrule's name.
      src: the .cu file.
      hdrs: headers it includes (kgrad-relative includes resolve from the
        repository root).
      anchor: a header among `hdrs` at backends/cuda/kernels/, used to find the
        repository root (which is external/<repo> when kgrad is an external
        repository).
    """
    native.genrule(
        name = name,
        srcs = [src] + hdrs,
        outs = ["lib" + name + ".a"],
        cmd = ("ROOT=$$(dirname $(location %s))/../../.. && " % anchor) +
              _NVCC + " " + _NVCC_FLAGS + " -I$$ROOT -lib -o $@ $(location %s)" % src,
        target_compatible_with = CUDA_ONLY,
        message = "nvcc " + src,
    )
