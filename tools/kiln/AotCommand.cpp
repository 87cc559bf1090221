// `kiln aot`: a zoo model or a .kir graph compiled ahead of time to libNAME.so + NAME.h (aot/Export.h),
// for the CPU or (--target cuda) for NVIDIA GPUs.
#include "tools/kiln/Commands.h"

#include "aot/Export.h"
#include "frontend/Build.h"
#include "frontend/Zoo.h"
#include "ir/Parser.h"
#include "passes/Pass.h"
#include "passes/TrainingStep.h"
#include "runtime/Safetensors.h"
#include "support/Error.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

namespace kiln::cli {

void addAotCommand(CLI::App& app, std::vector<std::pair<CLI::App*, RunFn>>& commands) {
  struct Options {
    std::string model, out, name, target = "cpu", cpu, precision = "f32", optimizer = "adam", weights, cc, dumpDir;
    int64_t batch = 32;
    uint64_t seed = 0;
    bool train = false, embed = false;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("aot", "Compile a model ahead of time to a shared library with a C header");
  cmd->add_option("MODEL", o->model, "zoo model (see `kiln models`) or a .kir file")->required();
  cmd->add_option("-o,--output", o->out, "output directory: libNAME.so, NAME.h, NAME.safetensors")->required();
  cmd->add_option("--name", o->name, "library name: the C prefix of its functions (default: the model's name)");
  cmd->add_flag("--train", o->train, "export the whole training step (forward, backward, optimizer update)");
  cmd->add_option("--optimizer", o->optimizer, "with --train: sgd, adam or adamw")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  cmd->add_option("--target", o->target,
                  "cpu, or cuda: a library for NVIDIA GPUs (cubins for sm_80 and sm_90, PTX for newer GPUs; needs the "
                  "CUDA driver at run time, no cuBLAS)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--cpu", o->cpu,
                  "with --target cpu: the CPU the kernels are for, an LLVM CPU name (haswell, znver3, skylake-avx512, "
                  "sapphirerapids, x86-64-v3, …; default native: this machine's); create checks the running CPU");
  cmd->add_option("--precision", o->precision, "f32, bf16 or f16 contractions (amp pass)")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  CLI::Option* batchOpt =
      cmd->add_option("--batch", o->batch, "batch size of a zoo model")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  CLI::Option* seedOpt = cmd->add_option("--seed", o->seed, "seed of a zoo model's parameter initializers");
  cmd->add_option("--weights", o->weights, "start from these parameters (safetensors; e.g. from kiln train --save)");
  cmd->add_flag("--embed-weights", o->embed, "also place the weights in the library (create needs no file)");
  cmd->add_option("--cc", o->cc, "the C compiler that links the library (default: $CC, else cc)");
  addDumpOption(cmd, o->dumpDir);
  commands.emplace_back(cmd, [o, batchOpt, seedOpt] {
    aot::ExportOptions eo;
    eo.outDir = o->out;
    eo.name = o->name;
    eo.target = o->target;
    eo.cpu = o->cpu;
    eo.embedWeights = o->embed;
    eo.compiler = o->cc;
    eo.dumpDir = dumpDirectory(o->dumpDir);
    const passes::Precision precision = passes::precisionFromName(o->precision);
    ir::Graph graph;
    const bool file = namesKirFile(o->model);
    if (file) {
      KILN_CHECK(!o->train, "--train applies to zoo models; a .kir file is exported as it is (export a training "
                            "step with `kiln export MODEL --train`)");
      rejectZooOptions(o->model, {batchOpt, seedOpt});
      graph = ir::parseGraphFile(o->model);
      eo.precision = precision;
      eo.source = fmt::format("{}, {}", std::filesystem::path(o->model).filename().string(), o->precision);
    } else {
      Model spec = zooModel(o->model, {.batch = o->batch, .seed = o->seed});
      if (o->train) {
        passes::TrainingStepOptions to;
        to.optimizer.kind = passes::optimizerKindFromName(o->optimizer);
        to.precision = precision;  // the step applies it (amp with loss scaling for f16)
        std::vector<std::string> warnings;
        graph = buildTrainStep(spec, to, o->batch, &warnings);
        for (const std::string& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
        eo.source = fmt::format("zoo model {}, training step with {}, {}, batch {}", o->model, o->optimizer,
                                o->precision, o->batch);
      } else {
        graph = buildInference(spec, o->batch);
        eo.precision = precision;
        eo.source = fmt::format("zoo model {}, inference, {}, batch {}", o->model, o->precision, o->batch);
      }
    }
    if (eo.name.empty()) eo.name = graph.name();
    if (!o->weights.empty()) {
      for (auto& [name, t] : rt::loadSafetensors(o->weights)) eo.weights.insert_or_assign(name, std::move(t));
    }
    aot::ExportResult r = aot::exportLibrary(graph, eo);
    std::printf("wrote %s (%.1f KiB, %d kernels, %s), %s, %s\n", r.library.c_str(), r.libraryBytes / 1024.0,
                r.kernels, r.training ? "training step" : "inference", r.header.c_str(), r.weights.c_str());
    if (!r.architectures.empty())
      std::printf("CUDA code: %s (cubins %.1f KiB, PTX %.1f KiB)\n", fmt::format("{}", fmt::join(r.architectures, ", ")).c_str(),
                  r.cubinBytes / 1024.0, r.ptxBytes / 1024.0);
    std::printf("compiled in %.0f ms, linked in %.0f ms\n", r.compileMs, r.linkMs);
    return 0;
  });
}

}  // namespace kiln::cli
