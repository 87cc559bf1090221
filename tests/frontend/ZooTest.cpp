// The model zoo: every model builds and verifies; signatures and parameter names follow PyTorch;
// docs/MODELS.md lists exactly each model's inputs, parameters and outputs.
#include "FrontendTestUtil.h"

#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <fstream>
#include <map>
#include <sstream>

namespace kiln {
namespace {

using testing::contains;
using testing::errorOf;

using Signature = std::vector<std::pair<std::string, std::string>>;  // name → type text

/// The graph's inputs, parameters and outputs as "name → type", with the batch size written B.
Signature signature(const ir::Graph& g, int64_t batch) {
  auto typeText = [&](const ir::TensorType& t, bool batched) {
    std::vector<std::string> dims;
    for (ir::Dim d : t.shape) dims.push_back(batched && d == batch ? "B" : std::to_string(d));
    return fmt::format("{}[{}]", dtypeName(t.dtype), fmt::join(dims, ","));
  };
  Signature s;
  for (const ir::Value* v : g.inputs()) s.emplace_back(v->name, typeText(v->type, true));
  for (const ir::Param& p : g.params()) s.emplace_back(p.value->name, typeText(p.value->type, false));
  for (const ir::Output& o : g.outputs()) s.emplace_back(o.name, typeText(o.value->type, true));
  return s;
}

TEST(Zoo, Names) {
  EXPECT_EQ(zooModelNames(),
            (std::vector<std::string>{"tiny_mlp", "mnist_mlp", "digits_mlp", "simplenet", "cnn", "lstm", "transformer"}));
}

TEST(Zoo, EveryModelBuildsAndVerifies) {
  for (const std::string& name : zooModelNames()) {
    for (int64_t batch : {1, 8}) {
      for (bool withLoss : {true, false}) {
        SCOPED_TRACE(fmt::format("{} batch {} loss {}", name, batch, withLoss));
        ir::Graph g = buildZooModel(name, {.batch = batch, .withLoss = withLoss});
        EXPECT_EQ(g.name(), name);
        EXPECT_TRUE(ir::verifyGraph(g).empty()) << fmt::format("{}", fmt::join(ir::verifyGraph(g), "\n"));
        EXPECT_EQ(g.outputs().size(), withLoss ? 2u : 1u);
        EXPECT_EQ(g.inputs().size(), withLoss ? 2u : 1u);
        EXPECT_EQ(g.inputs()[0]->type.shape[0], batch);
        if (withLoss) {
          EXPECT_EQ(g.outputs()[1].name, "loss");
          EXPECT_EQ(g.outputs()[1].value->type, (ir::TensorType{DType::f32, {}}));
        }
      }
    }
  }
}

TEST(Zoo, EveryModelRoundTripsThroughText) {
  for (const std::string& name : zooModelNames()) {
    std::string text = ir::printGraph(buildZooModel(name, {.batch = 2}));
    EXPECT_EQ(ir::printGraph(ir::parseGraph(text, name + ".kir")), text) << name;
  }
}

TEST(Zoo, MnistMlpSignature) {
  ir::Graph g = buildZooModel("mnist_mlp", {.batch = 4});
  EXPECT_EQ(signature(g, 4), (Signature{{"x", "f32[B,784]"},
                                        {"labels", "i64[B]"},
                                        {"fc1.weight", "f32[128,784]"},
                                        {"fc1.bias", "f32[128]"},
                                        {"fc2.weight", "f32[10,128]"},
                                        {"fc2.bias", "f32[10]"},
                                        {"logits", "f32[B,10]"},
                                        {"loss", "f32[]"}}));
}

TEST(Zoo, LayoutsFollowPyTorch) {
  ir::Graph cnn = buildZooModel("cnn", {.batch = 2});
  EXPECT_EQ(cnn.findParam("conv1.weight")->value->type.shape, (Shape{32, 1, 3, 3}));
  EXPECT_EQ(cnn.findParam("conv2.weight")->value->type.shape, (Shape{64, 32, 3, 3}));
  EXPECT_EQ(cnn.findParam("fc.weight")->value->type.shape, (Shape{10, 3136}));
  EXPECT_EQ(cnn.findOutput("logits")->value->type.shape, (Shape{2, 10}));

  ir::Graph lstm = buildZooModel("lstm", {.batch = 2});
  EXPECT_EQ(lstm.findParam("lstm.weight_ih_l0")->value->type.shape, (Shape{256, 32}));
  EXPECT_EQ(lstm.findParam("lstm.weight_hh_l0")->value->type.shape, (Shape{256, 64}));
  EXPECT_EQ(lstm.findParam("emb.weight")->value->type.shape, (Shape{64, 32}));
  EXPECT_EQ(lstm.findOutput("logits")->value->type.shape, (Shape{2, 4}));
  EXPECT_EQ(lstm.inputs()[0]->type, (ir::TensorType{DType::i64, {2, 16}}));

  ir::Graph gpt = buildZooModel("transformer", {.batch = 2});
  EXPECT_EQ(gpt.findParam("tok_emb.weight")->value->type.shape, (Shape{128, 64}));
  EXPECT_EQ(gpt.findParam("pos_emb.weight")->value->type.shape, (Shape{32, 64}));
  EXPECT_EQ(gpt.findParam("blocks.0.attn.qkv.weight")->value->type.shape, (Shape{192, 64}));
  EXPECT_EQ(gpt.findParam("blocks.1.mlp.fc2.weight")->value->type.shape, (Shape{64, 256}));
  EXPECT_EQ(gpt.findParam("ln_f.bias")->value->type.shape, (Shape{64}));
  EXPECT_EQ(gpt.findParam("head.weight")->value->type.shape, (Shape{128, 64}));
  EXPECT_EQ(gpt.findParam("head.bias"), nullptr);
  EXPECT_EQ(gpt.findOutput("logits")->value->type.shape, (Shape{2, 32, 128}));
  EXPECT_EQ(gpt.params().size(), 2u + 2 * 12 + 2 + 1);
}

TEST(Zoo, WithoutLossThereIsNoLabelInput) {
  ir::Graph g = buildZooModel("tiny_mlp", {.batch = 3, .withLoss = false});
  EXPECT_EQ(signature(g, 3), (Signature{{"x", "f32[B,64]"},
                                        {"fc1.weight", "f32[32,64]"},
                                        {"fc1.bias", "f32[32]"},
                                        {"fc2.weight", "f32[1,32]"},
                                        {"fc2.bias", "f32[1]"},
                                        {"pred", "f32[B,1]"}}));
}

TEST(Zoo, BadRequestsAreErrors) {
  std::string msg = errorOf([] { buildZooModel("resnet"); });
  EXPECT_TRUE(contains(msg, "unknown zoo model 'resnet'")) << msg;
  EXPECT_TRUE(contains(msg, "tiny_mlp, mnist_mlp, digits_mlp, simplenet, cnn, lstm, transformer")) << msg;
  EXPECT_TRUE(contains(errorOf([] { buildZooModel("cnn", {.batch = 0}); }), "batch must be positive"));
}

/// docs/MODELS.md: under "## NAME", table rows "| `value` | type |" for every input, parameter
/// and output (with the loss), batch written B.
std::map<std::string, Signature> documentedSignatures() {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/docs/MODELS.md");
  EXPECT_TRUE(in.good()) << "cannot read docs/MODELS.md";
  std::map<std::string, Signature> out;
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) section = line.substr(3);
    if (line.rfind("| `", 0) != 0 || section.empty()) continue;
    size_t nameEnd = line.find('`', 3);
    size_t typeStart = line.find('|', nameEnd) + 1;
    size_t typeEnd = line.find('|', typeStart);
    std::string type = line.substr(typeStart, typeEnd - typeStart);
    type.erase(0, type.find_first_not_of(" `"));
    type.erase(type.find_last_not_of(" `") + 1);
    out[section].emplace_back(line.substr(3, nameEnd - 3), type);
  }
  return out;
}

TEST(Zoo, ModelsDocListsEverySignature) {
  std::map<std::string, Signature> docs = documentedSignatures();
  for (const std::string& name : zooModelNames()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(docs.count(name)) << "docs/MODELS.md has no section '## " << name << "'";
    Signature actual = signature(buildZooModel(name, {.batch = 5}), 5);
    std::sort(actual.begin(), actual.end());
    Signature documented = docs[name];
    std::sort(documented.begin(), documented.end());
    EXPECT_EQ(documented, actual);
  }
}

}  // namespace
}  // namespace kiln
