// The machine profile's JSON and cache, the cost model on hand-made profiles, and `kiln explain`
// for every zoo model. Nothing here measures the machine or asserts a time: the profiles are fixed
// fakes, so the expectations follow from the formulas (docs/COST.md).
#include "cost/CostModel.h"
#include "cost/Explain.h"
#include "cost/MachineProfile.h"
#include "frontend/Zoo.h"
#include "ir/Parser.h"
#include "kernels/Kernel.h"
#include "passes/Pipeline.h"
#include "support/Error.h"
#include "support/File.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace kiln::cost {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

/// A CPU profile as `kiln profile` measured it on a 2-core AVX2 machine (rounded): fixed, so the
/// tests never measure.
CpuProfile fakeCpu() {
  CpuProfile c;
  c.identity = {"Test CPU 9000", 2, "avx2", "0.1"};
  c.f32Lanes = 8;
  c.peakGflops = {100, 200};
  c.peakBf16Gflops = {200, 400};
  c.triad = {{1 << 20, {50, 90}}, {int64_t{1} << 30, {15, 20}}};
  c.copy = {{1 << 20, {70, 110}}, {int64_t{1} << 30, {15, 20}}};
  c.read = {{1 << 20, {75, 130}}, {int64_t{1} << 30, {15, 22}}};
  auto mm = [](int64_t m, int64_t n, int64_t k, double us, int64_t batch = 1) {
    return GemmPoint{m, n, k, us, "matmul", batch};
  };
  c.gemm = {mm(16, 16, 16, 0.34),     mm(32, 32, 32, 1.3),     mm(64, 64, 64, 7.2),      mm(128, 128, 128, 31.7),
            mm(256, 256, 256, 204),   mm(512, 512, 512, 1570), mm(1024, 1024, 1024, 12974), mm(512, 512, 16, 90),
            mm(32, 512, 512, 151),    mm(512, 32, 512, 113),   mm(32, 32, 32, 52, 64),
            {32, 512, 512, 190, "matmul", 1, "f32", "nt"}, {512, 32, 512, 150, "matmul", 1, "f32", "tn"},
            {64, 196, 288, 511, "conv2d", 8}, {32, 196, 576, 739, "conv2d_grad_input", 8},
            {64, 288, 1568, 1537, "conv2d_grad_weight", 1},
            // bf16 squares at about twice f32's rate (vdpbf16ps k pairs), a small one at f32's
            {64, 64, 64, 7.0, "matmul", 1, "bf16"}, {256, 256, 256, 110, "matmul", 1, "bf16"}, {512, 512, 512, 790, "matmul", 1, "bf16"},
            {1024, 1024, 1024, 6500, "matmul", 1, "bf16"},
            // bf16 convolutions at 1.5–2.5 times f32's rate, not the squares'
            {64, 196, 288, 256, "conv2d", 8, "bf16"}, {32, 196, 576, 490, "conv2d_grad_input", 8, "bf16"},
            {64, 288, 1568, 615, "conv2d_grad_weight", 1, "bf16"}};
  c.opNanos = {{"exp", 0.5}, {"tanh", 1.0}, {"erf", 1.4}, {"max_pool2d", 0.06}, {"max_pool2d_grad", 0.12}};
  c.reduceRowNanos = 0;
  c.reduceElementNanos = 0.16;
  c.kernelCallMicros = 0.03;
  c.dispatchMicros = 0.2;
  c.runMicros = 0.15;
  return c;
}

GpuProfile fakeGpu() {
  GpuProfile g;
  g.name = "Fake H100";
  g.arch = "sm_90";
  g.multiprocessors = 132;
  g.memoryBytes = uint64_t{80} << 30;
  g.peakF32 = 50000;
  g.peakTf32 = 400000;
  g.peakBf16 = g.peakF16 = 700000;
  g.gemmF32 = {{128, 128, 128, 10}, {4096, 4096, 4096, 3000}};
  g.bandwidthGbps = 3000;
  g.launchMicros = 4;
  g.graphNodeMicros = 1.5;
  g.graphLaunchMicros = 8;
  g.h2dGbps = 25;
  g.d2hGbps = 25;
  g.transferMicros = 10;
  g.source = "a test";
  return g;
}

MachineProfile fakeMachine(bool withGpu) {
  MachineProfile p;
  p.measuredAt = "2025-01-01T00:00:00Z";
  p.measureSeconds = 4.5;
  p.cpu = fakeCpu();
  if (withGpu) p.gpus.push_back(fakeGpu());
  return p;
}

/// A fresh directory under the test's temporary directory.
fs::path scratchDir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("kiln_cost_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<kernels::Kernel> kernelsOf(const std::string& text) {
  ir::Graph g = ir::parseGraph(text, "<test>");
  passes::compileGraph(g);
  return kernels::lowerGraph(g);
}

// ---- the profile ---------------------------------------------------------------------------------

TEST(MachineProfile, JsonRoundTrip) {
  MachineProfile p = fakeMachine(true);
  const std::string text = profileToJson(p);
  MachineProfile q = profileFromJson(text, "test");
  EXPECT_EQ(profileToJson(q), text);
  EXPECT_EQ(q.cpu.identity, p.cpu.identity);
  EXPECT_DOUBLE_EQ(q.cpu.peak(2), 200);
  EXPECT_DOUBLE_EQ(q.cpu.peakBf16(2), 400);
  MachineProfile old = fakeMachine(false);  // a profile without the bf16 peak (format 3, or no bf16 unit)
  old.cpu.peakBf16Gflops.clear();
  EXPECT_EQ(profileFromJson(profileToJson(old), "t").cpu.peakBf16(2), 0);
  ASSERT_EQ(q.gpus.size(), 1u);
  EXPECT_EQ(q.gpus[0].name, "Fake H100");
  EXPECT_DOUBLE_EQ(q.gpus[0].graphNodeMicros, 1.5);
  EXPECT_EQ(profileToJson(fakeMachine(false)), profileToJson(profileFromJson(profileToJson(fakeMachine(false)), "t")));
  // The transposed probes keep their layout; the others have none written (format 8).
  EXPECT_THAT(text, HasSubstr("\"layout\": \"nt\""));
  EXPECT_EQ(std::count_if(q.cpu.gemm.begin(), q.cpu.gemm.end(), [](const GemmPoint& g) { return g.layout == "tn"; }), 1);
}

// How the GEMM probes were timed travels with them; a GPU object without the member (written
// before format 2, such as cost/profiles/h200.json) was timed on the stream.
TEST(MachineProfile, GemmTimingTravelsAndDefaultsToTheStream) {
  fs::path dir = scratchDir("timing");
  auto load = [&](const std::string& text) {
    const std::string path = (dir / "gpu.json").string();
    writeFileAtomically(path, text);
    return gpuProfileFromFile(path);
  };
  GpuProfile g = fakeGpu();
  EXPECT_FALSE(load(gpuProfileToJson(g)).gemmInGraph);
  g.gemmInGraph = true;
  const std::string text = gpuProfileToJson(g);
  EXPECT_THAT(text, HasSubstr("\"gemm_timing\": \"graph\""));
  EXPECT_TRUE(load(text).gemmInGraph);
  std::string old = text;
  old.erase(old.find("\"gemm_timing\""), std::string("\"gemm_timing\": \"graph\",").size());
  EXPECT_FALSE(load(old).gemmInGraph);
  std::string bad = text;
  bad.replace(bad.find("\"graph\""), 7, "\"often\"");
  EXPECT_THAT([&] { load(bad); }, ::testing::ThrowsMessage<Error>(HasSubstr("gemm_timing must be \"graph\" or \"stream\"")));
  fs::remove_all(dir);
}

TEST(MachineProfile, BadJsonNamesTheMember) {
  std::string text = profileToJson(fakeMachine(false));
  std::string noPeak = text;
  noPeak.replace(noPeak.find("\"peak_gflops\""), 13, "\"peak_gflopz\"");
  EXPECT_THAT([&] { profileFromJson(noPeak, "m.json"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("missing member 'peak_gflops'")));
  std::string oldFormat = text;
  const std::string format = "\"format\": " + std::to_string(kProfileFormat);
  oldFormat.replace(oldFormat.find(format), format.size(), "\"format\": 0");
  EXPECT_THAT([&] { profileFromJson(oldFormat, "m.json"); }, ::testing::ThrowsMessage<Error>(HasSubstr("format 0")));
  std::string badLayout = text;
  badLayout.replace(badLayout.find("\"layout\": \"nt\""), 14, "\"layout\": \"nx\"");
  EXPECT_THAT([&] { profileFromJson(badLayout, "m.json"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("m.json: a GEMM probe's layout is 'nx' (expected nn, nt, tn or tt)")));
}

TEST(MachineProfile, InterpolatesBandwidthAndClampsThreads) {
  CpuProfile c = fakeCpu();
  EXPECT_DOUBLE_EQ(c.bandwidth(1 << 10, 1), 50);            // below the ladder: its first point
  EXPECT_DOUBLE_EQ(c.bandwidth(int64_t{1} << 40, 2), 20);     // above: its last
  EXPECT_NEAR(c.bandwidth(int64_t{1} << 25, 1), 32.5, 1e-9);  // halfway in log(bytes)
  EXPECT_DOUBLE_EQ(c.memoryBandwidth(1), 15);  // the copy ladder's largest working set
  EXPECT_DOUBLE_EQ(c.memoryBandwidth(2), 20);
  EXPECT_DOUBLE_EQ(c.peak(16), 200);
  EXPECT_DOUBLE_EQ(c.peak(0), 100);
  // Reads at the read ladder's rate; writes at what a triad (8 bytes read, 4 written) leaves.
  const double r = 1 / 75.0, w = (12 / 50.0 - 8 * r) / 4;
  EXPECT_NEAR(c.memoryMicros(600000, 400000, 1), (600000 * r + 400000 * w) * 1e-3, 1e-9);
}

TEST(MachineProfile, IdentityDecidesWhetherTheCacheIsValid) {
  MachineProfile p = fakeMachine(false);
  CpuIdentity id = p.cpu.identity;
  EXPECT_TRUE(profileMatches(p, id));
  for (int change = 0; change < 4; ++change) {
    CpuIdentity other = id;
    if (change == 0) other.model = "Another CPU";
    if (change == 1) other.threads = 64;
    if (change == 2) other.isa = "avx512";
    if (change == 3) other.kilnVersion = "9.9";
    EXPECT_FALSE(profileMatches(p, other)) << "change " << change;
  }
  MachineProfile oldFormat = p;
  oldFormat.format = kProfileFormat - 1;
  EXPECT_FALSE(profileMatches(oldFormat, id));
}

TEST(MachineProfile, AValidCacheIsReadNotMeasured) {
  fs::path dir = scratchDir("cache");
  MachineProfile p = fakeMachine(true);
  p.cpu.identity = hostIdentity();  // this machine's: the cache is valid here
  writeFileAtomically((dir / "machine.json").string(), profileToJson(p));
  ProfileOptions o;
  o.path = (dir / "machine.json").string();
  o.measureGpus = false;
  std::vector<std::string> said;
  o.progress = [&](const std::string& s) { said.push_back(s); };
  MachineProfile got = machineProfile(o);
  EXPECT_TRUE(said.empty()) << said.front();  // nothing measured
  EXPECT_EQ(profileToJson(got), profileToJson(p));
  fs::remove_all(dir);
}

TEST(MachineProfile, DefaultPathFollowsTheCacheDirectory) {
  const char* old = std::getenv("KILN_CACHE_DIR");
  const std::string saved = old ? old : "";
  ::setenv("KILN_CACHE_DIR", "/tmp/kiln-cache-test", 1);
  EXPECT_EQ(defaultProfilePath(), "/tmp/kiln-cache-test/machine.json");
  ::unsetenv("KILN_CACHE_DIR");
  EXPECT_THAT(defaultProfilePath(), HasSubstr(".cache/kiln/machine.json"));
  if (old) ::setenv("KILN_CACHE_DIR", saved.c_str(), 1);
}

TEST(MachineProfile, GpuProfileFromAFile) {
  fs::path dir = scratchDir("gpu");
  const std::string machine = (dir / "machine.json").string(), one = (dir / "gpu.json").string(),
                    none = (dir / "cpu-only.json").string();
  writeFileAtomically(machine, profileToJson(fakeMachine(true)));
  writeFileAtomically(one, gpuProfileToJson(fakeGpu()));
  writeFileAtomically(none, profileToJson(fakeMachine(false)));
  EXPECT_EQ(gpuProfileFromFile(machine).name, "Fake H100");
  EXPECT_DOUBLE_EQ(gpuProfileFromFile(one).peakBf16, 700000);
  EXPECT_THAT([&] { gpuProfileFromFile(none); }, ::testing::ThrowsMessage<Error>(HasSubstr("has no GPU")));
  // A whole profile of an older format still gives its GPU, the newer members unmeasured.
  std::string older = profileToJson(fakeMachine(true));
  older.replace(older.find(fmt::format("\"format\": {}", kProfileFormat)), 11, "\"format\": 2");
  older.erase(older.find("\"graph_kernel_us\""), std::string("\"graph_kernel_us\": 0,").size());
  writeFileAtomically(machine, older);
  EXPECT_THAT([&] { profileFromJson(older, "older"); }, ::testing::ThrowsMessage<Error>(HasSubstr("profile format 2")));
  EXPECT_EQ(gpuProfileFromFile(machine).name, "Fake H100");
  EXPECT_EQ(gpuProfileFromFile(machine).graphKernelMicros, 0);
  fs::remove_all(dir);
}

// A profile measured while another process shared the cores says so: a 2-thread FMA peak short of
// twice the 1-thread one, or large GEMM probes far below the FMA peak (this machine's profile once
// measured 512³ at 46 % beside a benchmark, 93 % when quiet). The fake quiet machine has none.
TEST(MachineProfile, DoubtsAProfileMeasuredOnABusyMachine) {
  EXPECT_TRUE(profileDoubts(fakeCpu()).empty());
  // The fake machine with its f32 512³ probe `factor` times slower (171 GFLOP/s at 1).
  auto slowed512 = [](double factor) {
    CpuProfile c = fakeCpu();
    for (GemmPoint& g : c.gemm)
      if (g.square() && g.m == 512 && g.dtype == "f32") g.micros *= factor;
    return c;
  };
  CpuProfile busy = slowed512(3);  // 57 GFLOP/s
  busy.peakGflops = {100, 130};
  const std::vector<std::string> doubts = profileDoubts(busy);
  ASSERT_EQ(doubts.size(), 2u);
  EXPECT_THAT(doubts[0], HasSubstr("2-thread FMA peak is 1.30 times the 1-thread one"));
  EXPECT_THAT(doubts[1], HasSubstr("512³ ran at 44 % of the FMA peak")) << "of 130, the all-thread peak measured";
  MachineProfile m;
  m.cpu = busy;
  EXPECT_THAT(profileText(m), HasSubstr("doubtful: kiln's GEMM probe 512³"));
  CpuProfile slowGemm = slowed512(2);
  ASSERT_EQ(profileDoubts(slowGemm).size(), 1u);
  EXPECT_THAT(profileDoubts(slowGemm)[0], HasSubstr("512³ ran at 43 % of the FMA peak"));
  slowGemm.f32Lanes = 4;  // SSE: no claim about the GEMM's efficiency there
  EXPECT_TRUE(profileDoubts(slowGemm).empty());
}

// ---- the cost model ------------------------------------------------------------------------------

TEST(CostModel, APureBandwidthKernelTakesBytesOverBandwidth) {
  // 4 Mi elements: 48 MiB of compulsory traffic, one add per element.
  auto ks = kernelsOf("graph @g {\n  input %a : f32[4194304]\n  input %b : f32[4194304]\n"
                      "  %0 = add(%a, %b) : f32[4194304]\n  output %c = %0\n}\n");
  ASSERT_EQ(ks.size(), 1u);
  const CpuProfile cpu = fakeCpu();
  CpuEstimate e = predictCpu(ks[0], cpu);
  const double bytes = 3.0 * 4 * 4194304;
  EXPECT_EQ(e.threads, 2);
  EXPECT_EQ(e.bound, Bound::Memory);
  EXPECT_NEAR(e.memoryMicros, bytes / (cpu.bandwidth(static_cast<int64_t>(bytes), 2) * 1e3), 1e-6);
  EXPECT_NEAR(e.micros, e.memoryMicros + cpu.kernelCallMicros + cpu.dispatchMicros, 1e-6);

  GpuEstimate g = predictGpu(ks[0], fakeGpu(), 1);
  EXPECT_EQ(g.bound, Bound::Memory);
  EXPECT_NEAR(g.memoryMicros, bytes / 3000e3, 1e-9);
}

TEST(CostModel, ASmallKernelStaysOnOneThreadAndIsCallBound) {
  auto ks = kernelsOf("graph @g {\n  input %a : f32[8]\n  %0 = relu(%a) : f32[8]\n  output %c = %0\n}\n");
  ASSERT_EQ(ks.size(), 1u);
  CpuEstimate e = predictCpu(ks[0], fakeCpu());
  EXPECT_EQ(e.threads, 1);
  EXPECT_EQ(e.bound, Bound::Launch);
  GpuEstimate g = predictGpu(ks[0], fakeGpu(), 1);
  EXPECT_EQ(g.bound, Bound::Launch);
  EXPECT_DOUBLE_EQ(g.launchMicros, 1.5);  // a graph node
  EXPECT_DOUBLE_EQ(predictGpu(ks[0], fakeGpu(), 1, {.cudaGraphs = false}).launchMicros, 4);
  // A measured dependent small kernel costs more than the empty node: each node costs that.
  GpuProfile measured = fakeGpu();
  measured.graphKernelMicros = 2.25;
  EXPECT_DOUBLE_EQ(predictGpu(ks[0], measured, 1).launchMicros, 2.25);
  EXPECT_DOUBLE_EQ(predictGpu(ks[0], measured, 1, {.cudaGraphs = false}).launchMicros, 4);
  EXPECT_THAT(gpuProfileToJson(measured), HasSubstr("\"graph_kernel_us\": 2.25"));
}

// A product under the CUDA backend's cuBLASLt threshold is its generated GEMM: no cuBLASLt floor,
// a latency chain of K steps instead.
TEST(CostModel, SmallProductsArePricedAsTheGeneratedGemm) {
  auto ks = kernelsOf("graph @g {\n  input %a : f32[64,40]\n  input %b : f32[40,32]\n"
                      "  %0 = matmul(%a, %b) : f32[64,32]\n  output %c = %0\n}\n");
  ASSERT_EQ(ks.size(), 1u);
  const GpuProfile gpu = fakeGpu();
  const GpuEstimate generated = predictGpu(ks[0], gpu, GpuRoute{.launches = 1, .blas = false, .kSteps = 3});
  EXPECT_NEAR(generated.launchMicros, 1.5 + 5 * 0.47, 1e-9);
  const GpuEstimate blas = predictGpu(ks[0], gpu, 1);
  EXPECT_NEAR(blas.launchMicros, 1.5 + 10, 1e-9);  // the node and the smallest probe's floor
  EXPECT_DOUBLE_EQ(generated.computeMicros, blas.computeMicros);
#if KILN_HAVE_CUDA
  // The route comes from the CUDA renderer: one launch, K = 40 in one step (of 64: gemm::simtStep).
  const GpuRoute route = gpuRouteOf(ks[0], gpu);
  EXPECT_EQ(route.launches, 1);
  EXPECT_FALSE(route.blas);
  EXPECT_EQ(route.kSteps, 1);
  // A large product stays with cuBLASLt.
  auto big = kernelsOf("graph @g {\n  input %a : f32[1024,1024]\n  input %b : f32[1024,1024]\n"
                       "  %0 = matmul(%a, %b) : f32[1024,1024]\n  output %c = %0\n}\n");
  EXPECT_TRUE(gpuRouteOf(big.at(0), gpu).blas);
#endif
}

// The GEMM model's fit: every f32 matmul probe of the profile comes back within a few per cent
// (a non-negative least-squares fit of its eight terms; dropping every coefficient a plain fit
// made negative at once left c0 alone on a real AVX-512 profile, its probes −22 … +47 % off); on
// AVX-512 a product 16 columns wide is priced as computed, one vector wide (the micro-kernel's
// narrower variants), not padded to the 48-column tile, and a transposed operand's packing as the
// transposed probes measured it.
TEST(CostModel, TheGemmFitComesBackToItsProbes) {
  for (const CpuProfile& cpu : {fakeCpu(), [] {
         // An AVX-512 machine: the probes of a Xeon with AMX (2026-12-02, rounded), its f32 ones.
         CpuProfile c = fakeCpu();
         c.identity.isa = "avx512";
         c.f32Lanes = 16;
         c.peakGflops = {237, 479};
         auto mm = [](int64_t m, int64_t n, int64_t k, double gflops, int64_t batch = 1, const char* layout = "nn") {
           return GemmPoint{m, n, k, 2e-3 * static_cast<double>(batch * m * n * k) / gflops, "matmul", batch, "f32", layout};
         };
         c.gemm = {mm(16, 16, 16, 84.5),      mm(32, 32, 32, 142),     mm(64, 64, 64, 172),     mm(128, 128, 128, 289),
                   mm(256, 256, 256, 350),    mm(512, 512, 512, 349),  mm(1024, 1024, 1024, 338), mm(512, 512, 16, 269),
                   mm(32, 512, 512, 269),     mm(512, 32, 512, 335),   mm(32, 32, 32, 209, 64),
                   mm(32, 512, 512, 217, 1, "nt"), mm(128, 512, 512, 300, 1, "nt"), mm(512, 512, 512, 350, 1, "nt"),
                   mm(512, 32, 512, 252, 1, "tn"), mm(512, 128, 512, 325, 1, "tn"), mm(512, 512, 512, 342, 1, "tn")};
         return c;
       }()}) {
    const std::string text = cpuModelText(cpu);
    const size_t at = text.find("probes, measured against the model:");
    ASSERT_NE(at, std::string::npos) << text;
    // "NAME[ LAYOUT] ±E %;" per probe.
    std::string rest = text.substr(at + std::strlen("probes, measured against the model:"));
    rest = rest.substr(0, rest.find('\n'));
    int seen = 0;
    for (size_t from = 0, end; (end = rest.find(';', from)) != std::string::npos; from = end + 1) {
      const std::string entry = rest.substr(from, end - from);
      const size_t percent = entry.rfind(" %"), number = entry.rfind(' ', percent - 1);
      ASSERT_TRUE(percent != std::string::npos && number != std::string::npos) << entry;
      const double error = std::stod(entry.substr(number + 1, percent - number - 1));
      EXPECT_LE(std::abs(error), entry.find("64·") != std::string::npos ? 30 : 15)
          << cpu.identity.isa << " probe" << entry << "\n" << text;
      ++seen;
    }
    EXPECT_EQ(seen, cpu.f32Lanes == 16 ? 17 : 13) << text;
    if (cpu.f32Lanes == 16) {
      // C[m,n] = A·B of A stored [m,k] or (ta) [k,m], B stored [k,n] or (tb) [n,k].
      auto micros = [&](int64_t m, int64_t n, int64_t k, bool ta = false, bool tb = false) {
        auto ks = kernelsOf(fmt::format(
            "graph @g {{\n  input %a : f32[{3}]\n  input %b : f32[{4}]\n"
            "  %0 = matmul(%a, %b) {{transpose_a={5}, transpose_b={6}}} : f32[{0},{1}]\n  output %c = %0\n}}\n",
            m, n, k, ta ? fmt::format("{},{}", k, m) : fmt::format("{},{}", m, k),
            tb ? fmt::format("{},{}", n, k) : fmt::format("{},{}", k, n), ta, tb));
        return predictCpu(ks.at(0), cpu).computeMicros;
      };
      EXPECT_LT(micros(1024, 16, 1024), 0.6 * micros(1024, 48, 1024)) << "16 columns priced as 48";
      // A transposed operand's packing: dearest where few rows (Bᵀ) or columns (Aᵀ) share it.
      EXPECT_GT(micros(32, 512, 1000, false, true), 1.15 * micros(32, 512, 1000));
      EXPECT_GT(micros(512, 32, 1000, true, false), 1.15 * micros(512, 32, 1000));
      EXPECT_LT(micros(1024, 1024, 1024, false, true), 1.1 * micros(1024, 1024, 1024));
    }
  }
}

TEST(CostModel, ABigGemmIsComputeBound) {
  auto ks = kernelsOf("graph @g {\n  input %a : f32[1024,1024]\n  input %b : f32[1024,1024]\n"
                      "  %0 = matmul(%a, %b) : f32[1024,1024]\n  output %c = %0\n}\n");
  ASSERT_EQ(ks.size(), 1u);
  const CpuProfile cpu = fakeCpu();
  CpuEstimate e = predictCpu(ks[0], cpu);
  EXPECT_EQ(e.bound, Bound::Compute);
  EXPECT_EQ(e.threads, 2);
  // The model is fitted to the profile's probes: the measured 1024³ itself comes back closely.
  EXPECT_NEAR(e.computeMicros, 12974, 0.15 * 12974);
  EXPECT_THAT(cpuModelText(cpu), HasSubstr("1024x1024x1024"));
  GpuEstimate g = predictGpu(ks[0], fakeGpu(), 1);
  EXPECT_EQ(g.bound, Bound::Compute);
  EXPECT_LT(g.micros, e.micros);
}

TEST(CostModel, LowPrecisionContractionsUseTheirPeak) {
  auto ks = kernelsOf("graph @g {\n  input %a : bf16[2048,2048]\n  input %b : bf16[2048,2048]\n"
                      "  %0 = matmul(%a, %b) : bf16[2048,2048]\n  output %c = %0\n}\n");
  auto ks32 = kernelsOf("graph @g {\n  input %a : f32[2048,2048]\n  input %b : f32[2048,2048]\n"
                        "  %0 = matmul(%a, %b) : f32[2048,2048]\n  output %c = %0\n}\n");
  const GpuProfile gpu = fakeGpu();
  EXPECT_NEAR(predictGpu(ks32[0], gpu, 1).computeMicros / predictGpu(ks[0], gpu, 1).computeMicros,
              gpu.peakBf16 / gpu.peakF32, 0.5);
  // The CPU: at the rate of the profile's bf16 probes against its f32 model (about 2× here); a
  // profile without bf16 probes prices bf16 matmuls as f32 ones.
  CpuProfile cpu = fakeCpu();
  EXPECT_NEAR(predictCpu(ks32[0], cpu).computeMicros / predictCpu(ks[0], cpu).computeMicros, 2.0, 0.2);
  EXPECT_THAT(cpuModelText(cpu), HasSubstr("0.5")) << "1024³'s factor";
  EXPECT_THAT(cpuModelText(cpu), HasSubstr("× at 1024³"));
  // Small products at the small probe's rate (64³: its measured 7.0 µs), those between two probes
  // in between (128³: its f32 time over 1…2); a K under 16 widens to f32 (the backend's rule).
  auto square = [](const char* t, int64_t m, int64_t k) {
    return kernelsOf(fmt::format("graph @g {{\n  input %a : {0}[{1},{2}]\n  input %b : {0}[{2},{1}]\n"
                                 "  %0 = matmul(%a, %b) : {0}[{1},{1}]\n  output %c = %0\n}}\n",
                                 t, m, k))[0];
  };
  EXPECT_NEAR(predictCpu(square("bf16", 64, 64), cpu).computeMicros, 7.0, 0.05);
  const double mid = predictCpu(square("f32", 128, 128), cpu).computeMicros /
                     predictCpu(square("bf16", 128, 128), cpu).computeMicros;
  EXPECT_GT(mid, 1.05);
  EXPECT_LT(mid, 1.95);
  EXPECT_NEAR(predictCpu(square("f32", 512, 8), cpu).computeMicros, predictCpu(square("bf16", 512, 8), cpu).computeMicros,
              1e-9);
  std::erase_if(cpu.gemm, [](const GemmPoint& g) { return g.dtype == "bf16"; });
  EXPECT_NEAR(predictCpu(ks32[0], cpu).computeMicros / predictCpu(ks[0], cpu).computeMicros, 1.0, 0.01);
}

TEST(CostModel, Bf16ConvolutionsUseTheirOwnProbes) {
  // Each convolution form in bf16 at its own probe's rate against the same form in f32 (the probes
  // above: 2×, 1.5× and 2.5×), not at the squares' 2×; without bf16 convolution probes (a profile
  // before format 6), as f32.
  auto conv = [](const char* t) {
    const std::string x = fmt::format("  input %x : {}[8,32,14,14]\n", t), w = fmt::format("  input %w : {}[64,32,3,3]\n", t),
                      dy = fmt::format("  input %dy : {}[8,64,14,14]\n", t);
    return std::vector<std::vector<kernels::Kernel>>{
        kernelsOf("graph @g {\n" + x + w + fmt::format("  %0 = conv2d(%x, %w) {{padding=[1,1]}} : {}[8,64,14,14]\n", t) +
                  "  output %y = %0\n}\n"),
        kernelsOf("graph @g {\n" + dy + w +
                  fmt::format("  %0 = conv2d_grad_input(%dy, %w) {{input_shape=[8,32,14,14], padding=[1,1]}} : {}[8,32,14,14]\n", t) +
                  "  output %dx = %0\n}\n"),
        kernelsOf("graph @g {\n" + x + dy +
                  fmt::format("  %0 = conv2d_grad_weight(%x, %dy) {{weight_shape=[64,32,3,3], padding=[1,1]}} : {}[64,32,3,3]\n", t) +
                  "  output %dw = %0\n}\n")};
  };
  const auto f32 = conv("f32"), bf16 = conv("bf16");
  CpuProfile cpu = fakeCpu();
  const double ratios[] = {511.0 / 256, 739.0 / 490, 1537.0 / 615};
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(f32[i].size(), 1u);
    ASSERT_EQ(bf16[i].size(), 1u);
    EXPECT_NEAR(predictCpu(f32[i][0], cpu).computeMicros / predictCpu(bf16[i][0], cpu).computeMicros, ratios[i], 0.02)
        << f32[i][0].name;
  }
  EXPECT_THAT(cpuModelText(cpu), HasSubstr("conv2d_grad_weight bf16 "));
  std::erase_if(cpu.gemm, [](const GemmPoint& g) { return g.dtype == "bf16" && g.op != "matmul"; });
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(predictCpu(f32[i][0], cpu).computeMicros / predictCpu(bf16[i][0], cpu).computeMicros, 1.0, 0.01)
        << f32[i][0].name;
}

TEST(CostModel, ATinyModelOnAGpuIsLaunchAndTransferBound) {
  ir::Graph g = buildZooModel("tiny_mlp", {.batch = 1});
  passes::compileGraph(g);
  const CpuProfile cpu = fakeCpu();
  const GpuProfile gpu = fakeGpu();
  ProgramCost c = predictProgram(g, cpu, &gpu);
  ASSERT_TRUE(c.hasGpu);
  for (const KernelCost& k : c.kernels) {
    ASSERT_TRUE(k.gpu);
    EXPECT_EQ(k.gpu->bound, Bound::Launch) << k.name;
  }
  EXPECT_GT(c.gpuTransferMicros + c.gpuLaunchMicros, 0.5 * c.gpuStepMicros);
  Verdict v = verdict(c, cpu);
  EXPECT_EQ(v.winner, Verdict::Winner::Cpu);
  EXPECT_THAT(v.line, HasSubstr("CPU: "));
  EXPECT_THAT(v.line, HasSubstr("kernel launches"));
  EXPECT_THAT(v.line, HasSubstr("outweigh"));
}

// The host stages a run's inputs and outputs through pinned buffers at memory speed, whatever
// their size: twice the bytes, twice the staging.
TEST(CostModel, GpuRunsStageTheirInputsAtMemorySpeed) {
  const CpuProfile cpu = fakeCpu();
  const GpuProfile gpu = fakeGpu();
  auto transfer = [&](int64_t batch) {
    ir::Graph g = buildZooModel("simplenet", {.batch = batch});
    passes::compileGraph(g);
    const ProgramCost c = predictProgram(g, cpu, &gpu);
    return std::pair{c.gpuTransferMicros, static_cast<double>(c.inputBytes + c.outputBytes)};
  };
  // The difference: staging at memory speed, the upload and download at 25 GB/s. Batches of
  // 4 and 8 MB are staged by both threads (20 GB/s; rt::ThreadPool::copy from 2 MiB), batches
  // of 1 and 1.5 MB by one (15 GB/s).
  const auto [small, smallBytes] = transfer(1024);
  const auto [large, largeBytes] = transfer(2048);
  EXPECT_NEAR(large - small, (largeBytes - smallBytes) * (1 / (20 * 1e3) + 1 / (25 * 1e3)), 0.02 * (large - small));
  const auto [one, oneBytes] = transfer(256);
  const auto [more, moreBytes] = transfer(384);
  EXPECT_NEAR(more - one, (moreBytes - oneBytes) * (1 / (15 * 1e3) + 1 / (25 * 1e3)), 0.02 * (more - one));
}

TEST(CostModel, ABigModelAtALargeBatchFavoursTheGpu) {
  ir::Graph g = buildZooModel("simplenet", {.batch = 4096, .withLoss = false});
  passes::compileGraph(g);
  const CpuProfile cpu = fakeCpu();
  const GpuProfile gpu = fakeGpu();
  ProgramCost c = predictProgram(g, cpu, &gpu);
  Verdict v = verdict(c, cpu);
  EXPECT_EQ(v.winner, Verdict::Winner::Gpu) << v.line;
  EXPECT_THAT(v.line, HasSubstr("GPU: "));
}

TEST(CostModel, WithoutAGpuTheVerdictSaysSo) {
  ir::Graph g = buildZooModel("mnist_mlp", {.batch = 8});
  passes::compileGraph(g);
  const CpuProfile cpu = fakeCpu();
  ProgramCost c = predictProgram(g, cpu, nullptr);
  EXPECT_FALSE(c.hasGpu);
  for (const KernelCost& k : c.kernels) EXPECT_FALSE(k.gpu);
  Verdict v = verdict(c, cpu);
  EXPECT_EQ(v.winner, Verdict::Winner::CpuOnly);
  EXPECT_THAT(v.line, HasSubstr("no GPU profile"));
  EXPECT_NEAR(c.cpuStepMicros, c.cpuKernelMicros + c.cpuRunMicros, 1e-9);
}

TEST(CostModel, TextUnits) {
  EXPECT_EQ(flopText(2e5), "200.0 kFLOP");
  EXPECT_EQ(flopText(8.1e9), "8.1 GFLOP");
  EXPECT_EQ(byteText(4e5), "400.0 kB");
  EXPECT_EQ(timeText(4100), "4.10 ms");
}

// ---- kiln explain --------------------------------------------------------------------------------

TEST(Explain, EveryZooModelInferenceAndTraining) {
  const CpuProfile cpu = fakeCpu();
  const GpuProfile gpu = fakeGpu();
  for (const std::string& model : zooModelNames()) {
    for (bool train : {false, true}) {
      ExplainOptions o;
      o.model = model;
      o.batch = 4;
      o.train = train;
      o.optimizer = "adam";
      ExplainReport r = explain(o, cpu, &gpu);
      SCOPED_TRACE(r.title);
      ASSERT_FALSE(r.cost.kernels.empty());
      EXPECT_GT(r.cost.cpuStepMicros, 0);
      EXPECT_GT(r.cost.gpuStepMicros, 0);
      const std::string text = explainText(r);
      EXPECT_THAT(text, HasSubstr(model));
      EXPECT_THAT(text, HasSubstr("verdict: "));
      EXPECT_THAT(text, HasSubstr(r.cost.kernels.front().name));
      EXPECT_THAT(explainText(explain(o, cpu, nullptr, "no GPU here")), HasSubstr("gpu: no GPU here"));
    }
  }
}

TEST(Explain, MeasuresKernelsOnTheCpu) {
  ExplainOptions o;
  o.model = "tiny_mlp";
  o.batch = 2;
  o.measure = true;
  o.measureSeconds = 0.001;
  ExplainReport r = explain(o, fakeCpu(), nullptr);
  ASSERT_TRUE(r.measured);
  EXPECT_EQ(r.measured->kernelMicros.size(), r.cost.kernels.size());
  EXPECT_GE(r.measured->runs, 9);
  EXPECT_THAT(explainText(r), HasSubstr("meas µs"));
}

TEST(Explain, PrecisionAndErrors) {
  ExplainOptions o;
  o.model = "mnist_mlp";
  o.precision = "bf16";
  EXPECT_THAT(explainGraph(o).title, HasSubstr("bf16"));
  o.model = "no_such_model";
  EXPECT_THROW(explainGraph(o), Error);
}

}  // namespace
}  // namespace kiln::cost
