/* What the standalone tests of kiln_aot_runtime.c share (runtime_test.c: programs, runs, threads;
 * runtime_files_test.c: the weights files): the runtime itself (one translation unit with each
 * test), checks, a scratch directory, safetensors files built by hand and the program "names",
 * whose parameters cover every dtype and awkward names. Build and run with run.sh. */
#pragma once
#define _DEFAULT_SOURCE 1
#include "../kiln_aot.h"
#include "../kiln_aot_runtime.c"

#include <dirent.h>
#include <sys/wait.h>

static int failures;
#define CHECK(c)                                                                                       \
  do {                                                                                                 \
    if (!(c)) {                                                                                        \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, #c, kiln_aot_error()); \
      ++failures;                                                                                      \
    }                                                                                                  \
  } while (0)
/* `expr` fails with `code` and a message containing `text`. */
#define EXPECT_FAIL(expr, code, text)                                                                    \
  do {                                                                                                   \
    kaot_error_text[0] = 0;                                                                              \
    int rc_ = (expr);                                                                                    \
    if (rc_ != (code) || !strstr(kiln_aot_error(), (text))) {                                            \
      fprintf(stderr, "%s:%d: %s: got %d '%s', expected %d with '%s'\n", __FILE__, __LINE__, #expr, rc_, \
              kiln_aot_error(), (code), (text));                                                         \
      ++failures;                                                                                        \
    }                                                                                                    \
  } while (0)

static char dir[256];
static inline const char* tmpfile_(const char* name) {
  static char paths[8][512];
  static int next;
  char* p = paths[next++ % 8];
  snprintf(p, 512, "%s/%s", dir, name);
  return p;
}

/* ---------------------------------------------------------------- files by hand */

/* 8-byte length, `json` (padded with spaces to a multiple of 8 when `pad`), then `data`. */
static inline size_t build_st(unsigned char* out, const char* json, bool pad, const void* data, size_t data_len) {
  size_t n = strlen(json), padded = pad ? (n + 7) / 8 * 8 : n;
  for (int i = 0; i < 8; ++i) out[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  memcpy(out + 8, json, n);
  memset(out + 8 + n, ' ', padded - n);
  memcpy(out + 8 + padded, data, data_len);
  return 8 + padded + data_len;
}
static inline void write_bytes(const char* path, const void* b, size_t n) {
  FILE* f = fopen(path, "wb");
  CHECK(f && fwrite(b, 1, n, f) == n);
  if (f) fclose(f);
}
static inline size_t read_bytes(const char* path, unsigned char* b, size_t cap) {
  FILE* f = fopen(path, "rb");
  size_t n = f ? fread(b, 1, cap, f) : 0;
  if (f) fclose(f);
  return n;
}

/* ---------------------------------------------------------------- program "names": the writer */

static const int64_t shape_1[1] = {1}, shape_2[1] = {2}, shape_0[1] = {0}, shape_20[2] = {2, 0};
static const kiln_aot_tensor names_params[] = {{"zeta", KILN_AOT_I32, 2, shape_20, 0, 0, 0},
                                               {"a", KILN_AOT_F64, 1, shape_1, 1, 8, 0},
                                               {"s\"q\n\x01", KILN_AOT_F32, 0, NULL, 1, 4, 0},
                                               {"h\xc3\xa9", KILN_AOT_BF16, 1, shape_2, 2, 4, 0},
                                               {"flag", KILN_AOT_BOOL, 1, shape_2, 2, 2, 0},
                                               {"i", KILN_AOT_I64, 1, shape_0, 0, 0, 0}};
static kiln_aot_program names = {"names", 0, NULL, 0, NULL, NULL, 6, names_params, 0, NULL, 0, NULL, NULL, 0, 0, NULL,
                                 NULL, 0, NULL, -1, -1, -1, -1};
static const char names_json[] =
    "{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
    "\"i\":{\"dtype\":\"I64\",\"shape\":[0],\"data_offsets\":[8,8]},"
    "\"s\\\"q\\n\\u0001\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[8,12]},"
    "\"zeta\":{\"dtype\":\"I32\",\"shape\":[2,0],\"data_offsets\":[12,12]},"
    "\"h\xc3\xa9\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[12,16]},"
    "\"flag\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[16,18]}}";
static unsigned char names_data[18];
static unsigned char names_file[1024];
static size_t names_file_len;

static inline void make_names_data(void) {
  double a = -2.5;
  float s = 3.25f;
  uint16_t h[2] = {0x3f80, 0xc000};
  memcpy(names_data, &a, 8), memcpy(names_data + 8, &s, 4), memcpy(names_data + 12, h, 4);
  names_data[16] = 1, names_data[17] = 0;
  names_file_len = build_st(names_file, names_json, true, names_data, sizeof names_data);
  CHECK((names_file_len - 8 - 18) % 8 == 0);
}

/* A context of `names` loaded from `json` + names_data; NULL (and the code in *rc) on failure. */
static inline kiln_aot_context* names_from(const char* json, bool pad, int* rc) {
  static unsigned char buf[4096];
  kiln_aot_context* c = NULL;
  size_t n = build_st(buf, json, pad, names_data, sizeof names_data);
  write_bytes(tmpfile_("names_in.safetensors"), buf, n);
  *rc = kiln_aot_create(&names, tmpfile_("names_in.safetensors"), 1, &c);
  return c;
}

static inline void expect_same_file(const char* path, const unsigned char* want, size_t n) {
  static unsigned char got[65536];
  size_t m = read_bytes(path, got, sizeof got);
  CHECK(m == n && memcmp(got, want, n) == 0);
}

/* ---------------------------------------------------------------- the scratch directory */

/* Makes the scratch directory and the names file; returns 0, or 1 when it cannot. */
static inline int begin_tests(const char* test) {
  snprintf(dir, sizeof dir, "/tmp/kiln/%s.XXXXXX", test);
  mkdir("/tmp/kiln", 0755);
  if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
  make_names_data();
  return 0;
}

/* Removes the scratch directory and its files; returns the exit status. */
static inline int finish_tests(void) {
  rmdir(tmpfile_("adir"));
  DIR* d = opendir(dir);
  for (struct dirent* e; d && (e = readdir(d));)
    if (e->d_name[0] != '.') unlink(tmpfile_(e->d_name));
  if (d) closedir(d);
  rmdir(dir);
  printf(failures ? "FAILED: %d checks\n" : "all passed\n", failures);
  return failures != 0;
}
