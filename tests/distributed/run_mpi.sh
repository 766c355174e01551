#!/usr/bin/env bash
# Runs a program as an N-rank MPI job on this machine: run_mpi.sh N PROGRAM ARGS...
# (or run_mpi.sh -- MPIRUN_ARGS...: mpirun's own arguments, e.g. two programs).
# Oversubscribed (more ranks than cores is fine for correctness), as root when
# the machine runs tests as root; a job that does not end within the limit is
# killed (the collectives have their own timeouts; this is the outer bound).
set -euo pipefail
# Bazel's test temporary directory is too deep for the Unix sockets OpenMPI's
# runtime (PMIx) makes there (108 characters at most): a short one of our own.
job_tmp=$(mktemp -d /tmp/kgrad-mpi.XXXXXX)
trap 'rm -rf "$job_tmp"' EXIT
export TMPDIR=$job_tmp OMPI_MCA_orte_tmpdir_base=$job_tmp
export PMIX_MCA_gds=hash                              # no shared-memory key store
export OMPI_MCA_btl_vader_single_copy_mechanism=none  # no cross-process memory attach
# Shared-memory segments are named after the job id, which derives from
# mpirun's PID; in Bazel's sandboxes (PID namespaces) two jobs can share both:
# each job keeps its segments in its own directory.
export OMPI_MCA_btl_vader_backing_directory=$job_tmp
# Under AddressSanitizer: OpenMPI's finalisation leaves allocations behind in
# plugins it has already unloaded (LeakSanitizer reports them with frames it
# cannot name, so no suppression can match them); leak checking is off for MPI
# jobs. kgrad's side of the collectives is leak-checked in one process
# (tests/ops:collective_test, tests/ad:data_parallel_test).
if [ -n "${ASAN_OPTIONS:-}" ]; then export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"; fi
# KGRAD_MPIRUN_FLAGS: more mpirun options (rank_exit_test.sh: --enable-recovery).
mpirun=(timeout 600 mpirun --allow-run-as-root --oversubscribe --bind-to none ${KGRAD_MPIRUN_FLAGS:-})
if [ "$1" = "--" ]; then
  shift
  "${mpirun[@]}" "$@"
else
  ranks=$1
  shift
  "${mpirun[@]}" -np "$ranks" "$@"
fi
