// `kiln profile`: the machine profile (measured once, cached); `kiln explain`: a model's kernels with
// their predicted CPU and GPU times, the bound of each and which device wins (cost/, docs/COST.md).
#include "tools/kiln/Commands.h"

#include "cost/CostModel.h"
#include "cost/Explain.h"
#include "cost/MachineProfile.h"
#include "frontend/Zoo.h"
#include "support/Error.h"

#include <fmt/format.h>

#include <cstdio>

namespace kiln::cli {
namespace {

void progressLine(const std::string& s) {
  std::fprintf(stderr, "%s\n", s.c_str());
  std::fflush(stderr);
}

}  // namespace

void addExplainCommands(CLI::App& app, std::vector<std::pair<CLI::App*, RunFn>>& commands) {
  {
    struct Options {
      bool remeasure = false, json = false;
      std::string path;
      int rounds = 1;
    };
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("profile", "Show this machine's profile for the cost model (measured once, cached)");
    cmd->add_flag("--remeasure", o->remeasure, "measure again even when the cached profile is valid");
    cmd->add_flag("--json", o->json, "print the profile as JSON (the cache's form; a GPU profile for --gpu-profile)");
    cmd->add_option("--rounds", o->rounds, "when measuring: measure the CPU N times and keep each figure's best (shared "
                                           "machines)")
        ->check(CLI::Range(1, 20));
    cmd->add_option("--file", o->path, "the cache file (default: $KILN_CACHE_DIR/machine.json or ~/.cache/kiln/machine.json)");
    commands.emplace_back(cmd, [o] {
      cost::ProfileOptions po;
      po.path = o->path;
      po.remeasure = o->remeasure;
      po.rounds = o->rounds;
      po.progress = progressLine;
      cost::MachineProfile p = cost::machineProfile(po);
      std::fputs((o->json ? cost::profileToJson(p) : cost::profileText(p) + cost::cpuModelText(p.cpu)).c_str(), stdout);
      return 0;
    });
  }
  {
    struct Options {
      cost::ExplainOptions explain;
      std::string gpuProfile, profilePath;
      bool noGraphs = false, json = false;
    };
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("explain", "Predict each kernel's time on the CPU and a GPU, and say which wins and why");
    cmd->add_option("MODEL", o->explain.model, "zoo model (see `kiln models`) or a .kir file")->required();
    CLI::Option* batchOpt = cmd->add_option("--batch", o->explain.batch, "batch size of a zoo model")
                                ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    CLI::Option* seedOpt = cmd->add_option("--seed", o->explain.seed, "seed of a zoo model's parameter initializers");
    cmd->add_flag("--train", o->explain.train, "the whole training step: forward, backward and optimizer update");
    cmd->add_option("--optimizer", o->explain.optimizer, "with --train: sgd, adam or adamw")
        ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
    cmd->add_option("--precision", o->explain.precision, "f32, bf16 or f16 contractions (amp pass)")
        ->check(CLI::IsMember({"f32", "bf16", "f16"}));
    cmd->add_option("--gpu-profile", o->gpuProfile,
                    "a GPU profile measured elsewhere: `kiln profile --json` from a GPU machine, or one GPU object");
    cmd->add_flag("--measure", o->explain.measure, "also run the program on the CPU and show measured kernel times");
    cmd->add_flag("--no-graphs", o->noGraphs, "predict the GPU launching every kernel instead of replaying a CUDA graph");
    cmd->add_flag("--json", o->json, "print the report as JSON");
    cmd->add_option("--profile-file", o->profilePath, "the machine profile cache to use (default as `kiln profile`)");
    commands.emplace_back(cmd, [o, batchOpt, seedOpt] {
      if (namesKirFile(o->explain.model)) rejectZooOptions(o->explain.model, {batchOpt, seedOpt});
      cost::ProfileOptions po;
      po.path = o->profilePath;
      po.progress = progressLine;
      cost::MachineProfile machine = cost::machineProfile(po);
      std::optional<cost::GpuProfile> gpu;
      std::string noGpu;
      if (!o->gpuProfile.empty()) {
        gpu = cost::gpuProfileFromFile(o->gpuProfile);
      } else if (!machine.gpus.empty()) {
        gpu = machine.gpus.front();
      } else {
        noGpu = "none on this machine and no --gpu-profile: showing the CPU side only (measure a GPU machine with "
                "`kiln profile --json > gpu.json` and pass --gpu-profile gpu.json)";
      }
      o->explain.cost.cudaGraphs = !o->noGraphs;
      cost::ExplainReport r = cost::explain(o->explain, machine.cpu, gpu ? &*gpu : nullptr, noGpu);
      std::fputs((o->json ? cost::explainJson(r) : cost::explainText(r)).c_str(), stdout);
      return 0;
    });
  }
}

}  // namespace kiln::cli
