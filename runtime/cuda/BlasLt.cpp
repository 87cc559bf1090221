#include "runtime/cuda/BlasLt.h"

#include "runtime/cuda/Context.h"
#include "runtime/cuda/Driver.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <compare>
#include <map>
#include <vector>

namespace kiln::gpu {

namespace {

// The cuBLASLt entry points kiln uses, typed by their declarations in cublasLt.h (which maps none
// of them to versioned names).
#define KILN_CUBLASLT_FUNCTIONS(X)                                                                    \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetStatusName) X(cublasLtGetStatusString)             \
  X(cublasLtGetVersion) X(cublasLtMatmul) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy)     \
  X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)       \
  X(cublasLtMatrixLayoutSetAttribute) X(cublasLtMatmulPreferenceCreate)                                \
  X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)                           \
  X(cublasLtMatmulAlgoGetHeuristic)

struct LtApi {
#define KILN_CUBLASLT_DECLARE_ENTRY(name) decltype(&::name) name = nullptr;
  KILN_CUBLASLT_FUNCTIONS(KILN_CUBLASLT_DECLARE_ENTRY)
#undef KILN_CUBLASLT_DECLARE_ENTRY
};

struct LoadedLt {
  LtApi api;
  std::string problem;  // empty when loaded
};

LoadedLt loadLt() {
  LoadedLt l;
  // The soname of the major version the headers describe (the ABI this file was compiled for):
  // from the library path first, then from the toolkit kiln was built with.
  const std::string soname = fmt::format("libcublasLt.so.{}", CUBLAS_VER_MAJOR);
  std::vector<std::string> candidates = {soname};
#ifdef KILN_CUDA_LIBRARY_DIR
  candidates.push_back(std::string(KILN_CUDA_LIBRARY_DIR) + "/" + soname);
#endif
  candidates.push_back("/usr/local/cuda/lib64/" + soname);
  void* lib = nullptr;
  std::string firstError;
  for (const std::string& path : candidates) {
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    if (firstError.empty()) {
      const char* err = dlerror();
      firstError = err ? err : "not found";
    }
  }
  if (!lib) {
    l.problem = fmt::format("cuBLASLt ({}) could not be loaded: {}; add its folder to LD_LIBRARY_PATH", soname,
                            firstError);
    return l;
  }
  std::string missing;
#define KILN_CUBLASLT_RESOLVE_ENTRY(name)                                  \
  l.api.name = reinterpret_cast<decltype(l.api.name)>(dlsym(lib, #name)); \
  if (!l.api.name && missing.empty()) missing = #name;
  KILN_CUBLASLT_FUNCTIONS(KILN_CUBLASLT_RESOLVE_ENTRY)
#undef KILN_CUBLASLT_RESOLVE_ENTRY
  if (!missing.empty()) l.problem = fmt::format("{} lacks {}", soname, missing);
  return l;
}

const LoadedLt& loadedLt() {
  static const LoadedLt l = loadLt();
  return l;
}

const LtApi& lt() {
  const LoadedLt& l = loadedLt();
  if (!l.problem.empty()) throw Error(l.problem);
  return l.api;
}

template <typename... Args>
void checkLt(cublasStatus_t status, fmt::format_string<Args...> what, Args&&... args) {
  if (status == CUBLAS_STATUS_SUCCESS) [[likely]]
    return;
  const LtApi& api = lt();
  KILN_THROW("{} failed: {} ({})", fmt::format(what, std::forward<Args>(args)...), api.cublasLtGetStatusName(status),
             api.cublasLtGetStatusString(status));
}

cudaDataType_t cudaType(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: KILN_THROW("cuBLASLt matmul: unsupported element type {}", dtypeName(t));
  }
}

cublasLtEpilogue_t cublasEpilogue(Epilogue e) {
  switch (e) {
    case Epilogue::none: return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::relu: return CUBLASLT_EPILOGUE_RELU;
    case Epilogue::gelu: return CUBLASLT_EPILOGUE_GELU;
    case Epilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::biasRelu: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case Epilogue::biasGelu: return CUBLASLT_EPILOGUE_GELU_BIAS;
    // The operands are swapped (see BlasLt.h): kiln's A is cuBLASLt's B and vice versa.
    case Epilogue::biasGradA: return CUBLASLT_EPILOGUE_BGRADB;
    case Epilogue::biasGradB: return CUBLASLT_EPILOGUE_BGRADA;
  }
  internalError(__FILE__, __LINE__, fmt::format("unknown epilogue {}", static_cast<int>(e)));
}

bool usesBias(Epilogue e) { return e != Epilogue::none && e != Epilogue::relu && e != Epilogue::gelu; }
bool isBiasGrad(Epilogue e) { return e == Epilogue::biasGradA || e == Epilogue::biasGradB; }

/// The largest power of two up to 256 dividing the address and, in a batch, the stride in bytes —
/// the alignment every matrix of the batch has. cuBLASLt's heuristic assumes 256 unless told.
uint32_t alignmentOf(const void* p, int64_t strideBytes) {
  uint64_t addr = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && (addr % a != 0 || static_cast<uint64_t>(strideBytes) % a != 0)) a /= 2;
  return a;
}

// Everything a plan depends on. alpha and beta are not part of it (passed at each call).
struct PlanKey {
  int64_t m, n, k;
  bool transA, transB;
  int32_t batch;
  int64_t strideA, strideB, strideD, biasBatchStride;
  DType inputType, outputType;
  bool tf32;
  Epilogue epilogue;
  uint32_t alignA, alignB, alignC, alignD, alignBias;
  auto operator<=>(const PlanKey&) const = default;
};

// A plan: cuBLASLt's descriptors for one PlanKey, and the algorithm its heuristic chose.
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr;  // cuBLASLt's A: kiln's B
  cublasLtMatrixLayout_t b = nullptr;  // cuBLASLt's B: kiln's A
  cublasLtMatrixLayout_t d = nullptr;  // C and D
  cublasLtMatmulAlgo_t algo{};

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    const LtApi& api = lt();
    if (d) api.cublasLtMatrixLayoutDestroy(d);
    if (b) api.cublasLtMatrixLayoutDestroy(b);
    if (a) api.cublasLtMatrixLayoutDestroy(a);
    if (op) api.cublasLtMatmulDescDestroy(op);
  }
};

}  // namespace

std::string_view epilogueName(Epilogue e) {
  switch (e) {
    case Epilogue::none: return "none";
    case Epilogue::relu: return "relu";
    case Epilogue::gelu: return "gelu";
    case Epilogue::bias: return "bias";
    case Epilogue::biasRelu: return "bias_relu";
    case Epilogue::biasGelu: return "bias_gelu";
    case Epilogue::biasGradA: return "bias_grad_a";
    case Epilogue::biasGradB: return "bias_grad_b";
  }
  return "?";
}

std::string MatmulDesc::str() const {
  std::string s = fmt::format("{}x{}x{}", m, n, k);
  if (transA || transB) s += fmt::format(" ({})", transA && transB ? "transA, transB" : transA ? "transA" : "transB");
  if (batch != 1) s += fmt::format(" batch {}", batch);
  s += fmt::format(", {} -> {}", dtypeName(inputType), dtypeName(outputType));
  if (allowTf32 && inputType == DType::f32) s += " (tf32)";
  if (epilogue != Epilogue::none) s += fmt::format(", {}", epilogueName(epilogue));
  return s;
}

struct BlasLt::Impl {
  const LtApi& api;
  Context& context;
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;

  Impl(const LtApi& api, Context& context) : api(api), context(context) {}
  ~Impl() {
    plans.clear();
    if (handle) api.cublasLtDestroy(handle);
  }

  const Plan& plan(const MatmulDesc& desc, const MatmulOperands& ops);
  std::unique_ptr<Plan> build(const MatmulDesc& desc, const PlanKey& key, const MatmulOperands& ops);
};

namespace {

void validate(const MatmulDesc& d, const MatmulOperands& ops) {
  auto where = [&] { return d.str(); };
  constexpr int64_t kMaxDim = INT32_MAX;
  KILN_CHECK(d.m >= 1 && d.n >= 1 && d.k >= 1 && d.m <= kMaxDim && d.n <= kMaxDim && d.k <= kMaxDim,
             "cuBLASLt matmul {}: m, n and k must be between 1 and {}", where(), kMaxDim);
  KILN_CHECK(d.batch >= 1, "cuBLASLt matmul {}: the batch count must be at least 1", where());
  KILN_CHECK(d.inputType == DType::f32 || d.inputType == DType::bf16 || d.inputType == DType::f16,
             "cuBLASLt matmul {}: inputs must be f32, bf16 or f16", where());
  KILN_CHECK(d.outputType == DType::f32 || d.outputType == d.inputType,
             "cuBLASLt matmul {}: the output must be f32 or the input type", where());
  if (d.batch > 1) {
    KILN_CHECK(d.strideA >= 0 && d.strideB >= 0, "cuBLASLt matmul {}: batch strides must not be negative", where());
    KILN_CHECK(d.strideD >= d.m * d.n, "cuBLASLt matmul {}: the output batch stride {} is below m·n = {}", where(),
               d.strideD, d.m * d.n);
  }
  KILN_CHECK(ops.a && ops.b && ops.d, "cuBLASLt matmul {}: A, B and D must be given", where());
  if (usesBias(d.epilogue))
    KILN_CHECK(ops.bias, "cuBLASLt matmul {}: the {} epilogue needs a bias pointer", where(), epilogueName(d.epilogue));
  if (d.epilogue == Epilogue::biasGradA)
    KILN_CHECK(d.transA, "cuBLASLt matmul {}: bias_grad_a sums A over k and needs A stored [k×m] (transA)", where());
  if (d.epilogue == Epilogue::biasGradB)
    KILN_CHECK(!d.transB, "cuBLASLt matmul {}: bias_grad_b sums B over k and needs B stored [k×n] (not transB)",
               where());
  if (isBiasGrad(d.epilogue) && d.batch > 1) {
    int64_t length = d.epilogue == Epilogue::biasGradA ? d.m : d.n;
    KILN_CHECK(d.biasBatchStride >= length,
               "cuBLASLt matmul {}: a batched bias gradient needs one vector per batch (bias batch stride >= {})",
               where(), length);
  }
}

template <typename T>
void setDesc(const LtApi& api, cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value,
             const char* name) {
  checkLt(api.cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)), "cublasLtMatmulDescSetAttribute({})",
          name);
}

template <typename T>
void setLayout(const LtApi& api, cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, const T& value,
               const char* name) {
  checkLt(api.cublasLtMatrixLayoutSetAttribute(layout, attr, &value, sizeof(value)),
          "cublasLtMatrixLayoutSetAttribute({})", name);
}

template <typename T>
void setPreference(const LtApi& api, cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                   const T& value, const char* name) {
  checkLt(api.cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)),
          "cublasLtMatmulPreferenceSetAttribute({})", name);
}

}  // namespace

std::unique_ptr<Plan> BlasLt::Impl::build(const MatmulDesc& desc, const PlanKey& key, const MatmulOperands& ops) {
  auto plan = std::make_unique<Plan>();
  const cublasComputeType_t compute =
      desc.inputType == DType::f32 && desc.allowTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  checkLt(api.cublasLtMatmulDescCreate(&plan->op, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  // cuBLASLt's A is kiln's B and its B is kiln's A (BlasLt.h); each keeps its own transposition.
  const cublasOperation_t opA = desc.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opB = desc.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  setDesc(api, plan->op, CUBLASLT_MATMUL_DESC_TRANSA, opA, "TRANSA");
  setDesc(api, plan->op, CUBLASLT_MATMUL_DESC_TRANSB, opB, "TRANSB");
  const cublasLtEpilogue_t epilogue = cublasEpilogue(desc.epilogue);
  setDesc(api, plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue, "EPILOGUE");
  if (usesBias(desc.epilogue)) {
    // The heuristic reads the pointer's alignment; matmul() sets it again at every call.
    const void* bias = ops.bias;
    setDesc(api, plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias, "BIAS_POINTER");
    if (desc.batch > 1) setDesc(api, plan->op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, desc.biasBatchStride,
                                "BIAS_BATCH_STRIDE");
  }

  // Column-major views of the packed row-major matrices: a row-major R×C matrix is the
  // column-major C×R matrix with leading dimension C.
  const cudaDataType_t inType = cudaType(desc.inputType), outType = cudaType(desc.outputType);
  const uint64_t bRows = desc.transB ? desc.n : desc.k, bCols = desc.transB ? desc.k : desc.n;  // kiln B as stored
  const uint64_t aRows = desc.transA ? desc.k : desc.m, aCols = desc.transA ? desc.m : desc.k;  // kiln A as stored
  checkLt(api.cublasLtMatrixLayoutCreate(&plan->a, inType, bCols, bRows, static_cast<int64_t>(bCols)),
          "cublasLtMatrixLayoutCreate(B)");
  checkLt(api.cublasLtMatrixLayoutCreate(&plan->b, inType, aCols, aRows, static_cast<int64_t>(aCols)),
          "cublasLtMatrixLayoutCreate(A)");
  checkLt(api.cublasLtMatrixLayoutCreate(&plan->d, outType, desc.n, desc.m, desc.n), "cublasLtMatrixLayoutCreate(D)");
  if (desc.batch > 1) {
    const int32_t batch = desc.batch;
    for (auto [layout, stride] : {std::pair{plan->a, desc.strideB}, std::pair{plan->b, desc.strideA},
                                  std::pair{plan->d, desc.strideD}}) {
      setLayout(api, layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, batch, "BATCH_COUNT");
      setLayout(api, layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride, "STRIDED_BATCH_OFFSET");
    }
  }

  cublasLtMatmulPreference_t pref = nullptr;
  checkLt(api.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  try {
    const uint64_t maxWorkspace = workspace.bytes();
    setPreference(api, pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, maxWorkspace, "MAX_WORKSPACE_BYTES");
    // Alignments in cuBLASLt's naming: its A is kiln's B.
    setPreference(api, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.alignB, "MIN_ALIGNMENT_A_BYTES");
    setPreference(api, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.alignA, "MIN_ALIGNMENT_B_BYTES");
    setPreference(api, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.alignC, "MIN_ALIGNMENT_C_BYTES");
    setPreference(api, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.alignD, "MIN_ALIGNMENT_D_BYTES");
    status = api.cublasLtMatmulAlgoGetHeuristic(handle, plan->op, plan->a, plan->b, plan->d, plan->d, pref, 1,
                                                &result, &found);
  } catch (...) {
    api.cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  api.cublasLtMatmulPreferenceDestroy(pref);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0))
    KILN_THROW("cuBLASLt has no algorithm for the matmul {} on {} (alignments A {} B {} C {} D {} bias {} bytes, "
               "workspace {} bytes)",
               desc.str(), context.properties().label(), key.alignA, key.alignB, key.alignC, key.alignD, key.alignBias,
               workspace.bytes());
  checkLt(status, "cublasLtMatmulAlgoGetHeuristic({})", desc.str());
  checkLt(result.state, "cublasLtMatmulAlgoGetHeuristic({}) result", desc.str());
  plan->algo = result.algo;
  return plan;
}

const Plan& BlasLt::Impl::plan(const MatmulDesc& desc, const MatmulOperands& ops) {
  const int64_t in = dtypeSize(desc.inputType), out = dtypeSize(desc.outputType);
  const bool batched = desc.batch > 1;
  const void* c = ops.c ? ops.c : ops.d;
  PlanKey key{desc.m,
              desc.n,
              desc.k,
              desc.transA,
              desc.transB,
              desc.batch,
              batched ? desc.strideA : 0,
              batched ? desc.strideB : 0,
              batched ? desc.strideD : 0,
              batched && usesBias(desc.epilogue) ? desc.biasBatchStride : 0,
              desc.inputType,
              desc.outputType,
              desc.inputType == DType::f32 && desc.allowTf32,
              desc.epilogue,
              alignmentOf(ops.a, batched ? desc.strideA * in : 0),
              alignmentOf(ops.b, batched ? desc.strideB * in : 0),
              alignmentOf(c, batched ? desc.strideD * out : 0),
              alignmentOf(ops.d, batched ? desc.strideD * out : 0),
              usesBias(desc.epilogue) ? alignmentOf(ops.bias, batched ? desc.biasBatchStride * out : 0) : 256};
  auto it = plans.find(key);
  if (it == plans.end()) it = plans.emplace(key, build(desc, key, ops)).first;
  return *it->second;
}

BlasLt::BlasLt(Context& context, size_t workspaceBytes) {
  const LtApi& api = lt();
  impl_ = std::make_unique<Impl>(api, context);
  context.makeCurrent();
  checkLt(api.cublasLtCreate(&impl_->handle), "cublasLtCreate");
  impl_->workspace = context.allocate(workspaceBytes);
}

BlasLt::~BlasLt() = default;

void BlasLt::matmul(const MatmulDesc& desc, const MatmulOperands& ops, Stream& stream) {
  validate(desc, ops);
  const Plan& p = impl_->plan(desc, ops);
  const LtApi& api = impl_->api;
  if (usesBias(desc.epilogue)) {
    const void* bias = ops.bias;
    setDesc(api, p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias, "BIAS_POINTER");
  }
  const void* c = ops.c ? ops.c : ops.d;
  // Operands swapped: cuBLASLt's A is kiln's B, its B is kiln's A (BlasLt.h).
  checkLt(api.cublasLtMatmul(impl_->handle, p.op, &desc.alpha, ops.b, p.a, ops.a, p.b, &desc.beta, c, p.d, ops.d, p.d,
                             &p.algo, impl_->workspace.data(), impl_->workspace.bytes(), stream.handle()),
          "cublasLtMatmul({})", desc.str());
}

size_t BlasLt::cachedPlans() const { return impl_->plans.size(); }

size_t BlasLt::version() const { return impl_->api.cublasLtGetVersion(); }

bool BlasLt::available(std::string* why) {
  const LoadedLt& l = loadedLt();
  if (why) *why = l.problem;
  return l.problem.empty();
}

}  // namespace kiln::gpu
