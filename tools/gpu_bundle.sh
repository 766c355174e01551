#!/usr/bin/env bash
# Packs what a GPU machine needs to run kgrad's CUDA tests and //bench:gpu_suite
# into DIR (default .gpu-bundle, ignored by git): the GPU machines have CUDA,
# cuDNN (in Python's nvidia-* wheels) and PyTorch but no Bazel and none of
# Debian's Abseil/protobuf/gtest, so the binaries travel with those libraries.
#   tools/gpu_bundle.sh [DIR]      # here: build with --config=cuda, then pack
#   bash DIR/run.sh [OUT]          # there: tests + suite; logs and gpu.{json,md} in OUT
# DIR holds run.sh and one kgrad-gpu.tar.xz (solid xz: the test binaries share
# most of their bytes), small enough to travel with a working tree.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.gpu-bundle}

# --config=portable: the GPU machine's processor is not this one (-march=native
# here may use instructions it lacks, e.g. AVX-512 on a host without them).
# KGRAD_BUNDLE_FLAGS replaces it (e.g. "--config=cuda" alone for a native build).
flags=(${KGRAD_BUNDLE_FLAGS:---config=cuda --config=portable})
./bazelw build "${flags[@]}" //tests/cuda/... //bench:gpu_suite >&2
bin=$(./bazelw info "${flags[@]}" bazel-bin 2>/dev/null)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/lib-fallback" "$stage/bench"
# Every cc_test under tests/cuda (the emulated-kernel test too: it checks the
# host build there as well), and the suite with the PyTorch side's script.
binaries=("$bin/bench/gpu_suite")
for t in $(./bazelw query 'kind(cc_test, //tests/cuda/...)' 2>/dev/null); do
  binaries+=("$bin/tests/cuda/${t##*:}")
done
cp "${binaries[@]}" "$stage/bin/"
cp bench/torch_side.py "$stage/bench/"

# Libraries: kgrad's own shared objects and Debian's (Abseil, protobuf, gtest, ...)
# go in lib/. The C runtime and the CUDA libraries (NCCL too: 190 MB, in the
# GPU machine's nvidia-nccl wheel) are the GPU machine's own.
# libstdc++, libgomp and libatomic go in lib-fallback/: used there only when that
# machine has none (its own may be newer than Debian 12's, and the CUDA libraries
# it loads may need the newer one).
system='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnvrtc|libnvJitLink|libnccl)\.so'
fallback='^(libstdc\+\+|libgomp|libatomic)\.so'
# (ldd on the binaries where Bazel built them: their RUNPATH finds kgrad's own
# libraries relative to there.)
for b in "${binaries[@]}"; do
  if ldd "$b" | grep "not found" >&2; then echo "gpu_bundle: $b: libraries not found" >&2; exit 1; fi
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r soname path; do
  if [[ $soname =~ $system ]]; then continue; fi
  if [[ $soname =~ $fallback ]]; then cp -L "$path" "$stage/lib-fallback/$soname"; else cp -L "$path" "$stage/lib/$soname"; fi
done
chmod -R u+w "$stage"
strip --strip-unneeded "$stage"/bin/* "$stage"/lib/*.so* 2>/dev/null || true

mkdir -p "$dir"
rm -f "$dir/kgrad-gpu.tar.xz"
tar -C "$stage" -cf - bin lib lib-fallback bench | xz -9 -T1 > "$dir/kgrad-gpu.tar.xz"
cp tools/gpu_bundle_run.sh "$dir/run.sh"
echo "gpu_bundle: $(du -sh "$dir" | cut -f1) in $dir ($(ls "$stage/bin" | wc -l) binaries, $(ls "$stage/lib" | wc -l) libraries)" >&2
echo "gpu_bundle: there: bash $dir/run.sh [OUT]" >&2
