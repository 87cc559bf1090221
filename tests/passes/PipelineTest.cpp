// The pass registry and the pipeline driver: lookup by name, running in order, dumping the IR
// after every pass.
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "passes/Pass.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

ir::Graph softmaxGraph() {
  ir::Graph g("model");
  ir::Value* x = g.addInput("x", {DType::f32, {2, 3}});
  g.addOutput("y", g.addNode(ir::OpKind::Softmax, {x}, std::span<const ir::NamedAttr>{}, SourceLoc{"model.cpp", 9, 3}, "y"));
  return g;
}

std::string readFile(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class TempDir {
 public:
  TempDir() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / fmt::format("kiln-passes-{}-{}", getpid(), test->name());
    fs::remove_all(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(PassRegistry, KnowsVerifyAndDecompose) {
  std::vector<std::string> names;
  for (const passes::Pass& p : passes::registeredPasses()) {
    names.push_back(p.name);
    EXPECT_FALSE(p.description.empty()) << p.name;
    EXPECT_TRUE(static_cast<bool>(p.run)) << p.name;
  }
  EXPECT_NE(std::find(names.begin(), names.end(), "verify"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "decompose"), names.end());
  ASSERT_NE(passes::findPass("decompose"), nullptr);
  EXPECT_EQ(passes::findPass("decompose")->name, "decompose");
  EXPECT_EQ(passes::findPass("no-such-pass"), nullptr);
}

TEST(Pipeline, RunsPassesInOrder) {
  ir::Graph g = softmaxGraph();
  passes::runPipeline(g, {"verify", "decompose", "verify"});
  for (const auto& n : g.nodes()) EXPECT_FALSE(n->info().has(ir::kComposite));
  EXPECT_EQ(g.nodes().size(), 6u);  // reduce_max, stop_gradient, sub, exp, reduce_sum, div
}

TEST(Pipeline, EmptyPipelineLeavesTheGraphAlone) {
  ir::Graph g = softmaxGraph();
  std::string before = ir::printGraph(g);
  passes::runPipeline(g, {});
  EXPECT_EQ(ir::printGraph(g), before);
}

TEST(Pipeline, DumpsTheIrAfterEveryPass) {
  TempDir tmp;
  fs::path dir = tmp.path() / "nested" / "dumps";  // created on demand, parents included
  ir::Graph g = softmaxGraph();
  passes::PassContext ctx;
  ctx.dumpDir = dir.string();
  passes::runPipeline(g, {"verify", "decompose"}, ctx);

  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"01-verify.kir", "02-decompose.kir", "kernels.txt", "summary.txt"}));
  std::string summary = readFile(dir / "summary.txt");
  EXPECT_NE(summary.find("kernels:     6 (4 loop, 2 reduction)"), std::string::npos) << summary;
  EXPECT_NE(readFile(dir / "kernels.txt").find("reduce_max"), std::string::npos);

  std::string afterVerify = readFile(dir / "01-verify.kir");
  std::string afterDecompose = readFile(dir / "02-decompose.kir");
  EXPECT_NE(afterVerify.find("softmax("), std::string::npos) << afterVerify;
  EXPECT_EQ(afterDecompose.find("softmax("), std::string::npos) << afterDecompose;
  EXPECT_NE(afterDecompose.find("reduce_max("), std::string::npos) << afterDecompose;
  // A dump is the text form of the graph at that point: it parses back to the same graph.
  EXPECT_EQ(afterDecompose, ir::printGraph(g));
  EXPECT_EQ(ir::printGraph(ir::parseGraph(afterDecompose, "02-decompose.kir")), afterDecompose);
}

}  // namespace
}  // namespace kiln::testing
