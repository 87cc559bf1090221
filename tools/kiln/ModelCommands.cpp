// Commands on models and IR text: export, check, opt, ops, models.
#include "tools/kiln/Commands.h"

#include "frontend/Zoo.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Amp.h"
#include "passes/Decompose.h"
#include "passes/Pipeline.h"
#include "passes/Pass.h"
#include "passes/TrainingStep.h"
#include "support/File.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <fcntl.h>
#include <unistd.h>

namespace kiln::cli {

void writeTextOutput(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  writeFileAtomically(path, text);
}

void checkOutputPath(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  if (path.empty() || path == "-") return;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st)) KILN_THROW("{}: cannot write '{}': it is a directory", option, path);
  if (fs::exists(st) && !fs::is_regular_file(st)) return;  // a device or a pipe: written through
  const std::string target = linkTarget(path);  // what the write replaces: a link's target
  fs::path dir = fs::path(target).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec)) KILN_THROW("{}: cannot write '{}': the folder '{}' does not exist", option, path, dir.string());
  // The write makes a temporary file beside the result and renames it: try exactly that.
  const std::string probe = fmt::format("{}.kiln-check.{}", target, ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) KILN_THROW("{}: cannot write '{}': {}", option, path, std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

void rejectZooOptions(const std::string& file, std::initializer_list<const CLI::Option*> options) {
  for (const CLI::Option* opt : options)
    KILN_CHECK(opt->count() == 0, "{} applies to zoo models; '{}' has its own shapes and parameters", opt->get_name(),
               file);
}

namespace {

/// A validator of finite numbers at or above `least` (above it when `strict`).
CLI::Validator finiteNumber(double least, bool strict, std::string name) {
  return CLI::Validator(
      [least, strict](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "not a number: " + text;
        if (!std::isfinite(v)) return "not a finite number: " + text;
        if (strict ? v <= least : v < least) return fmt::format("{} must be {} {}", text, strict ? "above" : "at least", least);
        return {};
      },
      strict ? "POSITIVE" : "NONNEGATIVE", std::move(name));
}

}  // namespace

const CLI::Validator FinitePositive = finiteNumber(0, true, "FinitePositive");
const CLI::Validator FiniteNonNegative = finiteNumber(0, false, "FiniteNonNegative");

namespace {

std::string summarize(const ir::Graph& g) {
  int64_t paramElems = 0;
  for (const ir::Param& p : g.params()) paramElems += p.value->type.numel();
  int composite = 0;
  for (const auto& n : g.nodes()) composite += n->info().has(ir::kComposite);
  std::vector<std::string> outs;
  for (const ir::Output& o : g.outputs()) outs.push_back(fmt::format("{}: {}", o.name, o.value->type.str()));
  return fmt::format("graph @{}: {} inputs, {} parameters ({} elements), {} nodes ({} composite), outputs {}",
                     g.name(), g.inputs().size(), g.params().size(), paramElems, g.nodes().size(), composite,
                     fmt::join(outs, ", "));
}

std::string operandCount(const ir::OpInfo& info) {
  if (info.minOperands == info.maxOperands) return fmt::format("{}", info.minOperands);
  if (info.maxOperands < 0) return fmt::format("{}+", info.minOperands);
  return fmt::format("{}–{}", info.minOperands, info.maxOperands);
}

/// "`axes`: ints", "`keepdim`: bool = `false`", "`approximate`: str {none | tanh} = `"none"`".
std::string attrSummary(const ir::AttrSpec& a, std::string_view bar) {
  std::string kind(ir::attrKindName(a.kind));
  if (!a.choices.empty()) kind += fmt::format(" {{{}}}", fmt::join(a.choices, bar));
  std::string s = fmt::format("`{}`: {}", a.name, kind);
  if (a.hasDefault) s += fmt::format(" = `{}`", ir::printAttrValue(a.defaultValue));
  return s;
}

std::string escapeCell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|' || c == '*') out += '\\';  // table separator, emphasis
    out += c;
  }
  return out;
}

/// The op reference of docs/IR.md, one table per KILN_OP_GROUP (a test keeps the doc in sync).
std::string opReferenceMarkdown() {
  std::string out;
  std::string_view group;
  for (const ir::OpInfo& info : ir::allOps()) {
    if (info.group != group) {
      group = info.group;
      out += fmt::format("\n### {}\n\n| op | operands | attributes | flags | semantics |\n|---|---|---|---|---|\n", group);
    }
    std::vector<std::string> attrs;
    for (const ir::AttrSpec& a : info.attrs) attrs.push_back(attrSummary(a, " \\| "));
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", info.name, operandCount(info),
                       attrs.empty() ? std::string("—") : fmt::format("{}", fmt::join(attrs, ", ")),
                       fmt::join(ir::flagNames(info.flags), ", "), escapeCell(info.doc));
  }
  return out;
}

std::string opListText() {
  std::string out;
  for (const ir::OpInfo& info : ir::allOps()) {
    std::vector<std::string> attrs;
    for (const ir::AttrSpec& a : info.attrs) attrs.push_back(attrSummary(a, "|"));
    out += fmt::format("{:<16} {:<4} {}\n    {}\n", info.name, operandCount(info), fmt::join(attrs, ", "), info.doc);
  }
  return out + fmt::format("{} ops\n", ir::kNumOps);
}

std::vector<std::string> splitCommaList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

void addModelCommands(CLI::App& app, std::vector<std::pair<CLI::App*, RunFn>>& commands) {
  {
    struct Options {
      std::string model, out = "-";
      kiln::ZooOptions zoo;
      bool noLoss = false, train = false;
      std::string optimizer = "sgd", precision = "f32", dumpDir;
    };
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("export", "Trace a zoo model to .kir text");
    cmd->add_option("MODEL", o->model, "zoo model (see `kiln models`)")->required();
    cmd->add_option("-o,--output", o->out, "output .kir file ('-' = stdout)");
    cmd->add_option("--batch", o->zoo.batch, "batch size")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    cmd->add_option("--seed", o->zoo.seed, "seed of the parameter initializers");
    cmd->add_flag("--no-loss", o->noLoss, "export the prediction only (no labels input, no loss output)");
    cmd->add_flag("--train", o->train, "export the whole training step: forward, backward and optimizer update");
    cmd->add_option("--optimizer", o->optimizer, "with --train: sgd, adam or adamw")
        ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
    cmd->add_option("--precision", o->precision,
                    "f32, bf16 or f16: contractions in low precision (amp pass); with --train, f16 adds loss scaling")
        ->check(CLI::IsMember({"f32", "bf16", "f16"}));
    addDumpOption(cmd, o->dumpDir);
    commands.emplace_back(cmd, [o] {
      KILN_CHECK(!(o->train && o->noLoss), "--train needs the loss: drop --no-loss");
      o->zoo.withLoss = !o->noLoss;
      ir::Graph g = kiln::buildZooModel(o->model, o->zoo);
      passes::PassContext ctx;
      ctx.precision = passes::precisionFromName(o->precision);
      if (o->train) {
        passes::TrainingStepOptions to;
        to.optimizer.kind = passes::optimizerKindFromName(o->optimizer);
        to.precision = ctx.precision;
        for (const std::string& w : passes::buildTrainingStep(g, to)) std::fprintf(stderr, "warning: %s\n", w.c_str());
      } else if (ctx.precision != passes::Precision::F32) {
        passes::decompose(g);  // amp sees the matmuls inside linear, attention, …
        passes::amp(g, ctx);
      }
      writeTextOutput(o->out, ir::printGraph(g));
      if (o->out != "-") std::fprintf(stderr, "wrote %s: %s\n", o->out.c_str(), summarize(g).c_str());
      if (std::string dir = dumpDirectory(o->dumpDir); !dir.empty()) dumpCompilation(g, dir, "f32");
      return 0;
    });
  }
  {
    struct Options {
      std::string file;
      bool print = false;
    };
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("check", "Parse and verify a .kir file");
    cmd->add_option("FILE", o->file, ".kir file")->required();
    cmd->add_flag("--print", o->print, "print the graph back");
    commands.emplace_back(cmd, [o] {
      ir::Graph g = ir::parseGraphFile(o->file);
      if (o->print) std::fputs(ir::printGraph(g).c_str(), stdout);
      std::printf("%s: ok, %s\n", o->file.c_str(), summarize(g).c_str());
      return 0;
    });
  }
  {
    struct Options {
      std::string file, passList, out = "-", dumpDir, precision = "f32";
      bool summary = false;
    };
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("opt", "Run passes on a .kir file and print the result");
    cmd->add_option("FILE", o->file, ".kir file")->required();
    CLI::Option* passOption = cmd->add_option("--passes", o->passList,
                                          "comma-separated pass names (see `kiln passes`); default: the default "
                                          "pipeline decompose,canonicalize,amp,fuse,plan");
    cmd->add_option("-o,--output", o->out, "output .kir file ('-' = stdout)");
    cmd->add_flag("--summary", o->summary, "print the kernels, FLOPs, bytes moved and memory of the result to stderr");
    addDumpOption(cmd, o->dumpDir);
    cmd->add_option("--precision", o->precision, "the amp pass's policy: f32, bf16 or f16")
        ->check(CLI::IsMember({"f32", "bf16", "f16"}));
    commands.emplace_back(cmd, [o, passOption] {
      KILN_CHECK(passOption->count() == 0 || !o->passList.empty(),
                 "--passes names no pass: give pass names (see `kiln passes`), or leave it out for the default pipeline");
      ir::Graph g = ir::parseGraphFile(o->file);
      passes::PassContext ctx;
      ctx.dumpDir = dumpDirectory(o->dumpDir);
      ctx.precision = passes::precisionFromName(o->precision);
      passes::runPipeline(g, o->passList.empty() ? passes::defaultPipeline() : splitCommaList(o->passList), ctx);
      writeTextOutput(o->out, ir::printGraph(g));
      if (o->summary) std::fputs(passes::summaryText(g, passes::summarize(g)).c_str(), stderr);
      return 0;
    });
  }
  {
    auto* cmd = app.add_subcommand("passes", "List the registered passes");
    commands.emplace_back(cmd, [] {
      for (const passes::Pass& p : passes::registeredPasses())
        std::printf("%-14s %s\n", p.name.c_str(), p.description.c_str());
      return 0;
    });
  }
  {
    auto markdown = std::make_shared<bool>(false);
    auto* cmd = app.add_subcommand("ops", "List the IR's ops with their attributes and semantics");
    cmd->add_flag("--markdown", *markdown, "print docs/IR.md's op reference tables");
    commands.emplace_back(cmd, [markdown] {
      std::fputs(*markdown ? opReferenceMarkdown().c_str() : opListText().c_str(), stdout);
      return 0;
    });
  }
  {
    auto* cmd = app.add_subcommand("models", "List the zoo models");
    commands.emplace_back(cmd, [] {
      for (const std::string& name : kiln::zooModelNames()) {
        ir::Graph g = kiln::buildZooModel(name, {});
        std::printf("%-12s %s\n", name.c_str(), summarize(g).c_str());
      }
      return 0;
    });
  }
}

}  // namespace kiln::cli
