// Standard layers with PyTorch's parameter names, layouts and default initializers.
#pragma once

#include "frontend/nn/Module.h"

#include <optional>

namespace kiln::nn {

/// y = x Wᵀ + b; weight [out, in] ~ U(±1/sqrt(in)) (kaiming_uniform, a = sqrt(5)), bias [out] ~ U(±1/sqrt(in)).
class Linear : public UnaryModule {
 public:
  Linear(int64_t inFeatures, int64_t outFeatures, bool bias = true);
  std::string typeName() const override { return "Linear"; }
  Tensor forward(const Tensor& x, SrcLoc loc = SrcLoc::current()) override;
  int64_t inFeatures() const { return in_; }
  int64_t outFeatures() const { return out_; }

 private:
  int64_t in_, out_;
  bool bias_;
};

/// weight [out, in/groups, kh, kw], bias [out]; fan_in = in/groups * kh * kw for both initializers.
class Conv2d : public UnaryModule {
 public:
  Conv2d(int64_t inChannels, int64_t outChannels, int64_t kernelSize, int64_t stride = 1, int64_t padding = 0,
         int64_t dilation = 1, int64_t groups = 1, bool bias = true);
  /// Rectangular kernels and per-dimension options.
  Conv2d(int64_t inChannels, int64_t outChannels, Ints kernelSize, Conv2dOptions opts, bool bias = true);
  std::string typeName() const override { return "Conv2d"; }
  Tensor forward(const Tensor& x, SrcLoc loc = SrcLoc::current()) override;

 private:
  Conv2dOptions opts_;
  bool bias_;
};

/// Empty / zero stride means stride = kernel, as in PyTorch.
class MaxPool2d : public UnaryModule {
 public:
  explicit MaxPool2d(int64_t kernelSize, int64_t stride = 0, int64_t padding = 0);
  std::string typeName() const override { return "MaxPool2d"; }
  Tensor forward(const Tensor& x, SrcLoc loc = SrcLoc::current()) override;

 private:
  int64_t kernel_, stride_, padding_;
};

class AvgPool2d : public UnaryModule {
 public:
  explicit AvgPool2d(int64_t kernelSize, int64_t stride = 0, int64_t padding = 0, bool countIncludePad = true);
  std::string typeName() const override { return "AvgPool2d"; }
  Tensor forward(const Tensor& x, SrcLoc loc = SrcLoc::current()) override;

 private:
  int64_t kernel_, stride_, padding_;
  bool countIncludePad_;
};

/// Merges dimensions start..end (nn.Flatten's defaults keep the batch dimension).
class Flatten : public UnaryModule {
 public:
  explicit Flatten(int64_t startDim = 1, int64_t endDim = -1) : start_(startDim), end_(endDim) {}
  std::string typeName() const override { return "Flatten"; }
  Tensor forward(const Tensor& x, SrcLoc loc = SrcLoc::current()) override { return flatten(x, start_, end_, loc); }

 private:
  int64_t start_, end_;
};

class ReLU : public UnaryModule {
 public:
  std::string typeName() const override { return "ReLU"; }
  Tensor forward(const Tensor& x, SrcLoc loc = SrcLoc::current()) override { return relu(x, loc); }
};

class GELU : public UnaryModule {
 public:
  /// "none" (exact erf form) or "tanh".
  explicit GELU(std::string approximate = "none") : approximate_(std::move(approximate)) {}
  std::string typeName() const override { return "GELU"; }
  Tensor forward(const Tensor& x, SrcLoc loc = SrcLoc::current()) override { return gelu(x, approximate_, loc); }

 private:
  std::string approximate_;
};

class Tanh : public UnaryModule {
 public:
  std::string typeName() const override { return "Tanh"; }
  Tensor forward(const Tensor& x, SrcLoc loc = SrcLoc::current()) override { return tanh(x, loc); }
};

class Sigmoid : public UnaryModule {
 public:
  std::string typeName() const override { return "Sigmoid"; }
  Tensor forward(const Tensor& x, SrcLoc loc = SrcLoc::current()) override { return sigmoid(x, loc); }
};

class Softmax : public UnaryModule {
 public:
  explicit Softmax(int64_t dim = -1) : dim_(dim) {}
  std::string typeName() const override { return "Softmax"; }
  Tensor forward(const Tensor& x, SrcLoc loc = SrcLoc::current()) override { return softmax(x, dim_, loc); }

 private:
  int64_t dim_;
};

/// Normalizes over the trailing `normalizedShape`; weight = 1, bias = 0 (elementwise affine).
class LayerNorm : public UnaryModule {
 public:
  explicit LayerNorm(Shape normalizedShape, double eps = 1e-5, bool elementwiseAffine = true);
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool elementwiseAffine = true)
      : LayerNorm(Shape{dim}, eps, elementwiseAffine) {}
  std::string typeName() const override { return "LayerNorm"; }
  Tensor forward(const Tensor& x, SrcLoc loc = SrcLoc::current()) override;

 private:
  Shape shape_;
  double eps_;
  bool affine_;
};

/// Inverted dropout in training mode, identity in eval mode or when p == 0. Each application
/// draws a distinct mask: the seed comes from the tracer (Tracer::nextRandomSeed) unless one is
/// given here, in which case successive applications use successive offsets.
class Dropout : public UnaryModule {
 public:
  explicit Dropout(double p = 0.5, std::optional<uint64_t> seed = std::nullopt);
  std::string typeName() const override { return "Dropout"; }
  Tensor forward(const Tensor& x, SrcLoc loc = SrcLoc::current()) override;

 private:
  double p_;
  std::optional<uint64_t> seed_;
};

/// weight [num, dim] ~ N(0, 1) as in PyTorch; forward takes integer ids.
class Embedding : public UnaryModule {
 public:
  Embedding(int64_t numEmbeddings, int64_t embeddingDim);
  std::string typeName() const override { return "Embedding"; }
  Tensor forward(const Tensor& ids, SrcLoc loc = SrcLoc::current()) override;
};

}  // namespace kiln::nn
