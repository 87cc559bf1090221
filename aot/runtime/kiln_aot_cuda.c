/* The CUDA part of the runtime of a library written by `kiln aot --target cuda` (see kiln_aot.h):
 * pasted into NAME.c after kiln_aot_common.c and kiln_aot_safetensors.c. It runs the tables of a
 * kiln_aot_cuda_program exactly as kiln::cuda::Program::run does (codegen/cuda/Program.cpp).
 *
 * The CUDA driver is opened with dlopen("libcuda.so.1") on the first create, once per process;
 * nothing here needs CUDA's headers: the few driver types and entry points are declared below
 * (KAOT_USE_CUDA_H takes them from <cuda.h> instead, which tests/aot/cuda_abi_check.c uses to check
 * them). Without a driver or a device, create fails with KILN_AOT_E_CUDA and says why; a failed
 * driver call is KILN_AOT_E_CUDA naming the call and its CUresult (out of memory: E_MEMORY).
 *
 * A context holds a reference to the device's primary context (the one the CUDA runtime uses, so
 * the library shares the device with an application's own CUDA work), a stream of its own, the
 * module of the kernels (the cubin for the device's architecture, else the PTX) and one device
 * allocation carved into the arena, the scratch, the inputs, the parameters, the owned buffers and
 * the staging buffers; and, when an input or output has KAOT_PARALLEL_COPY bytes or more, the common
 * part's thread pool, on which those are copied to and from their pinned buffers (kaot_copy). Every call makes the primary context current for its duration and restores
 * the caller's current context after, so a context may move between threads. Device 0 is used:
 * CUDA_VISIBLE_DEVICES picks another. */

#include <dlfcn.h>

#ifdef KAOT_USE_CUDA_H
typedef CUresult kaot_cu_result;
typedef CUdevice kaot_cu_device;
typedef CUdeviceptr kaot_cu_ptr;
typedef CUcontext kaot_cu_context;
typedef CUmodule kaot_cu_module;
typedef CUfunction kaot_cu_function;
typedef CUstream kaot_cu_stream;
typedef CUdevice_attribute kaot_cu_device_attribute;
typedef CUfunction_attribute kaot_cu_function_attribute;
#else
typedef int kaot_cu_result;
typedef int kaot_cu_device;
typedef unsigned long long kaot_cu_ptr;
typedef struct kaot_cu_context_st* kaot_cu_context;
typedef struct kaot_cu_module_st* kaot_cu_module;
typedef struct kaot_cu_function_st* kaot_cu_function;
typedef struct kaot_cu_stream_st* kaot_cu_stream;
typedef int kaot_cu_device_attribute;
typedef int kaot_cu_function_attribute;
#endif

/* The values of cuda.h's enums used here. */
enum {
  KAOT_CUDA_ERROR_OUT_OF_MEMORY = 2,
  KAOT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  KAOT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  KAOT_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  KAOT_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  KAOT_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  KAOT_CU_STREAM_NON_BLOCKING = 1
};

/* The driver entry points: X(member, symbol, parameters); each returns a CUresult. The symbols are
 * the versioned ones cuda.h's macros select (cuMemAlloc is cuMemAlloc_v2). */
#define KAOT_CU_FUNCTIONS(X)                                                                                       \
  X(GetErrorName, "cuGetErrorName", (kaot_cu_result, const char**))                                              \
  X(GetErrorString, "cuGetErrorString", (kaot_cu_result, const char**))                                          \
  X(Init, "cuInit", (unsigned int))                                                                              \
  X(DriverGetVersion, "cuDriverGetVersion", (int*))                                                              \
  X(DeviceGetCount, "cuDeviceGetCount", (int*))                                                                  \
  X(DeviceGet, "cuDeviceGet", (kaot_cu_device*, int))                                                            \
  X(DeviceGetName, "cuDeviceGetName", (char*, int, kaot_cu_device))                                              \
  X(DeviceGetAttribute, "cuDeviceGetAttribute", (int*, kaot_cu_device_attribute, kaot_cu_device))               \
  X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (kaot_cu_context*, kaot_cu_device))                      \
  X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (kaot_cu_device))                                   \
  X(CtxPushCurrent, "cuCtxPushCurrent_v2", (kaot_cu_context))                                                    \
  X(CtxPopCurrent, "cuCtxPopCurrent_v2", (kaot_cu_context*))                                                     \
  X(MemGetInfo, "cuMemGetInfo_v2", (size_t*, size_t*))                                                           \
  X(MemAlloc, "cuMemAlloc_v2", (kaot_cu_ptr*, size_t))                                                           \
  X(MemFree, "cuMemFree_v2", (kaot_cu_ptr))                                                                      \
  X(MemHostAlloc, "cuMemHostAlloc", (void**, size_t, unsigned int))                                              \
  X(MemFreeHost, "cuMemFreeHost", (void*))                                                                       \
  X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", (kaot_cu_ptr, const void*, size_t, kaot_cu_stream))                 \
  X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", (void*, kaot_cu_ptr, size_t, kaot_cu_stream))                       \
  X(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", (kaot_cu_ptr, kaot_cu_ptr, size_t, kaot_cu_stream))                 \
  X(MemsetD8Async, "cuMemsetD8Async", (kaot_cu_ptr, unsigned char, size_t, kaot_cu_stream))                      \
  X(StreamCreate, "cuStreamCreate", (kaot_cu_stream*, unsigned int))                                             \
  X(StreamDestroy, "cuStreamDestroy_v2", (kaot_cu_stream))                                                       \
  X(StreamSynchronize, "cuStreamSynchronize", (kaot_cu_stream))                                                  \
  X(ModuleLoadData, "cuModuleLoadData", (kaot_cu_module*, const void*))                                          \
  X(ModuleUnload, "cuModuleUnload", (kaot_cu_module))                                                            \
  X(ModuleGetFunction, "cuModuleGetFunction", (kaot_cu_function*, kaot_cu_module, const char*))                  \
  X(FuncGetAttribute, "cuFuncGetAttribute", (int*, kaot_cu_function_attribute, kaot_cu_function))                \
  X(FuncSetAttribute, "cuFuncSetAttribute", (kaot_cu_function, kaot_cu_function_attribute, int))                 \
  X(LaunchKernel, "cuLaunchKernel",                                                                              \
    (kaot_cu_function, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,       \
     unsigned int, kaot_cu_stream, void**, void**))

#define KAOT_CU_MEMBER(member, symbol, params) kaot_cu_result(*member) params;
typedef struct {
  KAOT_CU_FUNCTIONS(KAOT_CU_MEMBER)
} kaot_cu_api;
#undef KAOT_CU_MEMBER

/* The driver, loaded once per process (kaot_cu_load). */
static kaot_cu_api kaot_cu;
static char kaot_cu_problem[1024]; /* "" once the driver is usable */
static int kaot_cu_version;
static pthread_once_t kaot_cu_once = PTHREAD_ONCE_INIT;

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" */
KAOT_FN const char* kaot_cu_text(char out[256], kaot_cu_result r) {
  const char *name = NULL, *text = NULL;
  if (kaot_cu.GetErrorName) kaot_cu.GetErrorName(r, &name);
  if (kaot_cu.GetErrorString) kaot_cu.GetErrorString(r, &text);
  if (!name) snprintf(out, 256, "CUresult %d", (int)r);
  else if (!text) snprintf(out, 256, "%s", name);
  else snprintf(out, 256, "%s (%s)", name, text);
  return out;
}

static void kaot_cu_load(void) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  const char* missing = NULL;
  char text[256];
  kaot_cu_result r;
  int count = 0;
  if (!lib) {
    const char* why = dlerror();
    snprintf(kaot_cu_problem, sizeof kaot_cu_problem,
             "no CUDA device: the NVIDIA driver's libcuda.so.1 cannot be loaded (%s); this library runs on NVIDIA GPUs only",
             why ? why : "not found");
    return;
  }
#define KAOT_CU_RESOLVE(member, symbol, params)        \
  {                                                     \
    void* f = dlsym(lib, symbol);                       \
    if (!f && !missing) missing = symbol;               \
    memcpy(&kaot_cu.member, &f, sizeof kaot_cu.member); \
  }
  KAOT_CU_FUNCTIONS(KAOT_CU_RESOLVE)
#undef KAOT_CU_RESOLVE
  if (kaot_cu.DriverGetVersion) kaot_cu.DriverGetVersion(&kaot_cu_version);
  if (missing) {
    snprintf(kaot_cu_problem, sizeof kaot_cu_problem, "no CUDA device: the CUDA driver (libcuda.so.1, CUDA %d.%d) lacks %s; it is too old",
             kaot_cu_version / 1000, kaot_cu_version % 1000 / 10, missing);
    return;
  }
  if ((r = kaot_cu.Init(0)) != 0) {
    snprintf(kaot_cu_problem, sizeof kaot_cu_problem, "no CUDA device: cuInit failed: %s", kaot_cu_text(text, r));
    return;
  }
  if ((r = kaot_cu.DeviceGetCount(&count)) != 0)
    snprintf(kaot_cu_problem, sizeof kaot_cu_problem, "no CUDA device: cuDeviceGetCount failed: %s", kaot_cu_text(text, r));
  else if (count == 0)
    snprintf(kaot_cu_problem, sizeof kaot_cu_problem, "no CUDA device: the CUDA driver reports no device");
}

/* A failed driver call of program `name`: "<name>: <call> failed: CUDA_ERROR_X (text)". */
static __attribute__((unused, format(printf, 3, 4))) int kaot_cu_fail(const char* name, kaot_cu_result r, const char* fmt, ...) {
  char call[512], text[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(call, sizeof call, fmt, ap);
  va_end(ap);
  return kaot_fail((int)r == KAOT_CUDA_ERROR_OUT_OF_MEMORY ? KILN_AOT_E_MEMORY : KILN_AOT_E_CUDA, "%s: %s failed: %s", name, call,
                   kaot_cu_text(text, r));
}

/* ---------------------------------------------------------------- the context */

struct kiln_aot_context {
  kaot_base b; /* p, threads, lr, outs (pinned), train_inputs */
  kaot_pool* pool;            /* copies inputs and outputs of KAOT_PARALLEL_COPY bytes and more */
  const kiln_aot_cuda_program* cp;
  kaot_cu_device device;
  kaot_cu_context ctx; /* the primary context, retained */
  kaot_cu_stream stream;
  kaot_cu_module module;
  kaot_cu_ptr memory; /* one allocation: arena, scratch, inputs, params, owned, staging */
  kaot_cu_ptr arena, scratch, *inputs, *params, *owned, *staging;
  void** in_host;             /* per input: pinned staging */
  kaot_cu_function* functions; /* per launch */
  kaot_cu_ptr* argv;          /* every launch's arguments, bound */
  void** argp;                /* pointers to them: each launch's kernelParams */
  size_t* first_arg;          /* per launch: its first entry in argv / argp */
  int pushed;                 /* inside kaot_cu_enter / leave */
};

KAOT_FN int kaot_cu_enter(kiln_aot_context* c) {
  kaot_cu_result r = kaot_cu.CtxPushCurrent(c->ctx);
  if (r != 0) return kaot_cu_fail(c->b.p->name, r, "cuCtxPushCurrent(device %d's primary context)", (int)c->device);
  c->pushed = 1;
  return KILN_AOT_OK;
}
KAOT_FN void kaot_cu_leave(kiln_aot_context* c) {
  kaot_cu_context ignored;
  if (c->pushed) kaot_cu.CtxPopCurrent(&ignored);
  c->pushed = 0;
}

KAOT_FN kaot_cu_ptr kaot_cu_address(const kiln_aot_context* c, kiln_aot_loc l) {
  switch (l.kind) {
    case KILN_AOT_INPUT: return c->inputs[l.index];
    case KILN_AOT_PARAM: return c->params[l.index];
    case KILN_AOT_ARENA: return c->arena + (kaot_cu_ptr)l.offset;
    case KILN_AOT_SCRATCH: return c->scratch + (kaot_cu_ptr)l.offset;
    default: return c->owned[l.index];
  }
}

KAOT_FN void kiln_aot_destroy(kiln_aot_context* c) {
  if (!c) return;
  const kiln_aot_program* p = c->b.p;
  if (c->ctx && kaot_cu_enter(c) == KILN_AOT_OK) {
    if (c->stream) kaot_cu.StreamSynchronize(c->stream);
    if (c->module) kaot_cu.ModuleUnload(c->module);
    if (c->memory) kaot_cu.MemFree(c->memory);
    for (int i = 0; c->in_host && i < p->num_inputs; ++i)
      if (c->in_host[i]) kaot_cu.MemFreeHost(c->in_host[i]);
    for (int i = 0; c->b.outs && i < p->num_outputs; ++i)
      if (c->b.outs[i]) kaot_cu.MemFreeHost(c->b.outs[i]);
    if (c->stream) kaot_cu.StreamDestroy(c->stream);
    kaot_cu_leave(c);
  }
  if (c->ctx) kaot_cu.DevicePrimaryCtxRelease(c->device);
  kaot_pool_destroy(c->pool);
  free(c->inputs), free(c->params), free(c->owned), free(c->staging), free(c->in_host), free(c->b.outs);
  free(c->functions), free(c->argv), free(c->argp), free(c->first_arg), free(c->b.train_inputs), kaot_free(c->b.lr);
  free(c);
}

/* ---------------------------------------------------------------- create */

/* The launch tables: entries, dimensions, arguments within range. */
KAOT_FN int kaot_cu_check(const kiln_aot_cuda_program* cp) {
  const kiln_aot_program* p = &cp->base;
  if (p->num_kernels != 0 || cp->num_launches < 0 || (cp->num_launches && !cp->launches) || cp->num_cubins < 0 ||
      (cp->num_cubins && !cp->cubins) || cp->scratch_bytes < 0 || (p->num_updates && !cp->update_staged) ||
      (!cp->num_cubins && !cp->ptx))
    return kaot_bad(p, "malformed CUDA tables");
  for (int i = 0; i < cp->num_cubins; ++i)
    if (!cp->cubins[i].image || cp->cubins[i].bytes <= 0) return kaot_bad(p, "cubin %d is empty", i);
  for (int u = 0; u < p->num_updates; ++u)
    if (p->updates[u].value.kind == KILN_AOT_PARAM && p->updates[u].value.index == p->updates[u].param)
      return kaot_bad(p, "update %d copies a parameter onto itself", u);
  for (int l = 0; l < cp->num_launches; ++l) {
    const kiln_aot_launch* L = &cp->launches[l];
    if (!L->entry || L->num_args < 0 || (L->num_args && !L->args)) return kaot_bad(p, "launch %d is malformed", l);
    for (int d = 0; d < 3; ++d)
      if (L->grid[d] < 1 || L->block[d] < 1) return kaot_bad(p, "launch %d (%s) has an empty grid or block", l, L->entry);
    for (int a = 0; a < L->num_args; ++a) {
      kiln_aot_loc at = L->args[a];
      int rc = at.kind == KILN_AOT_SCRATCH
                   ? (at.offset >= 0 && at.offset <= cp->scratch_bytes ? 0 : kaot_bad(p, "launch %d (%s): scratch offset %" PRId64 " is out of range", l, L->entry, at.offset))
                   : kaot_check_loc(p, at, -1, "launch argument", a);
      if (rc) return rc;
    }
  }
  return KILN_AOT_OK;
}

/* Picks the device's code (a cubin of its major version, else the PTX), loads it and looks up every
 * launch's entry, raising its dynamic shared-memory limit where the launch needs more. */
KAOT_FN int kaot_cu_load_module(kiln_aot_context* c, int major, int minor, const char* device) {
  const kiln_aot_cuda_program* cp = c->cp;
  const char* name = cp->base.name;
  const int sm = major * 10 + minor;
  int best = -1, optin = 0;
  kaot_cu_result r;
  char what[128], built[320] = "";
  for (int i = 0; i < cp->num_cubins; ++i)
    if (cp->cubins[i].sm / 10 == major && cp->cubins[i].sm % 10 <= minor && (best < 0 || cp->cubins[i].sm > cp->cubins[best].sm)) best = i;
  for (int i = 0; i < cp->num_cubins; ++i) {
    size_t n = strlen(built);
    snprintf(built + n, sizeof built - n, "%ssm_%d", i ? ", " : "cubins for ", cp->cubins[i].sm);
  }
  if (cp->ptx) {
    size_t n = strlen(built);
    snprintf(built + n, sizeof built - n, "%sPTX for compute capability %d.%d or newer", n ? " and " : "", cp->ptx_sm / 10, cp->ptx_sm % 10);
  }
  if (best < 0 && (!cp->ptx || sm < cp->ptx_sm))
    return kaot_fail(KILN_AOT_E_CUDA, "%s cannot run on %s (compute capability %d.%d): its kernels are %s", name, device,
                     major, minor, built);
  if (best >= 0) snprintf(what, sizeof what, "the sm_%d cubin (%" PRId64 " bytes)", cp->cubins[best].sm, cp->cubins[best].bytes);
  else snprintf(what, sizeof what, "the PTX for compute_%d", cp->ptx_sm);
  r = kaot_cu.ModuleLoadData(&c->module, best >= 0 ? (const void*)cp->cubins[best].image : (const void*)cp->ptx);
  if (r != 0) {
    c->module = NULL;
    return kaot_cu_fail(name, r, "cuModuleLoadData(%s, on %s; built with CUDA %d.%d, the driver supports CUDA %d.%d)", what, device,
                        cp->cuda_version / 1000, cp->cuda_version % 1000 / 10, kaot_cu_version / 1000, kaot_cu_version % 1000 / 10);
  }
  if ((r = kaot_cu.DeviceGetAttribute(&optin, (kaot_cu_device_attribute)KAOT_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, c->device)) != 0)
    return kaot_cu_fail(name, r, "cuDeviceGetAttribute(max shared memory per block, opt-in)");
  for (int l = 0; l < cp->num_launches; ++l) {
    const kiln_aot_launch* L = &cp->launches[l];
    int static_shared = 0, dynamic_limit = 0;
    if ((r = kaot_cu.ModuleGetFunction(&c->functions[l], c->module, L->entry)) != 0)
      return kaot_cu_fail(name, r, "cuModuleGetFunction('%s' in %s)", L->entry, what);
    if ((r = kaot_cu.FuncGetAttribute(&static_shared, (kaot_cu_function_attribute)KAOT_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, c->functions[l])) != 0 ||
        (r = kaot_cu.FuncGetAttribute(&dynamic_limit, (kaot_cu_function_attribute)KAOT_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, c->functions[l])) != 0)
      return kaot_cu_fail(name, r, "cuFuncGetAttribute('%s', shared memory)", L->entry);
    if ((int64_t)L->shared_bytes <= dynamic_limit) continue;
    if ((int64_t)L->shared_bytes + static_shared > optin)
      return kaot_fail(KILN_AOT_E_CUDA, "%s: kernel '%s' needs %u bytes of dynamic shared memory; with its %d static bytes that exceeds the %d bytes per block of %s",
                       name, L->entry, L->shared_bytes, static_shared, optin, device);
    if ((r = kaot_cu.FuncSetAttribute(c->functions[l], (kaot_cu_function_attribute)KAOT_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)L->shared_bytes)) != 0)
      return kaot_cu_fail(name, r, "cuFuncSetAttribute('%s', max dynamic shared memory = %u bytes)", L->entry, L->shared_bytes);
  }
  return KILN_AOT_OK;
}

/* Device memory: one allocation, each buffer at a multiple of 256 bytes (at least 256 bytes). */
static inline uint64_t kaot_cu_size(int64_t bytes) { return bytes <= 0 ? 256 : ((uint64_t)bytes + 255) / 256 * 256; }

KAOT_FN int kaot_cu_memory(kiln_aot_context* c, const char* device) {
  const kiln_aot_cuda_program* cp = c->cp;
  const kiln_aot_program* p = &cp->base;
  uint64_t total = kaot_cu_size(p->arena_bytes) + kaot_cu_size(cp->scratch_bytes), at;
  size_t free_bytes = 0, total_bytes = 0;
  kaot_cu_result r;
  for (int i = 0; i < p->num_inputs; ++i) total += kaot_cu_size(p->inputs[i].bytes);
  for (int i = 0; i < p->num_params; ++i) total += kaot_cu_size(p->params[i].bytes);
  for (int i = 0; i < p->num_owned; ++i) total += kaot_cu_size(p->owned[i].type.bytes);
  for (int u = 0; u < p->num_updates; ++u)
    if (cp->update_staged[u]) total += kaot_cu_size(p->params[p->updates[u].param].bytes);
  if ((r = kaot_cu.MemGetInfo(&free_bytes, &total_bytes)) != 0) return kaot_cu_fail(p->name, r, "cuMemGetInfo");
  if (total > free_bytes)
    return kaot_fail(KILN_AOT_E_MEMORY, "%s needs %" PRIu64 " bytes (%.1f MiB) of device memory; %s has %zu bytes (%.1f MiB) free of %zu",
                     p->name, total, (double)total / 1048576.0, device, free_bytes, (double)free_bytes / 1048576.0, total_bytes);
  if ((r = kaot_cu.MemAlloc(&c->memory, (size_t)total)) != 0) {
    c->memory = 0;
    return kaot_cu_fail(p->name, r, "cuMemAlloc(%" PRIu64 " bytes on %s)", total, device);
  }
  if ((r = kaot_cu.MemsetD8Async(c->memory, 0, (size_t)total, c->stream)) != 0)
    return kaot_cu_fail(p->name, r, "cuMemsetD8Async(%" PRIu64 " bytes)", total);
  at = c->memory;
  c->arena = at, at += kaot_cu_size(p->arena_bytes);
  c->scratch = at, at += kaot_cu_size(cp->scratch_bytes);
  for (int i = 0; i < p->num_inputs; ++i) c->inputs[i] = at, at += kaot_cu_size(p->inputs[i].bytes);
  for (int i = 0; i < p->num_params; ++i) c->params[i] = at, at += kaot_cu_size(p->params[i].bytes);
  for (int i = 0; i < p->num_owned; ++i) c->owned[i] = at, at += kaot_cu_size(p->owned[i].type.bytes);
  for (int u = 0; u < p->num_updates; ++u)
    if (cp->update_staged[u]) c->staging[u] = at, at += kaot_cu_size(p->params[p->updates[u].param].bytes);
  for (int i = 0; i < p->num_owned; ++i)
    if (p->owned[i].constant_offset >= 0 && p->owned[i].type.bytes > 0 &&
        (r = kaot_cu.MemcpyHtoDAsync(c->owned[i], p->constants + p->owned[i].constant_offset, (size_t)p->owned[i].type.bytes, c->stream)) != 0)
      return kaot_cu_fail(p->name, r, "cuMemcpyHtoDAsync(constant %d, %" PRId64 " bytes)", i, p->owned[i].type.bytes);
  /* Pinned host buffers for the inputs and the outputs. */
  for (int i = 0; i < p->num_inputs + p->num_outputs; ++i) {
    void** slot = i < p->num_inputs ? &c->in_host[i] : &c->b.outs[i - p->num_inputs];
    int64_t bytes = i < p->num_inputs ? p->inputs[i].bytes : p->outputs[i - p->num_inputs].bytes;
    if ((r = kaot_cu.MemHostAlloc(slot, (size_t)kaot_cu_size(bytes), 0)) != 0) {
      *slot = NULL;
      return kaot_cu_fail(p->name, r, "cuMemHostAlloc(%" PRIu64 " bytes)", kaot_cu_size(bytes));
    }
    memset(*slot, 0, (size_t)kaot_cu_size(bytes));
  }
  return KILN_AOT_OK;
}

/* Every launch's arguments, bound to device addresses once. */
KAOT_FN void kaot_cu_bind(kiln_aot_context* c) {
  size_t n = 0;
  for (int l = 0; l < c->cp->num_launches; ++l) {
    const kiln_aot_launch* L = &c->cp->launches[l];
    c->first_arg[l] = n;
    for (int a = 0; a < L->num_args; ++a, ++n) {
      c->argv[n] = kaot_cu_address(c, L->args[a]);
      c->argp[n] = &c->argv[n];
    }
  }
}

/* Whether an input or output is large enough for the staging copies to use threads. */
KAOT_FN bool kaot_cu_has_large_io(const kiln_aot_program* p) {
  for (int i = 0; i < p->num_inputs; ++i)
    if (p->inputs[i].bytes >= KAOT_PARALLEL_COPY) return true;
  for (int o = 0; o < p->num_outputs; ++o)
    if (p->outputs[o].bytes >= KAOT_PARALLEL_COPY) return true;
  return false;
}

KAOT_FN int kiln_aot_cuda_create(const kiln_aot_cuda_program* cp, const char* weights_path, int num_threads, kiln_aot_context** out) {
  const kiln_aot_program* p = cp ? &cp->base : NULL;
  kiln_aot_context* c;
  kaot_cu_result r;
  size_t args = 0;
  int rc, major = 0, minor = 0;
  char device[320], label[256] = "";
  if ((rc = kaot_check_create(p, out)) || (rc = kaot_cu_check(cp)) || (rc = kaot_check_weights_path(p, weights_path))) return rc;
  pthread_once(&kaot_cu_once, kaot_cu_load);
  if (kaot_cu_problem[0]) return kaot_fail(KILN_AOT_E_CUDA, "%s: %s", p->name, kaot_cu_problem);
  for (int l = 0; l < cp->num_launches; ++l) args += (size_t)cp->launches[l].num_args;
  c = (kiln_aot_context*)calloc(1, sizeof(kiln_aot_context));
  if (!c) return kaot_oom(p->name);
  c->b.p = p;
  c->b.threads = kaot_cu_has_large_io(p) ? kaot_threads_for(num_threads) : 1;
  c->cp = cp;
  c->inputs = (kaot_cu_ptr*)calloc((size_t)p->num_inputs + 1, sizeof(kaot_cu_ptr));
  c->params = (kaot_cu_ptr*)calloc((size_t)p->num_params + 1, sizeof(kaot_cu_ptr));
  c->owned = (kaot_cu_ptr*)calloc((size_t)p->num_owned + 1, sizeof(kaot_cu_ptr));
  c->staging = (kaot_cu_ptr*)calloc((size_t)p->num_updates + 1, sizeof(kaot_cu_ptr));
  c->in_host = (void**)calloc((size_t)p->num_inputs + 1, sizeof(void*));
  c->b.outs = (void**)calloc((size_t)p->num_outputs + 1, sizeof(void*));
  c->functions = (kaot_cu_function*)calloc((size_t)cp->num_launches + 1, sizeof(kaot_cu_function));
  c->argv = (kaot_cu_ptr*)calloc(args + 1, sizeof(kaot_cu_ptr));
  c->argp = (void**)calloc(args + 1, sizeof(void*));
  c->first_arg = (size_t*)calloc((size_t)cp->num_launches + 1, sizeof(size_t));
  c->b.train_inputs = (const void**)calloc((size_t)p->num_inputs + 1, sizeof(void*));
  c->b.lr = (unsigned char*)kaot_alloc(64);
  if (!c->inputs || !c->params || !c->owned || !c->staging || !c->in_host || !c->b.outs || !c->functions || !c->argv || !c->argp ||
      !c->first_arg || !c->b.train_inputs || !c->b.lr) {
    kiln_aot_destroy(c);
    return kaot_oom(p->name);
  }
  if ((r = kaot_cu.DeviceGet(&c->device, 0)) != 0) {
    kiln_aot_destroy(c);
    return kaot_cu_fail(p->name, r, "cuDeviceGet(0)");
  }
  kaot_cu.DeviceGetName(label, (int)sizeof label - 1, c->device);
  if ((r = kaot_cu.DeviceGetAttribute(&major, (kaot_cu_device_attribute)KAOT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->device)) != 0 ||
      (r = kaot_cu.DeviceGetAttribute(&minor, (kaot_cu_device_attribute)KAOT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c->device)) != 0) {
    kiln_aot_destroy(c);
    return kaot_cu_fail(p->name, r, "cuDeviceGetAttribute(compute capability of device 0)");
  }
  snprintf(device, sizeof device, "device 0 (%s, sm_%d%d)", label, major, minor);
  if ((r = kaot_cu.DevicePrimaryCtxRetain(&c->ctx, c->device)) != 0) {
    c->ctx = NULL;
    kiln_aot_destroy(c);
    return kaot_cu_fail(p->name, r, "cuDevicePrimaryCtxRetain(%s)", device);
  }
  if ((rc = kaot_cu_enter(c)) == KILN_AOT_OK) {
    if ((r = kaot_cu.StreamCreate(&c->stream, KAOT_CU_STREAM_NON_BLOCKING)) != 0) {
      c->stream = NULL;
      rc = kaot_cu_fail(p->name, r, "cuStreamCreate");
    }
    if (!rc) rc = kaot_cu_load_module(c, major, minor, device);
    if (!rc) rc = kaot_cu_memory(c, device);
    if (!rc) kaot_cu_bind(c);
    kaot_cu_leave(c);
  }
  if (!rc && c->b.threads > 1) rc = kaot_pool_create(c->b.threads, &c->pool);
  /* The parameters: from the file, else the embedded weights (uploaded by kaot_target_take_params). */
  if (!rc && weights_path) rc = kaot_load_file(c, weights_path);
  else if (!rc && p->weights) {
    char what[300];
    snprintf(what, sizeof what, "the embedded weights of %s", p->name);
    kaot_src s = {-1, p->weights, (uint64_t)p->weights_bytes, what};
    rc = kaot_load(c, &s);
  }
  if (!rc && (rc = kaot_cu_enter(c)) == KILN_AOT_OK) {
    if ((r = kaot_cu.StreamSynchronize(c->stream)) != 0) rc = kaot_cu_fail(p->name, r, "cuStreamSynchronize (create)");
    kaot_cu_leave(c);
  }
  if (rc) {
    kiln_aot_destroy(c);
    return rc;
  }
  *out = c;
  return KILN_AOT_OK;
}

/* ---------------------------------------------------------------- run */

/* As kiln::cuda::Program's run: inputs up, the launches, the outputs down, the staged copies, the
 * update copies, all on the context's stream; then one synchronisation. */
static int kaot_target_run(kiln_aot_context* c, const void* const* inputs, void* const* outputs) {
  const kiln_aot_cuda_program* cp = c->cp;
  const kiln_aot_program* p = &cp->base;
  const char* name = p->name;
  kaot_cu_result r = 0;
  int rc = kaot_cu_enter(c);
  if (rc) return rc;
  for (int i = 0; i < p->num_inputs && !rc; ++i) {
    if (p->inputs[i].bytes == 0) continue;
    kaot_copy(c->pool, c->in_host[i], inputs[i], p->inputs[i].bytes);
    if ((r = kaot_cu.MemcpyHtoDAsync(c->inputs[i], c->in_host[i], (size_t)p->inputs[i].bytes, c->stream)) != 0)
      rc = kaot_cu_fail(name, r, "cuMemcpyHtoDAsync(input %d, %" PRId64 " bytes)", i, p->inputs[i].bytes);
  }
  for (int l = 0; l < cp->num_launches && !rc; ++l) {
    const kiln_aot_launch* L = &cp->launches[l];
    r = kaot_cu.LaunchKernel(c->functions[l], L->grid[0], L->grid[1], L->grid[2], L->block[0], L->block[1], L->block[2], L->shared_bytes,
                             c->stream, L->num_args ? &c->argp[c->first_arg[l]] : NULL, NULL);
    if (r != 0)
      rc = kaot_cu_fail(name, r, "cuLaunchKernel('%s', grid %ux%ux%u, block %ux%ux%u, %u bytes of shared memory)", L->entry, L->grid[0],
                        L->grid[1], L->grid[2], L->block[0], L->block[1], L->block[2], L->shared_bytes);
  }
  /* Outputs before updates: an output that is a view of a parameter reads the step's starting value. */
  for (int o = 0; o < p->num_outputs && !rc; ++o) {
    if (p->outputs[o].bytes == 0) continue;
    if ((r = kaot_cu.MemcpyDtoHAsync(c->b.outs[o], kaot_cu_address(c, p->output_locs[o]), (size_t)p->outputs[o].bytes, c->stream)) != 0)
      rc = kaot_cu_fail(name, r, "cuMemcpyDtoHAsync(output %d, %" PRId64 " bytes)", o, p->outputs[o].bytes);
  }
  for (int pass = 0; pass < 2 && !rc; ++pass)
    for (int u = 0; u < p->num_updates && !rc; ++u) {
      const int64_t bytes = p->params[p->updates[u].param].bytes;
      kaot_cu_ptr dst = pass == 0 ? c->staging[u] : c->params[p->updates[u].param];
      kaot_cu_ptr src = pass == 1 && cp->update_staged[u] ? c->staging[u] : kaot_cu_address(c, p->updates[u].value);
      if (bytes == 0 || (pass == 0 && !cp->update_staged[u])) continue;
      if ((r = kaot_cu.MemcpyDtoDAsync(dst, src, (size_t)bytes, c->stream)) != 0)
        rc = kaot_cu_fail(name, r, "cuMemcpyDtoDAsync(update %d, %" PRId64 " bytes)", u, bytes);
    }
  if ((r = kaot_cu.StreamSynchronize(c->stream)) != 0 && !rc) rc = kaot_cu_fail(name, r, "cuStreamSynchronize (after the run)");
  kaot_cu_leave(c);
  for (int o = 0; o < p->num_outputs && !rc; ++o)
    if (outputs && outputs[o]) kaot_copy(c->pool, outputs[o], c->b.outs[o], p->outputs[o].bytes);
  return rc;
}

/* ---------------------------------------------------------------- parameters */

/* Uploads the new values; the caller frees `fresh`. A driver error leaves some parameters new. */
static int kaot_target_take_params(kiln_aot_context* c, void** fresh) {
  const kiln_aot_program* p = c->b.p;
  kaot_cu_result r;
  int rc = kaot_cu_enter(c);
  for (int i = 0; i < p->num_params && !rc; ++i)
    if (p->params[i].bytes && (r = kaot_cu.MemcpyHtoDAsync(c->params[i], fresh[i], (size_t)p->params[i].bytes, c->stream)) != 0)
      rc = kaot_cu_fail(p->name, r, "cuMemcpyHtoDAsync(parameter \"%s\", %" PRId64 " bytes)", p->params[i].name, p->params[i].bytes);
  if (!rc && (r = kaot_cu.StreamSynchronize(c->stream)) != 0) rc = kaot_cu_fail(p->name, r, "cuStreamSynchronize (loading weights)");
  kaot_cu_leave(c);
  return rc;
}

KAOT_FN int kaot_cu_copy_param(kiln_aot_context* c, int i, void* dst, const void* src) {
  const kiln_aot_tensor* t = &c->b.p->params[i];
  kaot_cu_result r = 0;
  int rc = kaot_cu_enter(c);
  if (rc) return rc;
  if (t->bytes) r = dst ? kaot_cu.MemcpyDtoHAsync(dst, c->params[i], (size_t)t->bytes, c->stream)
                        : kaot_cu.MemcpyHtoDAsync(c->params[i], src, (size_t)t->bytes, c->stream);
  if (r != 0) rc = kaot_cu_fail(c->b.p->name, r, "%s(parameter \"%s\", %" PRId64 " bytes)", dst ? "cuMemcpyDtoHAsync" : "cuMemcpyHtoDAsync", t->name, t->bytes);
  if (!rc && (r = kaot_cu.StreamSynchronize(c->stream)) != 0) rc = kaot_cu_fail(c->b.p->name, r, "cuStreamSynchronize (parameter \"%s\")", t->name);
  kaot_cu_leave(c);
  return rc;
}

static const void* kaot_target_param_bytes(const kiln_aot_context* c, int i, kaot_buf* tmp, int* rc) {
  size_t bytes = (size_t)c->b.p->params[i].bytes;
  if (kaot_reserve((void**)&tmp->p, &tmp->cap, bytes + 1, 1)) return *rc = kaot_oom(c->b.p->name), NULL;
  /* The context is const for the caller; the driver calls change nothing it can see. */
  *rc = kaot_cu_copy_param((kiln_aot_context*)c, i, tmp->p, NULL);
  return *rc ? NULL : tmp->p;
}

static int kaot_target_get_param(const kiln_aot_context* c, int i, void* dst) {
  return kaot_cu_copy_param((kiln_aot_context*)c, i, dst, NULL);
}

static int kaot_target_set_param(kiln_aot_context* c, int i, const void* src) { return kaot_cu_copy_param(c, i, NULL, src); }
