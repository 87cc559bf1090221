#include "codegen/cuda/Nvrtc.h"

#include "support/Error.h"

#include <nvrtc.h>

#include <fmt/format.h>

namespace kiln::cuda {

namespace {
void check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) KILN_THROW("nvrtc: {} failed: {}", what, nvrtcGetErrorString(r));
}

struct Program {
  nvrtcProgram p = nullptr;
  ~Program() {
    if (p) nvrtcDestroyProgram(&p);
  }
};
}  // namespace

std::string nvrtcVersion() {
  int major = 0, minor = 0;
  check(::nvrtcVersion(&major, &minor), "nvrtcVersion");
  return fmt::format("{}.{}", major, minor);
}

CompiledCuda compileCuda(const std::string& source, const std::string& name, const std::string& arch,
                         const std::vector<std::string>& extraOptions) {
  KILN_CHECK(arch.rfind("sm_", 0) == 0 || arch.rfind("compute_", 0) == 0,
             "cuda: architecture '{}' must look like sm_90 or compute_90", arch);
  Program prog;
  check(nvrtcCreateProgram(&prog.p, source.c_str(), name.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  std::vector<std::string> opts = {"-arch=" + arch, "-std=c++17",
                                   std::string("-I") + KILN_CUDA_INCLUDE_DIR};
  opts.insert(opts.end(), extraOptions.begin(), extraOptions.end());
  std::vector<const char*> cOpts;
  for (const auto& o : opts) cOpts.push_back(o.c_str());
  nvrtcResult res = nvrtcCompileProgram(prog.p, static_cast<int>(cOpts.size()), cOpts.data());

  CompiledCuda out;
  size_t logSize = 0;
  check(nvrtcGetProgramLogSize(prog.p, &logSize), "nvrtcGetProgramLogSize");
  out.log.resize(logSize);
  if (logSize) check(nvrtcGetProgramLog(prog.p, out.log.data()), "nvrtcGetProgramLog");
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  if (res != NVRTC_SUCCESS) KILN_THROW("nvrtc could not compile {} for {}:\n{}", name, arch, out.log);

  size_t ptxSize = 0;
  check(nvrtcGetPTXSize(prog.p, &ptxSize), "nvrtcGetPTXSize");
  out.ptx.resize(ptxSize);
  check(nvrtcGetPTX(prog.p, out.ptx.data()), "nvrtcGetPTX");
  if (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  if (arch.rfind("sm_", 0) == 0) {
    size_t cubinSize = 0;
    check(nvrtcGetCUBINSize(prog.p, &cubinSize), "nvrtcGetCUBINSize");
    out.cubin.resize(cubinSize);
    check(nvrtcGetCUBIN(prog.p, out.cubin.data()), "nvrtcGetCUBIN");
  }
  return out;
}

}  // namespace kiln::cuda
