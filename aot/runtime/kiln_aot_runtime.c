/* The runtime of a library written by `kiln aot`: pasted into the generated NAME.c after
 * kiln_aot.h and the program's tables (see kiln_aot.h). It interprets the tables exactly as
 * kiln::cpu::Program::run does, runs the kernels on a persistent thread pool whose chunking is
 * kiln::rt::ThreadPool's, and reads and writes weights as kiln's safetensors code does.
 *
 * Every name here is static (internal helpers start with kaot_) except kiln_parallel_for, which
 * the kernels call and which is hidden. Needs libc, libm, pthreads and the Linux futex syscall,
 * and the POSIX/BSD declarations of _DEFAULT_SOURCE: define _DEFAULT_SOURCE (or _GNU_SOURCE)
 * before the first #include when compiling with -std=c11. */
#if defined(__GLIBC__) && !defined(_DEFAULT_SOURCE)
#error "kiln_aot_runtime.c needs POSIX declarations: #define _DEFAULT_SOURCE before the first #include"
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
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define KAOT_FN static __attribute__((unused))

/* ---------------------------------------------------------------- errors and small helpers */

static _Thread_local char kaot_error_text[2048];
static _Thread_local int kaot_inside_job; /* a worker, or a caller running its own chunk */

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

/* A zeroed buffer of max(bytes, 64) bytes rounded up to 64, 64-byte aligned. */
KAOT_FN void* kaot_alloc(int64_t bytes) {
  if (bytes < 0 || (uint64_t)bytes > SIZE_MAX / 2) return NULL;
  size_t n = bytes < 64 ? 64 : (((size_t)bytes + 63) & ~(size_t)63);
  void* p = aligned_alloc(64, n);
  if (p) memset(p, 0, n);
  return p;
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

/* ---------------------------------------------------------------- thread pool */
/* kiln::rt::ThreadPool in C: a job [begin, end) with grain g is split into
 * min(threads, size / max(g, 1)) chunks; chunk i starts at i * base + min(i, extra) and is
 * base + (i < extra) long; the caller runs chunk 0, worker k chunk k. Fewer than 2 chunks, a
 * nested call or a busy pool: the caller runs the whole range inline. Waiting threads spin, then
 * poll with sched_yield for 100 us, then sleep on a futex (as runtime/ThreadPool.cpp). */

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
KAOT_FN int64_t kaot_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
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
  uint64_t size = (uint64_t)end - (uint64_t)begin;
  uint64_t chunks = p ? size / (uint64_t)(grain > 1 ? grain : 1) : 0;
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
  free(p->slots);
  free(p->tids);
  free(p->args);
  free(p);
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

/* ---------------------------------------------------------------- the context */

struct kiln_aot_context {
  const kiln_aot_program* p;
  kaot_pool* pool;
  int threads;
  unsigned char *arena, *scratch, *lr;
  void **params, **owned, **staging, **outs; /* staging[u]: for an update that is copied */
  signed char* mode;                          /* per update: 0 skip, 1 trade, 2 copy */
  void** table;                               /* per kernel: its arguments, then the scratch */
  const void** inputs;                        /* bound for the current run */
  const void** train_inputs;
};
typedef struct kiln_aot_context kiln_aot_context;

KAOT_FN void kiln_aot_destroy(kiln_aot_context* c) {
  if (!c) return;
  const kiln_aot_program* p = c->p;
  kaot_pool_destroy(c->pool);
  for (int i = 0; c->params && i < p->num_params; ++i) free(c->params[i]);
  for (int i = 0; c->owned && i < p->num_owned; ++i) free(c->owned[i]);
  for (int i = 0; c->staging && i < p->num_updates; ++i) free(c->staging[i]);
  for (int i = 0; c->outs && i < p->num_outputs; ++i) free(c->outs[i]);
  free(c->params), free(c->owned), free(c->staging), free(c->outs), free(c->mode), free(c->table);
  free(c->inputs), free(c->train_inputs), free(c->arena), free(c->scratch), free(c->lr);
  free(c);
}

KAOT_FN void* kaot_address(const kiln_aot_context* c, kiln_aot_loc l) {
  switch (l.kind) {
    case KILN_AOT_INPUT: return (void*)c->inputs[l.index]; /* kernels never write inputs */
    case KILN_AOT_PARAM: return c->params[l.index];
    case KILN_AOT_ARENA: return c->arena + l.offset;
    default: return c->owned[l.index];
  }
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

#if defined(__x86_64__)
KAOT_FN void kaot_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
  __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}
#endif

/* Every feature of p->cpu_features this CPU and OS support (CPUID, XGETBV); AMX also asks the
 * kernel for permission to use tile data. Unknown names are ignored. */
KAOT_FN int kaot_check_cpu(const kiln_aot_program* p) {
  static const struct { const char* name; int leaf, reg, bit; uint64_t xcr0; } feats[] = {
      {"avx", 1, 2, 28, 0x6},          {"avx2", 70, 1, 5, 0x6},       {"fma", 1, 2, 12, 0x6},
      {"f16c", 1, 2, 29, 0x6},         {"avx512f", 70, 1, 16, 0xe6},  {"avx512dq", 70, 1, 17, 0xe6},
      {"avx512bw", 70, 1, 30, 0xe6},   {"avx512vl", 70, 1, 31, 0xe6}, {"avx512bf16", 71, 0, 5, 0xe6},
      {"amx-tile", 70, 3, 24, 0x60000}, {"amx-bf16", 70, 3, 22, 0x60000}};
  uint32_t l1[4] = {0}, l70[4] = {0}, l71[4] = {0};
  uint64_t xcr0 = 0;
  char missing[512] = "";
  bool amx = false;
  if (!p->cpu_features) return 0;
#if defined(__x86_64__)
  uint32_t r[4];
  kaot_cpuid(0, 0, r);
  if (r[0] >= 1) kaot_cpuid(1, 0, l1);
  if (r[0] >= 7) kaot_cpuid(7, 0, l70);
  if (r[0] >= 7 && l70[0] >= 1) kaot_cpuid(7, 1, l71);
  if ((l1[2] >> 27) & 1) { /* OSXSAVE: XGETBV is available */
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = ((uint64_t)hi << 32) | lo;
  }
#endif
  for (const char* s = p->cpu_features; *s;) {
    while (*s == ',' || *s == ' ' || *s == '+') ++s;
    const char* e = s;
    while (*e && *e != ',' && *e != ' ') ++e;
    for (size_t f = 0; f < sizeof feats / sizeof feats[0]; ++f) {
      if (strlen(feats[f].name) != (size_t)(e - s) || memcmp(feats[f].name, s, (size_t)(e - s)) != 0) continue;
      const uint32_t* regs = feats[f].leaf == 1 ? l1 : feats[f].leaf == 70 ? l70 : l71;
      bool have = ((regs[feats[f].reg] >> feats[f].bit) & 1) && (xcr0 & feats[f].xcr0) == feats[f].xcr0;
      if (!have) {
        size_t n = strlen(missing);
        snprintf(missing + n, sizeof missing - n, "%s%s", n ? ", " : "", feats[f].name);
      }
      amx = amx || feats[f].xcr0 == 0x60000;
    }
    s = e;
  }
  if (missing[0])
    return kaot_fail(KILN_AOT_E_CPU, "this CPU lacks %s, which the kernels of %s were built for", missing, p->name);
#if defined(__x86_64__) && defined(SYS_arch_prctl)
  if (amx && syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) != 0) {
    char eb[128];
    return kaot_fail(KILN_AOT_E_CPU, "%s uses AMX, but the kernel refused permission to use AMX tile data: %s", p->name,
                     KAOT_STRERROR(errno, eb));
  }
#endif
  return 0;
}

/* ---------------------------------------------------------------- safetensors: the header's JSON */
/* A strict reader (as runtime/Json.cpp): RFC 8259 syntax, valid UTF-8, no duplicate keys, at most
 * 64 levels. kaot_jvalue validates (and skips) one value; the header is validated whole first, then
 * walked again for its meaning, so a syntax error anywhere wins over a semantic one. */

typedef struct { size_t off, len; const char* ptr; } kaot_key;
typedef struct {
  const unsigned char* s;
  size_t n, pos;
  const char* what;
  kaot_buf pool; /* the decoded keys of the objects being read */
  kaot_key* keys;
  size_t nkeys, capkeys;
} kaot_json;

KAOT_FN int kaot_jfail(const kaot_json* j, const char* reason) {
  return kaot_fail(KILN_AOT_E_FORMAT, "%s: header: invalid json at byte %zu: %s", j->what, j->pos, reason);
}
KAOT_FN int kaot_oom(const char* what) { return kaot_fail(KILN_AOT_E_MEMORY, "%s: out of memory", what); }
static inline int kaot_peek(const kaot_json* j) { return j->pos < j->n ? j->s[j->pos] : -1; }
static inline bool kaot_digit(int c) { return c >= '0' && c <= '9'; }
KAOT_FN void kaot_ws(kaot_json* j) {
  while (j->pos < j->n && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' || j->s[j->pos] == '\n' || j->s[j->pos] == '\r'))
    ++j->pos;
}
KAOT_FN const char* kaot_kind(const kaot_json* j) {
  switch (kaot_peek(j)) {
    case '{': return "object";
    case '[': return "array";
    case '"': return "string";
    case 't': case 'f': return "boolean";
    case 'n': return "null";
    default: return "number";
  }
}

KAOT_FN int kaot_hex4(kaot_json* j, uint32_t* u) {
  *u = 0;
  for (int i = 0; i < 4; ++i) {
    if (j->pos >= j->n) return kaot_jfail(j, "unterminated \\u escape");
    int c = j->s[j->pos++];
    *u <<= 4;
    if (kaot_digit(c)) *u |= (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f') *u |= (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') *u |= (uint32_t)(c - 'A' + 10);
    else return kaot_jfail(j, "invalid hex digit in \\u escape");
  }
  return 0;
}

/* The string at j->pos, decoded into `out` when not NULL. */
KAOT_FN int kaot_jstring(kaot_json* j, kaot_buf* out) {
  static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (kaot_peek(j) != '"') return kaot_jfail(j, "expected '\"'");
  ++j->pos;
  for (;;) {
    if (j->pos >= j->n) return kaot_jfail(j, "unterminated string");
    unsigned char c = j->s[j->pos], u8[4];
    size_t len = 1;
    if (c == '"') {
      ++j->pos;
      return 0;
    }
    if (c < 0x20) return kaot_jfail(j, "control character in a string");
    if (c >= 0x80) {
      len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
      if (len == 0 || c > 0xF4 || j->pos + len > j->n) return kaot_jfail(j, "invalid utf-8 in a string");
      uint32_t cp = c & (0x7Fu >> len);
      for (size_t i = 1; i < len; ++i) {
        if ((j->s[j->pos + i] & 0xC0) != 0x80) return kaot_jfail(j, "invalid utf-8 in a string");
        cp = (cp << 6) | (j->s[j->pos + i] & 0x3Fu);
      }
      if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return kaot_jfail(j, "invalid utf-8 in a string");
      memcpy(u8, j->s + j->pos, len);
      j->pos += len;
    } else if (c != '\\') {
      u8[0] = c;
      ++j->pos;
    } else {
      if (++j->pos >= j->n) return kaot_jfail(j, "unterminated escape");
      unsigned char e = j->s[j->pos++];
      uint32_t cp, lo;
      int rc;
      switch (e) {
        case '"': case '\\': case '/': u8[0] = e; break;
        case 'b': u8[0] = '\b'; break;
        case 'f': u8[0] = '\f'; break;
        case 'n': u8[0] = '\n'; break;
        case 'r': u8[0] = '\r'; break;
        case 't': u8[0] = '\t'; break;
        case 'u':
          if ((rc = kaot_hex4(j, &cp))) return rc;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return kaot_jfail(j, "unpaired low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (j->n - j->pos < 2 || j->s[j->pos] != '\\' || j->s[j->pos + 1] != 'u')
              return kaot_jfail(j, "unpaired high surrogate in \\u escape");
            j->pos += 2;
            if ((rc = kaot_hex4(j, &lo))) return rc;
            if (lo < 0xDC00 || lo > 0xDFFF) return kaot_jfail(j, "unpaired high surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          if (cp < 0x80) {
            u8[0] = (unsigned char)cp;
          } else if (cp < 0x800) {
            len = 2;
            u8[0] = (unsigned char)(0xC0 | (cp >> 6));
          } else if (cp < 0x10000) {
            len = 3;
            u8[0] = (unsigned char)(0xE0 | (cp >> 12));
          } else {
            len = 4;
            u8[0] = (unsigned char)(0xF0 | (cp >> 18));
          }
          for (size_t i = 1; i < len; ++i) u8[i] = (unsigned char)(0x80 | ((cp >> (6 * (len - 1 - i))) & 0x3F));
          break;
        default: --j->pos; return kaot_jfail(j, "invalid escape");
      }
    }
    if (out && kaot_put(out, u8, len)) return kaot_oom(j->what);
  }
}

KAOT_FN int kaot_digits(kaot_json* j) {
  size_t d = j->pos;
  while (kaot_digit(kaot_peek(j))) ++j->pos;
  return j->pos == d ? kaot_jfail(j, "expected a digit") : 0;
}
KAOT_FN int kaot_jnumber(kaot_json* j) {
  int rc = 0;
  if (kaot_peek(j) == '-') ++j->pos;
  if (kaot_peek(j) == '0') {
    ++j->pos;
    if (kaot_digit(kaot_peek(j))) return kaot_jfail(j, "leading zeros are not allowed");
  } else if ((rc = kaot_digits(j))) {
    return rc;
  }
  if (kaot_peek(j) == '.' && (++j->pos, (rc = kaot_digits(j)))) return rc;
  if (kaot_peek(j) == 'e' || kaot_peek(j) == 'E') {
    ++j->pos;
    if (kaot_peek(j) == '+' || kaot_peek(j) == '-') ++j->pos;
    return kaot_digits(j);
  }
  return 0;
}

KAOT_FN int kaot_keycmp(const void* a, const void* b) {
  const kaot_key *x = (const kaot_key*)a, *y = (const kaot_key*)b;
  int r = memcmp(x->ptr, y->ptr, x->len < y->len ? x->len : y->len);
  return r ? r : (x->len > y->len) - (x->len < y->len);
}

KAOT_FN int kaot_jvalue(kaot_json* j, int depth) {
  int rc = 0, c = kaot_peek(j);
  const char* word = c == 't' ? "true" : c == 'f' ? "false" : "null";
  if (depth >= 64) return kaot_jfail(j, "nesting deeper than 64 levels");
  if (c < 0) return kaot_jfail(j, "unexpected end of input");
  if (c == '"') return kaot_jstring(j, NULL);
  if (c == 't' || c == 'f' || c == 'n') {
    if (j->n - j->pos < strlen(word) || memcmp(j->s + j->pos, word, strlen(word)) != 0) return kaot_jfail(j, "unknown literal");
    j->pos += strlen(word);
    return 0;
  }
  if (c != '{' && c != '[') return kaot_jnumber(j);
  size_t base = j->nkeys, pool0 = j->pool.n;
  char close = c == '{' ? '}' : ']';
  ++j->pos;
  kaot_ws(j);
  if (kaot_peek(j) == close) return ++j->pos, 0;
  for (;;) {
    kaot_ws(j);
    if (c == '{') {
      size_t off = j->pool.n;
      if (kaot_peek(j) != '"') return kaot_jfail(j, "expected a string key");
      if ((rc = kaot_jstring(j, &j->pool))) return rc;
      if (kaot_reserve((void**)&j->keys, &j->capkeys, j->nkeys + 1, sizeof(kaot_key))) return kaot_oom(j->what);
      j->keys[j->nkeys++] = (kaot_key){off, j->pool.n - off, NULL};
      kaot_ws(j);
      if (kaot_peek(j) != ':') return kaot_jfail(j, "expected ':'");
      ++j->pos;
      kaot_ws(j);
    }
    if ((rc = kaot_jvalue(j, depth + 1))) return rc;
    kaot_ws(j);
    if (kaot_peek(j) == ',') {
      ++j->pos;
      continue;
    }
    if (kaot_peek(j) != close) return kaot_jfail(j, close == '}' ? "expected '}'" : "expected ']'");
    ++j->pos;
    break;
  }
  size_t count = j->nkeys - base;
  for (size_t i = 0; i < count; ++i) j->keys[base + i].ptr = j->pool.p + j->keys[base + i].off;
  if (count > 1) qsort(j->keys + base, count, sizeof(kaot_key), kaot_keycmp);
  for (size_t i = 1; i < count; ++i)
    if (kaot_keycmp(&j->keys[base + i - 1], &j->keys[base + i]) == 0) {
      char q[256];
      return kaot_fail(KILN_AOT_E_FORMAT, "%s: header: invalid json: duplicate key %s", j->what,
                       kaot_q(q, j->keys[base + i].ptr, j->keys[base + i].len));
    }
  j->nkeys = base;
  j->pool.n = pool0;
  return 0;
}

/* Integers as std::from_chars reads them: [-]digits, nothing else, no overflow. */
KAOT_FN bool kaot_u64(const unsigned char* s, size_t n, uint64_t* v) {
  *v = 0;
  if (n == 0) return false;
  for (size_t i = 0; i < n; ++i) {
    if (!kaot_digit(s[i]) || *v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10) return false;
    *v = *v * 10 + (uint64_t)(s[i] - '0');
  }
  return true;
}
KAOT_FN bool kaot_i64(const unsigned char* s, size_t n, int64_t* v) {
  bool neg = n > 0 && s[0] == '-';
  uint64_t u;
  if (!kaot_u64(s + neg, n - neg, &u) || u > (uint64_t)INT64_MAX + neg) return false;
  *v = neg ? (int64_t)(0 - u) : (int64_t)u;
  return true;
}

/* ---------------------------------------------------------------- safetensors: reading */

typedef struct {
  size_t name_off, name_len, shape_off, index;
  const char* name;
  int dtype, rank;
  uint64_t begin, end;
} kaot_entry;
typedef struct {
  kaot_entry* e;
  size_t n, cap;
  int64_t* dims;
  size_t ndims, capdims;
  kaot_buf names, tmp;
} kaot_tab;

#define KAOT_TRY(x) \
  do {              \
    if ((rc = (x)) != 0) goto done; \
  } while (0)

/* The next member of an object whose syntax is known good: its key into `key`, j->pos at its value.
 * Returns 0 at the closing brace (consumed). */
KAOT_FN int kaot_member(kaot_json* j, kaot_buf* key, bool first, int* rc) {
  kaot_ws(j);
  if (kaot_peek(j) == '}') return ++j->pos, 0;
  if (!first) ++j->pos, kaot_ws(j); /* ',' */
  key->n = 0;
  if ((*rc = kaot_jstring(j, key))) return 0;
  kaot_ws(j);
  ++j->pos; /* ':' */
  kaot_ws(j);
  return 1;
}

KAOT_FN int kaot_parse_entry(kaot_json* j, kaot_tab* T, size_t off, size_t len) {
  static const char* const foreign[] = {"U8", "I8", "U16", "I16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64"};
  char q[256], where[1400], ts[256];
  size_t pd = 0, ps = 0, po = 0, end, shape_off = T->ndims, spans[3][2] = {{0, 0}};
  int rc = 0, rank = 0, dt = -1, items = 0;
  uint64_t product, bytes, b, e;
  bool overflow = false, empty = false;
  snprintf(where, sizeof where, "%s: tensor %s", j->what, kaot_q(q, T->names.p + off, len));
  if (kaot_peek(j) != '{')
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: expected an object with dtype, shape and data_offsets, found a %s", where, kaot_kind(j));
  ++j->pos;
  for (bool first = true; kaot_member(j, &T->tmp, first, &rc); first = false) {
    if (T->tmp.n == 5 && memcmp(T->tmp.p, "dtype", 5) == 0) pd = j->pos;
    if (T->tmp.n == 5 && memcmp(T->tmp.p, "shape", 5) == 0) ps = j->pos;
    if (T->tmp.n == 12 && memcmp(T->tmp.p, "data_offsets", 12) == 0) po = j->pos;
    if ((rc = kaot_jvalue(j, 0))) return rc;
  }
  if (rc) return rc;
  end = j->pos;
  if (!pd || !ps || !po)
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: missing \"%s\"", where, !pd ? "dtype" : !ps ? "shape" : "data_offsets");
  j->pos = pd;
  if (kaot_peek(j) != '"') return kaot_fail(KILN_AOT_E_FORMAT, "%s: \"dtype\" must be a string, found a %s", where, kaot_kind(j));
  T->tmp.n = 0;
  if ((rc = kaot_jstring(j, &T->tmp))) return rc;
  for (int d = 0; d < 7; ++d)
    if (T->tmp.n == strlen(kaot_st_names[d]) && memcmp(T->tmp.p, kaot_st_names[d], T->tmp.n) == 0) dt = d;
  if (dt < 0) {
    bool known = false;
    for (size_t f = 0; f < sizeof foreign / sizeof foreign[0]; ++f)
      known = known || (T->tmp.n == strlen(foreign[f]) && memcmp(T->tmp.p, foreign[f], T->tmp.n) == 0);
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: %s dtype %s (kiln reads F32, F16, BF16, F64, I32, I64 and BOOL)", where,
                     known ? "unsupported" : "unknown", kaot_q(ts, T->tmp.p, T->tmp.n));
  }
  j->pos = ps;
  if (kaot_peek(j) != '[') return kaot_fail(KILN_AOT_E_FORMAT, "%s: \"shape\" must be an array, found a %s", where, kaot_kind(j));
  product = (uint64_t)kaot_dtype_sizes[dt];
  for (++j->pos, kaot_ws(j); kaot_peek(j) != ']'; kaot_ws(j), j->pos += kaot_peek(j) == ',') {
    size_t a = (kaot_ws(j), j->pos);
    int64_t v = -1;
    int c = kaot_peek(j);
    if (c != '-' && !kaot_digit(c))
      return kaot_fail(KILN_AOT_E_FORMAT, "%s: shape entries must be non-negative integers, found %s", where, kaot_kind(j));
    if ((rc = kaot_jnumber(j))) return rc;
    if (!kaot_i64(j->s + a, j->pos - a, &v) || v < 0)
      return kaot_fail(KILN_AOT_E_FORMAT, "%s: shape entries must be non-negative integers, found %.*s", where,
                       (int)(j->pos - a > 100 ? 100 : j->pos - a), (const char*)j->s + a);
    if (kaot_reserve((void**)&T->dims, &T->capdims, T->ndims + 1, sizeof(int64_t))) return kaot_oom(j->what);
    T->dims[T->ndims++] = v;
    ++rank;
    if (v == 0) empty = true;
    else if (product > UINT64_MAX / (uint64_t)v) overflow = true;
    else product *= (uint64_t)v;
  }
  if (overflow || product > (uint64_t)INT64_MAX)
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: shape %s is too large (its size in bytes overflows)", where,
                     kaot_type(ts, "", rank, T->dims + shape_off));
  bytes = empty ? 0 : product;
  j->pos = po;
  if (kaot_peek(j) == '[') {
    for (++j->pos, kaot_ws(j); kaot_peek(j) != ']'; kaot_ws(j), j->pos += kaot_peek(j) == ',') {
      kaot_ws(j);
      if (items < 3) spans[items][0] = j->pos;
      if ((rc = kaot_jvalue(j, 0))) return rc;
      if (items < 3) spans[items][1] = j->pos;
      ++items;
    }
  }
  if (items != 2)
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: \"data_offsets\" must be an array of two integers [begin, end]", where);
  if (!kaot_u64(j->s + spans[0][0], spans[0][1] - spans[0][0], &b) || !kaot_u64(j->s + spans[1][0], spans[1][1] - spans[1][0], &e))
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: \"data_offsets\" must be non-negative integers", where);
  if (b > e) return kaot_fail(KILN_AOT_E_FORMAT, "%s: data_offsets [%" PRIu64 ", %" PRIu64 "] end before they begin", where, b, e);
  if (e - b != bytes)
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: data_offsets [%" PRIu64 ", %" PRIu64 "] span %" PRIu64 " bytes but %s needs %" PRIu64 " bytes",
                     where, b, e, e - b, kaot_type(ts, kaot_st_names[dt], rank, T->dims + shape_off), bytes);
  if (kaot_reserve((void**)&T->e, &T->cap, T->n + 1, sizeof(kaot_entry))) return kaot_oom(j->what);
  T->e[T->n] = (kaot_entry){off, len, shape_off, T->n, NULL, dt, rank, b, e};
  T->n++;
  j->pos = end;
  return 0;
}

/* Walks the (valid) header: the tensors' entries into T, "__metadata__" checked and skipped. */
KAOT_FN int kaot_parse_header(kaot_json* j, kaot_tab* T) {
  int rc = 0;
  j->pos = 1;
  for (bool first = true;; first = false) {
    kaot_ws(j);
    if (kaot_peek(j) == '}') return 0;
    if (!first) ++j->pos, kaot_ws(j); /* ',' */
    size_t off = T->names.n;
    if ((rc = kaot_jstring(j, &T->names))) return rc;
    size_t len = T->names.n - off;
    kaot_ws(j);
    ++j->pos;
    kaot_ws(j);
    if (len != 12 || memcmp(T->names.p + off, "__metadata__", 12) != 0) {
      if ((rc = kaot_parse_entry(j, T, off, len))) return rc;
      continue;
    }
    T->names.n = off;
    if (kaot_peek(j) != '{') return kaot_fail(KILN_AOT_E_FORMAT, "%s: \"__metadata__\" must be an object of strings", j->what);
    ++j->pos;
    for (bool f = true; kaot_member(j, &T->tmp, f, &rc); f = false) {
      char q[256];
      if (kaot_peek(j) != '"')
        return kaot_fail(KILN_AOT_E_FORMAT, "%s: \"__metadata__\" value for %s must be a string, found a %s", j->what,
                         kaot_q(q, T->tmp.p, T->tmp.n), kaot_kind(j));
      if ((rc = kaot_jstring(j, NULL))) return rc;
    }
    if (rc) return rc;
  }
}

KAOT_FN int kaot_by_offset(const void* a, const void* b) {
  const kaot_entry *x = *(const kaot_entry* const*)a, *y = *(const kaot_entry* const*)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}
KAOT_FN int kaot_by_name(const void* a, const void* b) {
  const kaot_entry *x = *(const kaot_entry* const*)a, *y = *(const kaot_entry* const*)b;
  int r = memcmp(x->name, y->name, x->name_len < y->name_len ? x->name_len : y->name_len);
  return r ? r : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* Where the bytes come from: a file (fd) or memory (the embedded weights). */
typedef struct {
  int fd;
  const unsigned char* mem;
  uint64_t size;
  const char* what;
} kaot_src;

KAOT_FN int kaot_read(const kaot_src* s, uint64_t off, void* dst, uint64_t n) {
  unsigned char* d = (unsigned char*)dst;
  if (s->mem) {
    if (n) memcpy(d, s->mem + off, (size_t)n);
    return 0;
  }
  while (n > 0) {
    ssize_t r = pread(s->fd, d, n > (1u << 30) ? (1u << 30) : (size_t)n, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      char eb[128];
      return kaot_fail(KILN_AOT_E_IO, "%s: %s", s->what, r < 0 ? KAOT_STRERROR(errno, eb) : "unexpected end of file (was it changed while being read?)");
    }
    d += r, off += (uint64_t)r, n -= (uint64_t)r;
  }
  return 0;
}

/* Reads every parameter from `src` into fresh buffers; only when all of them are read and valid do
 * they replace the context's parameters. */
KAOT_FN int kaot_load(kiln_aot_context* c, const kaot_src* src) {
  const kiln_aot_program* p = c->p;
  const char* what = src->what;
  unsigned char len8[8];
  uint64_t n = 0, data, expected = 0;
  kaot_json j;
  kaot_tab T;
  kaot_entry **byoff = NULL, **byname = NULL;
  void** fresh = NULL;
  char q[256], t1[256], t2[256];
  int rc = 0;
  memset(&j, 0, sizeof j);
  memset(&T, 0, sizeof T);
  if (src->size < 8)
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: not a safetensors file: %" PRIu64 " bytes, shorter than the 8-byte header length", what, src->size);
  if ((rc = kaot_read(src, 0, len8, 8))) return rc;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len8[i];
  if (n > 100000000)
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: header length %" PRIu64 " exceeds the limit of 100000000 bytes (not a safetensors file?)", what, n);
  if (n > src->size - 8)
    return kaot_fail(KILN_AOT_E_FORMAT, "%s: header length %" PRIu64 " exceeds the %" PRIu64 " bytes after the length field (file truncated?)",
                     what, n, src->size - 8);
  data = 8 + n;
  j.s = (unsigned char*)malloc((size_t)n + 1);
  j.n = (size_t)n;
  j.what = what;
  if (!j.s || kaot_put(&j.pool, "", 0) || kaot_put(&T.names, "", 0) || kaot_put(&T.tmp, "", 0)) KAOT_TRY(kaot_oom(what));
  KAOT_TRY(kaot_read(src, 8, (void*)j.s, n));
  if (n == 0 || j.s[0] != '{') KAOT_TRY(kaot_fail(KILN_AOT_E_FORMAT, "%s: the header must be a json object starting with '{'", what));
  KAOT_TRY(kaot_jvalue(&j, 0));
  kaot_ws(&j);
  if (j.pos != j.n) KAOT_TRY(kaot_jfail(&j, "unexpected characters after the value"));
  KAOT_TRY(kaot_parse_header(&j, &T));

  /* The tensors must tile the data buffer: sorted by offset, each begins where the previous ends. */
  byoff = (kaot_entry**)malloc((T.n + 1) * sizeof(kaot_entry*));
  byname = (kaot_entry**)malloc((T.n + 1) * sizeof(kaot_entry*));
  fresh = (void**)calloc((size_t)p->num_params + 1, sizeof(void*));
  if (!byoff || !byname || !fresh) KAOT_TRY(kaot_oom(what));
  for (size_t i = 0; i < T.n; ++i) {
    T.e[i].name = T.names.p + T.e[i].name_off;
    byoff[i] = byname[i] = &T.e[i];
  }
  qsort(byoff, T.n, sizeof(kaot_entry*), kaot_by_offset);
  for (size_t i = 0; i < T.n; ++i) {
    const kaot_entry* e = byoff[i];
    if (e->end > src->size - data)
      KAOT_TRY(kaot_fail(KILN_AOT_E_FORMAT, "%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] run past the end of the %" PRIu64 "-byte data buffer",
                         what, kaot_q(q, e->name, e->name_len), e->begin, e->end, src->size - data));
    if (e->begin < expected)
      KAOT_TRY(kaot_fail(KILN_AOT_E_FORMAT, "%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] overlap tensor %s ([%" PRIu64 ", %" PRIu64 "])",
                         what, kaot_q(q, e->name, e->name_len), e->begin, e->end, kaot_q(t1, byoff[i - 1]->name, byoff[i - 1]->name_len),
                         byoff[i - 1]->begin, byoff[i - 1]->end));
    if (e->begin != expected)
      KAOT_TRY(kaot_fail(KILN_AOT_E_FORMAT, "%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] leave a gap: bytes [%" PRIu64 ", %" PRIu64 ") belong to no tensor",
                         what, kaot_q(q, e->name, e->name_len), e->begin, e->end, expected, e->begin));
    expected = e->end;
  }
  if (expected != src->size - data)
    KAOT_TRY(kaot_fail(KILN_AOT_E_FORMAT, "%s: the data buffer has %" PRIu64 " bytes but the tensors cover only %" PRIu64, what,
                       src->size - data, expected));

  /* Every parameter, with exactly its type; other tensors are ignored. */
  qsort(byname, T.n, sizeof(kaot_entry*), kaot_by_name);
  for (int i = 0; i < p->num_params; ++i) {
    const kiln_aot_tensor* t = &p->params[i];
    kaot_entry key, *kp = &key, **found;
    key.name = t->name;
    key.name_len = strlen(t->name);
    found = T.n ? (kaot_entry**)bsearch(&kp, byname, T.n, sizeof(kaot_entry*), kaot_by_name) : NULL;
    if (!found)
      KAOT_TRY(kaot_fail(KILN_AOT_E_FORMAT, "%s: no tensor %s: parameter %d of %s (%s) is missing", what,
                         kaot_q(q, t->name, key.name_len), i, p->name, kaot_type(t1, kaot_dtype_names[t->dtype], t->rank, t->shape)));
    const kaot_entry* e = *found;
    bool same = e->dtype == t->dtype && e->rank == t->rank;
    for (int d = 0; same && d < t->rank; ++d) same = T.dims[e->shape_off + (size_t)d] == t->shape[d];
    if (!same)
      KAOT_TRY(kaot_fail(KILN_AOT_E_FORMAT, "%s: tensor %s is %s, expected %s (parameter %d of %s)", what, kaot_q(q, t->name, key.name_len),
                         kaot_type(t1, kaot_dtype_names[e->dtype], e->rank, T.dims + e->shape_off),
                         kaot_type(t2, kaot_dtype_names[t->dtype], t->rank, t->shape), i, p->name));
    if (!(fresh[i] = kaot_alloc(t->bytes))) KAOT_TRY(kaot_oom(what));
    KAOT_TRY(kaot_read(src, data + e->begin, fresh[i], (uint64_t)t->bytes));
    for (int64_t k = 0; t->dtype == KILN_AOT_BOOL && k < t->bytes; ++k)
      if (((unsigned char*)fresh[i])[k] > 1)
        KAOT_TRY(kaot_fail(KILN_AOT_E_FORMAT, "%s: tensor %s: BOOL element %" PRId64 " has byte value %d (must be 0 or 1)", what,
                           kaot_q(q, t->name, key.name_len), k, ((unsigned char*)fresh[i])[k]));
  }
  for (int i = 0; i < p->num_params; ++i) {
    free(c->params[i]);
    c->params[i] = fresh[i];
    fresh[i] = NULL;
  }
done:
  for (int i = 0; fresh && i < p->num_params; ++i) free(fresh[i]);
  free(fresh), free(byoff), free(byname), free((void*)j.s), free(j.pool.p), free(j.keys);
  free(T.e), free(T.dims), free(T.names.p), free(T.tmp.p);
  return rc;
}

KAOT_FN int kaot_load_file(kiln_aot_context* c, const char* path) {
  char what[1100], eb[128];
  struct stat st;
  int rc, fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return kaot_fail(KILN_AOT_E_IO, "cannot open weights file '%s': %s", path, KAOT_STRERROR(errno, eb));
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    bool failed = fstat(fd, &st) != 0;
    rc = kaot_fail(KILN_AOT_E_IO, "cannot read weights file '%s': %s", path, failed ? KAOT_STRERROR(errno, eb) : "not a regular file");
    close(fd);
    return rc;
  }
  snprintf(what, sizeof what, "'%s'", path);
  kaot_src s = {fd, NULL, (uint64_t)st.st_size, what};
  rc = kaot_load(c, &s);
  close(fd);
  return rc;
}

/* ---------------------------------------------------------------- safetensors: writing */
/* As kiln's serializeSafetensors without metadata: tensors by element size (largest first), then
 * by name; compact JSON; the header padded with spaces to a multiple of 8 bytes. */

typedef struct { const kiln_aot_tensor* t; int index; } kaot_sorted;
KAOT_FN int kaot_save_order(const void* a, const void* b) {
  const kaot_sorted *x = (const kaot_sorted*)a, *y = (const kaot_sorted*)b;
  int sx = kaot_dtype_sizes[x->t->dtype], sy = kaot_dtype_sizes[y->t->dtype], r = strcmp(x->t->name, y->t->name);
  return sx != sy ? (sx > sy ? -1 : 1) : r ? r : x->index - y->index;
}

KAOT_FN int kaot_write_all(int fd, const void* buf, uint64_t n) {
  const unsigned char* s = (const unsigned char*)buf;
  while (n > 0) {
    ssize_t w = write(fd, s, n > (1u << 30) ? (1u << 30) : (size_t)n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : EIO;
    s += w, n -= (uint64_t)w;
  }
  return 0;
}

KAOT_FN int kiln_aot_save_weights(const kiln_aot_context* c, const char* path) {
  static atomic_uint counter;
  static const char digits62[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  if (!c) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_save_weights: the context is NULL");
  if (!path) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_save_weights: path is NULL");
  const kiln_aot_program* p = c->p;
  kaot_sorted* order = (kaot_sorted*)malloc(((size_t)p->num_params + 1) * sizeof(kaot_sorted));
  kaot_buf h = {0, 0, 0};
  char num[128], eb[128], *tmp = (char*)malloc(strlen(path) + 16);
  const char* step = "write failed";
  uint64_t offset = 0;
  int rc = 0, err = 0, fd = -1;
  bool oom = !order || !tmp || kaot_puts(&h, "{");
  for (int i = 0; !oom && i < p->num_params; ++i) order[i] = (kaot_sorted){&p->params[i], i};
  if (!oom) qsort(order, (size_t)p->num_params, sizeof(kaot_sorted), kaot_save_order);
  for (int i = 0; !oom && i < p->num_params; ++i) {
    const kiln_aot_tensor* t = order[i].t;
    oom = (i && kaot_puts(&h, ",")) || kaot_put_quoted(&h, t->name, strlen(t->name)) || kaot_puts(&h, ":{\"dtype\":\"") ||
          kaot_puts(&h, kaot_st_names[t->dtype]) || kaot_puts(&h, "\",\"shape\":[");
    for (int d = 0; !oom && d < t->rank; ++d) {
      snprintf(num, sizeof num, d ? ",%" PRId64 : "%" PRId64, t->shape[d]);
      oom = kaot_puts(&h, num);
    }
    snprintf(num, sizeof num, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", offset, offset + (uint64_t)t->bytes);
    oom = oom || kaot_puts(&h, num);
    offset += (uint64_t)t->bytes;
  }
  oom = oom || kaot_puts(&h, "}");
  while (!oom && h.n % 8) oom = kaot_puts(&h, " ");
  if (oom) {
    rc = kaot_fail(KILN_AOT_E_MEMORY, "cannot write '%s': out of memory", path);
    goto done;
  }
  /* A temporary file beside `path`, then renamed over it: a failed write leaves `path` intact. */
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    uint64_t r = (uint64_t)kaot_now_ns() * 0x9E3779B97F4A7C15u ^ ((uint64_t)getpid() << 32) ^ atomic_fetch_add(&counter, 1) * 0xBF58476D1CE4E5B9u;
    size_t n = (size_t)sprintf(tmp, "%s.tmp.", path);
    for (int k = 0; k < 6; ++k, r /= 62) tmp[n++] = digits62[r % 62];
    tmp[n] = 0;
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) {
      rc = kaot_fail(KILN_AOT_E_IO, "cannot write '%s': cannot create '%s': %s", path, tmp, KAOT_STRERROR(errno, eb));
      goto done;
    }
  }
  if (fd < 0) {
    rc = kaot_fail(KILN_AOT_E_IO, "cannot write '%s': no free temporary file name next to it", path);
    goto done;
  }
  unsigned char len8[8];
  for (int i = 0; i < 8; ++i) len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
  err = kaot_write_all(fd, len8, 8);
  if (!err) err = kaot_write_all(fd, h.p, h.n);
  for (int i = 0; !err && i < p->num_params; ++i) err = kaot_write_all(fd, c->params[order[i].index], (uint64_t)order[i].t->bytes);
  if (!err && fsync(fd) != 0) err = errno, step = "fsync failed";
  if (close(fd) != 0 && !err) err = errno, step = "close failed";
  if (!err && rename(tmp, path) != 0) err = errno, step = "rename failed";
  if (err) {
    unlink(tmp);
    rc = kaot_fail(KILN_AOT_E_IO, "cannot write '%s': %s: %s", path, step, KAOT_STRERROR(err, eb));
  }
done:
  free(order), free(tmp), free(h.p);
  return rc;
}

/* ---------------------------------------------------------------- the API */

KAOT_FN int kiln_aot_create(const kiln_aot_program* p, const char* weights_path, int num_threads, kiln_aot_context** out) {
  int rc, threads = num_threads;
  size_t slots = 0;
  int64_t scratch = 1;
  if (!out) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_create: out is NULL");
  *out = NULL;
  if (!p) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_create: the program is NULL");
  if ((rc = kaot_check_program(p)) || (rc = kaot_check_cpu(p))) return rc;
  if (!weights_path && !p->weights && p->num_params > 0)
    return kaot_fail(KILN_AOT_E_ARGUMENT, "this library has no embedded weights: pass a weights file (kiln aot wrote %s.safetensors beside it)", p->name);
  if (threads <= 0) {
    unsigned long mask[128];
    long got = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask);
    threads = 0;
    for (long i = 0; i < got / (long)sizeof(unsigned long); ++i) threads += __builtin_popcountl(mask[i]);
    if (threads <= 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads <= 0) threads = 1;
  }
  if (threads > 256) threads = 256;
  for (int k = 0; k < p->num_kernels; ++k) {
    const kiln_aot_kernel* K = &p->kernels[k];
    if (K->scratch_per_thread > (INT64_MAX / 2 - K->scratch_base) / threads)
      return kaot_bad(p, "kernel %d needs more scratch than memory can hold", k);
    if (K->scratch_base + threads * K->scratch_per_thread > scratch) scratch = K->scratch_base + threads * K->scratch_per_thread;
    slots += (size_t)K->num_args + 1;
  }
  kiln_aot_context* c = (kiln_aot_context*)calloc(1, sizeof(kiln_aot_context));
  if (!c) return kaot_fail(KILN_AOT_E_MEMORY, "out of memory creating a context of %s", p->name);
  c->p = p;
  c->threads = threads;
  c->params = (void**)calloc((size_t)p->num_params + 1, sizeof(void*));
  c->owned = (void**)calloc((size_t)p->num_owned + 1, sizeof(void*));
  c->staging = (void**)calloc((size_t)p->num_updates + 1, sizeof(void*));
  c->outs = (void**)calloc((size_t)p->num_outputs + 1, sizeof(void*));
  c->mode = (signed char*)calloc((size_t)p->num_updates + (size_t)p->num_owned + 1, 1);
  c->table = (void**)calloc(slots + 1, sizeof(void*));
  c->inputs = (const void**)calloc((size_t)p->num_inputs + 1, sizeof(void*));
  c->train_inputs = (const void**)calloc((size_t)p->num_inputs + 1, sizeof(void*));
  c->arena = (unsigned char*)kaot_alloc(p->arena_bytes);
  c->scratch = (unsigned char*)kaot_alloc(scratch);
  c->lr = (unsigned char*)kaot_alloc(64);
  bool oom = !c->params || !c->owned || !c->staging || !c->outs || !c->mode || !c->table || !c->inputs || !c->train_inputs ||
             !c->arena || !c->scratch || !c->lr;
  for (int i = 0; !oom && i < p->num_owned; ++i) {
    oom = !(c->owned[i] = kaot_alloc(p->owned[i].type.bytes));
    if (!oom && p->owned[i].constant_offset >= 0 && p->owned[i].type.bytes > 0)
      memcpy(c->owned[i], p->constants + p->owned[i].constant_offset, (size_t)p->owned[i].type.bytes);
  }
  for (int i = 0; !oom && i < p->num_outputs; ++i) oom = !(c->outs[i] = kaot_alloc(p->outputs[i].bytes));
  /* As Program::run: an owned update value trades places with its parameter, the first time that
   * buffer is used; every other value (not the parameter itself) is copied. */
  signed char* traded = c->mode ? c->mode + p->num_updates : NULL;
  for (int u = 0; !oom && u < p->num_updates; ++u) {
    kiln_aot_update up = p->updates[u];
    if (up.value.kind == KILN_AOT_PARAM && up.value.index == up.param) continue;
    if (up.value.kind == KILN_AOT_OWN && !traded[up.value.index]) {
      traded[up.value.index] = 1;
      c->mode[u] = 1;
      continue;
    }
    c->mode[u] = 2;
    oom = !(c->staging[u] = kaot_alloc(p->params[up.param].bytes));
  }
  if (oom) {
    kiln_aot_destroy(c);
    return kaot_fail(KILN_AOT_E_MEMORY, "out of memory creating a context of %s", p->name);
  }
  if (weights_path) rc = kaot_load_file(c, weights_path);
  else if (p->weights) {
    char what[300];
    snprintf(what, sizeof what, "the embedded weights of %s", p->name);
    kaot_src s = {-1, p->weights, (uint64_t)p->weights_bytes, what};
    rc = kaot_load(c, &s);
  }
  for (int i = 0; !rc && i < p->num_params; ++i) /* no parameters to load: an empty file */
    if (!c->params[i] && !(c->params[i] = kaot_alloc(p->params[i].bytes))) rc = kaot_oom(p->name);
  if (!rc) rc = kaot_pool_create(threads, &c->pool);
  if (rc) {
    kiln_aot_destroy(c);
    return rc;
  }
  *out = c;
  return KILN_AOT_OK;
}

KAOT_FN int kiln_aot_load_weights(kiln_aot_context* c, const char* path) {
  if (!c) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_load_weights: the context is NULL");
  if (!path) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_load_weights: path is NULL");
  return kaot_load_file(c, path);
}

/* One run: the kernels, the outputs, then the updates (copies staged before any trade). */
KAOT_FN void kaot_run(kiln_aot_context* c, const void* const* inputs, void* const* outputs) {
  const kiln_aot_program* p = c->p;
  void** table = c->table;
  for (int i = 0; i < p->num_inputs; ++i) c->inputs[i] = inputs[i];
  for (int k = 0; k < p->num_kernels; ++k) {
    const kiln_aot_kernel* K = &p->kernels[k];
    for (int a = 0; a < K->num_args; ++a) table[a] = kaot_address(c, K->args[a]);
    table[K->num_args] = c->scratch;
    K->fn(table, c->pool);
    table += K->num_args + 1;
  }
  for (int o = 0; o < p->num_outputs; ++o) {
    size_t bytes = (size_t)p->outputs[o].bytes;
    if (bytes) memcpy(c->outs[o], kaot_address(c, p->output_locs[o]), bytes);
    if (bytes && outputs && outputs[o]) memcpy(outputs[o], c->outs[o], bytes);
  }
  for (int u = 0; u < p->num_updates; ++u)
    if (c->mode[u] == 2 && p->params[p->updates[u].param].bytes)
      memcpy(c->staging[u], kaot_address(c, p->updates[u].value), (size_t)p->params[p->updates[u].param].bytes);
  for (int pass = 1; pass <= 2; ++pass)
    for (int u = 0; u < p->num_updates; ++u) {
      if (c->mode[u] != pass) continue;
      void** other = pass == 1 ? &c->owned[p->updates[u].value.index] : &c->staging[u];
      void* t = c->params[p->updates[u].param];
      c->params[p->updates[u].param] = *other;
      *other = t;
    }
  for (int i = 0; i < p->num_inputs; ++i) c->inputs[i] = NULL;
}

KAOT_FN int kiln_aot_run(kiln_aot_context* c, const void* const* inputs, void* const* outputs) {
  if (!c) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_run: the context is NULL");
  const kiln_aot_program* p = c->p;
  if (!inputs && p->num_inputs > 0) return kaot_fail(KILN_AOT_E_ARGUMENT, "%s run: inputs is NULL", p->name);
  for (int i = 0; i < p->num_inputs; ++i)
    if (!inputs[i]) return kaot_fail(KILN_AOT_E_ARGUMENT, "%s run: inputs[%d] (\"%s\") is NULL", p->name, i, p->inputs[i].name);
  kaot_run(c, inputs, outputs);
  return KILN_AOT_OK;
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
  const kiln_aot_program* p = c->p;
  if (p->train_batch < 0)
    return kaot_fail(KILN_AOT_E_STATE, "%s is an inference library; train_step needs one built with kiln aot --train", p->name);
  if (!batch) return kaot_fail(KILN_AOT_E_ARGUMENT, "%s train_step: batch is NULL", p->name);
  if (!labels && p->train_labels >= 0) return kaot_fail(KILN_AOT_E_ARGUMENT, "%s train_step: labels is NULL", p->name);
  for (int i = 0; i < p->num_inputs; ++i)
    if (i != p->train_batch && i != p->train_labels && i != p->train_lr)
      return kaot_fail(KILN_AOT_E_STATE, "%s train_step: input %d (\"%s\") is neither the batch, the labels nor the learning rate; use run",
                       p->name, i, p->inputs[i].name);
  float f;
  const kiln_aot_tensor* out = &p->outputs[p->train_loss];
  if (out->numel < 1 || !kaot_to_float(out->dtype, c->outs[p->train_loss], &f))
    return kaot_fail(KILN_AOT_E_STATE, "%s train_step: the loss output is %s, not a floating-point number", p->name, kaot_dtype_names[out->dtype]);
  if (p->train_lr >= 0) {
    const kiln_aot_tensor* t = &p->inputs[p->train_lr];
    uint16_t h = t->dtype == KILN_AOT_F16 ? kaot_f32_to_f16(learning_rate) : kaot_f32_to_bf16(learning_rate);
    double d = learning_rate;
    if (t->numel != 1 || (t->dtype != KILN_AOT_F32 && t->dtype != KILN_AOT_F64 && t->dtype != KILN_AOT_F16 && t->dtype != KILN_AOT_BF16))
      return kaot_fail(KILN_AOT_E_STATE, "%s train_step: the learning-rate input \"%s\" is %s[%" PRId64 " elements], not a float scalar",
                       p->name, t->name, kaot_dtype_names[t->dtype], t->numel);
    if (t->dtype == KILN_AOT_F32) memcpy(c->lr, &learning_rate, 4);
    else if (t->dtype == KILN_AOT_F64) memcpy(c->lr, &d, 8);
    else memcpy(c->lr, &h, 2);
    c->train_inputs[p->train_lr] = c->lr;
  }
  c->train_inputs[p->train_batch] = batch;
  if (p->train_labels >= 0) c->train_inputs[p->train_labels] = labels;
  kaot_run(c, c->train_inputs, NULL);
  if (loss) kaot_to_float(out->dtype, c->outs[p->train_loss], loss);
  return KILN_AOT_OK;
}

KAOT_FN const void* kiln_aot_output(const kiln_aot_context* c, int index) {
  if (!c) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_output: the context is NULL"), NULL;
  if (index < 0 || index >= c->p->num_outputs)
    return kaot_fail(KILN_AOT_E_ARGUMENT, "%s has no output %d (it has %d)", c->p->name, index, c->p->num_outputs), NULL;
  return c->outs[index];
}

KAOT_FN int kaot_find_param(const kiln_aot_context* c, const char* fn, const char* name, const void* buf, size_t bytes, int* index) {
  char q[256], t[256];
  if (!c) return kaot_fail(KILN_AOT_E_ARGUMENT, "%s: the context is NULL", fn);
  if (!name) return kaot_fail(KILN_AOT_E_ARGUMENT, "%s: name is NULL", fn);
  if (!buf) return kaot_fail(KILN_AOT_E_ARGUMENT, "%s: the buffer for %s is NULL", fn, kaot_q(q, name, strlen(name)));
  for (int i = 0; i < c->p->num_params; ++i) {
    const kiln_aot_tensor* p = &c->p->params[i];
    if (strcmp(p->name, name) != 0) continue;
    if ((uint64_t)bytes != (uint64_t)p->bytes)
      return kaot_fail(KILN_AOT_E_ARGUMENT, "%s: parameter %s is %s (%" PRId64 " bytes), not %zu bytes", fn, kaot_q(q, name, strlen(name)),
                       kaot_type(t, kaot_dtype_names[p->dtype], p->rank, p->shape), p->bytes, bytes);
    *index = i;
    return KILN_AOT_OK;
  }
  return kaot_fail(KILN_AOT_E_ARGUMENT, "%s: %s has no parameter %s", fn, c->p->name, kaot_q(q, name, strlen(name)));
}

KAOT_FN int kiln_aot_get_param(const kiln_aot_context* c, const char* name, void* dst, size_t bytes) {
  int i = 0, rc = kaot_find_param(c, "kiln_aot_get_param", name, dst, bytes, &i);
  if (!rc && bytes) memcpy(dst, c->params[i], bytes);
  return rc;
}

KAOT_FN int kiln_aot_set_param(kiln_aot_context* c, const char* name, const void* src, size_t bytes) {
  int i = 0, rc = kaot_find_param(c, "kiln_aot_set_param", name, src, bytes, &i);
  char q[256];
  for (size_t k = 0; !rc && c->p->params[i].dtype == KILN_AOT_BOOL && k < bytes; ++k)
    if (((const unsigned char*)src)[k] > 1)
      return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_set_param: bool parameter %s: element %zu has byte value %d (must be 0 or 1)",
                       kaot_q(q, name, strlen(name)), k, ((const unsigned char*)src)[k]);
  if (!rc && bytes) memcpy(c->params[i], src, bytes);
  return rc;
}

KAOT_FN int kiln_aot_threads(const kiln_aot_context* c) {
  if (!c) return kaot_fail(KILN_AOT_E_ARGUMENT, "kiln_aot_threads: the context is NULL"), 0;
  return c->threads;
}
