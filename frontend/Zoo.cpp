// The zoo models, written the way a user of the DSL would write them. Keep docs/MODELS.md in step
// (tests/frontend checks every parameter name appears there).
#include "frontend/Zoo.h"

#include "frontend/Kiln.h"

#include <algorithm>
#include <filesystem>
#include <functional>

namespace kiln {
namespace {

using nn::Linear;
template <typename M, typename... A>
std::shared_ptr<M> make(A&&... args) {
  return std::make_shared<M>(std::forward<A>(args)...);
}

struct TinyMlp : nn::Module {
  std::shared_ptr<Linear> fc1 = registerModule("fc1", make<Linear>(64, 32));
  std::shared_ptr<Linear> fc2 = registerModule("fc2", make<Linear>(32, 1));
  Tensor forward(const Tensor& x) { return (*fc2)(relu((*fc1)(x))); }
};

struct MnistMlp : nn::Module {
  std::shared_ptr<Linear> fc1 = registerModule("fc1", make<Linear>(784, 128));
  std::shared_ptr<Linear> fc2 = registerModule("fc2", make<Linear>(128, 10));
  Tensor forward(const Tensor& x) { return (*fc2)(relu((*fc1)(x))); }
};

struct DigitsMlp : nn::Module {
  std::shared_ptr<Linear> fc1 = registerModule("fc1", make<Linear>(64, 32));
  std::shared_ptr<Linear> fc2 = registerModule("fc2", make<Linear>(32, 10));
  Tensor forward(const Tensor& x) { return (*fc2)(relu((*fc1)(x))); }
};

struct SimpleNet : nn::Module {
  std::shared_ptr<Linear> fc1 = registerModule("fc1", make<Linear>(1000, 512));
  std::shared_ptr<Linear> fc2 = registerModule("fc2", make<Linear>(512, 256));
  std::shared_ptr<Linear> fc3 = registerModule("fc3", make<Linear>(256, 2));
  Tensor forward(const Tensor& x) { return (*fc3)(relu((*fc2)(relu((*fc1)(x))))); }
};

struct Cnn : nn::Module {
  std::shared_ptr<nn::Conv2d> conv1 = registerModule("conv1", make<nn::Conv2d>(1, 32, 3, 1, 1));
  std::shared_ptr<nn::Conv2d> conv2 = registerModule("conv2", make<nn::Conv2d>(32, 64, 3, 1, 1));
  std::shared_ptr<Linear> fc = registerModule("fc", make<Linear>(64 * 7 * 7, 10));
  Tensor forward(const Tensor& x) {
    Tensor h = max_pool2d(relu((*conv1)(x)), {2, 2});   // [B, 32, 14, 14]
    h = max_pool2d(relu((*conv2)(h)), {2, 2});          // [B, 64, 7, 7]
    return (*fc)(flatten(h, 1));
  }
};

struct LstmClassifier : nn::Module {
  std::shared_ptr<nn::Embedding> emb = registerModule("emb", make<nn::Embedding>(64, 32));
  std::shared_ptr<nn::LSTM> lstm = registerModule("lstm", make<nn::LSTM>(32, 64));
  std::shared_ptr<Linear> fc = registerModule("fc", make<Linear>(64, 4));
  Tensor forward(const Tensor& tokens) { return (*fc)((*lstm)((*emb)(tokens)).h); }
};

struct TinyGpt : nn::Module {
  static constexpr int64_t kVocab = 128, kContext = 32, kDim = 64, kHeads = 2, kLayers = 2;
  std::shared_ptr<nn::Embedding> tokEmb = registerModule("tok_emb", make<nn::Embedding>(kVocab, kDim));
  std::shared_ptr<nn::Embedding> posEmb = registerModule("pos_emb", make<nn::Embedding>(kContext, kDim));
  std::shared_ptr<nn::Sequential> blocks = registerModule("blocks", makeBlocks());
  std::shared_ptr<nn::LayerNorm> lnF = registerModule("ln_f", make<nn::LayerNorm>(kDim));
  std::shared_ptr<Linear> head = registerModule("head", make<Linear>(kDim, kVocab, /*bias=*/false));

  static std::shared_ptr<nn::Sequential> makeBlocks() {
    auto s = make<nn::Sequential>();
    for (int64_t i = 0; i < kLayers; ++i) s->push_back(make<nn::TransformerBlock>(kDim, kHeads, /*causal=*/true));
    return s;
  }
  Tensor forward(const Tensor& tokens) {
    Tensor pos = (*posEmb)(arange(tokens.tracer(), tokens.size(1)));  // [T, D], broadcast over the batch
    Tensor h = (*blocks)((*tokEmb)(tokens) + pos);
    return (*head)((*lnF)(h));
  }
};

/// Classifier models: input x (float or token ids), target labels i64[B], output logits, loss
/// cross_entropy.
template <typename M>
Model classifier(std::string_view name, const ZooOptions& o, DType xType, Shape xShape) {
  auto model = std::make_shared<M>();
  Model spec;
  spec.name = std::string(name);
  spec.seed = o.seed;
  spec.module = model.get();
  spec.inputs = {{xType == DType::i64 ? "tokens" : "x", xType, std::move(xShape)}};
  spec.targets = {{"labels", DType::i64, {o.batch}}};
  spec.forward = [model](const NamedTensors& in) -> NamedTensors { return {{"logits", model->forward(in[0])}}; };
  spec.loss = [](const NamedTensors& out, const NamedTensors& t) { return cross_entropy(out["logits"], t["labels"]); };
  return spec;
}

Model tinyMlp(const ZooOptions& o) {
  auto model = std::make_shared<TinyMlp>();
  Model spec;
  spec.name = "tiny_mlp";
  spec.seed = o.seed;
  spec.module = model.get();
  spec.inputs = {{"x", DType::f32, {o.batch, 64}}};
  spec.targets = {{"target", DType::f32, {o.batch, 1}}};
  spec.forward = [model](const NamedTensors& in) -> NamedTensors { return {{"pred", model->forward(in["x"])}}; };
  spec.loss = [](const NamedTensors& out, const NamedTensors& t) { return mse_loss(out["pred"], t["target"]); };
  return spec;
}

Model transformer(const ZooOptions& o) {
  auto model = std::make_shared<TinyGpt>();
  Model spec;
  spec.name = "transformer";
  spec.seed = o.seed;
  spec.module = model.get();
  spec.inputs = {{"tokens", DType::i64, {o.batch, TinyGpt::kContext}}};
  spec.targets = {{"targets", DType::i64, {o.batch, TinyGpt::kContext}}};
  spec.forward = [model](const NamedTensors& in) -> NamedTensors { return {{"logits", model->forward(in["tokens"])}}; };
  spec.loss = [](const NamedTensors& out, const NamedTensors& t) {
    Tensor flatLogits = reshape(out["logits"], {-1, TinyGpt::kVocab});  // [B*T, V]
    return cross_entropy(flatLogits, reshape(t["targets"], {-1}));
  };
  return spec;
}

struct ZooEntry {
  std::string_view name;
  std::function<Model(const ZooOptions&)> spec;
};

const std::vector<ZooEntry>& zoo() {
  static const std::vector<ZooEntry> entries = {
      {"tiny_mlp", tinyMlp},
      {"mnist_mlp", [](const ZooOptions& o) { return classifier<MnistMlp>("mnist_mlp", o, DType::f32, {o.batch, 784}); }},
      {"digits_mlp", [](const ZooOptions& o) { return classifier<DigitsMlp>("digits_mlp", o, DType::f32, {o.batch, 64}); }},
      {"simplenet", [](const ZooOptions& o) { return classifier<SimpleNet>("simplenet", o, DType::f32, {o.batch, 1000}); }},
      {"cnn", [](const ZooOptions& o) { return classifier<Cnn>("cnn", o, DType::f32, {o.batch, 1, 28, 28}); }},
      {"lstm", [](const ZooOptions& o) { return classifier<LstmClassifier>("lstm", o, DType::i64, {o.batch, 16}); }},
      {"transformer", transformer},
  };
  return entries;
}

}  // namespace

std::vector<std::string> zooModelNames() {
  std::vector<std::string> names;
  for (const ZooEntry& e : zoo()) names.emplace_back(e.name);
  return names;
}

bool namesKirFile(const std::string& model) {
  if (model.ends_with(".kir")) return true;
  if (!std::filesystem::exists(model)) return false;
  const std::vector<std::string> zoo = zooModelNames();
  return std::find(zoo.begin(), zoo.end(), model) == zoo.end();
}

Model zooModel(std::string_view name, const ZooOptions& opts) {
  KILN_CHECK(opts.batch > 0, "zoo model '{}': batch must be positive, got {}", name, opts.batch);
  for (const ZooEntry& e : zoo())
    if (e.name == name) return e.spec(opts);
  KILN_THROW("unknown zoo model '{}' (known models: {})", name, fmt::join(zooModelNames(), ", "));
}

ir::Graph buildZooModel(std::string_view name, const ZooOptions& opts) {
  return buildForward(zooModel(name, opts), {.withLoss = opts.withLoss});
}

}  // namespace kiln
