// How the backend tests compare a computed tensor with the reference interpreter's, shared by the
// CPU backend's (BackendTestSupport.h), the CUDA renderer's (CudaRenderTest.cpp, on the host
// emulator) and the CUDA backend's (CudaTestSupport.h) tests.
//
// A backend computes f32 in f32 (the interpreter in f64) and sums in another order (vector lanes,
// tree reductions, GEMM blocking), so floats agree within tolerance(dtype) relative to
// max(|want|, scaleFactor · the tensor's largest finite |value|, floor): scaleFactor 1e-2 for
// elementwise ops and reductions, 1 for contractions and whole models (errors of a dot product
// scale with the sum of |products|, not with the result). Integers and bools agree exactly.
#pragma once

#include "interp/Interpreter.h"
#include "runtime/HostTensor.h"
#include "support/DType.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace kiln::test {

/// Relative tolerance of a value of `t` computed in another order or precision; 0 (exact) for
/// integers and bool.
inline double tolerance(DType t) {
  switch (t) {
    case DType::f16: return 4e-3;
    case DType::bf16: return 2e-2;
    case DType::f32: return 2e-5;
    case DType::f64: return 1e-12;
    default: return 0;
  }
}

/// `got` against `want` elementwise: the same dtype and shape, the same NaNs and infinities, other
/// values within tolerance(dtype) · max(|want|, scaleFactor · the tensor's largest finite |value|,
/// floor). Reports at most five elements, each named `what`[index].
inline void expectClose(const rt::HostTensor& want, const rt::HostTensor& got, const std::string& what,
                        double scaleFactor = 1e-2, double floor = 0) {
  ASSERT_EQ(want.dtype(), got.dtype()) << what;
  ASSERT_EQ(want.shape(), got.shape()) << what;
  double scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    if (std::isfinite(want.at(i))) scale = std::max(scale, std::abs(want.at(i)));
  const double tol = tolerance(want.dtype());
  int reported = 0;
  for (int64_t i = 0; i < want.numel() && reported < 5; ++i) {
    const double a = want.at(i), b = got.at(i);
    const double relativeTo = std::max({std::abs(a), scale * scaleFactor, floor});
    bool ok;
    if (std::isnan(a) || std::isnan(b))
      ok = std::isnan(a) && std::isnan(b);
    else if (std::isinf(a) || std::isinf(b))
      ok = a == b;
    else
      ok = std::abs(a - b) <= tol * relativeTo + (tol == 0 ? 0 : 1e-30);
    if (!ok) {
      ADD_FAILURE() << what << "[" << i << "] of " << want.typeStr() << ": want " << a << ", got " << b
                    << " (tolerance " << tol << " relative to " << relativeTo << ")";
      ++reported;
    }
  }
}

/// Every tensor of `want` against the tensor of the same name in `got`, which has no others.
inline void expectClose(const interp::TensorMap& want, const interp::TensorMap& got, const std::string& what,
                        double scaleFactor = 1e-2, double floor = 0) {
  for (const auto& [name, t] : want) {
    auto it = got.find(name);
    if (it == got.end()) {
      ADD_FAILURE() << what << ": no output '" << name << "'";
      continue;
    }
    expectClose(t, it->second, what + " " + name, scaleFactor, floor);
  }
  EXPECT_EQ(want.size(), got.size()) << what;
}

}  // namespace kiln::test
