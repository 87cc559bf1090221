/* The CPU part of the runtime of a library written by `kiln aot` (see kiln_aot.h): pasted into
 * NAME.c after kiln_aot_common.c and kiln_aot_safetensors.c. It interprets the tables exactly as
 * kiln::cpu::Program::run does and runs the kernels on the common part's persistent thread pool
 * (kaot_pool, whose kiln_parallel_for the kernels call).
 *
 * Every name here is static. */

/* ---------------------------------------------------------------- the CPU */

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

/* ---------------------------------------------------------------- the context */

struct kiln_aot_context {
  kaot_base b; /* p, threads, lr, outs, train_inputs */
  kaot_pool* pool;
  unsigned char *arena, *scratch;
  void **params, **owned, **staging; /* staging[u]: for an update that is copied */
  signed char* mode;                 /* per update: 0 skip, 1 trade, 2 copy */
  void** table;                      /* per kernel: its arguments, then the scratch */
  const void** inputs;               /* bound for the current run */
  int keep_denormals;                /* KILN_DENORMALS=keep at create: IEEE subnormals, not flushed */
};

KAOT_FN void kiln_aot_destroy(kiln_aot_context* c) {
  if (!c) return;
  const kiln_aot_program* p = c->b.p;
  kaot_pool_destroy(c->pool);
  for (int i = 0; c->params && i < p->num_params; ++i) kaot_free(c->params[i]);
  for (int i = 0; c->owned && i < p->num_owned; ++i) kaot_free(c->owned[i]);
  for (int i = 0; c->staging && i < p->num_updates; ++i) kaot_free(c->staging[i]);
  for (int i = 0; c->b.outs && i < p->num_outputs; ++i) kaot_free(c->b.outs[i]);
  free(c->params), free(c->owned), free(c->staging), free(c->b.outs), free(c->mode), free(c->table);
  free(c->inputs), free(c->b.train_inputs), kaot_free(c->arena), kaot_free(c->scratch), kaot_free(c->b.lr);
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

/* ---------------------------------------------------------------- create and run */

KAOT_FN int kiln_aot_create(const kiln_aot_program* p, const char* weights_path, int num_threads, kiln_aot_context** out) {
  int rc, threads = num_threads;
  size_t slots = 0;
  int64_t scratch = 1;
  if ((rc = kaot_check_create(p, out)) || (rc = kaot_check_cpu(p)) || (rc = kaot_check_weights_path(p, weights_path))) return rc;
  const char* denormals = getenv("KILN_DENORMALS");
  const int keep_denormals = denormals && !strcmp(denormals, "keep");
  if (denormals && *denormals && !keep_denormals && strcmp(denormals, "flush"))
    return kaot_fail(KILN_AOT_E_ARGUMENT, "%s_create: KILN_DENORMALS is '%.64s': expected 'flush' (the default) or 'keep'",
                     p->name, denormals);
  threads = kaot_threads_for(threads);
  for (int k = 0; k < p->num_kernels; ++k) {
    const kiln_aot_kernel* K = &p->kernels[k];
    if (K->scratch_per_thread > (INT64_MAX / 2 - K->scratch_base) / threads)
      return kaot_bad(p, "kernel %d needs more scratch than memory can hold", k);
    if (K->scratch_base + threads * K->scratch_per_thread > scratch) scratch = K->scratch_base + threads * K->scratch_per_thread;
    slots += (size_t)K->num_args + 1;
  }
  kiln_aot_context* c = (kiln_aot_context*)calloc(1, sizeof(kiln_aot_context));
  if (!c) return kaot_fail(KILN_AOT_E_MEMORY, "out of memory creating a context of %s", p->name);
  c->b.p = p;
  c->b.threads = threads;
  c->keep_denormals = keep_denormals;
  c->params = (void**)calloc((size_t)p->num_params + 1, sizeof(void*));
  c->owned = (void**)calloc((size_t)p->num_owned + 1, sizeof(void*));
  c->staging = (void**)calloc((size_t)p->num_updates + 1, sizeof(void*));
  c->b.outs = (void**)calloc((size_t)p->num_outputs + 1, sizeof(void*));
  c->mode = (signed char*)calloc((size_t)p->num_updates + (size_t)p->num_owned + 1, 1);
  c->table = (void**)calloc(slots + 1, sizeof(void*));
  c->inputs = (const void**)calloc((size_t)p->num_inputs + 1, sizeof(void*));
  c->b.train_inputs = (const void**)calloc((size_t)p->num_inputs + 1, sizeof(void*));
  c->arena = (unsigned char*)kaot_alloc(p->arena_bytes);
  c->scratch = (unsigned char*)kaot_alloc(scratch);
  c->b.lr = (unsigned char*)kaot_alloc(64);
  bool oom = !c->params || !c->owned || !c->staging || !c->b.outs || !c->mode || !c->table || !c->inputs || !c->b.train_inputs ||
             !c->arena || !c->scratch || !c->b.lr;
  for (int i = 0; !oom && i < p->num_owned; ++i) {
    oom = !(c->owned[i] = kaot_alloc(p->owned[i].type.bytes));
    if (!oom && p->owned[i].constant_offset >= 0 && p->owned[i].type.bytes > 0)
      memcpy(c->owned[i], p->constants + p->owned[i].constant_offset, (size_t)p->owned[i].type.bytes);
  }
  for (int i = 0; !oom && i < p->num_outputs; ++i) oom = !(c->b.outs[i] = kaot_alloc(p->outputs[i].bytes));
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

/* One run: the kernels, the outputs, then the updates (copies staged before any trade). */
static int kaot_target_run(kiln_aot_context* c, const void* const* inputs, void* const* outputs) {
  const kiln_aot_program* p = c->b.p;
  void** table = c->table;
  for (int i = 0; i < p->num_inputs; ++i) c->inputs[i] = inputs[i];
  /* As Program::run: subnormals flushed (or kept) for the kernels, the caller's mode back after. */
  const unsigned saved = kaot_float_control();
  kaot_set_float_mode(c->keep_denormals ? saved & ~KAOT_DENORMAL_BITS : saved | KAOT_DENORMAL_BITS);
  for (int k = 0; k < p->num_kernels; ++k) {
    const kiln_aot_kernel* K = &p->kernels[k];
    for (int a = 0; a < K->num_args; ++a) table[a] = kaot_address(c, K->args[a]);
    table[K->num_args] = c->scratch;
    K->fn(table, c->pool);
    table += K->num_args + 1;
  }
  kaot_set_float_mode(saved);
  for (int o = 0; o < p->num_outputs; ++o) {
    size_t bytes = (size_t)p->outputs[o].bytes;
    if (bytes) memcpy(c->b.outs[o], kaot_address(c, p->output_locs[o]), bytes);
    if (bytes && outputs && outputs[o]) memcpy(outputs[o], c->b.outs[o], bytes);
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
  return KILN_AOT_OK;
}

/* ---------------------------------------------------------------- parameters */

static int kaot_target_take_params(kiln_aot_context* c, void** fresh) {
  for (int i = 0; i < c->b.p->num_params; ++i) {
    kaot_free(c->params[i]);
    c->params[i] = fresh[i];
    fresh[i] = NULL;
  }
  return KILN_AOT_OK;
}

static const void* kaot_target_param_bytes(const kiln_aot_context* c, int i, kaot_buf* tmp, int* rc) {
  (void)tmp;
  *rc = KILN_AOT_OK;
  return c->params[i];
}

static int kaot_target_get_param(const kiln_aot_context* c, int i, void* dst) {
  memcpy(dst, c->params[i], (size_t)c->b.p->params[i].bytes);
  return KILN_AOT_OK;
}

static int kaot_target_set_param(kiln_aot_context* c, int i, const void* src) {
  memcpy(c->params[i], src, (size_t)c->b.p->params[i].bytes);
  return KILN_AOT_OK;
}
