// Launch chains: a run of small kernels as one launch of one thread block (docs/ARCHITECTURE.md,
// "CUDA code generation").
//
// A small training step on the GPU is a row of kernels that each do a few microseconds of work or
// less, and each launch costs more than that: in a replayed CUDA graph every dependent kernel
// costs about 1.3 µs before it starts plus its own ramp and drain, and every update copy is a
// memcpy node of its own. A chain runs consecutive small launches as phases of one kernel of
// kChainThreads threads on one multiprocessor, separated by the block's barrier (bar.sync 0):
//
//   - each member launch keeps its code: its entry becomes a device function of the virtual block
//     index and grid size (blockIdx.x → kiln_bx, gridDim.x → kiln_gx), called for every block of
//     its original grid; the chain's threads form groups of the launch's block size that run
//     different virtual blocks side by side (threadIdx.x → its index in the group, each group with
//     its own copy of the launch's __shared__ arrays and its own named barrier, bar.sync 1+group,
//     for the launch's __syncthreads);
//   - the chain's parameters are the distinct buffers of its members, each cast back to the type
//     its member declares.
//
// foldUpdates first turns a program's update copies (ProgramLayout::updates) into one copy launch
// after the last step, when nothing forbids it (no staged copy, no output that is an updated
// parameter), so a trailing chain also holds them.
//
// A kernel joins a chain when all its steps are launches of at most kChainThreads threads with no
// dynamic shared memory and it is small (kChainMaxFlops, kChainMaxBytes, at most kChainMaxRounds
// rounds of its virtual blocks); a chain holds two launches or more, at most kChainMaxLaunches and
// kChainMaxArgs distinct buffers. Free of CUDA and of any device:
// the layout (and so `kiln aot --target cuda`) holds the chains.
#pragma once

#include "codegen/cuda/Layout.h"

#include <cstdint>

namespace kiln::cuda {

constexpr int kChainThreads = 512;
constexpr double kChainMaxFlops = 1 << 20;
constexpr int64_t kChainMaxBytes = int64_t{1} << 18;
constexpr int64_t kChainMaxRounds = 8;
constexpr size_t kChainMaxLaunches = 32;
/// Pointer parameters of a chain: 4000 bytes, within the 4 KiB every architecture takes.
constexpr size_t kChainMaxArgs = 500;

/// Replaces L.updates by one launch after the last step (attributed to the last kernel, its code
/// appended to that kernel's) when there are two copies or more, none is staged and no output is a
/// parameter. Returns whether it did.
bool foldUpdates(ProgramLayout& L);

/// Replaces each run of chainable launches (see the file comment) by one launch of a chain entry,
/// whose code (and that of every member kernel) moves to the run's first kernel. Updates
/// L.launches; returns the number of chains made.
int chainLaunches(ProgramLayout& L);

}  // namespace kiln::cuda
