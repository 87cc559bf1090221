// Diagnostics of the pipeline driver: unknown pass names, graphs that do not verify, dump
// directories that cannot be created.
#include "ir/Printer.h"
#include "passes/Pass.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

ir::Graph softmaxGraph() {
  ir::Graph g("model");
  ir::Value* x = g.addInput("x", {DType::f32, {2, 3}});
  g.addOutput("y", g.addNode(ir::OpKind::Softmax, {x}, std::span<const ir::NamedAttr>{}, SourceLoc{}, "y"));
  return g;
}

std::string errorOf(ir::Graph& g, const std::vector<std::string>& names, const passes::PassContext& ctx = {}) {
  try {
    passes::runPipeline(g, names, ctx);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PipelineErrors, UnknownPassListsTheKnownOnes) {
  ir::Graph g = softmaxGraph();
  std::string before = ir::printGraph(g);
  std::string msg = errorOf(g, {"decompose", "fuze"});
  EXPECT_NE(msg.find("unknown pass 'fuze'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("known passes: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("verify"), std::string::npos) << msg;
  EXPECT_NE(msg.find("decompose"), std::string::npos) << msg;
  // Names are checked before anything runs: the graph is untouched.
  EXPECT_EQ(ir::printGraph(g), before);
}

TEST(PipelineErrors, VerifyRejectsAMalformedGraph) {
  ir::Graph g("bad");
  ir::Value* x = g.addInput("x", {DType::f32, {2, 3}});
  // exp of f32[2,3] declared as f32[3,2]: only the verifier can catch this.
  ir::Value* y = g.addNodeRaw(ir::OpKind::Exp, {x}, {}, {DType::f32, {3, 2}}, SourceLoc{"bad.kir", 3, 7});
  g.addOutput("y", y);
  std::string msg = errorOf(g, {"verify"});
  EXPECT_NE(msg.find("exp"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bad.kir:3:7"), std::string::npos) << msg;
}

TEST(PipelineErrors, DumpDirectoryThatCannotBeCreated) {
  fs::path file = fs::temp_directory_path() / fmt::format("kiln-passes-{}-not-a-dir", getpid());
  std::ofstream(file) << "x";
  ir::Graph g = softmaxGraph();
  passes::PassContext ctx;
  ctx.dumpDir = (file / "dumps").string();
  std::string msg = errorOf(g, {"verify"}, ctx);
  fs::remove(file);
  EXPECT_NE(msg.find("cannot create dump directory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not-a-dir"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln::testing
