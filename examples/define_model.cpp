// Defines a small convolutional classifier with the kiln DSL and prints its graph as .kir text.
//
//   define_model            prints the graph of the model below
//   define_model ZOO_NAME   prints a zoo model (tiny_mlp, mnist_mlp, simplenet, cnn, lstm, transformer)
#include "frontend/Kiln.h"
#include "ir/Printer.h"

#include <cstdio>

using namespace kiln;

// A model is a Module with named children; parameter names follow PyTorch (conv.weight, head.0.bias…).
struct SmallConvNet : nn::Module {
  std::shared_ptr<nn::Conv2d> conv = registerModule("conv", std::make_shared<nn::Conv2d>(1, 8, 3, 1, 1));
  std::shared_ptr<nn::Sequential> head = registerModule(
      "head", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
                  std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(8 * 14 * 14, 32),
                  std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(32, 10)}));

  Tensor forward(const Tensor& images) {
    Tensor h = max_pool2d(relu((*conv)(images)), {2, 2});  // [B, 8, 14, 14]
    return (*head)(h);                                      // [B, 10]
  }
};

int main(int argc, char** argv) {
  try {
    if (argc > 1) {
      std::fputs(ir::printGraph(buildZooModel(argv[1], {.batch = 4})).c_str(), stdout);
      return 0;
    }
    SmallConvNet net;
    Tracer t("small_conv_net", /*seed=*/1);
    Tensor images = t.input("images", DType::f32, {4, 1, 28, 28});
    Tensor labels = t.input("labels", DType::i64, {4});
    Tensor logits = net.forward(images);
    t.output("logits", logits);
    t.output("loss", cross_entropy(logits, labels));
    t.output("accuracy", mean(cast(argmax(logits, -1) == labels, DType::f32)));
    std::fputs(ir::printGraph(t.finish()).c_str(), stdout);
  } catch (const Error& e) {
    // Shape mistakes land here, with the file:line of the offending call in this file.
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
