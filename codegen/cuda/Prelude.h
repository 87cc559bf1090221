// The CUDA prelude (Prelude.cuh): the device functions every generated kernel calls, one per
// elementwise primitive plus conversions, loads, stores and Philox. Its text is embedded into the
// library at build time (CMake reads Prelude.cuh into a generated source), so a program's CUDA
// source needs no file at run time.
#pragma once

#include <string_view>

namespace kiln::cuda {

/// The text of Prelude.cuh, the start of every program's CUDA source (Render.h programSource).
std::string_view preludeSource();

}  // namespace kiln::cuda
