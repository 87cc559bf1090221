#include "frontend/nn/Layers.h"

#include "frontend/OpHelpers.h"

#include <algorithm>

namespace kiln::nn {

Linear::Linear(int64_t inFeatures, int64_t outFeatures, bool bias) : in_(inFeatures), out_(outFeatures), bias_(bias) {
  KILN_CHECK(inFeatures > 0 && outFeatures > 0, "Linear({}, {}): feature counts must be positive", inFeatures,
             outFeatures);
  registerParameter("weight", {outFeatures, inFeatures}, init::kaimingUniform(inFeatures));
  if (bias) registerParameter("bias", {outFeatures}, init::biasUniform(inFeatures));
}

Tensor Linear::forward(const Tensor& x, SrcLoc loc) {
  Tracer& t = x.tracer();
  return linear(x, param(t, "weight"), bias_ ? param(t, "bias") : Tensor(), loc);
}

Conv2d::Conv2d(int64_t inChannels, int64_t outChannels, int64_t kernelSize, int64_t stride, int64_t padding,
               int64_t dilation, int64_t groups, bool bias)
    : Conv2d(inChannels, outChannels, Ints{kernelSize, kernelSize},
             Conv2dOptions{{stride, stride}, {padding, padding}, {dilation, dilation}, groups}, bias) {}

Conv2d::Conv2d(int64_t inChannels, int64_t outChannels, Ints kernelSize, Conv2dOptions opts, bool bias)
    : opts_(std::move(opts)), bias_(bias) {
  if (kernelSize.size() == 1) kernelSize.push_back(kernelSize[0]);
  KILN_CHECK(kernelSize.size() == 2 && kernelSize[0] > 0 && kernelSize[1] > 0,
             "Conv2d: kernel size must be one or two positive numbers");
  KILN_CHECK(inChannels > 0 && outChannels > 0 && opts_.groups > 0, "Conv2d: channels and groups must be positive");
  KILN_CHECK(inChannels % opts_.groups == 0 && outChannels % opts_.groups == 0,
             "Conv2d: in_channels {} and out_channels {} must be divisible by groups {}", inChannels, outChannels,
             opts_.groups);
  int64_t fanIn = inChannels / opts_.groups * kernelSize[0] * kernelSize[1];
  registerParameter("weight", {outChannels, inChannels / opts_.groups, kernelSize[0], kernelSize[1]},
                    init::kaimingUniform(fanIn));
  if (bias) registerParameter("bias", {outChannels}, init::biasUniform(fanIn));
}

Tensor Conv2d::forward(const Tensor& x, SrcLoc loc) {
  Tracer& t = x.tracer();
  return conv2d(x, param(t, "weight"), bias_ ? param(t, "bias") : Tensor(), opts_, loc);
}

MaxPool2d::MaxPool2d(int64_t kernelSize, int64_t stride, int64_t padding)
    : kernel_(kernelSize), stride_(stride == 0 ? kernelSize : stride), padding_(padding) {}

Tensor MaxPool2d::forward(const Tensor& x, SrcLoc loc) {
  return max_pool2d(x, {kernel_, kernel_}, {stride_, stride_}, {padding_, padding_}, loc);
}

AvgPool2d::AvgPool2d(int64_t kernelSize, int64_t stride, int64_t padding, bool countIncludePad)
    : kernel_(kernelSize), stride_(stride == 0 ? kernelSize : stride), padding_(padding),
      countIncludePad_(countIncludePad) {}

Tensor AvgPool2d::forward(const Tensor& x, SrcLoc loc) {
  return avg_pool2d(x, {kernel_, kernel_}, {stride_, stride_}, {padding_, padding_}, countIncludePad_, loc);
}

LayerNorm::LayerNorm(Shape normalizedShape, double eps, bool elementwiseAffine)
    : shape_(std::move(normalizedShape)), eps_(eps), affine_(elementwiseAffine) {
  KILN_CHECK(!shape_.empty(), "LayerNorm: the normalized shape must not be empty");
  if (affine_) {
    registerParameter("weight", shape_, init::ones());
    registerParameter("bias", shape_, init::zeros());
  }
}

Tensor LayerNorm::forward(const Tensor& x, SrcLoc loc) {
  Tracer& t = x.tracer();
  int64_t n = static_cast<int64_t>(shape_.size());
  if (x.rank() < n || !std::equal(shape_.begin(), shape_.end(), x.shape().end() - n))
    detail::opError("layer_norm", x, loc,
                    fmt::format("{} normalizes over {}, which is not the trailing shape of the input",
                                label(), ir::shapeStr(shape_)));
  if (!affine_) return layer_norm(x, {}, {}, n, eps_, loc);
  return layer_norm(x, param(t, "weight"), param(t, "bias"), n, eps_, loc);
}

Dropout::Dropout(double p, std::optional<uint64_t> seed) : p_(p), seed_(seed) {
  KILN_CHECK(p >= 0 && p < 1, "Dropout: p must be in [0, 1), got {}", p);
}

Tensor Dropout::forward(const Tensor& x, SrcLoc loc) {
  if (!isTraining() || p_ == 0) return x;
  if (!seed_) return dropout(x, p_, loc);
  // Successive applications within one trace draw disjoint stretches of one stream.
  uint64_t offset = x.tracer().claimRandomOffset(this, static_cast<uint64_t>(x.numel()));
  return dropout(x, p_, *seed_, offset, loc);
}

Embedding::Embedding(int64_t numEmbeddings, int64_t embeddingDim) {
  KILN_CHECK(numEmbeddings > 0 && embeddingDim > 0, "Embedding({}, {}): sizes must be positive", numEmbeddings,
             embeddingDim);
  registerParameter("weight", {numEmbeddings, embeddingDim}, init::normal(0, 1));
}

Tensor Embedding::forward(const Tensor& ids, SrcLoc loc) { return embedding(ids, param(ids.tracer(), "weight"), loc); }

}  // namespace kiln::nn
