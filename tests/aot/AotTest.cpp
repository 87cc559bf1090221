// kiln aot: libraries written by exportLibrary, opened with dlopen, against the JIT (cpu::Program:
// the same kernels, so f32 results are equal bit for bit), and the C API's error handling.
#include "aot/Export.h"
#include "aot/Library.h"
#include "codegen/cpu/Jit.h"
#include "codegen/cpu/Program.h"
#include "frontend/Build.h"
#include "frontend/Zoo.h"
#include "ir/Parser.h"
#include "passes/Pipeline.h"
#include "passes/TrainingStep.h"
#include "runtime/Safetensors.h"
#include "runtime/ThreadPool.h"
#include "support/Error.h"
#include "support/FloatMode.h"
#include "tests/passes/RandomGraphs.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

namespace kiln {
namespace {

namespace fs = std::filesystem;
using AotLibrary = aot::Library;
using aot::TensorInfo;

constexpr int kOk = 0, kArgument = 1, kIo = 2, kFormat = 3;

/// A fresh directory for one test, removed afterwards.
struct Scratch {
  fs::path dir;
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "kiln-aot-test-XXXXXX").string();
    dir = ::mkdtemp(pattern.data());
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

aot::ExportResult exportTo(const ir::Graph& g, const std::string& name, const fs::path& dir,
                           aot::ExportOptions o = {}) {
  o.name = name;
  o.outDir = dir.string();
  o.compiler = KILN_TEST_CC;
  return aot::exportLibrary(g, o);
}

/// The JIT's program for `g`, compiled as exportLibrary compiles it, on the global pool (with `jit`:
/// for that Jit's CPU).
std::unique_ptr<cpu::Program> jitFor(const ir::Graph& g, passes::Precision precision = passes::Precision::F32,
                                     cpu::Jit* jit = nullptr) {
  ir::Graph compiled = g.clone();
  passes::PassContext ctx;
  ctx.precision = precision;
  passes::compileGraph(compiled, ctx);
  cpu::ProgramOptions options;
  options.jit = jit;
  return cpu::Program::compile(compiled, options);
}

int threads() { return rt::ThreadPool::global().threads(); }

/// Inputs with valid class indices (integers in [0, 4)) and lr = 0.01.
interp::TensorMap inputsFor(const ir::Graph& g, uint64_t seed) {
  interp::TensorMap in = kiln::testing::randomInputs(g, seed);
  if (auto it = in.find("lr"); it != in.end()) it->second.set(0, 0.01);
  return in;
}

/// One run of the library on `in` (by the graph's input names); the outputs by name.
interp::TensorMap runLibrary(const AotLibrary& lib, void* ctx, const ir::Graph& g, const interp::TensorMap& in) {
  std::vector<const void*> inputs;
  for (const ir::Value* v : g.inputs()) inputs.push_back(in.at(v->name).data());
  interp::TensorMap out;
  std::vector<void*> outputs;
  for (const ir::Output& o : g.outputs()) {
    auto [it, _] = out.insert_or_assign(o.name, rt::HostTensor(o.value->type.dtype, o.value->type.shape));
    outputs.push_back(it->second.data());
  }
  EXPECT_EQ(lib.run(ctx, inputs.data(), outputs.data()), kOk) << lib.errorMessage();
  return out;
}

interp::TensorMap libraryParams(const AotLibrary& lib, void* ctx, const ir::Graph& g) {
  interp::TensorMap out;
  for (const ir::Param& p : g.params()) {
    rt::HostTensor t(p.value->type.dtype, p.value->type.shape);
    EXPECT_EQ(lib.getParam(ctx, p.value->name.c_str(), t.data(), t.bytes()), kOk) << lib.errorMessage();
    out.insert_or_assign(p.value->name, std::move(t));
  }
  return out;
}

void expectSameBits(const interp::TensorMap& want, const interp::TensorMap& got, const std::string& what) {
  for (const auto& [name, t] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << what << ": no " << name;
    ASSERT_EQ(t.bytes(), it->second.bytes()) << what << " " << name;
    EXPECT_EQ(std::memcmp(t.data(), it->second.data(), t.bytes()), 0) << what << ": " << name << " differs";
  }
}

ir::Graph zooInference(const std::string& name, int64_t batch) {
  return buildInference(zooModel(name, {.batch = batch}), batch);
}

ir::Graph zooTrainStep(const std::string& name, int64_t batch, const char* optimizer = "adam") {
  passes::TrainingStepOptions to;
  to.optimizer.kind = passes::optimizerKindFromName(optimizer);
  return buildTrainStep(zooModel(name, {.batch = batch}), to, batch);
}

TEST(AotZoo, InferenceEqualsTheJitBitForBit) {
  for (const std::string& model : zooModelNames()) {
    SCOPED_TRACE(model);
    Scratch s;
    ir::Graph g = zooInference(model, 3);
    aot::ExportResult r = exportTo(g, "m", s.dir);
    EXPECT_FALSE(r.training);
    AotLibrary lib(r.library, "m");
    void* ctx = nullptr;
    ASSERT_EQ(lib.create(&ctx, r.weights.c_str(), threads()), kOk) << lib.errorMessage();
    std::unique_ptr<cpu::Program> jit = jitFor(g);
    for (uint64_t seed : {1, 2}) {
      interp::TensorMap in = inputsFor(g, seed);
      expectSameBits(jit->run(in), runLibrary(lib, ctx, g, in), model);
    }
    lib.destroy(ctx);
  }
}

TEST(AotZoo, TrainingStepsEqualTheJitBitForBit) {
  for (const std::string& model : zooModelNames()) {
    SCOPED_TRACE(model);
    Scratch s;
    ir::Graph g = zooTrainStep(model, 3);
    aot::ExportResult r = exportTo(g, "t", s.dir);
    AotLibrary lib(r.library, "t");
    void* ctx = nullptr;
    ASSERT_EQ(lib.create(&ctx, r.weights.c_str(), threads()), kOk) << lib.errorMessage();
    std::unique_ptr<cpu::Program> jit = jitFor(g);
    for (int step = 0; step < 3; ++step) {
      interp::TensorMap in = inputsFor(g, 10 + step);
      const std::string what = fmt::format("{} step {}", model, step);
      expectSameBits(jit->run(in), runLibrary(lib, ctx, g, in), what);
      expectSameBits(jit->params(), libraryParams(lib, ctx, g), what + " parameters");
    }
    lib.destroy(ctx);
  }
}

TEST(AotZoo, MixedPrecisionEqualsTheJitBitForBit) {
  for (const char* model : {"mnist_mlp", "cnn"})
    for (passes::Precision precision : {passes::Precision::BF16, passes::Precision::F16}) {
      SCOPED_TRACE(fmt::format("{} {}", model, passes::precisionName(precision)));
      Scratch s;
      ir::Graph g = zooInference(model, 2);
      aot::ExportOptions o;
      o.precision = precision;
      aot::ExportResult r = exportTo(g, "mixed", s.dir, o);
      AotLibrary lib(r.library, "mixed");
      void* ctx = nullptr;
      ASSERT_EQ(lib.create(&ctx, r.weights.c_str(), threads()), kOk) << lib.errorMessage();
      interp::TensorMap in = inputsFor(g, 4);
      expectSameBits(jitFor(g, precision)->run(in), runLibrary(lib, ctx, g, in), model);
      lib.destroy(ctx);
    }
}

TEST(Aot, TrainStepApiAndSaveLoadRoundTrip) {
  Scratch s;
  ir::Graph g = zooTrainStep("mnist_mlp", 8);
  aot::ExportResult r = exportTo(g, "mnist_train", s.dir);
  ASSERT_TRUE(r.training);
  AotLibrary lib(r.library, "mnist_train");
  ASSERT_NE(lib.trainStep, nullptr);
  EXPECT_EQ(lib.forward, nullptr);
  void* ctx = nullptr;
  ASSERT_EQ(lib.create(&ctx, r.weights.c_str(), threads()), kOk) << lib.errorMessage();
  std::unique_ptr<cpu::Program> jit = jitFor(g);
  for (int step = 0; step < 3; ++step) {
    interp::TensorMap in = inputsFor(g, 20 + step);
    float loss = -1;
    ASSERT_EQ(lib.trainStep(ctx, in.at("x").data(), in.at("labels").data(), 0.01f, &loss), kOk) << lib.errorMessage();
    interp::TensorMap want = jit->run(in);
    EXPECT_EQ(loss, want.at("loss").at(0));
    // The other outputs stay readable.
    const float* logits = static_cast<const float*>(lib.output(ctx, 0));
    ASSERT_NE(logits, nullptr);
    EXPECT_EQ(std::memcmp(logits, want.at("logits").data(), want.at("logits").bytes()), 0);
  }
  const std::string saved = (s.dir / "after.safetensors").string();
  ASSERT_EQ(lib.saveWeights(ctx, saved.c_str()), kOk) << lib.errorMessage();
  expectSameBits(jit->params(), rt::loadSafetensors(saved), "saved weights");
  // The saved file starts a second context where the first left off.
  void* again = nullptr;
  ASSERT_EQ(lib.create(&again, saved.c_str(), 1), kOk) << lib.errorMessage();
  EXPECT_EQ(lib.numThreads(again), 1);
  expectSameBits(jit->params(), libraryParams(lib, again, g), "reloaded");
  lib.destroy(again);
  lib.destroy(ctx);
}

TEST(Aot, TwoLibrariesInOneProcess) {
  Scratch s;
  // The same model twice (identical kernel names inside) and another one.
  ir::Graph a = zooInference("mnist_mlp", 2);
  ir::Graph b = buildInference(zooModel("mnist_mlp", {.batch = 2, .seed = 5}), 2);
  ir::Graph c = zooInference("tiny_mlp", 4);
  aot::ExportResult ra = exportTo(a, "first", s.dir / "a"), rb = exportTo(b, "second", s.dir / "b"),
                    rc = exportTo(c, "third", s.dir / "c");
  AotLibrary la(ra.library, "first"), lb(rb.library, "second"), lc(rc.library, "third");
  void *ca = nullptr, *cb = nullptr, *cc = nullptr;
  ASSERT_EQ(la.create(&ca, ra.weights.c_str(), 0), kOk) << la.errorMessage();
  ASSERT_EQ(lb.create(&cb, rb.weights.c_str(), 0), kOk) << lb.errorMessage();
  ASSERT_EQ(lc.create(&cc, rc.weights.c_str(), 0), kOk) << lc.errorMessage();
  interp::TensorMap ia = inputsFor(a, 1), ic = inputsFor(c, 1);
  std::unique_ptr<cpu::Program> ja = jitFor(a), jb = jitFor(b), jc = jitFor(c);
  for (int round = 0; round < 2; ++round) {
    expectSameBits(ja->run(ia), runLibrary(la, ca, a, ia), "first");
    expectSameBits(jb->run(ia), runLibrary(lb, cb, b, ia), "second");
    expectSameBits(jc->run(ic), runLibrary(lc, cc, c, ic), "third");
  }
  la.destroy(ca);
  lb.destroy(cb);
  lc.destroy(cc);
}

TEST(Aot, ExportsTheApiOnlyAndNeedsLibcLibmPthreadOnly) {
  Scratch s;
  ir::Graph g = zooInference("tiny_mlp", 2);
  aot::ExportResult r = exportTo(g, "tiny", s.dir);
  AotLibrary lib(r.library, "tiny");
  EXPECT_NE(lib.symbol("tiny_forward"), nullptr);
  EXPECT_EQ(lib.symbol("kiln_parallel_for"), nullptr);
  EXPECT_EQ(lib.symbol("kiln_aot_create"), nullptr);
  EXPECT_EQ(lib.symbol("tiny_kiln_constants"), nullptr);
  // readelf -d: the libraries it needs.
  std::string cmd = "readelf -d '" + r.library + "' 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string text;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) text += buf;
  if (::pclose(p) != 0 || text.empty()) GTEST_SKIP() << "readelf is not available";
  std::vector<std::string> needed;
  for (size_t at = text.find("(NEEDED)"); at != std::string::npos; at = text.find("(NEEDED)", at + 1)) {
    size_t open = text.find('[', at), close = text.find(']', open);
    needed.push_back(text.substr(open + 1, close - open - 1));
  }
  EXPECT_FALSE(needed.empty());
  for (const std::string& n : needed)
    EXPECT_TRUE(n == "libc.so.6" || n == "libm.so.6" || n == "libpthread.so.0" || n == "ld-linux-x86-64.so.2")
        << "needs " << n;
}

TEST(Aot, EmbeddedWeightsNeedNoFile) {
  Scratch s;
  ir::Graph g = zooInference("mnist_mlp", 2);
  aot::ExportOptions o;
  o.embedWeights = true;
  aot::ExportResult r = exportTo(g, "emb", s.dir / "emb", o);
  aot::ExportResult plain = exportTo(g, "plain", s.dir / "plain");
  AotLibrary lib(r.library, "emb"), other(plain.library, "plain");
  void* ctx = nullptr;
  ASSERT_EQ(lib.create(&ctx, nullptr, 0), kOk) << lib.errorMessage();
  interp::TensorMap in = inputsFor(g, 3);
  rt::HostTensor out(DType::f32, {2, 10});
  ASSERT_EQ(lib.forward(ctx, in.at("x").data(), out.data()), kOk) << lib.errorMessage();
  expectSameBits(jitFor(g)->run(in), {{"logits", out}}, "embedded");
  // forward's errors name forward and its one input.
  EXPECT_EQ(lib.forward(ctx, nullptr, out.data()), kArgument);
  EXPECT_EQ(std::string(lib.errorMessage()), "emb_forward: input (\"x\") is NULL");
  EXPECT_EQ(lib.forward(ctx, in.at("x").data(), nullptr), kArgument);
  EXPECT_EQ(std::string(lib.errorMessage()), "emb_forward: output is NULL");
  lib.destroy(ctx);
  // Without embedded weights, a NULL path is an error that says what to do.
  void* none = reinterpret_cast<void*>(1);
  EXPECT_EQ(other.create(&none, nullptr, 0), kArgument);
  EXPECT_EQ(none, nullptr);
  EXPECT_NE(std::string(other.errorMessage()).find("weights"), std::string::npos) << other.errorMessage();
}

// Subnormal floats (support/FloatMode.h): the library's kernels flush them, on the caller's thread
// and the pool's, unless KILN_DENORMALS=keep when the context is created, as the JIT's do; the
// caller's own floating-point mode is the same after a run; another value fails create.
TEST(Aot, SubnormalsFlushedUnlessKept) {
  Scratch s;
  constexpr int64_t n = 1 << 17;  // two chunks of the pool's elementwise grain at least
  ir::Graph g = ir::parseGraph(fmt::format("graph @g {{\n  input %x : f32[{0}]\n  input %s : f32[{0}]\n"
                                           "  %m = mul(%x, %s) : f32[{0}]\n  output %y = %m\n}}\n", n),
                               "subnormals.kir");
  aot::ExportOptions o;
  o.embedWeights = true;
  aot::ExportResult r = exportTo(g, "sub", s.dir, o);
  AotLibrary lib(r.library, "sub");
  const rt::HostTensor tiny = rt::HostTensor::fromVector(DType::f32, {n}, std::vector<float>(n, 1e-20f));
  const interp::TensorMap in{{"x", tiny}, {"s", tiny}};  // products of 1e-40: subnormal
  struct Unset {
    ~Unset() { ::unsetenv("KILN_DENORMALS"); }
  } unset;
  const uint32_t before = floatControl();
  for (const char* value : {"", "keep", "flush"}) {
    ::setenv("KILN_DENORMALS", value, 1);
    void* ctx = nullptr;
    ASSERT_EQ(lib.create(&ctx, nullptr, 2), kOk) << lib.errorMessage();
    const interp::TensorMap out = runLibrary(lib, ctx, g, in);
    lib.destroy(ctx);
    EXPECT_EQ(floatControl() & ~kFloatFlags, before & ~kFloatFlags) << value;
    const bool keep = std::string(value) == "keep";
    int64_t nonzero = 0;
    for (int64_t i = 0; i < n; ++i) nonzero += out.at("y").as<float>()[i] != 0.0f;
    EXPECT_EQ(nonzero, keep ? n : 0) << "KILN_DENORMALS=" << value;
  }
  ::setenv("KILN_DENORMALS", "fast", 1);
  void* ctx = nullptr;
  EXPECT_EQ(lib.create(&ctx, nullptr, 2), kArgument);
  EXPECT_STREQ(lib.errorMessage(), "sub_create: KILN_DENORMALS is 'fast': expected 'flush' (the default) or 'keep'");
}

TEST(Aot, BadInputsGiveCodesAndMessages) {
  Scratch s;
  ir::Graph g = zooTrainStep("tiny_mlp", 4, "sgd");
  aot::ExportResult r = exportTo(g, "bad", s.dir);
  AotLibrary lib(r.library, "bad");
  auto message = [&] { return std::string(lib.errorMessage()); };

  // Messages name the library's functions, not the runtime's.
  EXPECT_EQ(lib.create(nullptr, r.weights.c_str(), 0), kArgument);
  EXPECT_EQ(message(), "bad_create: ctx is NULL");
  void* ctx = nullptr;
  const std::string missing = (s.dir / "no-such.safetensors").string();
  EXPECT_EQ(lib.create(&ctx, missing.c_str(), 0), kIo);
  EXPECT_NE(message().find("no-such.safetensors"), std::string::npos) << message();
  EXPECT_EQ(ctx, nullptr);

  const std::string garbage = (s.dir / "garbage.safetensors").string();
  std::ofstream(garbage) << "this is not a safetensors file at all";
  EXPECT_EQ(lib.create(&ctx, garbage.c_str(), 0), kFormat) << message();

  // A weights file with one parameter of the wrong shape, and one lacking a parameter.
  rt::NamedTensors weights = rt::loadSafetensors(r.weights);
  const std::string first = g.params().at(0).value->name;
  rt::NamedTensors wrong = weights;
  wrong.insert_or_assign(first, rt::HostTensor(DType::f32, {1, 2, 3}));
  const std::string wrongPath = (s.dir / "wrong.safetensors").string();
  rt::saveSafetensors(wrongPath, wrong);
  EXPECT_EQ(lib.create(&ctx, wrongPath.c_str(), 0), kFormat);
  EXPECT_NE(message().find(first), std::string::npos) << message();
  rt::NamedTensors lacking = weights;
  lacking.erase(first);
  const std::string lackingPath = (s.dir / "lacking.safetensors").string();
  rt::saveSafetensors(lackingPath, lacking);
  EXPECT_EQ(lib.create(&ctx, lackingPath.c_str(), 0), kFormat);
  EXPECT_NE(message().find(first), std::string::npos) << message();

  ASSERT_EQ(lib.create(&ctx, r.weights.c_str(), 0), kOk) << message();
  interp::TensorMap before = libraryParams(lib, ctx, g);
  // A failed load changes nothing.
  EXPECT_EQ(lib.loadWeights(ctx, wrongPath.c_str()), kFormat);
  EXPECT_EQ(lib.loadWeights(ctx, nullptr), kArgument);
  EXPECT_EQ(lib.loadWeights(nullptr, r.weights.c_str()), kArgument);
  EXPECT_EQ(message(), "bad_load_weights: the context is NULL");
  expectSameBits(before, libraryParams(lib, ctx, g), "after failed loads");

  interp::TensorMap in = inputsFor(g, 1);
  float loss = 0;
  EXPECT_EQ(lib.run(nullptr, nullptr, nullptr), kArgument);
  EXPECT_EQ(message(), "bad_run: the context is NULL");
  EXPECT_EQ(lib.run(ctx, nullptr, nullptr), kArgument);
  EXPECT_EQ(message(), "bad_run: inputs is NULL");
  const void* batch = in.at(g.inputs()[0]->name).data();
  const void* targets = in.at(g.inputs()[1]->name).data();  // tiny_mlp: "target", f32
  EXPECT_EQ(lib.trainStep(ctx, nullptr, targets, 0.1f, &loss), kArgument);
  EXPECT_EQ(lib.trainStep(ctx, batch, nullptr, 0.1f, &loss), kArgument);
  EXPECT_EQ(lib.trainStep(nullptr, batch, targets, 0.1f, &loss), kArgument);
  EXPECT_EQ(message(), "bad_train_step: the context is NULL");
  EXPECT_EQ(lib.trainStep(ctx, batch, targets, 0.1f, nullptr), kOk) << message();
  before = libraryParams(lib, ctx, g);
  EXPECT_EQ(lib.getParam(ctx, "no.such.param", nullptr, 0), kArgument);
  EXPECT_EQ(message(), "bad_get_param: the buffer for \"no.such.param\" is NULL");
  float one = 0;
  EXPECT_EQ(lib.getParam(ctx, "no.such.param", &one, sizeof one), kArgument);
  EXPECT_EQ(message(), "bad_get_param: no parameter \"no.such.param\"");
  EXPECT_EQ(lib.getParam(ctx, first.c_str(), &one, sizeof one), kArgument);
  EXPECT_EQ(lib.output(ctx, 99), nullptr);
  EXPECT_EQ(lib.output(nullptr, 0), nullptr);
  EXPECT_EQ(message(), "bad_output: the context is NULL");
  TensorInfo info{};
  EXPECT_EQ(lib.inputInfo(99, &info), kArgument);
  EXPECT_EQ(lib.inputInfo(0, nullptr), kArgument);
  ASSERT_EQ(lib.inputInfo(0, &info), kOk);
  EXPECT_STREQ(info.name, g.inputs()[0]->name.c_str());
  EXPECT_EQ(info.numel, g.inputs()[0]->type.numel());
  expectSameBits(before, libraryParams(lib, ctx, g), "after failed calls");
  EXPECT_EQ(lib.saveWeights(ctx, (s.dir / "no-dir" / "x.safetensors").c_str()), kIo);
  lib.destroy(ctx);
  lib.destroy(nullptr);
}

// Token ids out of range: KILN_AOT_E_ARGUMENT naming the input, the element and the range (the
// kernels would read zeros), as the JIT's executor and the interpreter refuse them.
TEST(Aot, IndexInputsOutOfRangeAreErrors) {
  Scratch s;
  ir::Graph g = ir::parseGraph(R"(graph @emb {
  input %tokens : i64[2,2]
  param %table : f32[4,3] = ones
  %flat = reshape(%tokens) {shape=[4]} : i64[4]
  %e = gather(%table, %flat) {axis=0} : f32[4,3]
  output %e = %e
}
)",
                               "emb.kir");
  aot::ExportResult r = exportTo(g, "emb", s.dir);
  AotLibrary lib(r.library, "emb");
  void* ctx = nullptr;
  ASSERT_EQ(lib.create(&ctx, r.weights.c_str(), 0), kOk) << lib.errorMessage();
  int64_t tokens[4] = {0, 3, 1, 2};
  float out[12] = {};
  const void* inputs[] = {tokens};
  void* outputs[] = {out};
  EXPECT_EQ(lib.run(ctx, inputs, outputs), kOk) << lib.errorMessage();
  EXPECT_EQ(out[11], 1.0f);
  tokens[2] = 4;
  EXPECT_EQ(lib.run(ctx, inputs, outputs), kArgument);
  EXPECT_NE(std::string(lib.errorMessage()).find("input \"tokens\" element 2 is 4, an index out of range [0, 4)"),
            std::string::npos)
      << lib.errorMessage();
  tokens[2] = -1;
  EXPECT_EQ(lib.run(ctx, inputs, outputs), kArgument);
  lib.destroy(ctx);
}

// --cpu: a library for another CPU than the build machine's. One for plain x86-64 (SSE2, 4 lanes)
// runs here and equals, bit for bit, the JIT compiled for that CPU (not the host's: its vectors
// sum in another order); one for Skylake-X lists AVX-512 in its header and, on a CPU without it,
// refuses to create with KILN_AOT_E_CPU naming what is missing (where the CPU has it, it runs and
// equals its JIT too).
TEST(Aot, LibrariesForAnotherCpu) {
  Scratch s;
  const ir::Graph g = zooTrainStep("mnist_mlp", 5);
  for (const std::string name : {"x86-64", "skylake-avx512"}) {
    aot::ExportOptions o;
    o.cpu = name;
    const std::string lib = name == "x86-64" ? "plain" : "avx512";
    aot::ExportResult r = exportTo(g, lib, s.dir / lib, o);
    std::ifstream header(r.header);
    const std::string text((std::istreambuf_iterator<char>(header)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find("avx512f") != std::string::npos, name == "skylake-avx512") << text;
    AotLibrary library(r.library, lib);
    void* ctx = nullptr;
    cpu::JitOptions jo;
    jo.cpu = name;
    cpu::Jit jit(jo);
    const bool runs = name == "x86-64" || cpu::Jit::host().hasFeature("avx512f");
    const int rc = library.create(&ctx, r.weights.c_str(), threads());
    if (!runs) {
      EXPECT_EQ(rc, 5) << "KILN_AOT_E_CPU";
      EXPECT_NE(std::string(library.errorMessage()).find("lacks avx512f"), std::string::npos) << library.errorMessage();
      EXPECT_EQ(ctx, nullptr);
      continue;
    }
    ASSERT_EQ(rc, kOk) << library.errorMessage();
    std::unique_ptr<cpu::Program> program = jitFor(g, passes::Precision::F32, &jit);
    for (int step = 0; step < 2; ++step) {
      const interp::TensorMap in = inputsFor(g, 400 + static_cast<uint64_t>(step));
      expectSameBits(program->run(in), runLibrary(library, ctx, g, in), fmt::format("{} step {}", name, step));
    }
    expectSameBits(program->params(), libraryParams(library, ctx, g), name + " parameters");
    library.destroy(ctx);
  }
}

TEST(AotExport, ErrorsNameTheProblem) {
  Scratch s;
  ir::Graph g = zooInference("tiny_mlp", 2);
  auto expectError = [&](const aot::ExportOptions& o, const std::string& name, const std::string& needle) {
    try {
      exportTo(g, name, s.dir, o);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expectError({}, "9lives", "not a C identifier");
  expectError({}, "has-dash", "not a C identifier");
  aot::ExportOptions tpu;  // CUDA libraries: AotCudaTest.cpp
  tpu.target = "tpu";
  expectError(tpu, "ok", "cpu and cuda");
  aot::ExportOptions bogus;
  bogus.cpu = "bogus-cpu";
  expectError(bogus, "ok", "unsupported CPU 'bogus-cpu'");
  aot::ExportOptions cudaCpu;
  cudaCpu.target = "cuda";
  cudaCpu.cpu = "haswell";
  expectError(cudaCpu, "ok", "--cpu names the CPU of a --target cpu library");
  aot::ExportOptions weights;
  weights.weights.emplace(g.params().at(0).value->name, rt::HostTensor(DType::f32, {7}));
  expectError(weights, "ok", g.params().at(0).value->name);
  // No C compiler: exportTo sets the compiler, so call exportLibrary directly.
  aot::ExportOptions nocc;
  nocc.name = "ok";
  nocc.outDir = s.dir.string();
  nocc.compiler = "/nonexistent/cc";
  try {
    aot::exportLibrary(g, nocc);
    ADD_FAILURE() << "no error without a compiler";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("C compiler"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(s.dir / "libok.so"));
}

}  // namespace
}  // namespace kiln
