// Side-by-side work on short-lived threads, for compilers: the LLVM parts of a CPU program, the
// NVRTC parts of a CUDA program. (Kernels run on rt::ThreadPool, which lives below in runtime/.)
#pragma once

#include <cstddef>
#include <functional>

namespace kiln {

/// Threads that compile side by side by default: the hardware's, at least 1, at most 8.
std::size_t compileThreadLimit();

/// Calls fn(item, worker) for every item in [0, items) on min(items, workers) threads, this one
/// being worker 0; a worker takes the next item when it is done with one. When items fail, the
/// first one's exception is rethrown after every item has run.
void forEachItem(std::size_t items, std::size_t workers, const std::function<void(std::size_t, std::size_t)>& fn);

}  // namespace kiln
