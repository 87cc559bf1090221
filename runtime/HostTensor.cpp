#include "runtime/HostTensor.h"

#include "support/Error.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace kiln::rt {

namespace {
std::byte* allocateBytes(size_t n) {
  size_t rounded = (n + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) KILN_THROW("out of host memory allocating a tensor of {} bytes", n);
  std::memset(p, 0, rounded);
  return static_cast<std::byte*>(p);
}
}  // namespace

void HostTensor::Free::operator()(std::byte* p) const { std::free(p); }

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  numel_ = 1;
  for (int64_t d : shape_) KILN_CHECK(d >= 0, "negative dimension {} in tensor shape [{}]", d, fmt::join(shape_, ","));
  for (int64_t d : shape_) {
    if (d == 0) {
      numel_ = 0;
      break;
    }
    // Bound the element count so bytes() cannot overflow whatever the element size.
    KILN_CHECK(numel_ <= (int64_t{1} << 56) / d, "tensor shape [{}] has too many elements", fmt::join(shape_, ","));
    numel_ *= d;
  }
  data_.reset(allocateBytes(bytes()));
}

HostTensor::HostTensor(const HostTensor& o) : dtype_(o.dtype_), shape_(o.shape_), numel_(o.numel_) {
  if (o.data_) {
    data_.reset(allocateBytes(bytes()));
    std::memcpy(data_.get(), o.data_.get(), bytes());
  }
}

HostTensor& HostTensor::operator=(const HostTensor& o) {
  if (this != &o) *this = HostTensor(o);
  return *this;
}

HostTensor HostTensor::fromDoubles(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values) {
  HostTensor t(dtype, std::move(shape));
  KILN_CHECK(static_cast<int64_t>(values.size()) == t.numel(),
             "{} values given for a tensor of type {} ({} elements)", values.size(), t.typeStr(), t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, values[i]);
  return t;
}

double HostTensor::at(int64_t i) const {
  return loadAsDouble(dtype_, data_.get() + static_cast<size_t>(i) * dtypeSize(dtype_));
}

void HostTensor::set(int64_t i, double v) {
  storeFromDouble(dtype_, data_.get() + static_cast<size_t>(i) * dtypeSize(dtype_), v);
}

std::vector<double> HostTensor::toDoubles() const {
  std::vector<double> out(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) out[i] = at(i);
  return out;
}

std::string HostTensor::typeStr() const {
  return fmt::format("{}[{}]", dtypeName(dtype_), fmt::join(shape_, ","));
}

bool HostTensor::identical(const HostTensor& o) const {
  return dtype_ == o.dtype_ && shape_ == o.shape_ &&
         (bytes() == 0 || std::memcmp(data_.get(), o.data_.get(), bytes()) == 0);
}

}  // namespace kiln::rt
