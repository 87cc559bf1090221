// Internal to aot/: what the CPU and the CUDA export share (Export.cpp defines it), and the CUDA
// part of an export (CudaExport.cpp, built with the CUDA toolkit only).
#pragma once

#include "aot/CSource.h"
#include "aot/Export.h"
#include "ir/Graph.h"

#ifdef KILN_HAVE_CUDA
#include "codegen/cuda/Layout.h"
#endif

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln::aot::detail {

/// What the target part of an export hands to the link step.
struct TargetParts {
  std::string source;                   // NAME.c
  std::vector<std::string> inputs;      // further files the compiler links (objects)
  std::vector<std::string> flags;       // further compiler flags (before the sources)
  std::vector<std::string> libraries;   // -l flags, after the sources
  int kernels = 0;
  int64_t cubinBytes = 0, ptxBytes = 0;  // cuda
  std::vector<std::string> architectures;  // cuda: "sm_80", "sm_90", "compute_80"
};

#ifdef KILN_HAVE_CUDA
/// The read-only data of a CUDA library: files in the export's scratch directory, pulled into
/// NAME.c with the assembler's .incbin (the compiler gets -Wa,-I of that directory).
struct CudaBlobs {
  struct Cubin {
    int sm = 0;
    std::string file;
    int64_t bytes = 0;
  };
  std::vector<Cubin> cubins;
  std::string ptxFile;  // NUL-terminated PTX
  int ptxSm = 0;
  std::string constantsFile;            // empty: no constants
  std::vector<int64_t> constantOffsets;  // per owned buffer: its offset in the constants, or -1
  std::string weightsFile;              // empty: no embedded weights
  int cudaVersion = 0;                  // NVRTC's, 13000 for 13.0
};

/// NAME.c of a CUDA library: the tables of `layout` (a kiln_aot_cuda_program), the blobs, the
/// runtime (common, safetensors, CUDA) and the API.
std::string generateCudaSource(const ProgramDescription& d, const cuda::ProgramLayout& layout, const CudaBlobs& blobs);

/// The CUDA part of exportLibrary: lays `compiled` out for the generated GEMM (cuda::layoutProgram
/// with blasLt off: the library needs no cuBLAS), compiles the source with NVRTC to a cubin per
/// options.cudaArchitectures and to PTX for the lowest of them, writes those, the constants and
/// (with embedWeights) `weights` as blobs into `dir` (NAME.c pulls them in with .incbin) and
/// generates NAME.c. Fills d.kernelCount and d.cudaCode.
TargetParts cudaParts(const ir::Graph& compiled, ProgramDescription& d, const std::vector<std::byte>& weights,
                      const std::filesystem::path& dir, const ExportOptions& options);
#endif

}  // namespace kiln::aot::detail
