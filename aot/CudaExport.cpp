// The CUDA part of exportLibrary (ExportSupport.h cudaParts): layout, NVRTC, blobs, NAME.c.
#include "aot/ExportSupport.h"

#include "codegen/cuda/Layout.h"
#include "codegen/cuda/Nvrtc.h"
#include "support/Error.h"
#include "support/File.h"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <set>

namespace kiln::aot::detail {

namespace {

namespace fs = std::filesystem;

/// The renderer's architecture for a device of SM `sm`, as cuda::Program chooses it.
int renderSm(int sm) { return sm >= 90 ? 90 : 80; }

/// The same program for every architecture: one set of tables serves all the cubins.
void checkSameLayout(const cuda::ProgramLayout& a, const cuda::ProgramLayout& b) {
  bool same = a.source == b.source && a.steps.size() == b.steps.size() && a.scratchBytes == b.scratchBytes;
  for (size_t i = 0; same && i < a.steps.size(); ++i)
    same = a.steps[i].entry == b.steps[i].entry && a.steps[i].grid == b.steps[i].grid &&
           a.steps[i].block == b.steps[i].block && a.steps[i].sharedBytes == b.steps[i].sharedBytes &&
           a.steps[i].args == b.steps[i].args;
  KILN_CHECK(same,
             "kiln aot --target cuda: the kernels rendered for sm_{} and sm_{} differ, but a library holds one launch "
             "table for all its architectures; export one library per architecture (cudaArchitectures)",
             a.sm, b.sm);
}

}  // namespace

TargetParts cudaParts(const ir::Graph& compiled, ProgramDescription& d, const std::vector<std::byte>& weights,
                      const fs::path& dir, const ExportOptions& options) {
  const std::string& name = d.name;
  const std::set<int> archs(options.cudaArchitectures.begin(), options.cudaArchitectures.end());
  KILN_CHECK(!archs.empty(), "kiln aot --target cuda: no CUDA architectures to compile for");
  for (int sm : archs)
    KILN_CHECK(sm >= 80 && sm < 1000,
               "kiln aot --target cuda: architecture {} is not supported (the kernels need sm_80 or newer)", sm);

  // One layout, the generated GEMM instead of cuBLASLt: the library depends on the driver alone.
  const cuda::ProgramLayout layout = cuda::layoutProgram(compiled, renderSm(*archs.begin()), /*blasLt=*/false);
  for (int sm : archs)
    if (renderSm(sm) != layout.sm) checkSameLayout(layout, cuda::layoutProgram(compiled, renderSm(sm), false));
  KILN_CHECK(!layout.usesBlas(), "kiln aot --target cuda: the program has cuBLASLt steps with blasLt off");

  // NVRTC, one compile per architecture, concurrently; the lowest one's PTX is the fallback.
  const std::string unit = name + ".cu";
  std::vector<std::future<cuda::CompiledCuda>> jobs;
  for (int sm : archs)
    jobs.push_back(std::async(std::launch::async, [&layout, &unit, sm] {
      return cuda::compileCuda(layout.source, unit, fmt::format("sm_{}", sm));
    }));
  std::vector<cuda::CompiledCuda> code;
  for (auto& j : jobs) code.push_back(j.get());

  TargetParts parts;
  CudaBlobs blobs;
  const std::string version = cuda::nvrtcVersion();
  blobs.cudaVersion = std::stoi(version.substr(0, version.find('.'))) * 1000 +
                      std::stoi(version.substr(version.find('.') + 1)) * 10;
  size_t i = 0;
  for (int sm : archs) {
    const std::vector<char>& cubin = code[i++].cubin;
    KILN_CHECK(!cubin.empty(), "nvrtc produced no cubin for sm_{}", sm);
    CudaBlobs::Cubin cb{sm, fmt::format("{}.sm_{}.cubin", name, sm), static_cast<int64_t>(cubin.size())};
    writeFileAtomically((dir / cb.file).string(), std::string(cubin.begin(), cubin.end()));
    blobs.cubins.push_back(cb);
    parts.cubinBytes += cb.bytes;
    parts.architectures.push_back(fmt::format("sm_{}", sm));
  }
  blobs.ptxSm = *archs.begin();
  blobs.ptxFile = fmt::format("{}.compute_{}.ptx", name, blobs.ptxSm);
  writeFileAtomically((dir / blobs.ptxFile).string(), code.front().ptx);
  parts.ptxBytes = static_cast<int64_t>(code.front().ptx.size()) + 1;
  parts.architectures.push_back(fmt::format("compute_{}", blobs.ptxSm));

  // Constants, each 64-byte aligned in one blob; the weights as their safetensors file.
  std::string constants;
  for (const cuda::ProgramLayout::Owned& o : layout.owned) {
    if (!o.constant) {
      blobs.constantOffsets.push_back(-1);
      continue;
    }
    constants.resize((constants.size() + 63) / 64 * 64, '\0');
    blobs.constantOffsets.push_back(static_cast<int64_t>(constants.size()));
    constants.append(static_cast<const char*>(o.value.data()), o.value.bytes());
  }
  if (!constants.empty()) {
    blobs.constantsFile = name + ".constants.bin";
    writeFileAtomically((dir / blobs.constantsFile).string(), constants);
    d.hasConstants = true;
  }
  if (options.embedWeights) {
    blobs.weightsFile = name + ".weights.safetensors";
    writeFileAtomically((dir / blobs.weightsFile).string(),
                        std::string(reinterpret_cast<const char*>(weights.data()), weights.size()));
  }

  d.kernelCount = static_cast<int>(layout.kernels.size());
  std::vector<std::string> cubinNames;
  for (const auto& cb : blobs.cubins) cubinNames.push_back(fmt::format("sm_{}", cb.sm));
  d.cudaCode = fmt::format("cubins for {}, and PTX that the driver compiles for other GPUs of\n"
                           " * compute capability {}.{} or newer; contractions as kiln's generated GEMM",
                           fmt::join(cubinNames, ", "), blobs.ptxSm / 10, blobs.ptxSm % 10);
  parts.kernels = d.kernelCount;
  parts.source = generateCudaSource(d, layout, blobs);
  parts.flags.push_back("-Wa,-I" + dir.string());
  parts.libraries = {"-ldl", "-lm", "-lpthread"};

  if (!options.dumpDir.empty()) {
    const fs::path dump(options.dumpDir);
    fs::create_directories(dump);
    writeFileAtomically((dump / (name + ".cu")).string(), layout.source);
    writeFileAtomically((dump / blobs.ptxFile).string(), code.front().ptx);
    for (const CudaBlobs::Cubin& cb : blobs.cubins) fs::copy_file(dir / cb.file, dump / cb.file, fs::copy_options::overwrite_existing);
    if (!blobs.constantsFile.empty())
      fs::copy_file(dir / blobs.constantsFile, dump / blobs.constantsFile, fs::copy_options::overwrite_existing);
  }
  return parts;
}

}  // namespace kiln::aot::detail
