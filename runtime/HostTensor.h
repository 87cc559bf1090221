// A dense, row-major tensor in host memory: element type, shape and owned bytes (64-byte aligned
// so vectorized kernels can use aligned loads). The currency of the runtime, the reference
// interpreter, safetensors I/O and the data set readers.
#pragma once

#include "support/DType.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::rt {

class HostTensor {
 public:
  HostTensor() = default;
  /// A zero-filled tensor.
  HostTensor(DType dtype, std::vector<int64_t> shape);
  HostTensor(const HostTensor& o);
  HostTensor& operator=(const HostTensor& o);
  HostTensor(HostTensor&&) noexcept = default;
  HostTensor& operator=(HostTensor&&) noexcept = default;

  /// A tensor of `dtype` holding `values` (rounded/converted as by storeFromDouble).
  static HostTensor fromDoubles(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values);
  template <typename T>
  static HostTensor fromVector(DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
    std::vector<double> d(values.begin(), values.end());
    return fromDoubles(dtype, std::move(shape), d);
  }

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const { return numel_; }
  size_t bytes() const { return static_cast<size_t>(numel_) * dtypeSize(dtype_); }

  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  template <typename T> T* as() { return static_cast<T*>(data()); }
  template <typename T> const T* as() const { return static_cast<const T*>(data()); }

  /// Element i (row-major) converted to double, and the converse store (rounds to dtype).
  double at(int64_t i) const;
  void set(int64_t i, double v);
  std::vector<double> toDoubles() const;

  /// "f32[2,3]"
  std::string typeStr() const;
  /// Same dtype, shape and bytes.
  bool identical(const HostTensor& o) const;

 private:
  struct Free { void operator()(std::byte* p) const; };
  DType dtype_ = DType::f32;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  std::unique_ptr<std::byte[], Free> data_;
};

}  // namespace kiln::rt
