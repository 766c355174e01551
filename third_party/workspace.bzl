"""Repositories kgrad needs, for kgrad's own WORKSPACE and for workspaces that
embed kgrad (see examples/embedding/WORKSPACE)."""

def kgrad_repositories(kgrad_path = "."):
    """Declares the offline stand-ins and system-library repositories.

    Args:
      kgrad_path: path of the kgrad checkout relative to the calling workspace.
    """

    # Bazel 4.2.3 wants to download these even for C++-only builds; small local
    # stand-ins keep it offline (TOOLCHAIN.md).
    native.local_repository(name = "rules_cc", path = kgrad_path + "/third_party/rules_cc")
    native.local_repository(name = "rules_java", path = kgrad_path + "/third_party/rules_java")
    native.local_repository(
        name = "remote_coverage_tools",
        path = kgrad_path + "/third_party/remote_coverage_tools",
    )

    # Eigen 3.4 headers from libeigen3-dev.
    native.new_local_repository(
        name = "eigen",
        build_file = "@kgrad//third_party:eigen.BUILD",
        path = "/usr/include/eigen3",
    )

    # ONNX's protobuf schema (libonnx-dev); third_party/onnx.BUILD compiles it.
    native.new_local_repository(
        name = "onnx",
        build_file = "@kgrad//third_party:onnx.BUILD",
        path = "/usr/include/onnx",
    )

    # CUDA is optional: only --config=cuda targets read this repository.
    native.new_local_repository(
        name = "local_cuda",
        build_file = "@kgrad//third_party:cuda.BUILD",
        path = "/usr/local/cuda",
    )
