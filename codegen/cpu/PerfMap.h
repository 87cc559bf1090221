// A perf map for JIT-compiled code: with KILN_PERF_MAP set (to anything but "" or "0"), every
// function a Jit links — kernels, their epilogues and packing routines, the shared GEMM routines,
// prebuilt ones included — is appended to /tmp/perf-PID.map as "ADDRESS SIZE NAME", where
// `perf report` looks for the names of JIT-compiled code (docs/CLI.md).
#pragma once

namespace llvm::orc {
class LLJIT;
}

namespace kiln::cpu {

/// Whether KILN_PERF_MAP asks for the map.
bool perfMapWanted();

/// Makes `jit` write the map of everything it links from now on (its object layer must be
/// JITLink's, LLJIT's default on x86-64 ELF; otherwise nothing is written).
void addPerfMap(llvm::orc::LLJIT& jit);

}  // namespace kiln::cpu
