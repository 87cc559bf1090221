#include "aot/Export.h"

#include "aot/CSource.h"
#include "aot/ExportSupport.h"
#include "codegen/cpu/Jit.h"
#include "codegen/cpu/Program.h"
#include "passes/Pipeline.h"
#include "runtime/Safetensors.h"
#include "support/Error.h"
#include "support/File.h"

#include <fmt/format.h>

#include <chrono>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace kiln::aot {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

void checkName(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 64 && !std::isdigit(static_cast<unsigned char>(name[0]));
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  KILN_CHECK(ok, "library name '{}' is not a C identifier of at most 64 characters (letters, digits, _): it "
                 "prefixes every function of the library; choose one with --name",
             name);
}

int inputIndex(const ir::Graph& g, std::string_view name) {
  for (size_t i = 0; i < g.inputs().size(); ++i)
    if (g.inputs()[i]->name == name) return static_cast<int>(i);
  return -1;
}

/// Fills the training-step indices of `d` when `g` is one (see exportLibrary).
void detectTraining(const ir::Graph& g, ProgramDescription& d) {
  const int lr = inputIndex(g, "lr");
  int loss = -1;
  for (size_t i = 0; i < g.outputs().size(); ++i)
    if (g.outputs()[i].name == "loss") loss = static_cast<int>(i);
  if (g.updates().empty() || lr < 0 || loss < 0 || g.inputs().size() != 3) return;
  const int batch = lr == 0 ? 1 : 0;
  d.trainBatch = batch;
  d.trainLabels = 3 - lr - batch;
  d.trainLr = lr;
  d.trainLoss = loss;
}

/// A scratch directory removed when it goes out of scope.
struct TempDir {
  fs::path path;
  explicit TempDir(const fs::path& parent) {
    std::string pattern = (parent / ".kiln-aot-XXXXXX").string();
    KILN_CHECK(::mkdtemp(pattern.data()), "cannot create a temporary directory in '{}': {}", parent.string(),
               std::strerror(errno));
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

/// The compiler command: `given`, else $CC, else cc; split at spaces ("ccache gcc").
std::vector<std::string> compilerCommand(const std::string& given) {
  std::string text = given;
  if (text.empty())
    if (const char* cc = std::getenv("CC"); cc && *cc) text = cc;
  if (text.empty()) text = "cc";
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

/// Runs argv (no shell), its output into `log`; returns the exit status. Throws when it cannot start.
int runProcess(const std::vector<std::string>& argv, const fs::path& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  int err = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  KILN_CHECK(err == 0, "kiln aot links the library with a C compiler, and '{}' cannot be run: {} (set CC or "
                       "install one, e.g. gcc)",
             argv[0], std::strerror(err));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// The parameters the library starts from: the initializers, replaced by `weights` where named.
rt::NamedTensors startingWeights(const ir::Graph& g, const interp::TensorMap& weights) {
  rt::NamedTensors out;
  size_t matched = 0;
  for (const ir::Param& p : g.params()) matched += weights.count(p.value->name);
  std::vector<std::string> names;
  for (const ir::Param& p : g.params()) names.push_back(p.value->name);
  KILN_CHECK(weights.empty() || matched > 0,
             "none of the {} given weights is a parameter of the program (its parameters: {})", weights.size(),
             fmt::join(names, ", "));
  for (const ir::Param& p : g.params()) {
    auto it = weights.find(p.value->name);
    if (it == weights.end()) {
      out.emplace(p.value->name, interp::initialize(p));
      continue;
    }
    KILN_CHECK(it->second.dtype() == p.value->type.dtype && it->second.shape() == p.value->type.shape,
               "weight '{}' is {}, but the program's parameter is {}", p.value->name, it->second.typeStr(),
               p.value->type.str());
    out.emplace(p.value->name, it->second);
  }
  return out;
}

/// Whether `options` name a CPU other than this machine's (empty and "native" name this one).
bool forAnotherCpu(const ExportOptions& options) { return !options.cpu.empty() && options.cpu != "native"; }

/// The CPU part of exportLibrary: the kernels as an object file (with the constants and the
/// embedded weights as blobs), written into `dir`, and NAME.c.
detail::TargetParts cpuParts(const ir::Graph& compiled, ProgramDescription& d, const std::vector<std::byte>& weightBytes,
                             const fs::path& dir, const ExportOptions& options) {
  const std::string& name = d.name;
  cpu::ObjectOptions oo;
  // Another CPU than this machine's: a Jit of its own for that CPU (its kernels' vector width and
  // features; an unknown name is an error naming it).
  std::unique_ptr<cpu::Jit> targetJit;
  if (forAnotherCpu(options)) {
    try {
      cpu::JitOptions jo;
      jo.cpu = options.cpu;
      targetJit = std::make_unique<cpu::Jit>(jo);
    } catch (const Error& e) {
      KILN_THROW("kiln aot --cpu {}: {} (LLVM's CPU names, e.g. haswell, znver3, skylake-avx512, sapphirerapids, "
                 "x86-64-v3; or native)",
                 options.cpu, e.what());
    }
    oo.jit = targetJit.get();
  }
  oo.constantsSymbol = constantsSymbol(name);
  oo.dumpDir = options.dumpDir;
  if (options.embedWeights)
    oo.blobs.emplace_back(weightsSymbol(name),
                          std::string(reinterpret_cast<const char*>(weightBytes.data()), weightBytes.size()));
  cpu::ProgramObject object = cpu::compileObject(compiled, oo);
  d.layout = &object.layout;
  d.kernelCount = static_cast<int>(object.layout.kernels.size());
  d.cpuFeatures = object.cpuFeatures;
  d.constantOffsets = object.constantOffsets;
  d.hasConstants = object.hasConstants;
  detail::TargetParts parts;
  parts.kernels = d.kernelCount;
  parts.source = generateSource(d);
  d.layout = nullptr;  // `object` goes out of scope
  const fs::path objectPath = dir / (name + ".kernels.o");
  writeFileAtomically(objectPath.string(), object.object);
  if (!options.dumpDir.empty()) {
    std::error_code ec;
    fs::create_directories(options.dumpDir, ec);
    writeFileAtomically((fs::path(options.dumpDir) / (name + ".kernels.o")).string(), object.object);
  }
  parts.inputs.push_back(objectPath.string());
  parts.libraries = {"-lm", "-lpthread"};
  return parts;
}

}  // namespace

ExportResult exportLibrary(const ir::Graph& graph, const ExportOptions& options) {
  const std::string name = options.name.empty() ? graph.name() : options.name;
  checkName(name);
  KILN_CHECK(!options.outDir.empty(), "kiln aot: no output directory (-o DIR)");
  KILN_CHECK(options.target == "cpu" || options.target == "cuda", "kiln aot --target {}: the targets are cpu and cuda",
             options.target);
  KILN_CHECK(options.target == "cpu" || !forAnotherCpu(options),
             "kiln aot --cpu {}: --cpu names the CPU of a --target cpu library; a CUDA library's code is the GPU's "
             "(sm_80 and sm_90 cubins, PTX)",
             options.cpu);
#ifndef KILN_HAVE_CUDA
  KILN_CHECK(options.target != "cuda",
             "kiln aot --target cuda: this kiln was built without the CUDA toolkit (NVRTC), which compiles the kernels");
#endif
  const auto start = Clock::now();
  ExportResult result;

  const ir::Graph compiled = passes::compiledCopy(graph, options.precision, options.dumpDir);

  ProgramDescription d;
  d.name = name;
  d.source = options.source;
  d.target = options.target;
  d.graph = &compiled;
  detectTraining(compiled, d);
  result.training = d.training();

  const rt::NamedTensors weights = startingWeights(compiled, options.weights);
  const std::vector<std::byte> weightBytes = rt::serializeSafetensors(weights);
  if (options.embedWeights) {
    d.embeddedWeights = true;
    d.weightsBytes = static_cast<int64_t>(weightBytes.size());
  }

  std::error_code ec;
  fs::create_directories(options.outDir, ec);
  KILN_CHECK(!ec, "cannot create the output directory '{}': {}", options.outDir, ec.message());
  const fs::path out(options.outDir);
  TempDir tmp(out);
  detail::TargetParts parts;
#ifdef KILN_HAVE_CUDA
  if (options.target == "cuda") parts = detail::cudaParts(compiled, d, weightBytes, tmp.path, options);
#endif
  if (options.target == "cpu") parts = cpuParts(compiled, d, weightBytes, tmp.path, options);
  result.kernels = parts.kernels;
  result.cubinBytes = parts.cubinBytes;
  result.ptxBytes = parts.ptxBytes;
  result.architectures = parts.architectures;
  const std::string header = generateHeader(d);
  result.compileMs = msSince(start);

  writeFileAtomically((tmp.path / (name + ".h")).string(), header);
  writeFileAtomically((tmp.path / (name + ".c")).string(), parts.source);
  if (!options.dumpDir.empty()) {
    fs::create_directories(options.dumpDir, ec);
    writeFileAtomically((fs::path(options.dumpDir) / (name + ".c")).string(), parts.source);
  }

  const auto linkStart = Clock::now();
  const fs::path library = out / ("lib" + name + ".so");
  const fs::path built = tmp.path / ("lib" + name + ".so");
  std::vector<std::string> argv = compilerCommand(options.compiler);
  for (const char* flag : {"-std=c11", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-Wl,-z,noexecstack",
                           "-Wl,--no-undefined"})
    argv.push_back(flag);
  argv.push_back("-Wl,-soname,lib" + name + ".so");
  argv.push_back("-I" + tmp.path.string());
  argv.insert(argv.end(), parts.flags.begin(), parts.flags.end());
  argv.push_back("-o");
  argv.push_back(built.string());
  argv.push_back((tmp.path / (name + ".c")).string());
  argv.insert(argv.end(), parts.inputs.begin(), parts.inputs.end());
  argv.insert(argv.end(), parts.libraries.begin(), parts.libraries.end());
  const fs::path log = tmp.path / "cc.log";
  const int status = runProcess(argv, log);
  std::string output = fs::exists(log) ? readTextFile(log.string()) : std::string();
  KILN_CHECK(status == 0, "the C compiler failed ({} exited with {}) linking lib{}.so:\n{}\ncommand: {}", argv[0],
             status, name, output, fmt::join(argv, " "));
  result.linkMs = msSince(linkStart);

  // Everything built: put the files in place (each rename is atomic).
  result.library = library.string();
  result.header = (out / (name + ".h")).string();
  result.weights = (out / (name + ".safetensors")).string();
  fs::rename(built, library, ec);
  KILN_CHECK(!ec, "cannot move the library to '{}': {}", result.library, ec.message());
  writeFileAtomically(result.header, header);
  rt::saveSafetensors(result.weights, weights);
  result.libraryBytes = static_cast<int64_t>(fs::file_size(library));
  return result;
}

}  // namespace kiln::aot
