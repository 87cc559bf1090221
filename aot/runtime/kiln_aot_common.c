/* The common part of the runtime of a library written by `kiln aot`, pasted into the generated
 * NAME.c after kiln_aot.h and the program's tables, before kiln_aot_safetensors.c and the target's
 * part (kiln_aot_cpu.c or kiln_aot_cuda.c; see kiln_aot.h):
 *   - errors (a per-thread message), growable buffers, JSON quoting, f16/bf16 conversions;
 *   - the checks of the program's tables at create;
 *   - the part of a context every target has (kaot_base) and the hooks a target defines;
 *   - the API functions, argument checks and all, that are the same for every target.
 *
 * Every name here is static (internal helpers start with kaot_). Needs libc and libm, and the
 * POSIX/BSD declarations of _DEFAULT_SOURCE: define _DEFAULT_SOURCE (or _GNU_SOURCE) before the
 * first #include when compiling with -std=c11. */
#if defined(__GLIBC__) && !defined(_DEFAULT_SOURCE)
#error "kiln_aot_common.c needs POSIX declarations: #define _DEFAULT_SOURCE before the first #include"
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define KAOT_FN static __attribute__((unused))

/* ---------------------------------------------------------------- errors and small helpers */

static _Thread_local char kaot_error_text[2048];

KAOT_FN const char* kiln_aot_error(void) { return kaot_error_text; }

static __attribute__((unused, format(printf, 2, 3))) int kaot_fail(int code, const char* fmt, ...) {
  char text[sizeof kaot_error_text]; /* arguments may point into kaot_error_text */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  memcpy(kaot_error_text, text, sizeof text);
  return code;
}

static const char* const kaot_st_names[7] = {"F32", "F16", "BF16", "F64", "I32", "I64", "BOOL"};
static const char* const kaot_dtype_names[7] = {"f32", "f16", "bf16", "f64", "i32", "i64", "bool"};
static const int kaot_dtype_sizes[7] = {4, 2, 2, 8, 4, 8, 1};

/* strerror_r is the XSI (int) or the GNU (char*) one depending on the feature macros. */
KAOT_FN const char* kaot_se_int(int r, const char* buf) { return r == 0 ? buf : "unknown error"; }
KAOT_FN const char* kaot_se_ptr(const char* r, const char* buf) { return r ? r : buf; }
#define KAOT_STRERROR(e, buf) \
  _Generic(strerror_r((e), (buf), sizeof(buf)), int: kaot_se_int, default: kaot_se_ptr)( \
      strerror_r((e), (buf), sizeof(buf)), (buf))

/* A growable byte buffer. */
typedef struct { char* p; size_t n, cap; } kaot_buf;

KAOT_FN int kaot_reserve(void** p, size_t* cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 16;
  while (c < need) {
    if (c > SIZE_MAX / 2 / elem) return -1;
    c *= 2;
  }
  void* q = realloc(*p, c * elem);
  if (!q) return -1;
  *p = q;
  *cap = c;
  return 0;
}
KAOT_FN int kaot_put(kaot_buf* b, const void* s, size_t n) {
  if (n > SIZE_MAX - b->n - 1 || kaot_reserve((void**)&b->p, &b->cap, b->n + n + 1, 1)) return -1;
  if (n) memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
  return 0;
}
KAOT_FN int kaot_puts(kaot_buf* b, const char* s) { return kaot_put(b, s, strlen(s)); }

/* `s` as a JSON string literal, escaped as kiln's json::quote does. */
KAOT_FN int kaot_put_quoted(kaot_buf* b, const char* s, size_t n) {
  int bad = kaot_put(b, "\"", 1);
  for (size_t i = 0; i < n && !bad; ++i) {
    unsigned char c = (unsigned char)s[i];
    char esc[8];
    switch (c) {
      case '"': bad = kaot_put(b, "\\\"", 2); break;
      case '\\': bad = kaot_put(b, "\\\\", 2); break;
      case '\n': bad = kaot_put(b, "\\n", 2); break;
      case '\r': bad = kaot_put(b, "\\r", 2); break;
      case '\t': bad = kaot_put(b, "\\t", 2); break;
      case '\b': bad = kaot_put(b, "\\b", 2); break;
      case '\f': bad = kaot_put(b, "\\f", 2); break;
      default:
        if (c < 0x20) {
          snprintf(esc, sizeof esc, "\\u%04x", c);
          bad = kaot_put(b, esc, 6);
        } else {
          bad = kaot_put(b, s + i, 1);
        }
    }
  }
  return bad || kaot_put(b, "\"", 1);
}

/* A quoted name for a message, cut at 200 bytes. */
KAOT_FN const char* kaot_q(char out[256], const char* s, size_t n) {
  kaot_buf b = {0, 0, 0};
  bool cut = n > 200;
  if (kaot_put_quoted(&b, s, cut ? 200 : n) == 0) snprintf(out, 256, "%s%s", b.p, cut ? "..." : "");
  else snprintf(out, 256, "\"?\"");
  free(b.p);
  return out;
}

/* "f32[128,784]" */
KAOT_FN const char* kaot_type(char out[256], const char* dtype, int rank, const int64_t* shape) {
  size_t n = (size_t)snprintf(out, 256, "%s[", dtype);
  for (int i = 0; i < rank && n < 256; ++i) n += (size_t)snprintf(out + n, 256 - n, i ? ",%" PRId64 : "%" PRId64, shape[i]);
  if (n < 255) snprintf(out + n, 256 - n, "]");
  return out;
}

/* KILN_GUARD_PAGES=1 (kiln's test suite sets it), as kiln::rt::HostTensor does: every buffer
 * kaot_alloc returns ends where a page without access begins (and starts after a read-only page
 * that holds the mapping's size), so a kernel that writes past the end of its buffer faults at
 * once instead of corrupting the heap. Read once per library, so that kaot_free always undoes
 * what kaot_alloc did. */
KAOT_FN int kaot_guard_pages(void) {
  static atomic_int known = -1;
  int on = atomic_load_explicit(&known, memory_order_relaxed);
  if (on < 0) {
    const char* v = getenv("KILN_GUARD_PAGES");
    on = v && *v && strcmp(v, "0") != 0;
    atomic_store_explicit(&known, on, memory_order_relaxed);
  }
  return on;
}

/* A zeroed buffer of max(bytes, 64) bytes rounded up to 64, 64-byte aligned; freed by kaot_free. */
KAOT_FN void* kaot_alloc(int64_t bytes) {
  if (bytes < 0 || (uint64_t)bytes > SIZE_MAX / 2) return NULL;
  size_t n = bytes < 64 ? 64 : (((size_t)bytes + 63) & ~(size_t)63);
  if (kaot_guard_pages()) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = (n + page - 1) / page, total = (pages + 2) * page;
    unsigned char* base = (unsigned char*)mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == (unsigned char*)MAP_FAILED) return NULL;
    memcpy(base, &total, sizeof total);
    if (mprotect(base, page, PROT_READ) || mprotect(base + (pages + 1) * page, page, PROT_NONE)) {
      munmap(base, total);
      return NULL;
    }
    return base + (pages + 1) * page - n;
  }
  void* p = aligned_alloc(64, n);
  if (p) memset(p, 0, n);
  return p;
}

KAOT_FN void kaot_free(void* p) {
  if (!p) return;
  if (!kaot_guard_pages()) {
    free(p);
    return;
  }
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char* base = (unsigned char*)((uintptr_t)p / page * page - page);
  size_t total;
  memcpy(&total, base, sizeof total);
  munmap(base, total);
}

KAOT_FN uint16_t kaot_f32_to_f16(float f) { /* support/DType.cpp floatToHalf */
  uint32_t x, sign, absx;
  memcpy(&x, &f, 4);
  sign = (x >> 16) & 0x8000u;
  absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (absx < 0x38800000u) {
    float a;
    memcpy(&a, &absx, 4);
    return (uint16_t)(sign | (uint32_t)nearbyintf(a * 16777216.0f));
  }
  uint32_t h = ((uint32_t)((int32_t)(absx >> 23) - 127 + 15) << 10) | ((absx & 0x7fffffu) >> 13);
  uint32_t rest = absx & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return (uint16_t)(sign | h);
}
KAOT_FN float kaot_f16_to_f32(uint16_t h) {
  uint32_t sign = ((uint32_t)h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, x;
  float v;
  if (exp == 0) {
    v = ldexpf((float)mant, -24);
    return sign ? -v : v;
  }
  x = exp == 31 ? (sign | 0x7f800000u | (mant << 13)) : (sign | ((exp - 15 + 127) << 23) | (mant << 13));
  memcpy(&v, &x, 4);
  return v;
}
KAOT_FN uint16_t kaot_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}
KAOT_FN float kaot_bf16_to_f32(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float v;
  memcpy(&v, &x, 4);
  return v;
}
KAOT_FN int64_t kaot_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ---------------------------------------------------------------- checks at create */

static __attribute__((unused, format(printf, 2, 3))) int kaot_bad(const kiln_aot_program* p, const char* fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  return kaot_fail(KILN_AOT_E_ARGUMENT, "malformed program tables in %s: %s", p->name ? p->name : "a kiln library", text);
}

KAOT_FN int kaot_check_tensor(const kiln_aot_program* p, const kiln_aot_tensor* t, const char* what, int i) {
  if (!t->name) return kaot_bad(p, "%s %d has no name", what, i);
  if (t->dtype < 0 || t->dtype > 6 || t->rank < 0 || (t->rank > 0 && !t->shape))
    return kaot_bad(p, "%s %d (\"%s\") has an invalid dtype or rank", what, i, t->name);
  int64_t n = 1;
  for (int d = 0; d < t->rank; ++d) {
    if (t->shape[d] < 0 || (t->shape[d] && n > INT64_MAX / t->shape[d]))
      return kaot_bad(p, "%s %d (\"%s\") has an invalid shape", what, i, t->name);
    n *= t->shape[d];
  }
  if (n != t->numel || n > INT64_MAX / 8 || t->bytes != n * kaot_dtype_sizes[t->dtype])
    return kaot_bad(p, "%s %d (\"%s\"): numel or bytes do not match its shape", what, i, t->name);
  return 0;
}

/* A location; `bytes` >= 0: it must hold exactly that many bytes. */
KAOT_FN int kaot_check_loc(const kiln_aot_program* p, kiln_aot_loc l, int64_t bytes, const char* what, int i) {
  int64_t have = -1;
  if (l.kind == KILN_AOT_INPUT && l.index >= 0 && l.index < p->num_inputs) have = p->inputs[l.index].bytes;
  else if (l.kind == KILN_AOT_PARAM && l.index >= 0 && l.index < p->num_params) have = p->params[l.index].bytes;
  else if (l.kind == KILN_AOT_OWN && l.index >= 0 && l.index < p->num_owned) have = p->owned[l.index].type.bytes;
  else if (l.kind == KILN_AOT_ARENA && l.offset >= 0 && l.offset <= p->arena_bytes)
    have = bytes < 0 ? 0 : bytes <= p->arena_bytes - l.offset ? bytes : -1;
  if (have < 0 || (bytes >= 0 && have != bytes))
    return kaot_bad(p, "%s %d: location {kind %d, index %d, offset %" PRId64 "} is out of range or of the wrong size", what,
                    i, l.kind, l.index, l.offset);
  return 0;
}

KAOT_FN int kaot_check_program(const kiln_aot_program* p) {
  int rc = 0;
  if (!p->name) return kaot_bad(p, "no name");
  if (p->num_inputs < 0 || p->num_outputs < 0 || p->num_params < 0 || p->num_updates < 0 || p->num_owned < 0 ||
      p->num_kernels < 0 || p->arena_bytes < 0 || p->weights_bytes < 0 || (p->num_inputs && !p->inputs) ||
      (p->num_outputs && (!p->outputs || !p->output_locs)) || (p->num_params && !p->params) ||
      (p->num_updates && !p->updates) || (p->num_owned && !p->owned) || (p->num_kernels && !p->kernels))
    return kaot_bad(p, "a negative count or a missing table");
  for (int i = 0; i < p->num_inputs && !rc; ++i) rc = kaot_check_tensor(p, &p->inputs[i], "input", i);
  for (int i = 0; i < p->num_outputs && !rc; ++i) rc = kaot_check_tensor(p, &p->outputs[i], "output", i);
  for (int i = 0; i < p->num_params && !rc; ++i) rc = kaot_check_tensor(p, &p->params[i], "parameter", i);
  for (int i = 0; i < p->num_owned && !rc; ++i) rc = kaot_check_tensor(p, &p->owned[i].type, "owned buffer", i);
  if (rc) return rc;
  for (int i = 0; i < p->num_params; ++i) {
    if (strcmp(p->params[i].name, "__metadata__") == 0) return kaot_bad(p, "a parameter is named \"__metadata__\"");
    for (int k = 0; k < i; ++k)
      if (strcmp(p->params[i].name, p->params[k].name) == 0) return kaot_bad(p, "two parameters named \"%s\"", p->params[i].name);
  }
  for (int i = 0; i < p->num_owned; ++i)
    if (p->owned[i].constant_offset >= 0 && !p->constants) return kaot_bad(p, "owned buffer %d is a constant but there is no constants blob", i);
  for (int i = 0; i < p->num_outputs && !rc; ++i) rc = kaot_check_loc(p, p->output_locs[i], p->outputs[i].bytes, "output", i);
  for (int i = 0; i < p->num_updates && !rc; ++i) {
    int32_t pi = p->updates[i].param;
    if (pi < 0 || pi >= p->num_params) return kaot_bad(p, "update %d names parameter %d", i, pi);
    rc = kaot_check_loc(p, p->updates[i].value, p->params[pi].bytes, "update", i);
  }
  for (int k = 0; k < p->num_kernels && !rc; ++k) {
    const kiln_aot_kernel* K = &p->kernels[k];
    if (!K->fn || K->num_args < 0 || (K->num_args && !K->args) || K->scratch_base < 0 || K->scratch_per_thread < 0)
      return kaot_bad(p, "kernel %d is malformed", k);
    for (int a = 0; a < K->num_args && !rc; ++a) rc = kaot_check_loc(p, K->args[a], -1, "kernel argument", a);
  }
  if (rc) return rc;
  if (p->train_batch >= 0 &&
      (p->train_batch >= p->num_inputs || p->train_labels >= p->num_inputs || p->train_lr >= p->num_inputs ||
       p->train_loss < 0 || p->train_loss >= p->num_outputs))
    return kaot_bad(p, "training indices out of range");
  return 0;
}

/* ---------------------------------------------------------------- contexts and targets */

/* The part of a context every target has. Each target's struct kiln_aot_context begins with it
 * (member `b`), so the common code reaches it through KAOT_BASE without knowing the rest. */
typedef struct {
  const kiln_aot_program* p;
  int threads;               /* the pool's threads (CPU: the kernels'; CUDA: the staging copies') */
  unsigned char* lr;         /* the learning-rate input of train_step (64 bytes) */
  void** outs;               /* the last run's outputs, in host memory */
  const void** train_inputs; /* train_step's inputs: batch, labels, lr */
} kaot_base;
typedef struct kiln_aot_context kiln_aot_context;
#define KAOT_BASE(c) ((kaot_base*)(c))
#define KAOT_CBASE(c) ((const kaot_base*)(c))

/* What the target's part defines:
 *   kaot_target_run          one run on `inputs` (host pointers, checked); the outputs end up in
 *                            base.outs and, where `outputs[i]` is not NULL, there too
 *   kaot_target_take_params  new values of every parameter (host buffers from kaot_alloc, each
 *                            checked): the target takes them (setting fresh[i] to NULL) or copies
 *   kaot_target_param_bytes  parameter i's bytes in host memory, valid until the next call into
 *                            the context (`tmp` may be grown to hold them); NULL on failure
 *   kaot_target_get_param / kaot_target_set_param  one parameter to or from host memory
 * Each returns KILN_AOT_OK or fails through kaot_fail. */
static int kaot_target_run(kiln_aot_context* c, const void* const* inputs, void* const* outputs);
static int kaot_target_take_params(kiln_aot_context* c, void** fresh);
static const void* kaot_target_param_bytes(const kiln_aot_context* c, int i, kaot_buf* tmp, int* rc);
static int kaot_target_get_param(const kiln_aot_context* c, int i, void* dst);
static int kaot_target_set_param(kiln_aot_context* c, int i, const void* src);
/* From kiln_aot_safetensors.c. */
static int kaot_load_file(kiln_aot_context* c, const char* path);

/* The checks every create makes first. */
KAOT_FN int kaot_check_create(const kiln_aot_program* p, kiln_aot_context** out) {
  if (!out) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_create: out is NULL");
  *out = NULL;
  if (!p) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_create: the program is NULL");
  return kaot_check_program(p);
}
KAOT_FN int kaot_check_weights_path(const kiln_aot_program* p, const char* weights_path) {
  if (!weights_path && !p->weights && p->num_params > 0)
    return kaot_fail(KILN_AOT_E_ARGUMENT, "this library has no embedded weights: pass a weights file (kiln aot wrote %s.safetensors beside it)", p->name);
  return KILN_AOT_OK;
}

/* ---------------------------------------------------------------- the API (every target) */

KAOT_FN int kiln_aot_load_weights(kiln_aot_context* c, const char* path) {
  if (!c) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_load_weights: the context is NULL");
  if (!path) return kaot_fail(KILN_AOT_E_ARGUMENT, "%s_load_weights: path is NULL", KAOT_BASE(c)->p->name);
  return kaot_load_file(c, path);
}

/* Inputs read as indices (index_bound > 0): every element in [0, index_bound), as the interpreter
 * and the JIT's executor require; the kernels would read or add nothing for the others. */
static int kaot_check_indices(const kiln_aot_program* p, const void* const* inputs, const char* fn) {
  for (int i = 0; i < p->num_inputs; ++i) {
    const kiln_aot_tensor* t = &p->inputs[i];
    if (t->index_bound <= 0 || (t->dtype != KILN_AOT_I64 && t->dtype != KILN_AOT_I32)) continue;
    for (int64_t j = 0; j < t->numel; ++j) {
      int64_t v;
      if (t->dtype == KILN_AOT_I64) {
        memcpy(&v, (const char*)inputs[i] + 8 * j, 8);
      } else {
        int32_t w;
        memcpy(&w, (const char*)inputs[i] + 4 * j, 4);
        v = w;
      }
      if (v < 0 || v >= t->index_bound)
        return kaot_fail(KILN_AOT_E_ARGUMENT, "%s_%s: input \"%s\" element %" PRId64 " is %" PRId64 ", an index out of range [0, %" PRId64 ")",
                         p->name, fn, t->name, j, v, t->index_bound);
    }
  }
  return KILN_AOT_OK;
}

/* One run, its errors named after the library function the caller called: `fn` is "run" (inputs
 * an array, inputs[i] named by index) or "forward" (one input, passed by address). */
KAOT_FN int kaot_run(kiln_aot_context* c, const void* const* inputs, void* const* outputs, const char* fn) {
  if (!c) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_%s: the context is NULL", fn);
  const kiln_aot_program* p = KAOT_BASE(c)->p;
  const bool one = strcmp(fn, "forward") == 0;
  if (!inputs && p->num_inputs > 0) return kaot_fail(KILN_AOT_E_ARGUMENT, "%s_%s: inputs is NULL", p->name, fn);
  for (int i = 0; i < p->num_inputs; ++i) {
    if (inputs[i]) continue;
    if (one) return kaot_fail(KILN_AOT_E_ARGUMENT, "%s_%s: input (\"%s\") is NULL", p->name, fn, p->inputs[i].name);
    return kaot_fail(KILN_AOT_E_ARGUMENT, "%s_%s: inputs[%d] (\"%s\") is NULL", p->name, fn, i, p->inputs[i].name);
  }
  int rc = kaot_check_indices(p, inputs, fn);
  if (rc) return rc;
  return kaot_target_run(c, inputs, outputs);
}

KAOT_FN int kiln_aot_run(kiln_aot_context* c, const void* const* inputs, void* const* outputs) {
  return kaot_run(c, inputs, outputs, "run");
}

KAOT_FN bool kaot_to_float(int dtype, const void* src, float* v) {
  uint16_t h;
  double d;
  switch (dtype) {
    case KILN_AOT_F32: memcpy(v, src, 4); return true;
    case KILN_AOT_F64: memcpy(&d, src, 8); *v = (float)d; return true;
    case KILN_AOT_F16: memcpy(&h, src, 2); *v = kaot_f16_to_f32(h); return true;
    case KILN_AOT_BF16: memcpy(&h, src, 2); *v = kaot_bf16_to_f32(h); return true;
    default: return false;
  }
}

KAOT_FN int kiln_aot_train_step(kiln_aot_context* c, const void* batch, const void* labels, float learning_rate, float* loss) {
  if (!c) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_train_step: the context is NULL");
  kaot_base* b = KAOT_BASE(c);
  const kiln_aot_program* p = b->p;
  int rc;
  if (p->train_batch < 0)
    return kaot_fail(KILN_AOT_E_STATE, "%s is an inference library; train_step needs one built with kiln aot --train", p->name);
  if (!batch) return kaot_fail(KILN_AOT_E_ARGUMENT, "%s_train_step: batch is NULL", p->name);
  if (!labels && p->train_labels >= 0) return kaot_fail(KILN_AOT_E_ARGUMENT, "%s_train_step: labels is NULL", p->name);
  for (int i = 0; i < p->num_inputs; ++i)
    if (i != p->train_batch && i != p->train_labels && i != p->train_lr)
      return kaot_fail(KILN_AOT_E_STATE, "%s_train_step: input %d (\"%s\") is neither the batch, the labels nor the learning rate; use run",
                       p->name, i, p->inputs[i].name);
  float f;
  const kiln_aot_tensor* out = &p->outputs[p->train_loss];
  if (out->numel < 1 || !kaot_to_float(out->dtype, b->outs[p->train_loss], &f))
    return kaot_fail(KILN_AOT_E_STATE, "%s_train_step: the loss output is %s, not a floating-point number", p->name, kaot_dtype_names[out->dtype]);
  if (p->train_lr >= 0) {
    const kiln_aot_tensor* t = &p->inputs[p->train_lr];
    uint16_t h = t->dtype == KILN_AOT_F16 ? kaot_f32_to_f16(learning_rate) : kaot_f32_to_bf16(learning_rate);
    double d = learning_rate;
    if (t->numel != 1 || (t->dtype != KILN_AOT_F32 && t->dtype != KILN_AOT_F64 && t->dtype != KILN_AOT_F16 && t->dtype != KILN_AOT_BF16))
      return kaot_fail(KILN_AOT_E_STATE, "%s_train_step: the learning-rate input \"%s\" is %s[%" PRId64 " elements], not a float scalar",
                       p->name, t->name, kaot_dtype_names[t->dtype], t->numel);
    if (t->dtype == KILN_AOT_F32) memcpy(b->lr, &learning_rate, 4);
    else if (t->dtype == KILN_AOT_F64) memcpy(b->lr, &d, 8);
    else memcpy(b->lr, &h, 2);
    b->train_inputs[p->train_lr] = b->lr;
  }
  b->train_inputs[p->train_batch] = batch;
  if (p->train_labels >= 0) b->train_inputs[p->train_labels] = labels;
  rc = kaot_check_indices(p, b->train_inputs, "train_step");
  if (rc) return rc;
  rc = kaot_target_run(c, b->train_inputs, NULL);
  if (!rc && loss) kaot_to_float(out->dtype, b->outs[p->train_loss], loss);
  return rc;
}

KAOT_FN const void* kiln_aot_output(const kiln_aot_context* c, int index) {
  if (!c) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_output: the context is NULL"), NULL;
  const kaot_base* b = KAOT_CBASE(c);
  if (index < 0 || index >= b->p->num_outputs)
    return kaot_fail(KILN_AOT_E_ARGUMENT, "%s has no output %d (it has %d)", b->p->name, index, b->p->num_outputs), NULL;
  return b->outs[index];
}

/* `fn`: the API function without the library's name ("get_param"). */
KAOT_FN int kaot_find_param(const kiln_aot_context* c, const char* fn, const char* name, const void* buf, size_t bytes, int* index) {
  char q[256], t[256];
  if (!c) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_%s: the context is NULL", fn);
  const kiln_aot_program* prog = KAOT_CBASE(c)->p;
  if (!name) return kaot_fail(KILN_AOT_E_ARGUMENT, "%s_%s: name is NULL", prog->name, fn);
  if (!buf) return kaot_fail(KILN_AOT_E_ARGUMENT, "%s_%s: the buffer for %s is NULL", prog->name, fn, kaot_q(q, name, strlen(name)));
  for (int i = 0; i < prog->num_params; ++i) {
    const kiln_aot_tensor* p = &prog->params[i];
    if (strcmp(p->name, name) != 0) continue;
    if ((uint64_t)bytes != (uint64_t)p->bytes)
      return kaot_fail(KILN_AOT_E_ARGUMENT, "%s_%s: parameter %s is %s (%" PRId64 " bytes), not %zu bytes", prog->name, fn, kaot_q(q, name, strlen(name)),
                       kaot_type(t, kaot_dtype_names[p->dtype], p->rank, p->shape), p->bytes, bytes);
    *index = i;
    return KILN_AOT_OK;
  }
  return kaot_fail(KILN_AOT_E_ARGUMENT, "%s_%s: no parameter %s", prog->name, fn, kaot_q(q, name, strlen(name)));
}

KAOT_FN int kiln_aot_get_param(const kiln_aot_context* c, const char* name, void* dst, size_t bytes) {
  int i = 0, rc = kaot_find_param(c, "get_param", name, dst, bytes, &i);
  if (!rc && bytes) rc = kaot_target_get_param(c, i, dst);
  return rc;
}

KAOT_FN int kiln_aot_set_param(kiln_aot_context* c, const char* name, const void* src, size_t bytes) {
  int i = 0, rc = kaot_find_param(c, "set_param", name, src, bytes, &i);
  char q[256];
  for (size_t k = 0; !rc && KAOT_BASE(c)->p->params[i].dtype == KILN_AOT_BOOL && k < bytes; ++k)
    if (((const unsigned char*)src)[k] > 1)
      return kaot_fail(KILN_AOT_E_ARGUMENT, "%s_set_param: bool parameter %s: element %zu has byte value %d (must be 0 or 1)",
                       KAOT_BASE(c)->p->name, kaot_q(q, name, strlen(name)), k, ((const unsigned char*)src)[k]);
  if (!rc && bytes) rc = kaot_target_set_param(c, i, src);
  return rc;
}

KAOT_FN int kiln_aot_threads(const kiln_aot_context* c) {
  if (!c) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_threads: the context is NULL"), 0;
  return KAOT_CBASE(c)->threads;
}


/* ---------------------------------------------------------------- thread pool
 * The CPU runtime runs its kernels on it; the CUDA runtime copies large inputs and outputs to and
 * from its pinned staging buffers on it (kaot_copy). kiln_parallel_for, which the CPU kernels call,
 * is the one name here that is not static; it is hidden. Needs pthreads and the Linux futex
 * syscall. */
/* kiln::rt::ThreadPool in C: a job [begin, end) with grain g is split into
 * min(threads, size / max(g, 1)) chunks; chunk i starts at i * base + min(i, extra) and is
 * base + (i < extra) long; the caller runs chunk 0, worker k chunk k. Fewer than 2 chunks, a
 * nested call or a busy pool: the caller runs the whole range inline, as it does a job with a
 * negative grain (kiln's pool splits those among awake workers only). Waiting threads spin, then
 * poll with sched_yield for 100 us, then sleep on a futex (as runtime/ThreadPool.cpp). */

static _Thread_local int kaot_inside_job; /* a worker, or a caller running its own chunk */

/* The thread's floating-point control word (x86: MXCSR; 0 elsewhere) and its subnormal bits, FTZ
 * and DAZ (support/FloatMode.h): every chunk of a job runs in its caller's, and the CPU runtime
 * runs its kernels with subnormals flushed unless KILN_DENORMALS=keep. */
#define KAOT_DENORMAL_BITS 0x8040u
#if defined(__x86_64__) || defined(__i386__)
KAOT_FN unsigned kaot_float_control(void) { return __builtin_ia32_stmxcsr(); }
KAOT_FN void kaot_set_float_control(unsigned v) { __builtin_ia32_ldmxcsr(v); }
#else
KAOT_FN unsigned kaot_float_control(void) { return 0; }
KAOT_FN void kaot_set_float_control(unsigned v) { (void)v; }
#endif
/* The mode bits of `control`, keeping the thread's sticky exception flags (bits 0-5). */
KAOT_FN void kaot_set_float_mode(unsigned control) {
  unsigned now = kaot_float_control();
  if ((now ^ control) & ~0x3Fu) kaot_set_float_control((control & ~0x3Fu) | (now & 0x3Fu));
}

typedef void (*kaot_chunk_fn)(void*, int64_t, int64_t);
typedef struct {
  _Alignas(64) atomic_uint seq;
  atomic_bool sleeping;
} kaot_slot;
typedef struct kaot_pool kaot_pool;
typedef struct { kaot_pool* pool; int index; } kaot_worker;
struct kaot_pool {
  int threads, started;
  kaot_slot* slots; /* slots[k - 1]: worker k */
  pthread_t* tids;
  kaot_worker* args;
  atomic_bool busy, stopping;
  kaot_chunk_fn fn; /* the job in flight */
  void* ctx;
  int64_t begin;
  uint64_t size, chunks;
  unsigned control; /* the caller's floating-point control word */
  _Alignas(64) atomic_uint pending;
  atomic_bool caller_sleeping;
};

KAOT_FN void kaot_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}
/* FUTEX_WAIT / FUTEX_WAKE | FUTEX_PRIVATE_FLAG */
KAOT_FN void kaot_futex_wait(atomic_uint* w, uint32_t v) { syscall(SYS_futex, (void*)w, 128, v, NULL, NULL, 0); }
KAOT_FN void kaot_futex_wake(atomic_uint* w) { syscall(SYS_futex, (void*)w, 129, 1, NULL, NULL, 0); }

static inline bool kaot_done(uint32_t v, bool until_zero, uint32_t seen) { return until_zero ? v == 0 : v != seen; }

/* Waits until *word is 0 (until_zero) or differs from `seen`; `sleeping` is raised while this
 * thread may sleep, so the writer of `word` makes the wake-up call only then. */
KAOT_FN uint32_t kaot_await(atomic_uint* word, atomic_bool* sleeping, bool until_zero, uint32_t seen) {
  uint32_t v;
  for (int i = 0; i < 64; ++i) {
    v = atomic_load_explicit(word, memory_order_acquire);
    if (kaot_done(v, until_zero, seen)) return v;
    kaot_relax();
  }
  int64_t deadline = kaot_now_ns() + 100000;
  do {
    v = atomic_load_explicit(word, memory_order_acquire);
    if (kaot_done(v, until_zero, seen)) return v;
    sched_yield();
  } while (kaot_now_ns() < deadline);
  for (;;) {
    atomic_store(sleeping, true);
    v = atomic_load(word);
    if (kaot_done(v, until_zero, seen)) {
      atomic_store_explicit(sleeping, false, memory_order_relaxed);
      return v;
    }
    kaot_futex_wait(word, v);
  }
}

KAOT_FN void kaot_wake(kaot_pool* p, int k) {
  kaot_slot* s = &p->slots[k - 1];
  atomic_fetch_add(&s->seq, 1);
  if (atomic_load(&s->sleeping)) kaot_futex_wake(&s->seq);
}

KAOT_FN void kaot_run_chunk(kaot_pool* p, uint64_t i) {
  uint64_t base = p->size / p->chunks, extra = p->size % p->chunks;
  uint64_t offset = i * base + (i < extra ? i : extra), length = base + (i < extra ? 1 : 0);
  int64_t b = (int64_t)((uint64_t)p->begin + offset);
  p->fn(p->ctx, b, (int64_t)((uint64_t)b + length));
}

KAOT_FN void* kaot_worker_main(void* arg) {
  kaot_pool* p = ((kaot_worker*)arg)->pool;
  int index = ((kaot_worker*)arg)->index;
  char name[16];
  snprintf(name, sizeof name, "kiln-aot-%d", index);
  prctl(PR_SET_NAME, name, 0, 0, 0);
  kaot_inside_job = 1;
  kaot_slot* slot = &p->slots[index - 1];
  uint32_t seen = 0;
  for (;;) {
    seen = kaot_await(&slot->seq, &slot->sleeping, false, seen);
    if (atomic_load_explicit(&p->stopping, memory_order_relaxed)) return NULL;
    kaot_set_float_mode(p->control);
    kaot_run_chunk(p, (uint64_t)index);
    if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_sleeping)) kaot_futex_wake(&p->pending);
  }
}

void kiln_parallel_for(void* pool, int64_t begin, int64_t end, int64_t grain, void (*fn)(void*, int64_t, int64_t),
                       void* ctx) __attribute__((visibility("hidden")));
__attribute__((visibility("hidden"))) void kiln_parallel_for(void* pool, int64_t begin, int64_t end, int64_t grain,
                                                             void (*fn)(void*, int64_t, int64_t), void* ctx) {
  if (end <= begin) return;
  kaot_pool* p = (kaot_pool*)pool;
  /* A negative grain (runtime/ThreadPool.h's runAwake: a job of a few microseconds, for workers
   * already awake) runs inline here: the caller of this pool waits for every chunk it hands out,
   * and a worker slow to start (its core taken by another process) would cost it more than the
   * job (mnist_mlp's batch-1 inference split so: 2.2 -> 5.7 us beside one busy process). */
  uint64_t size = (uint64_t)end - (uint64_t)begin;
  uint64_t chunks = p && grain >= 0 ? size / (uint64_t)(grain > 1 ? grain : 1) : 0;
  if (p && chunks > (uint64_t)p->threads) chunks = (uint64_t)p->threads;
  if (chunks < 2 || kaot_inside_job || atomic_exchange_explicit(&p->busy, true, memory_order_acquire)) {
    fn(ctx, begin, end);
    return;
  }
  p->fn = fn;
  p->ctx = ctx;
  p->begin = begin;
  p->size = size;
  p->chunks = chunks;
  p->control = kaot_float_control();
  atomic_store_explicit(&p->pending, (uint32_t)chunks - 1, memory_order_relaxed); /* published by the wakes */
  for (int k = 1; k < (int)chunks; ++k) kaot_wake(p, k);
  kaot_inside_job = 1;
  kaot_run_chunk(p, 0);
  kaot_inside_job = 0;
  kaot_await(&p->pending, &p->caller_sleeping, true, 0);
  atomic_store_explicit(&p->busy, false, memory_order_release);
}

KAOT_FN void kaot_pool_destroy(kaot_pool* p) {
  if (!p) return;
  atomic_store_explicit(&p->stopping, true, memory_order_relaxed); /* published by the wakes */
  for (int k = 1; k <= p->started; ++k) kaot_wake(p, k);
  for (int k = 0; k < p->started; ++k) pthread_join(p->tids[k], NULL);
  kaot_free(p->slots);
  free(p->tids);
  free(p->args);
  kaot_free(p);
}

KAOT_FN int kaot_pool_create(int threads, kaot_pool** out) {
  kaot_pool* p = (kaot_pool*)kaot_alloc((int64_t)sizeof(kaot_pool));
  int n = threads - 1, rc = 0;
  *out = NULL;
  if (!p) return kaot_fail(KILN_AOT_E_MEMORY, "out of memory creating a thread pool of %d threads", threads);
  p->threads = threads;
  atomic_init(&p->busy, false);
  atomic_init(&p->stopping, false);
  atomic_init(&p->pending, 0);
  atomic_init(&p->caller_sleeping, false);
  if (n > 0) {
    p->slots = (kaot_slot*)kaot_alloc((int64_t)(sizeof(kaot_slot) * (size_t)n));
    p->tids = (pthread_t*)calloc((size_t)n, sizeof(pthread_t));
    p->args = (kaot_worker*)calloc((size_t)n, sizeof(kaot_worker));
    if (!p->slots || !p->tids || !p->args) {
      kaot_pool_destroy(p);
      return kaot_fail(KILN_AOT_E_MEMORY, "out of memory creating a thread pool of %d threads", threads);
    }
    for (int k = 0; k < n; ++k) {
      atomic_init(&p->slots[k].seq, 0);
      atomic_init(&p->slots[k].sleeping, false);
    }
    sigset_t all, old; /* workers block every signal: they belong to the process's main threads */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int k = 0; k < n && rc == 0; ++k) {
      p->args[k].pool = p;
      p->args[k].index = k + 1;
      rc = pthread_create(&p->tids[k], NULL, kaot_worker_main, &p->args[k]);
      if (rc == 0) p->started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
      char eb[128];
      int started = p->started;
      kaot_pool_destroy(p);
      return kaot_fail(KILN_AOT_E_MEMORY, "could not start thread %d of a pool of %d: %s", started + 2, threads,
                       KAOT_STRERROR(rc, eb));
    }
  }
  *out = p;
  return KILN_AOT_OK;
}

/* The threads of a pool for `requested` (0 or less: the CPUs this process may run on), at most 256. */
KAOT_FN int kaot_threads_for(int requested) {
  int threads = requested;
  if (threads <= 0) {
    unsigned long mask[128];
    long got = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask);
    threads = 0;
    for (long i = 0; i < got / (long)sizeof(unsigned long); ++i) threads += __builtin_popcountl(mask[i]);
    if (threads <= 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads <= 0) threads = 1;
  }
  return threads > 256 ? 256 : threads;
}

/* kiln::rt::ThreadPool::copy in C: `bytes` from src to dst, in runs of whole 4 KiB steps of at
 * least KAOT_COPY_GRAIN on every thread of the pool from KAOT_PARALLEL_COPY on, else (or without a
 * pool) by the caller alone. */
#define KAOT_COPY_STEP ((int64_t)4096)
#define KAOT_COPY_GRAIN ((int64_t)1 << 20)
#define KAOT_PARALLEL_COPY ((int64_t)2 << 20)
typedef struct { unsigned char* dst; const unsigned char* src; int64_t bytes; } kaot_copy_job;
KAOT_FN void kaot_copy_steps(void* arg, int64_t begin, int64_t end) {
  const kaot_copy_job* j = (const kaot_copy_job*)arg;
  int64_t from = begin * KAOT_COPY_STEP, to = end * KAOT_COPY_STEP;
  if (to > j->bytes) to = j->bytes;
  memcpy(j->dst + from, j->src + from, (size_t)(to - from));
}
KAOT_FN void kaot_copy(kaot_pool* pool, void* dst, const void* src, int64_t bytes) {
  if (bytes <= 0) return;
  if (!pool || pool->threads < 2 || bytes < KAOT_PARALLEL_COPY) {
    memcpy(dst, src, (size_t)bytes);
    return;
  }
  kaot_copy_job j = {(unsigned char*)dst, (const unsigned char*)src, bytes};
  kiln_parallel_for(pool, 0, (bytes + KAOT_COPY_STEP - 1) / KAOT_COPY_STEP, KAOT_COPY_GRAIN / KAOT_COPY_STEP, kaot_copy_steps, &j);
}

