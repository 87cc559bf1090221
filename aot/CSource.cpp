#include "aot/CSource.h"

#include "ir/IndexInputs.h"
#include "support/Error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace kiln::aot {

namespace {

// The runtime's sources, embedded at build time (aot/CMakeLists.txt).
constexpr const char* kRuntimeHeader =
#include "KilnAotHeader.inc"
    ;
constexpr const char* kRuntimeCommon =
#include "KilnAotCommon.inc"
    ;
constexpr const char* kRuntimeSafetensors =
#include "KilnAotSafetensors.inc"
    ;
constexpr const char* kRuntimeCpu =
#include "KilnAotCpu.inc"
    ;
constexpr const char* kRuntimeCuda =
#include "KilnAotCuda.inc"
    ;

std::string typeText(const ir::TensorType& t) { return t.str(); }

const char* dtypeConstant(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::f64: return "F64";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::boolean: return "BOOL";
  }
  return "F32";
}

/// Macro fragments for a list of tensor names, made unique ("X", "X_1", …).
std::vector<std::string> uniqueMacros(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  std::set<std::string> used;
  for (const std::string& n : names) {
    std::string m = macroName(n);
    for (int i = 1; used.count(m); ++i) m = fmt::format("{}_{}", macroName(n), i);
    used.insert(m);
    out.push_back(m);
  }
  return out;
}

std::string shapeList(const ir::TensorType& t) {
  return fmt::format("{}", fmt::join(t.shape, ", "));
}

/// The #defines of one tensor of the signature.
std::string tensorMacros(const std::string& prefix, const std::string& kind, int index, const std::string& macro,
                         const std::string& name, const ir::TensorType& t) {
  const std::string m = fmt::format("{}_{}_{}", prefix, kind, macro);
  std::string out = fmt::format("/* {} {}: '{}', {} */\n", kind == "INPUT" ? "input" : "output", index, name,
                                typeText(t));
  out += fmt::format("#define {} {}\n", m, index);
  out += fmt::format("#define {}_DTYPE {}_{}\n", m, prefix, dtypeConstant(t.dtype));
  out += fmt::format("#define {}_RANK {}\n", m, t.shape.size());
  if (!t.shape.empty()) out += fmt::format("#define {}_SHAPE {{{}}}\n", m, shapeList(t));
  out += fmt::format("#define {}_NUMEL {}\n", m, t.numel());
  out += fmt::format("#define {}_BYTES {}\n\n", m, t.numel() * dtypeSize(t.dtype));
  return out;
}

/// `static const int64_t NAME[] = {…};` (nothing for rank 0) and the kiln_aot_tensor initializer.
std::string tensorEntry(std::string& decls, const std::string& shapeName, const std::string& name,
                        const ir::TensorType& t, int64_t indexBound = 0) {
  std::string shape = "NULL";
  if (!t.shape.empty()) {
    decls += fmt::format("static const int64_t {}[] = {{{}}};\n", shapeName, shapeList(t));
    shape = shapeName;
  }
  return fmt::format("{{{}, KILN_AOT_{}, {}, {}, {}, {}, {}}}", literal(name), dtypeConstant(t.dtype), t.shape.size(),
                     shape, t.numel(), t.numel() * dtypeSize(t.dtype), indexBound);
}

bool isIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

}  // namespace

/// A C string literal for `s` (names are printable ASCII in practice; anything else is escaped).
std::string literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += fmt::format("\\{}", static_cast<char>(c));
    else if (c < 0x20 || c >= 0x7f) out += fmt::format("\\{:03o}", c);
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

std::string macroName(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "T" + out;
  return out;
}

std::string constantsSymbol(const std::string& name) { return name + "_kiln_constants"; }
std::string weightsSymbol(const std::string& name) { return name + "_kiln_weights"; }

std::string generateHeader(const ProgramDescription& p) {
  const ir::Graph& g = *p.graph;
  const std::string& n = p.name;
  const std::string N = macroName(n);
  std::vector<std::string> inNames, outNames;
  for (const ir::Value* v : g.inputs()) inNames.push_back(v->name);
  for (const ir::Output& o : g.outputs()) outNames.push_back(o.name);
  const std::vector<std::string> inMacros = uniqueMacros(inNames), outMacros = uniqueMacros(outNames);
  int64_t paramBytes = 0;
  for (const ir::Param& prm : g.params()) paramBytes += prm.value->type.numel() * dtypeSize(prm.value->type.dtype);

  std::string h;
  h += fmt::format("/* {n}.h — the C API of lib{n}.so, written by `kiln aot`.\n *\n", fmt::arg("n", n));
  const bool cuda = p.target == "cuda";
  h += fmt::format(" * Program: {} ({}); {} kernels{}; {} parameters ({} bytes).\n",
                   p.training() ? "one training step: forward, backward and optimizer update" : "inference",
                   p.source.empty() ? "@" + g.name() : p.source, p.kernelCount, cuda ? " for CUDA GPUs" : "",
                   g.params().size(), paramBytes);
  h += " * Inputs:  ";
  for (size_t i = 0; i < inNames.size(); ++i)
    h += fmt::format("{}{} {}", i ? ", " : "", inNames[i], typeText(g.inputs()[i]->type));
  h += "\n * Outputs: ";
  for (size_t i = 0; i < outNames.size(); ++i)
    h += fmt::format("{}{} {}", i ? ", " : "", outNames[i], typeText(g.outputs()[i].value->type));
  h += fmt::format(R"c(
 * Weights: {weights}
 *
 * {needs}
 * Every function returns {N}_OK or an error code; {n}_error_message() then says what and where.
 *
 * Example:
 *   {n}_context* ctx;
 *   if ({n}_create(&ctx, "{n}.safetensors", 0) != {N}_OK) {{
 *     fprintf(stderr, "%s\n", {n}_error_message());
 *     return 1;
 *   }}
)c",
                   fmt::arg("n", n), fmt::arg("N", N),
                   fmt::arg("weights", p.embeddedWeights ? "embedded (create with a NULL path), or loaded from a file"
                                                         : "loaded from a safetensors file at create (" + n +
                                                               ".safetensors holds the initial ones)"),
                   fmt::arg("needs", cuda ? fmt::format("The library needs libc, libm, libpthread and libdl. It runs on NVIDIA GPUs through the\n"
                                                        " * CUDA driver, libcuda.so.1, which {}_create opens (without a driver or a GPU it\n"
                                                        " * fails with {}_E_CUDA).\n * Kernels: {}; no cuBLAS.", n, N, p.cudaCode)
                                          : fmt::format("The library needs libc, libm and libpthread only; it runs on CPUs with {}.",
                                                        p.cpuFeatures.empty() ? std::string("x86-64")
                                                                              : fmt::format("{}", fmt::join(p.cpuFeatures, ", ")))));
  if (p.training())
    h += fmt::format(" *   float loss;\n *   {n}_train_step(ctx, batch, labels, 0.01f, &loss);   // the parameters update\n"
                     " *   {n}_save_weights(ctx, \"trained.safetensors\");\n",
                     fmt::arg("n", n));
  else if (inNames.size() == 1)
    h += fmt::format(" *   {n}_forward(ctx, input, output);   // {in} → {out}\n", fmt::arg("n", n),
                     fmt::arg("in", inNames[0]), fmt::arg("out", outNames.empty() ? "" : outNames[0]));
  else
    h += fmt::format(" *   {n}_run(ctx, inputs, outputs);\n", fmt::arg("n", n));
  h += fmt::format(R"c( *   {n}_destroy(ctx);
 *
 * Thread safety: a context must not be used by two threads at the same time; different contexts
 * are independent (each owns its parameters, buffers and {owns}) and may run
 * concurrently. The info functions and {n}_error_message (per thread) may be called from any
 * thread at any time.{cudaThreads}
 *
 * Data layout: tensors are dense, row-major, little-endian; f16/bf16 are their 16-bit patterns,
 * bool one byte 0/1.
 */
#ifndef {N}_H
#define {N}_H

#include <stddef.h>
#include <stdint.h>

#ifndef {N}_API
#define {N}_API
#endif

#ifdef __cplusplus
extern "C" {{
#endif

typedef enum {n}_status {{
  {N}_OK = 0,
  {N}_E_ARGUMENT = 1, /* a NULL pointer, an unknown name or index, a size that does not match */
  {N}_E_IO = 2,       /* a file cannot be opened, read or written */
  {N}_E_FORMAT = 3,   /* a weights file is malformed, lacks a parameter or has the wrong type */
  {N}_E_MEMORY = 4,   /* out of memory */
  {N}_E_CPU = 5,      /* this CPU lacks an instruction-set feature the kernels were built for */
  {N}_E_STATE = 6,    /* the call does not apply to this library (e.g. train_step of an inference one) */
  {N}_E_CUDA = 7      /* CUDA libraries: no usable CUDA driver or GPU, or a driver call failed (the
                         message names the call and its CUresult) */
}} {n}_status;

typedef enum {n}_dtype {{
  {N}_F32 = 0, {N}_F16 = 1, {N}_BF16 = 2, {N}_F64 = 3, {N}_I32 = 4, {N}_I64 = 5, {N}_BOOL = 6
}} {n}_dtype;

typedef struct {n}_tensor_info {{
  const char* name;
  {n}_dtype dtype;
  int rank;
  const int64_t* shape; /* rank entries */
  int64_t numel;
  size_t bytes;
}} {n}_tensor_info;

#define {N}_NUM_INPUTS {ins}
#define {N}_NUM_OUTPUTS {outs}
#define {N}_NUM_PARAMS {params}
#define {N}_IS_TRAINING {training}

)c",
                   fmt::arg("n", n), fmt::arg("N", N), fmt::arg("ins", inNames.size()),
                   fmt::arg("outs", outNames.size()), fmt::arg("params", g.params().size()),
                   fmt::arg("training", p.training() ? 1 : 0),
                   fmt::arg("owns", cuda ? "stream" : "worker threads"),
                   fmt::arg("cudaThreads",
                            cuda ? "\n * A CUDA context may move between threads: every call makes the device's primary context\n"
                                   " * current for its duration and restores the caller's current context afterwards."
                                 : ""));
  for (size_t i = 0; i < inNames.size(); ++i)
    h += tensorMacros(N, "INPUT", static_cast<int>(i), inMacros[i], inNames[i], g.inputs()[i]->type);
  for (size_t i = 0; i < outNames.size(); ++i)
    h += tensorMacros(N, "OUTPUT", static_cast<int>(i), outMacros[i], outNames[i], g.outputs()[i].value->type);

  h += fmt::format(R"c(typedef struct {n}_context {n}_context;

/* Creates a context: {createWhat}. The parameters come from the safetensors file
 * weights_path (every parameter with exactly its dtype and shape; other tensors are ignored), or
 * when weights_path is NULL from the weights embedded in the library (kiln aot --embed-weights).
 * On failure *ctx is NULL. */
{N}_API {n}_status {n}_create({n}_context** ctx, const char* weights_path, int num_threads);
/* Frees everything the context owns; NULL is ignored. */
{N}_API void {n}_destroy({n}_context* ctx);
/* The message of the calling thread's last failed call ("" when none). */
{N}_API const char* {n}_error_message(void);
/* The number of threads the context runs on{threadsCuda}. */
{N}_API int {n}_num_threads(const {n}_context* ctx);

/* Replaces all parameters from a safetensors file (as create; on failure nothing changes). */
{N}_API {n}_status {n}_load_weights({n}_context* ctx, const char* path);
/* Writes all parameters to a safetensors file, atomically (a failure leaves an existing file). */
{N}_API {n}_status {n}_save_weights(const {n}_context* ctx, const char* path);
/* Copies the parameter `name` to or from `data`, which must hold exactly its bytes. */
{N}_API {n}_status {n}_get_param(const {n}_context* ctx, const char* name, void* data, size_t bytes);
{N}_API {n}_status {n}_set_param({n}_context* ctx, const char* name, const void* data, size_t bytes);

/* Runs the program once. inputs[i] points to input i ({N}_INPUT_*_BYTES bytes); outputs[i] to a
 * buffer for output i, or is NULL to skip it. A training step also updates the parameters. */
{N}_API {n}_status {n}_run({n}_context* ctx, const void* const* inputs, void* const* outputs);
/* The last run's output i, owned by the context, valid until the next run or destroy; NULL for
 * a bad index. */
{N}_API const void* {n}_output(const {n}_context* ctx, int index);

/* Signature information, for generic code. */
{N}_API {n}_status {n}_input_info(int index, {n}_tensor_info* info);
{N}_API {n}_status {n}_output_info(int index, {n}_tensor_info* info);
{N}_API {n}_status {n}_param_info(int index, {n}_tensor_info* info);
)c",
                   fmt::arg("n", n), fmt::arg("N", N),
                   fmt::arg("createWhat", cuda ? "its parameters and buffers in the memory of CUDA device 0\n"
                                                 " * (CUDA_VISIBLE_DEVICES selects the GPU), a stream, the kernels and, when an input or\n"
                                                 " * output has 2 MiB or more, num_threads - 1 worker threads that copy them to and from\n"
                                                 " * the pinned staging buffers with the caller (num_threads <= 0: one per CPU this\n"
                                                 " * process may run on)"
                                               : "its parameters, buffers and num_threads - 1 worker threads (num_threads <= 0:\n"
                                                 " * one per CPU this process may run on)"),
                   fmt::arg("threadsCuda", cuda ? " (for a CUDA library, those of its staging copies; 1 without)" : ""));
  if (p.training())
    h += fmt::format(R"c(
/* One training step: forward, loss, backward and the optimizer's update of the parameters.
 * batch: {batch} ({bt}); labels: {labels} ({lt}); *loss (if loss is not NULL): the batch's loss.
 * The other outputs stay readable through {n}_output. */
{N}_API {n}_status {n}_train_step({n}_context* ctx, const void* batch, const void* labels, float learning_rate,
                                  float* loss);
)c",
                     fmt::arg("n", n), fmt::arg("N", N), fmt::arg("batch", inNames[p.trainBatch]),
                     fmt::arg("bt", typeText(g.inputs()[p.trainBatch]->type)), fmt::arg("labels", inNames[p.trainLabels]),
                     fmt::arg("lt", typeText(g.inputs()[p.trainLabels]->type)));
  else if (inNames.size() == 1 && !outNames.empty())
    h += fmt::format(R"c(
/* Inference on one batch: input {in} ({it}) → output {out} ({ot}); the same as {n}_run with one
 * input and the first output. */
{N}_API {n}_status {n}_forward({n}_context* ctx, const void* input, void* output);
)c",
                     fmt::arg("n", n), fmt::arg("N", N), fmt::arg("in", inNames[0]),
                     fmt::arg("it", typeText(g.inputs()[0]->type)), fmt::arg("out", outNames[0]),
                     fmt::arg("ot", typeText(g.outputs()[0].value->type)));
  h += fmt::format(R"c(
#ifdef __cplusplus
}}
#endif

#endif /* {N}_H */
)c",
                   fmt::arg("N", N));
  return h;
}

TableParts commonTables(const ProgramDescription& p, const std::vector<std::string>& outputLocs,
                        const std::vector<std::string>& updates,
                        const std::vector<std::pair<ir::TensorType, int64_t>>& owned) {
  const ir::Graph& g = *p.graph;
  TableParts t;
  // Inputs read as indices carry the range they must lie in (the smallest over their readers),
  // checked by run and train_step as the JIT's executor checks them (ir/IndexInputs.h).
  std::map<std::string, int64_t> indexBounds;
  for (const ir::IndexInput& use : ir::indexInputs(g)) {
    auto [it, fresh] = indexBounds.emplace(use.input->name, use.bound);
    if (!fresh) it->second = std::min(it->second, use.bound);
  }
  auto tensors = [&](const std::string& array, const std::vector<std::pair<std::string, const ir::TensorType*>>& ts) {
    if (ts.empty()) return std::string("NULL");
    std::vector<std::string> entries;
    for (size_t i = 0; i < ts.size(); ++i) {
      auto bound = array == "inputs" ? indexBounds.find(ts[i].first) : indexBounds.end();
      entries.push_back(tensorEntry(t.decls, fmt::format("kiln_aot_{}_shape{}", array, i), ts[i].first, *ts[i].second,
                                    bound != indexBounds.end() ? bound->second : 0));
    }
    t.body += fmt::format("static const kiln_aot_tensor kiln_aot_{}[] = {{\n  {}\n}};\n", array, fmt::join(entries, ",\n  "));
    return "kiln_aot_" + array;
  };
  std::vector<std::pair<std::string, const ir::TensorType*>> ins, outs, params;
  for (const ir::Value* v : g.inputs()) ins.emplace_back(v->name, &v->type);
  for (const ir::Output& o : g.outputs()) outs.emplace_back(o.name, &o.value->type);
  for (const ir::Param& prm : g.params()) params.emplace_back(prm.value->name, &prm.value->type);
  t.inputs = tensors("inputs", ins);
  t.outputs = tensors("outputs", outs);
  t.params = tensors("params", params);
  t.numInputs = ins.size();
  t.numOutputs = outs.size();
  t.numParams = params.size();
  if (!outputLocs.empty()) {
    t.body += fmt::format("static const kiln_aot_loc kiln_aot_output_locs[] = {{{}}};\n", fmt::join(outputLocs, ", "));
    t.outputLocs = "kiln_aot_output_locs";
  }
  if (!updates.empty()) {
    t.body += fmt::format("static const kiln_aot_update kiln_aot_updates[] = {{\n  {}\n}};\n", fmt::join(updates, ",\n  "));
    t.updates = "kiln_aot_updates";
  }
  t.numUpdates = updates.size();
  if (!owned.empty()) {
    std::vector<std::string> os;
    for (size_t i = 0; i < owned.size(); ++i)
      os.push_back(fmt::format("{{{}, {}}}", tensorEntry(t.decls, fmt::format("kiln_aot_owned_shape{}", i),
                                                         fmt::format("own{}", i), owned[i].first),
                               owned[i].second));
    t.body += fmt::format("static const kiln_aot_owned kiln_aot_owned_buffers[] = {{\n  {}\n}};\n", fmt::join(os, ",\n  "));
    t.owned = "kiln_aot_owned_buffers";
  }
  t.numOwned = owned.size();
  return t;
}

std::string locText(int kind, size_t index, int64_t offset) {
  static const char* const kinds[] = {"KILN_AOT_INPUT", "KILN_AOT_PARAM", "KILN_AOT_ARENA", "KILN_AOT_OWN",
                                      "KILN_AOT_SCRATCH"};
  return fmt::format("{{{}, {}, {}}}", kinds[kind], index, offset);
}

std::string sourceHead(const ProgramDescription& p, const std::string& what, const std::string& compile) {
  return fmt::format(
      "/* {n}.c — generated by `kiln aot`: {what}.\n * Compile: {compile} */\n#define _GNU_SOURCE 1\n"
      "#define {N}_API __attribute__((visibility(\"default\")))\n#include \"{n}.h\"\n\n{header}"
      "\n/* ---- the program ---- */\n\n#define KILN_AOT_HIDDEN __attribute__((visibility(\"hidden\")))\n",
      fmt::arg("n", p.name), fmt::arg("N", macroName(p.name)), fmt::arg("what", what), fmt::arg("compile", compile),
      fmt::arg("header", kRuntimeHeader));
}

std::string programInitializer(const ProgramDescription& p, const TableParts& t, const std::string& constants,
                               int64_t arenaBytes, size_t numKernels, const std::string& kernels,
                               const std::string& features) {
  return fmt::format(
      "{{\n  {name}, {nin}, {ins}, {nout}, {outs}, {outLocs}, {nparams}, {params}, {nupd}, {upd}, {nown}, {own},\n"
      "  {constants}, {arena}, {nk}, {ks}, {weights}, {wbytes}, {features},\n  {tb}, {tl}, {tlr}, {tloss}\n}}",
      fmt::arg("name", literal(p.name)), fmt::arg("nin", t.numInputs), fmt::arg("ins", t.inputs),
      fmt::arg("nout", t.numOutputs), fmt::arg("outs", t.outputs), fmt::arg("outLocs", t.outputLocs),
      fmt::arg("nparams", t.numParams), fmt::arg("params", t.params), fmt::arg("nupd", t.numUpdates),
      fmt::arg("upd", t.updates), fmt::arg("nown", t.numOwned), fmt::arg("own", t.owned),
      fmt::arg("constants", constants), fmt::arg("arena", arenaBytes), fmt::arg("nk", numKernels),
      fmt::arg("ks", kernels), fmt::arg("weights", p.embeddedWeights ? weightsSymbol(p.name) : "NULL"),
      fmt::arg("wbytes", p.weightsBytes), fmt::arg("features", features), fmt::arg("tb", p.trainBatch),
      fmt::arg("tl", p.trainLabels), fmt::arg("tlr", p.trainLr), fmt::arg("tloss", p.trainLoss));
}

std::string generateSource(const ProgramDescription& p) {
  const cpu::ProgramLayout& L = *p.layout;
  const std::string& n = p.name;
  std::string c = sourceHead(p, "the tables of program " + n + ", then kiln's AOT runtime, then the functions of " + n +
                                    ".h",
                             "cc -std=c11 -O2 -fPIC -shared -fvisibility=hidden " + n + ".c " + n +
                                 ".kernels.o -lm -lpthread");
  for (const auto& k : L.kernels) {
    KILN_CHECK(isIdentifier(k.name), "kernel name '{}' is not a C identifier", k.name);
    c += fmt::format("KILN_AOT_HIDDEN void {}(void**, void*);\n", k.name);
  }
  if (p.hasConstants) c += fmt::format("KILN_AOT_HIDDEN extern const unsigned char {}[];\n", constantsSymbol(n));
  if (p.embeddedWeights) c += fmt::format("KILN_AOT_HIDDEN extern const unsigned char {}[];\n", weightsSymbol(n));
  c += "\n";

  auto loc = [](const cpu::Location& at) { return locText(static_cast<int>(at.kind), at.index, at.offset); };
  std::vector<std::string> outLocs, updates;
  for (const auto& at : L.outputs) outLocs.push_back(loc(at));
  for (const auto& u : L.updates) updates.push_back(fmt::format("{{{}, {}}}", u.param, loc(u.value)));
  std::vector<std::pair<ir::TensorType, int64_t>> owned;
  for (size_t i = 0; i < L.owned.size(); ++i)
    owned.emplace_back(ir::TensorType{L.owned[i].dtype(), L.owned[i].shape()}, p.constantOffsets.at(i));
  TableParts t = commonTables(p, outLocs, updates, owned);
  std::vector<std::string> ks;
  for (size_t k = 0; k < L.kernels.size(); ++k) {
    const auto& call = L.kernels[k];
    std::string args = "NULL";
    if (!call.args.empty()) {
      std::vector<std::string> as;
      for (const auto& at : call.args) as.push_back(loc(at));
      t.body += fmt::format("static const kiln_aot_loc kiln_aot_args{}[] = {{{}}};\n", k, fmt::join(as, ", "));
      args = fmt::format("kiln_aot_args{}", k);
    }
    ks.push_back(fmt::format("{{{}, {}, {}, {}, {}, {}}}", literal(call.name), call.name, call.args.size(), args,
                             call.scratchBase, call.scratchPerThread));
  }
  std::string kernelsArray = "NULL";
  if (!ks.empty()) {
    t.body += fmt::format("static const kiln_aot_kernel kiln_aot_kernels[] = {{\n  {}\n}};\n", fmt::join(ks, ",\n  "));
    kernelsArray = "kiln_aot_kernels";
  }
  c += t.decls + t.body;
  c += "\nstatic const kiln_aot_program kiln_aot_the_program = " +
       programInitializer(p, t, p.hasConstants ? constantsSymbol(n) : "NULL", L.arenaBytes, L.kernels.size(),
                          kernelsArray, literal(fmt::format("{}", fmt::join(p.cpuFeatures, ",")))) +
       ";\n\n";
  c += "/* ---- the runtime (aot/runtime/kiln_aot_common.c, kiln_aot_safetensors.c, kiln_aot_cpu.c) ---- */\n\n";
  c += runtimeText("cpu");
  c += apiFunctions(p, "kiln_aot_the_program", "kiln_aot_create(&kiln_aot_the_program");
  return c;
}

std::string runtimeText(const std::string& target) {
  std::string text = kRuntimeCommon;
  text += kRuntimeSafetensors;
  text += target == "cuda" ? kRuntimeCuda : kRuntimeCpu;
  return text;
}

std::string apiFunctions(const ProgramDescription& p, const std::string& P, const std::string& createCall) {
  const std::string& n = p.name;
  const std::string N = macroName(n);
  const size_t numInputs = p.graph->inputs().size(), numOutputs = p.graph->outputs().size();
  std::string c = "\n/* ---- the API of " + n + ".h ---- */\n\n";
  // A NULL context is reported here, under the function's public name: the runtime's own message
  // could only name its internal function.
  c += fmt::format(R"c(static int kiln_aot_no_context(const char* fn) {{
  return kaot_fail(KILN_AOT_E_ARGUMENT, "%s: the context is NULL", fn);
}}
{N}_API {n}_status {n}_create({n}_context** ctx, const char* weights_path, int num_threads) {{
  if (!ctx) return ({n}_status)kaot_fail(KILN_AOT_E_ARGUMENT, "{n}_create: ctx is NULL");
  return ({n}_status){create}, weights_path, num_threads, (kiln_aot_context**)ctx);
}}
{N}_API void {n}_destroy({n}_context* ctx) {{ kiln_aot_destroy((kiln_aot_context*)ctx); }}
{N}_API const char* {n}_error_message(void) {{ return kiln_aot_error(); }}
{N}_API int {n}_num_threads(const {n}_context* ctx) {{
  if (!ctx) return kiln_aot_no_context("{n}_num_threads"), 0;
  return kiln_aot_threads((const kiln_aot_context*)ctx);
}}
{N}_API {n}_status {n}_load_weights({n}_context* ctx, const char* path) {{
  if (!ctx) return ({n}_status)kiln_aot_no_context("{n}_load_weights");
  return ({n}_status)kiln_aot_load_weights((kiln_aot_context*)ctx, path);
}}
{N}_API {n}_status {n}_save_weights(const {n}_context* ctx, const char* path) {{
  if (!ctx) return ({n}_status)kiln_aot_no_context("{n}_save_weights");
  return ({n}_status)kiln_aot_save_weights((const kiln_aot_context*)ctx, path);
}}
{N}_API {n}_status {n}_get_param(const {n}_context* ctx, const char* name, void* data, size_t bytes) {{
  if (!ctx) return ({n}_status)kiln_aot_no_context("{n}_get_param");
  return ({n}_status)kiln_aot_get_param((const kiln_aot_context*)ctx, name, data, bytes);
}}
{N}_API {n}_status {n}_set_param({n}_context* ctx, const char* name, const void* data, size_t bytes) {{
  if (!ctx) return ({n}_status)kiln_aot_no_context("{n}_set_param");
  return ({n}_status)kiln_aot_set_param((kiln_aot_context*)ctx, name, data, bytes);
}}
{N}_API {n}_status {n}_run({n}_context* ctx, const void* const* inputs, void* const* outputs) {{
  if (!ctx) return ({n}_status)kiln_aot_no_context("{n}_run");
  return ({n}_status)kiln_aot_run((kiln_aot_context*)ctx, inputs, outputs);
}}
{N}_API const void* {n}_output(const {n}_context* ctx, int index) {{
  if (!ctx) return kiln_aot_no_context("{n}_output"), NULL;
  return kiln_aot_output((const kiln_aot_context*)ctx, index);
}}
static {n}_status kiln_aot_info(int count, const kiln_aot_tensor* ts, const char* what, int index,
                                {n}_tensor_info* info) {{
  if (!info) return ({n}_status)kaot_fail(KILN_AOT_E_ARGUMENT, "{n}_%s_info: info is NULL", what);
  if (index < 0 || index >= count)
    return ({n}_status)kaot_fail(KILN_AOT_E_ARGUMENT, "{n}_%s_info: index %d is out of range (the program has %d)",
                                     what, index, count);
  info->name = ts[index].name;
  info->dtype = ({n}_dtype)ts[index].dtype;
  info->rank = ts[index].rank;
  info->shape = ts[index].shape;
  info->numel = ts[index].numel;
  info->bytes = (size_t)ts[index].bytes;
  return {N}_OK;
}}
{N}_API {n}_status {n}_input_info(int index, {n}_tensor_info* info) {{
  return kiln_aot_info({P}.num_inputs, {P}.inputs, "input", index, info);
}}
{N}_API {n}_status {n}_output_info(int index, {n}_tensor_info* info) {{
  return kiln_aot_info({P}.num_outputs, {P}.outputs, "output", index, info);
}}
{N}_API {n}_status {n}_param_info(int index, {n}_tensor_info* info) {{
  return kiln_aot_info({P}.num_params, {P}.params, "param", index, info);
}}
)c",
                   fmt::arg("n", n), fmt::arg("N", N), fmt::arg("P", P), fmt::arg("create", createCall));
  if (p.training())
    c += fmt::format(R"c({N}_API {n}_status {n}_train_step({n}_context* ctx, const void* batch, const void* labels,
                                  float learning_rate, float* loss) {{
  if (!ctx) return ({n}_status)kiln_aot_no_context("{n}_train_step");
  return ({n}_status)kiln_aot_train_step((kiln_aot_context*)ctx, batch, labels, learning_rate, loss);
}}
)c",
                     fmt::arg("n", n), fmt::arg("N", N));
  else if (numInputs == 1 && numOutputs > 0)
    c += fmt::format(R"c({N}_API {n}_status {n}_forward({n}_context* ctx, const void* input, void* output) {{
  void* outputs[{nout}] = {{0}};
  if (!ctx) return ({n}_status)kiln_aot_no_context("{n}_forward");
  if (!output) return ({n}_status)kaot_fail(KILN_AOT_E_ARGUMENT, "{n}_forward: output is NULL");
  outputs[0] = output;
  return ({n}_status)kaot_run((kiln_aot_context*)ctx, &input, outputs, "forward");
}}
)c",
                     fmt::arg("n", n), fmt::arg("N", N), fmt::arg("nout", numOutputs));
  return c;
}

}  // namespace kiln::aot
