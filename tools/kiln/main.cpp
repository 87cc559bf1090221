// kiln — the command line of the kiln deep-learning compiler. See docs/CLI.md.
#include "tools/kiln/Commands.h"

#include "support/Error.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>

namespace {

/// Flushes what the command printed; a failed write (a full disk, a closed pipe) is an error with
/// exit status 1, not a silently truncated output.
int flushed(const char* command, int rc) {
  std::cout.flush();
  errno = 0;
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) || std::cout.bad();
  if (!failed) return rc;
  std::fprintf(stderr, "kiln %s: error: cannot write the standard output: %s\n", command,
               errno ? std::strerror(errno) : "a write failed (a full disk?)");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln: a deep-learning compiler. Models traced to .kir graph IR, differentiated, fused and\n"
               "compiled to vectorized multi-threaded CPU code (LLVM) or CUDA kernels; ahead of time to C libraries.",
               "kiln"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln 0.1");
  std::vector<std::pair<CLI::App*, kiln::cli::RunFn>> commands;
  kiln::cli::addModelCommands(app, commands);
  kiln::cli::addRunCommands(app, commands);
  kiln::cli::addDeviceCommands(app, commands);
  kiln::cli::addTrainCommands(app, commands);
  kiln::cli::addAotCommand(app, commands);
  kiln::cli::addExplainCommands(app, commands);
  kiln::cli::addBenchCommand(app, commands);

  // CLI11 reports an unknown command only as "a subcommand is required"; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    std::string first = argv[1];
    if (first == "help") {  // `kiln help` as many CLIs accept it
      std::fputs(app.help().c_str(), stdout);
      return 0;
    }
    bool known = false;
    std::vector<std::string> names;
    for (auto& [sub, run] : commands) {
      names.push_back(sub->get_name());
      known |= sub->get_name() == first;
    }
    if (!known) {
      std::fprintf(stderr, "kiln: unknown command '%s' (commands: %s); see kiln --help\n", first.c_str(),
                   fmt::format("{}", fmt::join(names, ", ")).c_str());
      return 2;
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message and a hint to stderr
    return 2;
  }

  for (auto& [sub, run] : commands) {
    if (!sub->parsed()) continue;
    try {
      return flushed(sub->get_name().c_str(), run());
    } catch (const kiln::Error& e) {
      std::fprintf(stderr, "kiln %s: error: %s\n", sub->get_name().c_str(), e.what());
      return 1;
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "kiln %s: error: out of memory\n", sub->get_name().c_str());
      return 1;
    } catch (const std::exception& e) {
      // What a library throws past kiln's own checks (std::filesystem on a path it cannot use):
      // still a user error with its message, never an abort.
      std::fprintf(stderr, "kiln %s: error: %s\n", sub->get_name().c_str(), e.what());
      return 1;
    }
  }
  return 2;
}
