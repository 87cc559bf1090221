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

/// Writes `text` to `path` atomically, or to stdout when path is "-" or empty.
void writeTextOutput(const std::string& path, const std::string& text);

}  // namespace kiln::cli
