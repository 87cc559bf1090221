// The `kiln` command line: each command registers itself on the CLI11 app and runs later.
// Exit codes: 0 ok, 1 user error (kiln::Error: bad file, wrong shapes, missing data), 2 usage.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace kiln::cli {

/// A registered command: its run function is called after a successful parse when selected.
using RunFn = std::function<int()>;

void addModelCommands(CLI::App& app, std::vector<std::pair<CLI::App*, RunFn>>& commands);
void addRunCommands(CLI::App& app, std::vector<std::pair<CLI::App*, RunFn>>& commands);
void addDeviceCommands(CLI::App& app, std::vector<std::pair<CLI::App*, RunFn>>& commands);
void addTrainCommands(CLI::App& app, std::vector<std::pair<CLI::App*, RunFn>>& commands);
void addAotCommand(CLI::App& app, std::vector<std::pair<CLI::App*, RunFn>>& commands);
void addExplainCommands(CLI::App& app, std::vector<std::pair<CLI::App*, RunFn>>& commands);
void addBenchCommand(CLI::App& app, std::vector<std::pair<CLI::App*, RunFn>>& commands);

/// Writes `text` to `path` atomically, or to stdout when path is "-" or empty.
void writeTextOutput(const std::string& path, const std::string& text);

/// Throws kiln::Error naming `option` when `path` (unless empty or "-") cannot be written: its
/// folder is missing or not writable, or it is a directory. Commands check their output paths
/// with it before they work, so that a typo costs nothing.
void checkOutputPath(const std::string& path, const std::string& option);

/// Throws kiln::Error when any of `options` (a zoo model's --batch, --seed) was given for the .kir
/// file `file`, which has its own shapes and weights.
void rejectZooOptions(const std::string& file, std::initializer_list<const CLI::Option*> options);

/// A finite number above 0 (CLI11's PositiveNumber lets NaN and infinity through).
extern const CLI::Validator FinitePositive;
/// A finite number of at least 0.
extern const CLI::Validator FiniteNonNegative;

}  // namespace kiln::cli

namespace kiln::ir {
class Graph;
}

namespace kiln::cli {

/// Adds `--dump DIR` to a command that compiles. When the option is absent, the environment
/// variable KILN_DUMP fills it in (see dumpDirectory).
void addDumpOption(CLI::App* cmd, std::string& dir);
/// `given`, or $KILN_DUMP when `given` is empty.
std::string dumpDirectory(const std::string& given);
/// Compiles a copy of `g` with the default pipeline (passes/Pipeline.h) and writes its dump to
/// `dir`: the IR after every pass, kernels.txt and summary.txt. Prints where to stderr.
void dumpCompilation(const ir::Graph& g, const std::string& dir, const std::string& precision);

}  // namespace kiln::cli
