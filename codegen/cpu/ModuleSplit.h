// Splitting a module for parallel compilation (an implementation detail of Jit; includes LLVM).
//
// A program's module holds every kernel of a training step plus the GEMM routines they share;
// generating its machine code is most of a cold compile. splitModule cuts it into parts of similar
// size that compile on their own threads, each in its own LLVMContext (from bitcode), and link
// into one JITDylib. The cut never changes the code: a function stays with every local function
// it may inline and every local constant it uses; only `noinline` local functions (the shared
// GEMM routines) are called across parts, which become hidden external symbols of the dylib.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llvm {
class Module;
}

namespace kiln::cpu {

struct ModulePart {
  std::string bitcode;
  int64_t instructions = 0;  // the part's IR instructions (its size estimate)
};

/// Splits `m` into at most `maxParts` parts of at least `minInstructions` IR instructions each
/// (fewer when the module is small; one part means "compile it whole" and returns no bitcode).
/// Externalizes the local functions called across parts (hidden visibility) in `m` itself.
std::vector<ModulePart> splitModule(llvm::Module& m, int maxParts, int64_t minInstructions);

/// The IR instructions of the functions defined in `m`.
int64_t instructionCount(const llvm::Module& m);

}  // namespace kiln::cpu
