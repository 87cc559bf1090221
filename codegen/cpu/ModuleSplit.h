// Splitting a module for parallel compilation (an implementation detail of Jit; includes LLVM).
//
// A program's module holds every kernel of a training step plus the GEMM routines they share;
// generating its machine code is most of a cold compile. planSplit cuts it into parts of similar
// size; each compiles on a thread of its own, in an LLVMContext of its own, from the module's
// bitcode (loadPart reads only the part's function bodies), and the objects link into one
// JITDylib. The cut never changes the code: a function stays with every local function it may
// inline and every local constant it uses; only `noinline` local functions (the shared GEMM
// routines) are called across parts, as external symbols of the dylib, hidden where defined and
// reached through a GOT entry or call stub elsewhere (parts may land gigabytes apart).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace llvm {
class LLVMContext;
class MemoryBufferRef;
class Module;
}  // namespace llvm

namespace kiln::cpu {

struct SplitPlan {
  /// IR instructions per part, largest first; empty: compile the module whole.
  std::vector<int64_t> instructions;
  /// The part of every defined global, by name.
  std::unordered_map<std::string, int> partOf;
  /// Local functions called across parts: hidden external symbols in every part.
  std::vector<std::string> shared;
};

/// Plans at most `maxParts` parts of at least `minInstructions` IR instructions each (none when
/// the module is too small for two). `m` is not changed; its globals must be named.
SplitPlan planSplit(const llvm::Module& m, int maxParts, int64_t minInstructions);

/// Part `part` of the module whose bitcode is `bitcode`, read into `ctx`: the other parts'
/// definitions become declarations (default visibility, not dso_local: reached through the GOT or a
/// stub), the plan's shared functions hidden external symbols where this part defines them.
std::unique_ptr<llvm::Module> loadPart(llvm::MemoryBufferRef bitcode, const SplitPlan& plan, int part,
                                       llvm::LLVMContext& ctx);

/// The IR instructions of the functions defined in `m`.
int64_t instructionCount(const llvm::Module& m);

}  // namespace kiln::cpu
