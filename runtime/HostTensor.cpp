#include "runtime/HostTensor.h"

#include "support/Error.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

namespace kiln::rt {

namespace {

// KILN_GUARD_PAGES=1 (kiln's test suite sets it; read once): every tensor's bytes end where a page
// without access begins (and start after a read-only page that holds the mapping's size), so a
// kernel that writes past the end of a buffer (the arena, the scratch, a parameter) faults at once
// instead of corrupting the heap somewhere a later test may or may not notice. An AOT library's
// runtime does the same (kaot_alloc).
bool guardPages() {
  static const bool on = [] {
    const char* v = std::getenv("KILN_GUARD_PAGES");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

size_t pageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

std::byte* allocateGuarded(size_t rounded) {
  const size_t page = pageBytes(), pages = (rounded + page - 1) / page, total = (pages + 2) * page;
  void* m = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) KILN_THROW("out of host memory allocating a tensor of {} bytes (with guard pages)", rounded);
  auto* base = static_cast<std::byte*>(m);
  std::memcpy(base, &total, sizeof total);
  if (mprotect(base, page, PROT_READ) != 0 || mprotect(base + (pages + 1) * page, page, PROT_NONE) != 0) {
    munmap(base, total);
    KILN_THROW("cannot protect the guard pages of a tensor of {} bytes (KILN_GUARD_PAGES)", rounded);
  }
  return base + (pages + 1) * page - rounded;
}

std::byte* allocateBytes(size_t n) {
  size_t rounded = (n + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  if (guardPages()) return allocateGuarded(rounded);  // zeroed by mmap
  void* p = std::aligned_alloc(64, rounded);
  if (!p) KILN_THROW("out of host memory allocating a tensor of {} bytes", n);
  std::memset(p, 0, rounded);
  return static_cast<std::byte*>(p);
}

}  // namespace

void HostTensor::Free::operator()(std::byte* p) const {
  if (!guardPages()) return std::free(p);
  const size_t page = pageBytes();
  auto* base = reinterpret_cast<std::byte*>(reinterpret_cast<uintptr_t>(p) / page * page - page);
  size_t total;
  std::memcpy(&total, base, sizeof total);
  munmap(base, total);
}

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
