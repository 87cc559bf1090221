// Commands that evaluate graphs and move tensors: run, init, dataset.
#include "tools/kiln/Commands.h"
#include "tools/kiln/Profile.h"

#include "engine/Executor.h"

#include "interp/Interpreter.h"
#include "ir/Parser.h"
#include "runtime/Datasets.h"
#include "runtime/Safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

namespace kiln::cli {

namespace {

/// "f32[2,3] = [0.1, 0.2, … 4 more]": the first values of a tensor, for a terminal.
std::string preview(const rt::HostTensor& t, int64_t maxValues = 8) {
  std::vector<std::string> vals;
  for (int64_t i = 0; i < std::min(t.numel(), maxValues); ++i) vals.push_back(fmt::format("{:.6g}", t.at(i)));
  std::string more = t.numel() > maxValues ? fmt::format(", … {} more", t.numel() - maxValues) : "";
  return fmt::format("{} = [{}{}]", t.typeStr(), fmt::join(vals, ", "), more);
}

std::vector<std::string> splitLines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string line; std::getline(ss, line);) out.push_back(line);
  return out;
}

/// Prints, per row of a [N, C] output, the index of its largest entry (and the class name and the
/// softmax probability); compares with `labels` when the inputs hold a tensor of that name.
void printArgmax(const std::string& name, const rt::HostTensor& out, const rt::NamedTensors& inputs,
                 const std::vector<std::string>& classNames) {
  KILN_CHECK(out.rank() == 2 && out.shape()[1] > 0, "--argmax {}: the output has type {}, expected [N, C] with C ≥ 1", name,
             out.typeStr());
  int64_t n = out.shape()[0], c = out.shape()[1];
  const rt::HostTensor* labels = nullptr;
  if (auto it = inputs.find("labels"); it != inputs.end() && it->second.rank() == 1 && it->second.numel() == n)
    labels = &it->second;
  auto className = [&](int64_t k) {
    return k >= 0 && k < static_cast<int64_t>(classNames.size()) ? classNames[k] : fmt::format("class {}", k);
  };
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    double mx = out.at(i * c);
    for (int64_t j = 1; j < c; ++j)
      if (out.at(i * c + j) > mx) mx = out.at(i * c + (best = j));
    double denom = 0;
    for (int64_t j = 0; j < c; ++j) denom += std::exp(out.at(i * c + j) - mx);
    std::string truth;
    if (labels) {
      int64_t l = static_cast<int64_t>(labels->at(i));
      correct += l == best;
      truth = fmt::format("  (label: {}{})", className(l), l == best ? ", correct" : "");
    }
    std::printf("  %4lld: %-12s p=%.3f%s\n", static_cast<long long>(i), className(best).c_str(), 1.0 / denom,
                truth.c_str());
  }
  if (labels)
    std::printf("  accuracy: %lld/%lld = %.1f%%\n", static_cast<long long>(correct), static_cast<long long>(n),
                100.0 * correct / n);
}

/// Rows [offset, offset + limit) of a tensor (limit < 0: to the end).
rt::HostTensor takeRows(const rt::HostTensor& t, int64_t offset, int64_t limit) {
  int64_t n = t.shape().at(0);
  KILN_CHECK(offset <= n, "--offset {} is past the {} examples of the data set", offset, n);
  int64_t count = limit < 0 ? n - offset : std::min(limit, n - offset);
  std::vector<int64_t> shape = t.shape();
  shape[0] = count;
  rt::HostTensor out(t.dtype(), shape);
  size_t rowBytes = t.numel() == 0 ? 0 : t.bytes() / n;
  std::memcpy(out.data(), static_cast<const std::byte*>(t.data()) + offset * rowBytes, count * rowBytes);
  return out;
}

/// [N, ...] → [N, prod(...)], the same bytes.
rt::HostTensor reshapeRows(const rt::HostTensor& t) {
  int64_t n = t.shape().at(0);
  rt::HostTensor out(t.dtype(), {n, n == 0 ? 0 : t.numel() / n});
  std::memcpy(out.data(), t.data(), t.bytes());
  return out;
}

}  // namespace

void addRunCommands(CLI::App& app, std::vector<std::pair<CLI::App*, RunFn>>& commands) {
  {
    struct Options {
      std::string file, inputsPath, weightsPath, outPath, target = "cpu", dumpDir;
      std::vector<std::string> argmaxOutputs;
      bool print = false, profile = false;
      int runs = 1;
    };
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("run", "Evaluate a .kir graph (LLVM CPU backend, CUDA backend or reference interpreter)");
    cmd->add_option("FILE", o->file, ".kir file")->required();
    cmd->add_option("--inputs", o->inputsPath, "safetensors file with one tensor per graph input");
    cmd->add_option("--weights", o->weightsPath, "safetensors file with parameters (others use their initializers)");
    cmd->add_option("--out", o->outPath, "write the outputs to this safetensors file");
    cmd->add_option("--target", o->target, "where to run: cpu (the LLVM CPU backend), cuda (the CUDA backend, on GPU 0), interp (the reference interpreter) or auto (the device the cost model predicts faster, checked against the first steps)")
        ->check(CLI::IsMember({"cpu", "cuda", "interp", "auto"}));
    cmd->add_flag("--print", o->print, "print every output");
    cmd->add_flag("--profile", o->profile, "print each kernel's time, share, GFLOP/s, GB/s and source lines");
    cmd->add_option("--runs", o->runs,
                    "run the graph this many times: the first warms up, the time printed (and --profile's) is "
                    "over the others; a training step updates its parameters every run; outputs are the last run's")
        ->check(CLI::Range(1, 1000000));
    addDumpOption(cmd, o->dumpDir);
    cmd->add_option("--argmax", o->argmaxOutputs, "print the per-row argmax of this [N, C] output");
    commands.emplace_back(cmd, [o] {
      checkOutputPath(o->outPath, "--out");
      ir::Graph g = ir::parseGraphFile(o->file);
      for (const std::string& name : o->argmaxOutputs)
        KILN_CHECK(g.findOutput(name) != nullptr, "--argmax: graph @{} has no output '{}'", g.name(), name);
      rt::NamedTensors inputs, weights;
      rt::Metadata meta;
      if (!o->inputsPath.empty()) inputs = rt::loadSafetensors(o->inputsPath, &meta);
      // Extra tensors in an inputs file (e.g. labels for a model exported without loss) are fine;
      // the interpreter gets exactly the graph's inputs.
      interp::TensorMap graphInputs;
      for (const ir::Value* in : g.inputs()) {
        auto it = inputs.find(in->name);
        KILN_CHECK(it != inputs.end(), "graph input '{}' ({}) is not in {}", in->name, in->type.str(),
                   o->inputsPath.empty() ? std::string("the inputs (pass --inputs FILE.safetensors)")
                                         : o->inputsPath);
        KILN_CHECK(it->second.dtype() == in->type.dtype && it->second.shape() == in->type.shape,
                   "{}: tensor '{}' has type {}, but graph input '{}' of @{} is {}", o->inputsPath, in->name,
                   it->second.typeStr(), in->name, g.name(), in->type.str());
        graphInputs.emplace(in->name, it->second);
      }
      if (!o->weightsPath.empty()) {
        weights = rt::loadSafetensors(o->weightsPath);
        for (const auto& [name, t] : weights) {
          const ir::Param* p = g.findParam(name);
          KILN_CHECK(p != nullptr, "{}: '{}' is not a parameter of graph @{}", o->weightsPath, name, g.name());
          KILN_CHECK(t.dtype() == p->value->type.dtype && t.shape() == p->value->type.shape,
                     "{}: tensor '{}' has type {}, but parameter '{}' of @{} is {}", o->weightsPath, name, t.typeStr(),
                     name, g.name(), p->value->type.str());
        }
      }
      const engine::Target target = engine::parseTarget(o->target);
      const std::string dir = dumpDirectory(o->dumpDir);
      if (!dir.empty() && target == engine::Target::Interp) dumpCompilation(g, dir, "f32");
      std::unique_ptr<engine::Executor> exec = engine::Executor::create(g, executorOptions(target, dir, o->profile));
      exec->setParams(interp::TensorMap(weights.begin(), weights.end()));
      // One run, or a warm-up and then the timed runs (each timed alone: their median and fastest).
      interp::TensorMap outputs;
      std::vector<double> times;
      for (int r = 0; r < o->runs; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        exec->run(graphInputs, outputs);
        times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        if (r == 0 && o->runs > 1) {
          times.clear();
          if (o->profile) exec->kernelProfile();  // resets it: the profile covers the timed runs
        }
      }
      std::sort(times.begin(), times.end());
      const double ms = times[times.size() / 2];
      const std::string how = o->runs == 1 ? std::string("in")
                                           : fmt::format("{} times after a warm-up (fastest {:.4g} ms), median", times.size(), times.front());
      if (exec->target() != engine::Target::Interp)
        std::fprintf(stderr, "ran @%s on the %s backend %s %.4g ms (compiled in %.0f ms)\n", g.name().c_str(),
                     exec->target() == engine::Target::Cpu ? "CPU" : "CUDA", how.c_str(), ms, exec->compileMs());
      else
        std::fprintf(stderr, "ran @%s on the reference interpreter %s %.4g ms\n", g.name().c_str(), how.c_str(), ms);
      std::vector<std::string> classNames;
      if (auto it = meta.find("class_names"); it != meta.end()) classNames = splitLines(it->second);
      if (o->profile) std::fputs(profileTable(g, passes::Precision::F32, exec->kernelProfile()).c_str(), stdout);
      if (o->print)
        for (const ir::Output& out : g.outputs())
          std::printf("%s: %s\n", out.name.c_str(), preview(outputs.at(out.name)).c_str());
      for (const std::string& name : o->argmaxOutputs) {
        std::printf("%s argmax:\n", name.c_str());
        printArgmax(name, outputs.at(name), inputs, classNames);
      }
      if (!o->outPath.empty()) {
        rt::saveSafetensors(o->outPath, rt::NamedTensors(outputs.begin(), outputs.end()));
        std::fprintf(stderr, "wrote %s\n", o->outPath.c_str());
      }
      return 0;
    });
  }
  {
    struct Options {
      std::string file, outPath;
    };
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("init", "Write a graph's initial parameters to safetensors");
    cmd->add_option("FILE", o->file, ".kir file")->required();
    cmd->add_option("-o,--output", o->outPath, "safetensors file to write")->required();
    commands.emplace_back(cmd, [o] {
      ir::Graph g = ir::parseGraphFile(o->file);
      interp::TensorMap params = interp::initializeParams(g);
      rt::saveSafetensors(o->outPath, rt::NamedTensors(params.begin(), params.end()));
      std::fprintf(stderr, "wrote %zu parameters of @%s to %s\n", params.size(), g.name().c_str(),
                   o->outPath.c_str());
      return 0;
    });
  }
  {
    struct Options {
      std::string name, split = "test", outPath, xName = "x", yName = "labels";
      std::optional<int64_t> limit;
      int64_t offset = 0;
      bool flatten = false;
    };
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("dataset", "Write a slice of a data set to safetensors (inputs for `kiln run`)");
    cmd->add_option("NAME", o->name, "fashion-mnist or digits")
        ->required()
        ->check(CLI::IsMember({"fashion-mnist", "digits"}));
    cmd->add_option("--split", o->split, "train or test (fashion-mnist)")->check(CLI::IsMember({"train", "test"}));
    cmd->add_option("--limit", o->limit, "number of examples (default: all)")
        ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()).description("a count >= 0"));
    cmd->add_option("--offset", o->offset, "index of the first example")
        ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()).description("an index >= 0"));
    cmd->add_flag("--flatten", o->flatten, "images as [N, H*W] instead of [N, 1, H, W]");
    cmd->add_option("--x-name", o->xName, "tensor name of the features");
    cmd->add_option("--y-name", o->yName, "tensor name of the labels");
    cmd->add_option("-o,--output", o->outPath, "safetensors file to write")->required();
    commands.emplace_back(cmd, [o] {
      KILN_CHECK(o->xName != o->yName, "--x-name and --y-name are both '{}': the features and the labels need two names",
                 o->xName);
      checkOutputPath(o->outPath, "-o");
      rt::HostTensor x, y;
      std::vector<std::string> classNames;
      int64_t limit = o->limit.value_or(-1);
      if (o->name == "fashion-mnist") {
        // Read only what is needed: the first offset + limit images.
        int64_t upTo = limit < 0 ? -1 : o->offset + limit;
        rt::ImageDataset d = rt::loadFashionMnist(o->split == "train" ? rt::Split::Train : rt::Split::Test,
                                                  rt::defaultFashionMnistDir(), upTo);
        x = std::move(d.images), y = std::move(d.labels), classNames = std::move(d.classNames);
      } else {
        rt::TabularDataset d = rt::loadDigits();
        x = std::move(d.features), y = std::move(d.labels), classNames = std::move(d.classNames);
      }
      x = takeRows(x, o->offset, limit);
      y = takeRows(y, o->offset, limit);
      if (o->flatten && x.rank() > 2) x = reshapeRows(x);
      rt::Metadata meta{{"dataset", o->name}, {"class_names", fmt::format("{}", fmt::join(classNames, "\n"))}};
      rt::saveSafetensors(o->outPath, {{o->xName, x}, {o->yName, y}}, meta);
      std::fprintf(stderr, "wrote %s: %s %s, %s %s\n", o->outPath.c_str(), o->xName.c_str(), x.typeStr().c_str(),
                   o->yName.c_str(), y.typeStr().c_str());
      return 0;
    });
  }
}

}  // namespace kiln::cli
