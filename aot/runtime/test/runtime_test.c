/* A standalone test of kiln_aot_runtime.c's programs: hand-written program tables and kernels run,
 * trained, checked for bad arguments, on 1 to 4 threads. Build and run with run.sh. */
#include "runtime_test.h"

#ifndef STRESS_RUNS
#define STRESS_RUNS 100000
#endif

/* ---------------------------------------------------------------- program "toy" */
/* x f32[N] -> tmp = x * w + c (constant); y = tmp + b; wn = w + 0.5 x; cnt += 1 in place.
 * Outputs y (arena), w (the parameter, before the updates), cnt. Updates: w <- wn (trade),
 * b <- y (copy from the arena), v <- wn (copy: wn is traded already), cnt <- cnt (skipped). */
enum { N = 1000 };
static const int64_t shape_n[1] = {N}, shape_3[1] = {3};
static const kiln_aot_tensor toy_inputs[] = {{"x", KILN_AOT_F32, 1, shape_n, N, 4 * N, 0}};
static const kiln_aot_tensor toy_params[] = {{"w", KILN_AOT_F32, 1, shape_n, N, 4 * N, 0},
                                             {"b", KILN_AOT_F32, 1, shape_n, N, 4 * N, 0},
                                             {"v", KILN_AOT_F32, 1, shape_n, N, 4 * N, 0},
                                             {"cnt", KILN_AOT_I64, 1, shape_1, 1, 8, 0},
                                             {"flag", KILN_AOT_BOOL, 1, shape_3, 3, 3, 0}};
static const kiln_aot_owned toy_owned[] = {{{"c", KILN_AOT_F32, 1, shape_n, N, 4 * N, 0}, 0},
                                           {{"wn", KILN_AOT_F32, 1, shape_n, N, 4 * N, 0}, -1}};
static _Alignas(64) float toy_constants[N];
static const kiln_aot_tensor toy_outputs[] = {{"y", KILN_AOT_F32, 1, shape_n, N, 4 * N, 0},
                                              {"w_out", KILN_AOT_F32, 1, shape_n, N, 4 * N, 0},
                                              {"cnt_out", KILN_AOT_I64, 1, shape_1, 1, 8, 0}};
#define IN(i) {KILN_AOT_INPUT, i, 0}
#define PAR(i) {KILN_AOT_PARAM, i, 0}
#define OWN(i) {KILN_AOT_OWN, i, 0}
#define ARENA(o) {KILN_AOT_ARENA, 0, o}
static const kiln_aot_loc toy_output_locs[] = {ARENA(4032), PAR(0), PAR(3)};
static const kiln_aot_update toy_updates[] = {{0, OWN(1)}, {1, ARENA(4032)}, {2, OWN(1)}, {3, PAR(3)}};
static const kiln_aot_loc k0_args[] = {IN(0), PAR(0), OWN(0), ARENA(0)};
static const kiln_aot_loc k1_args[] = {ARENA(0), PAR(1), ARENA(4032), PAR(0), IN(0), OWN(1)};
static const kiln_aot_loc k2_args[] = {PAR(3)};
static int toy_threads; /* what the kernels expect the scratch to be sized for */

typedef struct { float** b; } toy_ctx;
static void k0_chunk(void* ctx, int64_t b, int64_t e) {
  float** v = ((toy_ctx*)ctx)->b;
  for (int64_t i = b; i < e; ++i) v[3][i] = v[0][i] * v[1][i] + v[2][i];
}
static void k0(void** bufs, void* pool) {
  for (int i = 1; i < 5; ++i) CHECK((uintptr_t)bufs[i] % 64 == 0); /* bufs[0] is the caller's input */
  toy_ctx c = {(float**)bufs};
  kiln_parallel_for(pool, 0, N, 64, k0_chunk, &c);
}
static void k1_chunk(void* ctx, int64_t b, int64_t e) {
  float** v = ((toy_ctx*)ctx)->b;
  for (int64_t i = b; i < e; ++i) {
    v[2][i] = v[0][i] + v[1][i];
    v[5][i] = v[3][i] + 0.5f * v[4][i];
  }
}
static void k1(void** bufs, void* pool) {
  toy_ctx c = {(float**)bufs};
  kiln_parallel_for(pool, 0, N, 100, k1_chunk, &c);
}
static void k2(void** bufs, void* pool) {
  (void)pool;
  ((int64_t*)bufs[0])[0] += 1;
  memset(bufs[1], 0xab, (size_t)(128 + toy_threads * 64)); /* the whole scratch (ASan checks the size) */
}
static const kiln_aot_kernel toy_kernels[] = {{"k0_mul_add", k0, 4, k0_args, 0, 0},
                                              {"k1_add", k1, 6, k1_args, 0, 0},
                                              {"k2_count", k2, 1, k2_args, 128, 64}};
static kiln_aot_program toy = {"toy", 1, toy_inputs, 3, toy_outputs, toy_output_locs, 5, toy_params, 4, toy_updates,
                               2, toy_owned, (const unsigned char*)toy_constants, 8064, 3, toy_kernels, NULL, 0,
                               "avx-bogus,sse2", -1, -1, -1, -1};

/* The toy's weights as kiln's writer lays them out: I64 first, then F32 by name, then BOOL. */
static unsigned char toy_file[16384];
static size_t toy_file_len;
static float ref_w[N], ref_b[N], ref_v[N];
static int64_t ref_cnt;
static void make_toy_file(void) {
  static unsigned char data[12011];
  ref_cnt = 41;
  for (int i = 0; i < N; ++i) {
    ref_w[i] = (float)i * 0.001f - 0.3f;
    ref_b[i] = (float)(i % 7) - 3.0f;
    ref_v[i] = 1.0f / (float)(i + 1);
    toy_constants[i] = (float)i * 0.25f;
  }
  memcpy(data, &ref_cnt, 8);
  memcpy(data + 8, ref_b, 4000);
  memcpy(data + 4008, ref_v, 4000);
  memcpy(data + 8008, ref_w, 4000);
  data[12008] = 1, data[12009] = 0, data[12010] = 1;
  toy_file_len = build_st(toy_file,
                          "{\"cnt\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                          "\"b\":{\"dtype\":\"F32\",\"shape\":[1000],\"data_offsets\":[8,4008]},"
                          "\"v\":{\"dtype\":\"F32\",\"shape\":[1000],\"data_offsets\":[4008,8008]},"
                          "\"w\":{\"dtype\":\"F32\",\"shape\":[1000],\"data_offsets\":[8008,12008]},"
                          "\"flag\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[12008,12011]}}",
                          true, data, sizeof data);
}

static bool param_is(kiln_aot_context* c, const char* name, const void* want, size_t bytes) {
  static unsigned char got[8192];
  return kiln_aot_get_param(c, name, got, bytes) == KILN_AOT_OK && memcmp(got, want, bytes) == 0;
}

static void test_toy_runs(int threads) {
  kiln_aot_context* c = NULL;
  toy_threads = threads;
  write_bytes(tmpfile_("toy.safetensors"), toy_file, toy_file_len);
  CHECK(kiln_aot_create(&toy, tmpfile_("toy.safetensors"), threads, &c) == KILN_AOT_OK && c);
  if (!c) return;
  CHECK(kiln_aot_threads(c) == threads);
  float w[N], b[N], v[N], x[N], y[N], wn[N], y_out[N], w_out[N];
  int64_t cnt = ref_cnt, cnt_out = 0;
  memcpy(w, ref_w, sizeof w), memcpy(b, ref_b, sizeof b), memcpy(v, ref_v, sizeof v);
  for (int step = 0; step < 4; ++step) {
    for (int i = 0; i < N; ++i) x[i] = (float)((i * 13 + step * 7) % 17) * 0.125f - 1.0f;
    for (int i = 0; i < N; ++i) {
      y[i] = (x[i] * w[i] + toy_constants[i]) + b[i];
      wn[i] = w[i] + 0.5f * x[i];
    }
    const void* ins[1] = {x};
    void* outs[3] = {y_out, step == 1 ? NULL : w_out, &cnt_out};
    CHECK(kiln_aot_run(c, ins, step == 2 ? NULL : outs) == KILN_AOT_OK);
    ++cnt;
    if (step != 2) {
      CHECK(memcmp(y_out, y, sizeof y) == 0);
      if (step != 1) CHECK(memcmp(w_out, w, sizeof w) == 0);
      CHECK(cnt_out == cnt);
    }
    CHECK(memcmp(kiln_aot_output(c, 0), y, sizeof y) == 0);
    CHECK(memcmp(kiln_aot_output(c, 1), w, sizeof w) == 0);
    memcpy(w, wn, sizeof w), memcpy(b, y, sizeof b), memcpy(v, wn, sizeof v);
    CHECK(param_is(c, "w", w, sizeof w) && param_is(c, "b", b, sizeof b) && param_is(c, "v", v, sizeof v));
    CHECK(param_is(c, "cnt", &cnt, 8));
  }
  /* get/set */
  unsigned char flag[3] = {0, 1, 1}, bad[3] = {0, 2, 1};
  CHECK(kiln_aot_set_param(c, "flag", flag, 3) == KILN_AOT_OK && param_is(c, "flag", flag, 3));
  EXPECT_FAIL(kiln_aot_set_param(c, "flag", bad, 3), KILN_AOT_E_ARGUMENT, "byte value 2");
  EXPECT_FAIL(kiln_aot_set_param(c, "w", w, 12), KILN_AOT_E_ARGUMENT, "\"w\" is f32[1000] (4000 bytes), not 12 bytes");
  EXPECT_FAIL(kiln_aot_get_param(c, "nope", w, 4000), KILN_AOT_E_ARGUMENT, "toy_get_param: no parameter \"nope\"");
  CHECK(param_is(c, "flag", flag, 3));
  kiln_aot_destroy(c);
}

/* ---------------------------------------------------------------- arguments and programs */

static void test_arguments(void) {
  write_bytes(tmpfile_("names_out.safetensors"), names_file, names_file_len);
  kiln_aot_context* c = (kiln_aot_context*)1;
  float x[N], out[N];
  EXPECT_FAIL(kiln_aot_create(&toy, NULL, 1, NULL), KILN_AOT_E_ARGUMENT, "out is NULL");
  EXPECT_FAIL(kiln_aot_create(NULL, NULL, 1, &c), KILN_AOT_E_ARGUMENT, "the program is NULL");
  CHECK(c == NULL);
  EXPECT_FAIL(kiln_aot_create(&toy, tmpfile_("nothere"), 1, &c), KILN_AOT_E_IO, "nothere': No such file");
  EXPECT_FAIL(kiln_aot_run(NULL, NULL, NULL), KILN_AOT_E_ARGUMENT, "context is NULL");
  EXPECT_FAIL(kiln_aot_train_step(NULL, x, x, 0.1f, NULL), KILN_AOT_E_ARGUMENT, "context is NULL");
  EXPECT_FAIL(kiln_aot_load_weights(NULL, "x"), KILN_AOT_E_ARGUMENT, "context is NULL");
  EXPECT_FAIL(kiln_aot_save_weights(NULL, "x"), KILN_AOT_E_ARGUMENT, "context is NULL");
  EXPECT_FAIL(kiln_aot_get_param(NULL, "w", x, 4), KILN_AOT_E_ARGUMENT, "context is NULL");
  EXPECT_FAIL(kiln_aot_set_param(NULL, "w", x, 4), KILN_AOT_E_ARGUMENT, "context is NULL");
  CHECK(kiln_aot_output(NULL, 0) == NULL && strstr(kiln_aot_error(), "context is NULL"));
  CHECK(kiln_aot_threads(NULL) == 0);
  kiln_aot_destroy(NULL);
  toy_threads = 3;
  write_bytes(tmpfile_("toy.safetensors"), toy_file, toy_file_len);
  CHECK(kiln_aot_create(&toy, tmpfile_("toy.safetensors"), 3, &c) == KILN_AOT_OK);
  const void* ins[1] = {NULL};
  EXPECT_FAIL(kiln_aot_run(c, NULL, NULL), KILN_AOT_E_ARGUMENT, "inputs is NULL");
  EXPECT_FAIL(kiln_aot_run(c, ins, NULL), KILN_AOT_E_ARGUMENT, "inputs[0] (\"x\") is NULL");
  EXPECT_FAIL(kiln_aot_train_step(c, x, x, 0.1f, NULL), KILN_AOT_E_STATE,
              "toy is an inference library; train_step needs one built with kiln aot --train");
  EXPECT_FAIL(kiln_aot_load_weights(c, NULL), KILN_AOT_E_ARGUMENT, "path is NULL");
  EXPECT_FAIL(kiln_aot_save_weights(c, NULL), KILN_AOT_E_ARGUMENT, "path is NULL");
  EXPECT_FAIL(kiln_aot_get_param(c, NULL, x, 4), KILN_AOT_E_ARGUMENT, "name is NULL");
  EXPECT_FAIL(kiln_aot_get_param(c, "w", NULL, 4000), KILN_AOT_E_ARGUMENT, "buffer for \"w\" is NULL");
  EXPECT_FAIL(kiln_aot_set_param(c, "w", NULL, 4000), KILN_AOT_E_ARGUMENT, "buffer for \"w\" is NULL");
  CHECK(kiln_aot_output(c, 3) == NULL && strstr(kiln_aot_error(), "toy has no output 3 (it has 3)"));
  CHECK(kiln_aot_output(c, -1) == NULL);
  for (int i = 0; i < N; ++i) x[i] = 1;
  ins[0] = x;
  void* outs[3] = {out, NULL, NULL};
  CHECK(kiln_aot_run(c, ins, outs) == KILN_AOT_OK && out[5] == (1 * ref_w[5] + toy_constants[5]) + ref_b[5]);
  /* a load from a file that lacks a parameter leaves everything as it was */
  CHECK(kiln_aot_save_weights(c, tmpfile_("toy_saved.safetensors")) == KILN_AOT_OK);
  EXPECT_FAIL(kiln_aot_load_weights(c, tmpfile_("names_out.safetensors")), KILN_AOT_E_FORMAT, "no tensor \"w\"");
  CHECK(kiln_aot_save_weights(c, tmpfile_("toy_saved2.safetensors")) == KILN_AOT_OK);
  static unsigned char a[16384];
  size_t na = read_bytes(tmpfile_("toy_saved.safetensors"), a, sizeof a);
  expect_same_file(tmpfile_("toy_saved2.safetensors"), a, na);
  kiln_aot_destroy(c);
  /* malformed tables and CPU features */
  kiln_aot_program bad = toy;
  bad.num_params = -1;
  EXPECT_FAIL(kiln_aot_create(&bad, NULL, 1, &c), KILN_AOT_E_ARGUMENT, "malformed program tables in toy");
  kiln_aot_loc locs[3] = {ARENA(8000), PAR(0), PAR(3)};
  bad = toy;
  bad.output_locs = locs;
  EXPECT_FAIL(kiln_aot_create(&bad, NULL, 1, &c), KILN_AOT_E_ARGUMENT, "output 0: location");
  bad = toy;
  bad.cpu_features = "avx512f,avx2,amx-tile,amx-bf16,fma,f16c,avx512bw,avx512vl,avx512dq,avx512bf16,avx";
  int rc = kiln_aot_create(&bad, tmpfile_("toy.safetensors"), 1, &c);
  CHECK(rc == KILN_AOT_OK || (rc == KILN_AOT_E_CPU && strstr(kiln_aot_error(), "this CPU lacks ")));
  printf("  all features: %s\n", rc == KILN_AOT_OK ? "present" : kiln_aot_error());
  if (rc == KILN_AOT_OK) kiln_aot_destroy(c);
  bad.cpu_features = "avx2";
  rc = kiln_aot_create(&bad, tmpfile_("toy.safetensors"), 1, &c);
  CHECK((rc == KILN_AOT_OK) == (__builtin_cpu_supports("avx2") != 0));
  if (rc == KILN_AOT_OK) kiln_aot_destroy(c);
  bad.cpu_features = "avx512f";
  rc = kiln_aot_create(&bad, tmpfile_("toy.safetensors"), 1, &c);
  CHECK((rc == KILN_AOT_OK) == (__builtin_cpu_supports("avx512f") != 0));
  if (rc == KILN_AOT_OK) kiln_aot_destroy(c);
  /* thread counts */
  CHECK(kiln_aot_create(&toy, tmpfile_("toy.safetensors"), 0, &c) == KILN_AOT_OK);
  CHECK(kiln_aot_threads(c) >= 1 && kiln_aot_threads(c) <= sysconf(_SC_NPROCESSORS_ONLN));
  kiln_aot_destroy(c);
  CHECK(kiln_aot_create(&names, tmpfile_("names_out.safetensors"), 1000, &c) == KILN_AOT_OK && kiln_aot_threads(c) == 256);
  kiln_aot_destroy(c);
}

/* ---------------------------------------------------------------- program "trainer" */

static const int64_t shape_4[1] = {4};
static kiln_aot_tensor train_inputs[4] = {{"batch", KILN_AOT_F32, 1, shape_4, 4, 16, 0},
                                          {"labels", KILN_AOT_F32, 1, shape_4, 4, 16, 0},
                                          {"lr", KILN_AOT_F32, 0, NULL, 1, 4, 0},
                                          {"extra", KILN_AOT_F32, 0, NULL, 1, 4, 0}};
static kiln_aot_tensor train_outputs[1] = {{"loss", KILN_AOT_F32, 0, NULL, 1, 4, 0}};
static const kiln_aot_tensor train_params[1] = {{"w", KILN_AOT_F32, 1, shape_4, 4, 16, 0}};
static kiln_aot_owned train_owned[2] = {{{"w_new", KILN_AOT_F32, 1, shape_4, 4, 16, 0}, -1}, {{"loss", KILN_AOT_F32, 0, NULL, 1, 4, 0}, -1}};
static const kiln_aot_loc train_output_locs[1] = {OWN(1)};
static const kiln_aot_update train_updates[1] = {{0, OWN(0)}};
static const kiln_aot_loc kt_args[6] = {IN(0), IN(1), IN(2), PAR(0), OWN(0), OWN(1)};
static uint64_t g_lr_bits;
static void store_as(int dtype, void* dst, float v) {
  double d = v;
  uint16_t h = dtype == KILN_AOT_F16 ? kaot_f32_to_f16(v) : kaot_f32_to_bf16(v);
  if (dtype == KILN_AOT_F32) memcpy(dst, &v, 4);
  else if (dtype == KILN_AOT_F64) memcpy(dst, &d, 8);
  else memcpy(dst, &h, 2);
}
static void kt(void** bufs, void* pool) {
  (void)pool;
  float lr = 0, loss = 0, *b = (float*)bufs[0], *l = (float*)bufs[1], *w = (float*)bufs[3], *wn = (float*)bufs[4];
  g_lr_bits = 0;
  memcpy(&g_lr_bits, bufs[2], (size_t)kaot_dtype_sizes[train_inputs[2].dtype]);
  CHECK(kaot_to_float(train_inputs[2].dtype, bufs[2], &lr));
  for (int i = 0; i < 4; ++i) {
    float r = w[i] * b[i] - l[i];
    loss += r * r;
    wn[i] = w[i] - lr * (2 * r * b[i]);
  }
  store_as(train_outputs[0].dtype, bufs[5], loss);
}
static const kiln_aot_kernel train_kernels[1] = {{"k0_step", kt, 6, kt_args, 0, 0}};
static unsigned char train_file[256];
static kiln_aot_program trainer = {"trainer", 3, train_inputs, 1, train_outputs, train_output_locs, 1, train_params, 1,
                                   train_updates, 2, train_owned, NULL, 0, 1, train_kernels, train_file, 0, "", 0, 1, 2, 0};


static void test_train(void) {
  static const int dts[4] = {KILN_AOT_F32, KILN_AOT_F64, KILN_AOT_F16, KILN_AOT_BF16};
  float w0[4] = {0.5f, -1.0f, 2.0f, 0.25f}, batch[4] = {1, 2, 3, 4}, labels[4] = {0.5f, 0.5f, 0.5f, 0.5f};
  trainer.weights_bytes = (int64_t)build_st(train_file, "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", true, w0, 16);
  for (int li = 0; li < 4; ++li)
    for (int oi = 0; oi < 4; ++oi) {
      int ldt = dts[li], odt = dts[oi];
      int64_t osize = kaot_dtype_sizes[odt];
      train_inputs[2].dtype = ldt;
      train_inputs[2].bytes = kaot_dtype_sizes[ldt];
      train_outputs[0].dtype = train_owned[1].type.dtype = odt;
      train_outputs[0].bytes = train_owned[1].type.bytes = osize;
      kiln_aot_context* c = NULL;
      CHECK(kiln_aot_create(&trainer, NULL, 2, &c) == KILN_AOT_OK);
      if (!c) continue;
      float w[4], lr_used = 0, loss = -1;
      unsigned char lr_bytes[8];
      memcpy(w, w0, 16);
      store_as(ldt, lr_bytes, 0.1f);
      kaot_to_float(ldt, lr_bytes, &lr_used);
      for (int step = 0; step < 3; ++step) {
        float want = 0, wn[4];
        unsigned char lb[8];
        for (int i = 0; i < 4; ++i) {
          float r = w[i] * batch[i] - labels[i];
          want += r * r;
          wn[i] = w[i] - lr_used * (2 * r * batch[i]);
        }
        store_as(odt, lb, want);
        kaot_to_float(odt, lb, &want);
        CHECK(kiln_aot_train_step(c, batch, labels, 0.1f, step == 1 ? NULL : &loss) == KILN_AOT_OK);
        CHECK(step == 1 || loss == want);
        CHECK(memcmp(&g_lr_bits, lr_bytes, (size_t)kaot_dtype_sizes[ldt]) == 0);
        memcpy(w, wn, 16);
        CHECK(param_is(c, "w", w, 16));
      }
      EXPECT_FAIL(kiln_aot_train_step(c, NULL, labels, 0.1f, &loss), KILN_AOT_E_ARGUMENT, "batch is NULL");
      EXPECT_FAIL(kiln_aot_train_step(c, batch, NULL, 0.1f, &loss), KILN_AOT_E_ARGUMENT, "labels is NULL");
      kiln_aot_destroy(c);
    }
  train_inputs[2] = (kiln_aot_tensor){"lr", KILN_AOT_F32, 0, NULL, 1, 4, 0};
  train_outputs[0] = train_owned[1].type = (kiln_aot_tensor){"loss", KILN_AOT_F32, 0, NULL, 1, 4, 0};
  kiln_aot_program extra = trainer;
  extra.num_inputs = 4;
  kiln_aot_context* c = NULL;
  CHECK(kiln_aot_create(&extra, NULL, 1, &c) == KILN_AOT_OK);
  float x[4] = {0};
  EXPECT_FAIL(kiln_aot_train_step(c, x, x, 0.1f, NULL), KILN_AOT_E_STATE, "input 3 (\"extra\") is neither");
  kiln_aot_destroy(c);
}

/* ---------------------------------------------------------------- the pool */

static kiln_aot_program empty = {"empty", 0, NULL, 0, NULL, NULL, 0, NULL, 0, NULL, 0, NULL, NULL, 0, 0, NULL,
                                 NULL, 0, NULL, -1, -1, -1, -1};
typedef struct { int64_t b, e; pthread_t t; } rec;
static rec recs[512];
static atomic_int nrec;
static void rec_fn(void* ctx, int64_t b, int64_t e) {
  (void)ctx;
  int i = atomic_fetch_add(&nrec, 1);
  if (i < 512) recs[i] = (rec){b, e, pthread_self()};
}
static int by_begin(const void* a, const void* b) {
  const rec *x = (const rec*)a, *y = (const rec*)b;
  return x->b < y->b ? -1 : x->b > y->b;
}

static void check_partition(kaot_pool* pool, int64_t begin, int64_t end, int64_t grain) {
  atomic_store(&nrec, 0);
  kiln_parallel_for(pool, begin, end, grain, rec_fn, NULL);
  int n = atomic_load(&nrec);
  if (end <= begin) {
    CHECK(n == 0);
    return;
  }
  /* A negative grain: the whole range inline on the caller. */
  uint64_t size = (uint64_t)end - (uint64_t)begin, g = grain > 1 ? (uint64_t)grain : 1;
  uint64_t chunks = grain < 0 ? 1 : size / g;
  if (chunks > (uint64_t)pool->threads) chunks = (uint64_t)pool->threads;
  if (chunks < 2) {
    CHECK(n == 1 && recs[0].b == begin && recs[0].e == end && pthread_equal(recs[0].t, pthread_self()));
    return;
  }
  CHECK((uint64_t)n == chunks);
  qsort(recs, (size_t)n, sizeof(rec), by_begin);
  uint64_t base = size / chunks, extra = size % chunks;
  for (uint64_t i = 0; i < chunks && i < (uint64_t)n; ++i) {
    uint64_t off = i * base + (i < extra ? i : extra), len = base + (i < extra);
    bool ok = recs[i].b == (int64_t)((uint64_t)begin + off) && recs[i].e == (int64_t)((uint64_t)begin + off + len);
    ok = ok && pthread_equal(recs[i].t, i == 0 ? pthread_self() : pool->tids[i - 1]);
    if (!ok) {
      fprintf(stderr, "partition of [%" PRId64 ", %" PRId64 ") grain %" PRId64 " on %d threads: chunk %" PRIu64 " is [%" PRId64 ", %" PRId64 ")\n",
              begin, end, grain, pool->threads, i, recs[i].b, recs[i].e);
      ++failures;
    }
  }
}

static atomic_int nested_bad, nested_calls;
static kaot_pool* nested_pool;
static void inner_fn(void* ctx, int64_t b, int64_t e) {
  if (b != 0 || e != 100 || !pthread_equal(*(pthread_t*)ctx, pthread_self())) atomic_fetch_add(&nested_bad, 1);
  atomic_fetch_add(&nested_calls, 1);
}
static void outer_fn(void* ctx, int64_t b, int64_t e) {
  (void)ctx, (void)b, (void)e;
  pthread_t self = pthread_self();
  kiln_parallel_for(nested_pool, 0, 100, 1, inner_fn, &self);
}

typedef struct { kaot_pool* pool; unsigned char seen[1000]; int bad; } busy_arg;
static void busy_fn(void* ctx, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) ((busy_arg*)ctx)->seen[i]++;
}
static void* busy_thread(void* arg) {
  busy_arg* a = (busy_arg*)arg;
  for (int r = 1; r <= 200; ++r) {
    kiln_parallel_for(a->pool, 0, 1000, 1, busy_fn, a);
    for (int i = 0; i < 1000; ++i) a->bad += a->seen[i] != (unsigned char)r;
  }
  return NULL;
}

typedef struct { int64_t v[2]; int64_t iter; } stress_arg;
static void stress_fn(void* ctx, int64_t b, int64_t e) {
  stress_arg* s = (stress_arg*)ctx;
  for (int64_t i = b; i < e; ++i) s->v[i] = s->iter;
}

static void test_pool(void) {
  static const int64_t begins[] = {0, -5, 100, INT64_MIN, INT64_MAX - 5000};
  static const int64_t sizes[] = {0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 63, 64, 65, 100, 1000, 1001, 4096};
  static const int64_t grains[] = {-3, -1, 0, 1, 2, 3, 7, 64, 1000, INT64_MIN};
  for (int t = 1; t <= 4; ++t) {
    kiln_aot_context* c = NULL;
    CHECK(kiln_aot_create(&empty, NULL, t, &c) == KILN_AOT_OK);
    if (!c) continue;
    for (size_t bi = 0; bi < 5; ++bi)
      for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; ++si)
        for (size_t gi = 0; gi < sizeof grains / sizeof grains[0]; ++gi)
          check_partition(c->pool, begins[bi], begins[bi] + sizes[si], grains[gi]);
    check_partition(c->pool, 10, 5, 1);
    check_partition(c->pool, INT64_MIN, INT64_MAX, 1);
    check_partition(c->pool, INT64_MIN, INT64_MAX, INT64_MAX);
    check_partition(c->pool, INT64_MIN, INT64_MAX, INT64_MAX / 3);
    /* nested calls run inline, on whichever thread runs the outer chunk */
    nested_pool = c->pool;
    atomic_store(&nested_calls, 0);
    kiln_parallel_for(c->pool, 0, 4, 1, outer_fn, NULL);
    CHECK(atomic_load(&nested_calls) == t && atomic_load(&nested_bad) == 0);
    /* a NULL pool runs inline */
    atomic_store(&nrec, 0);
    kiln_parallel_for(NULL, 3, 9, 1, rec_fn, NULL);
    CHECK(atomic_load(&nrec) == 1 && recs[0].b == 3 && recs[0].e == 9);
    /* two threads sharing one pool: one of them runs inline while the other's job is in flight */
    busy_arg a[2];
    pthread_t th[2];
    for (int k = 0; k < 2; ++k) {
      memset(&a[k], 0, sizeof a[k]);
      a[k].pool = c->pool;
      pthread_create(&th[k], NULL, busy_thread, &a[k]);
    }
    for (int k = 0; k < 2; ++k) {
      pthread_join(th[k], NULL);
      CHECK(a[k].bad == 0);
    }
    kiln_aot_destroy(c);
  }
  /* many tiny two-thread jobs, with pauses now and then so that the workers fall asleep */
  kiln_aot_context* c = NULL;
  CHECK(kiln_aot_create(&empty, NULL, 2, &c) == KILN_AOT_OK);
  stress_arg s = {{0, 0}, 0};
  int bad = 0;
  for (int64_t i = 1; i <= STRESS_RUNS; ++i) {
    s.iter = i;
    kiln_parallel_for(c->pool, 0, 2, 1, stress_fn, &s);
    bad += s.v[0] != i || s.v[1] != i;
    if (i % 10000 == 0) usleep(300);
  }
  CHECK(bad == 0);
  kiln_aot_destroy(c);
}

/* A job with a negative grain (awake workers only, in kiln's pool) runs inline here, in one piece,
 * whether the worker is parked or polling. */
static void test_awake_only(void) {
  kiln_aot_context* c = NULL;
  CHECK(kiln_aot_create(&empty, NULL, 2, &c) == KILN_AOT_OK);
  if (!c) return;
  kaot_pool* p = c->pool;
  for (int k = 0; k < 200; ++k) {
    if (k % 50 == 0) usleep(2000); /* parked */
    else kiln_parallel_for(p, 0, 2, 1, rec_fn, NULL); /* polling */
    atomic_store(&nrec, 0);
    kiln_parallel_for(p, 0, 10, -1, rec_fn, NULL);
    CHECK(atomic_load(&nrec) == 1 && recs[0].b == 0 && recs[0].e == 10 && pthread_equal(recs[0].t, pthread_self()));
  }
  kiln_aot_destroy(c);
}

static void test_cycles(void) {
  float x[N], y[N];
  for (int i = 0; i < N; ++i) x[i] = (float)i;
  write_bytes(tmpfile_("toy.safetensors"), toy_file, toy_file_len);
  for (int t = 1; t <= 4; ++t)
    for (int k = 0; k < 20; ++k) {
      kiln_aot_context* c = NULL;
      toy_threads = t;
      CHECK(kiln_aot_create(&toy, tmpfile_("toy.safetensors"), t, &c) == KILN_AOT_OK);
      const void* ins[1] = {x};
      void* outs[3] = {y, NULL, NULL};
      for (int r = 0; r < k % 3; ++r) CHECK(kiln_aot_run(c, ins, outs) == KILN_AOT_OK);
      if (k % 3 == 1) CHECK(y[7] == (x[7] * ref_w[7] + toy_constants[7]) + ref_b[7]);
      kiln_aot_destroy(c);
    }
  /* many runs of the toy on two threads (the kernels' jobs have 2 chunks) */
  kiln_aot_context* c = NULL;
  toy_threads = 2;
  CHECK(kiln_aot_create(&toy, tmpfile_("toy.safetensors"), 2, &c) == KILN_AOT_OK);
  const void* ins[1] = {x};
  for (int r = 0; r < STRESS_RUNS / 50; ++r) kiln_aot_run(c, ins, NULL);
  int64_t cnt = 0;
  CHECK(kiln_aot_get_param(c, "cnt", &cnt, 8) == KILN_AOT_OK && cnt == ref_cnt + STRESS_RUNS / 50);
  kiln_aot_destroy(c);
}

/* KILN_GUARD_PAGES=1 (run.sh's second -O2 run; ctest sets it for every run): kaot_alloc's buffers
 * are zeroed, whole to their rounded end, and a write one byte past that faults. */
static void test_guard_pages(void) {
  if (!kaot_guard_pages()) return;
  for (int64_t n = 1; n <= 8192; n = n * 3 + 1) {
    unsigned char* p = (unsigned char*)kaot_alloc(n);
    const int64_t rounded = n < 64 ? 64 : (n + 63) / 64 * 64;
    CHECK(p && (uintptr_t)p % 64 == 0);
    for (int64_t i = 0; p && i < rounded; ++i) CHECK(p[i] == 0);
    if (p) memset(p, 0x5a, (size_t)rounded);
    pid_t child = fork();
    if (child == 0) {
      int quiet = open("/dev/null", O_WRONLY); /* a sanitizer's report of the fault is expected */
      if (quiet >= 0) dup2(quiet, 2);
      ((volatile unsigned char*)p)[rounded] = 1;
      _exit(0);
    }
    int status = 0;
    /* SIGSEGV, or under a sanitizer its report and a failing exit */
    CHECK(child > 0 && waitpid(child, &status, 0) == child && !(WIFEXITED(status) && WEXITSTATUS(status) == 0));
    kaot_free(p);
  }
}

int main(void) {
  if (begin_tests("aotrt_test")) return 1;
  make_toy_file();
  for (int t = 1; t <= 4; ++t) printf("toy, %d threads\n", t), test_toy_runs(t);
  printf("arguments\n"), test_arguments();
  printf("train_step\n"), test_train();
  printf("pool\n"), test_pool();
  printf("awake-only jobs\n"), test_awake_only();
  printf("create/destroy cycles\n"), test_cycles();
  printf("guard pages: %s\n", kaot_guard_pages() ? "on" : "off (KILN_GUARD_PAGES unset)"), test_guard_pages();
  return finish_tests();
}
