// Launch chains (codegen/cuda/Chain.h) without a GPU: chained layouts and kiln's own CUDA program
// on the stand-in driver, whose launches run on the host emulator, against the CPU JIT.
#include "AotCudaEmulation.h"

#include "codegen/cpu/Program.h"
#include "codegen/cuda/Chain.h"
#include "tests/codegen/CudaTestSupport.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <utility>

namespace kiln::aottest {
namespace {

// Launch chains (codegen/cuda/Chain.h): tiny_mlp's whole Adam step at batch 64 — products with
// shared-memory tiles run by two groups side by side, reductions, the optimizer and the update
// copies — is one launch of one block; mnist_mlp's keeps its large products apart and chains the
// rest. Both run as the CPU JIT does, step after step, and as the same programs without chains.
TEST_F(AotCudaEmulated, SmallKernelsRunAsLaunchChains) {
  for (const auto& [model, batch] : {std::pair<std::string, int64_t>{"tiny_mlp", 64}, {"mnist_mlp", 100}}) {
    SCOPED_TRACE(model);
    const ir::Graph g = zooTrainStep(model, batch);
    const ir::Graph compiled = passes::compiledCopy(g, passes::Precision::F32, "");
    const cuda::ProgramLayout plain = cuda::layoutProgram(compiled, 80, false, cuda::RenderOptions::kBlasMinMacs, false);
    const cuda::ProgramLayout chained = cuda::layoutProgram(compiled, 80, false);
    EXPECT_EQ(plain.chains, 0);
    EXPECT_FALSE(plain.updatesFolded);
    EXPECT_GE(plain.updates.size(), 4u);
    EXPECT_GE(chained.chains, 1);
    EXPECT_TRUE(chained.updatesFolded);
    EXPECT_TRUE(chained.updates.empty());
    EXPECT_LT(chained.launches, plain.launches);
    if (model == "tiny_mlp") {
      EXPECT_EQ(chained.launches, 1);
      ASSERT_EQ(chained.steps.size(), 1u);
      EXPECT_EQ(chained.steps[0].block[0], static_cast<uint32_t>(cuda::kChainThreads));
      EXPECT_EQ(chained.steps[0].grid[0], 1u);
    }
    std::unique_ptr<cpu::Program> jit = cpu::Program::compile(compiled);
    std::unique_ptr<cuda::Program> withChains, without;
    {
      EmulatedDevice device(g);
      ASSERT_NO_THROW(withChains = emulatedProgram(g, false));
      EXPECT_EQ(withChains->stats().chains, chained.chains);
      for (int run = 0; run < 3; ++run) {
        interp::TensorMap in = modelInputs(g, 90 + static_cast<uint64_t>(run));
        kiln::testing::expectClose(jit->run(in), withChains->run(in), fmt::format("run {}", run), 1.0, 1.0);
        kiln::testing::expectClose(jit->params(), withChains->params(), fmt::format("run {} parameters", run), 1.0, 1.0);
        EXPECT_EQ(device.error(), "");
      }
    }
    {
      EmulatedDevice device(g, passes::Precision::F32, false);
      cuda::ProgramOptions options;
      options.blasLt = false;
      options.graphs = false;
      options.chain = false;
      ASSERT_NO_THROW(without = cuda::Program::compile(compiled, options));
      EXPECT_EQ(without->stats().chains, 0);
      EXPECT_EQ(without->stats().launches, plain.launches);
      interp::TensorMap in = modelInputs(g, 90);
      EXPECT_EQ(device.error(), "");
      (void)without->run(in);
      // The environment variable overrides the option, and says what it takes.
      options.chain = true;
      ::setenv("KILN_CUDA_CHAIN", "0", 1);
      EXPECT_EQ(cuda::Program::compile(compiled, options)->stats().chains, 0);
      ::setenv("KILN_CUDA_CHAIN", "2", 1);
      try {
        cuda::Program::compile(compiled, options);
        ADD_FAILURE() << "KILN_CUDA_CHAIN=2 was accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("KILN_CUDA_CHAIN='2': expected 0 or 1"), std::string::npos) << e.what();
      }
      ::unsetenv("KILN_CUDA_CHAIN");
    }
  }
}

}  // namespace
}  // namespace kiln::aottest
