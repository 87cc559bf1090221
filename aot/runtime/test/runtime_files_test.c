/* A standalone test of kiln_aot_runtime.c's weights files: the writer's bytes, malformed files
 * refused with messages, f16/bf16 conversions. Build and run with run.sh. */
#include "runtime_test.h"

static void test_writer(void) {
  int rc;
  /* The canonical file loads and saves back byte for byte. */
  kiln_aot_context* c = names_from(names_json, true, &rc);
  CHECK(rc == KILN_AOT_OK && c);
  CHECK(kiln_aot_save_weights(c, tmpfile_("names_out.safetensors")) == KILN_AOT_OK);
  expect_same_file(tmpfile_("names_out.safetensors"), names_file, names_file_len);
  kiln_aot_destroy(c);
  /* The same tensors written differently: metadata, escapes, spaces, other order, an extra tensor. */
  const char* other =
      "{\"__metadata__\" : {\"format\":\"pt\", \"\\u00e9\\ud83d\\ude00\": \"x\"},\n"
      " \"flag\":{\"data_offsets\":[16,18],\"dtype\":\"BOOL\",\"shape\":[2], \"extra\": [null, true, {\"k\": 1.5e3}]},"
      "\"h\\u00e9\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[12,16]},"
      "\"s\\\"q\\n\\u0001\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[8,12]},"
      "\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
      "\"unused\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,8]},"
      "\"i\":{\"dtype\":\"I64\",\"shape\":[-0],\"data_offsets\":[8,8]},"
      "\"zeta\":{\"dtype\":\"I32\",\"shape\":[2,0],\"data_offsets\":[12,12]}}  \t";
  c = names_from(other, false, &rc);
  /* U8 is a dtype kiln does not read: the file is rejected even though the tensor is unused. */
  CHECK(rc == KILN_AOT_E_FORMAT && strstr(kiln_aot_error(), "unsupported dtype \"U8\""));
  char fixed[2048];
  snprintf(fixed, sizeof fixed, "%s", other);
  char* u = strstr(fixed, "\"U8\"");
  memmove(u + 5, u + 4, strlen(u + 4) + 1); /* ... now an unused F32[0]: fine */
  memcpy(u, "\"F32\"", 5);
  c = names_from(fixed, false, &rc);
  CHECK(rc == KILN_AOT_OK && c);
  if (c) {
    CHECK(kiln_aot_save_weights(c, tmpfile_("names_out.safetensors")) == KILN_AOT_OK);
    expect_same_file(tmpfile_("names_out.safetensors"), names_file, names_file_len);
    kiln_aot_destroy(c);
  }
  /* Embedded weights. */
  names.weights = names_file;
  names.weights_bytes = (int64_t)names_file_len;
  CHECK(kiln_aot_create(&names, NULL, 2, &c) == KILN_AOT_OK);
  double a = 0;
  CHECK(kiln_aot_get_param(c, "a", &a, 8) == KILN_AOT_OK && a == -2.5);
  CHECK(kiln_aot_save_weights(c, tmpfile_("names_out.safetensors")) == KILN_AOT_OK);
  expect_same_file(tmpfile_("names_out.safetensors"), names_file, names_file_len);
  /* A failed save leaves the target intact and no temporary file behind. */
  mkdir(tmpfile_("adir"), 0755);
  EXPECT_FAIL(kiln_aot_save_weights(c, tmpfile_("adir")), KILN_AOT_E_IO, "rename failed");
  EXPECT_FAIL(kiln_aot_save_weights(c, tmpfile_("no/such/dir.safetensors")), KILN_AOT_E_IO, "cannot create");
  DIR* d = opendir(dir);
  for (struct dirent* e; d && (e = readdir(d));) CHECK(!strstr(e->d_name, ".tmp."));
  if (d) closedir(d);
  kiln_aot_destroy(c);
  unsigned char broken[100];
  memcpy(broken, names_file, 100);
  broken[20] = 'X';
  names.weights = broken;
  names.weights_bytes = 100;
  EXPECT_FAIL(kiln_aot_create(&names, NULL, 1, &c), KILN_AOT_E_FORMAT, "the embedded weights of names: ");
  names.weights = NULL;
  names.weights_bytes = 0;
  EXPECT_FAIL(kiln_aot_create(&names, NULL, 1, &c), KILN_AOT_E_ARGUMENT,
              "this library has no embedded weights: pass a weights file (kiln aot wrote names.safetensors beside it)");
  CHECK(c == NULL);
}

/* ---------------------------------------------------------------- malformed files */

typedef struct { const char* json; int code; const char* text; } bad_case;

static void test_malformed(void) {
  int rc;
  kiln_aot_context* c = names_from(names_json, true, &rc);
  CHECK(rc == KILN_AOT_OK && c);
  if (!c) return;
  CHECK(kiln_aot_save_weights(c, tmpfile_("before.safetensors")) == KILN_AOT_OK);
  /* Each case replaces one piece of the canonical header. */
  static const bad_case cases[] = {
      {"{\"a\":{\"dtype\":\"F64\",}", KILN_AOT_E_FORMAT, "invalid json at byte"},
      {" {}", KILN_AOT_E_FORMAT, "must be a json object starting with '{'"},
      {"{} x", KILN_AOT_E_FORMAT, "unexpected characters after the value"},
      {"{}", KILN_AOT_E_FORMAT, "the data buffer has 18 bytes but the tensors cover only 0"},
      {"{\"x\":{\"dtype\":\"U8\",\"shape\":[18],\"data_offsets\":[0,18]}}", KILN_AOT_E_FORMAT, "unsupported dtype \"U8\""},
      {"{\"x\":{\"dtype\":\"Q7\",\"shape\":[18],\"data_offsets\":[0,18]}}", KILN_AOT_E_FORMAT, "unknown dtype \"Q7\""},
      {"{\"x\":{\"dtype\":\"BOOL\",\"shape\":[18],\"data_offsets\":[0,18]}}", KILN_AOT_E_FORMAT, "no tensor \"zeta\": parameter 0 of names (i32[2,0]) is missing"},
      {"{\"zeta\":{\"dtype\":\"I32\",\"shape\":[2,0],\"data_offsets\":[0,0]},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"r\":{\"dtype\":\"BOOL\",\"shape\":[10],\"data_offsets\":[8,18]}}",
       KILN_AOT_E_FORMAT, "tensor \"a\" is f32[2], expected f64[1] (parameter 1 of names)"},
      {"{\"zeta\":{\"dtype\":\"I32\",\"shape\":[2,0],\"data_offsets\":[0,0]},\"a\":{\"dtype\":\"F64\",\"shape\":[1,1],\"data_offsets\":[0,8]},\"r\":{\"dtype\":\"BOOL\",\"shape\":[10],\"data_offsets\":[8,18]}}",
       KILN_AOT_E_FORMAT, "is f64[1,1], expected f64[1]"},
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},\"r\":{\"dtype\":\"BOOL\",\"shape\":[12],\"data_offsets\":[6,18]}}",
       KILN_AOT_E_FORMAT, "overlap tensor \"a\""},
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},\"r\":{\"dtype\":\"BOOL\",\"shape\":[9],\"data_offsets\":[9,18]}}",
       KILN_AOT_E_FORMAT, "leave a gap: bytes [8, 9) belong to no tensor"},
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},\"r\":{\"dtype\":\"BOOL\",\"shape\":[12],\"data_offsets\":[8,20]}}",
       KILN_AOT_E_FORMAT, "run past the end of the 18-byte data buffer"},
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,9]}}", KILN_AOT_E_FORMAT, "span 9 bytes but F64[1] needs 8 bytes"},
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[8,0]}}", KILN_AOT_E_FORMAT, "end before they begin"},
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8,9]}}", KILN_AOT_E_FORMAT, "must be an array of two integers"},
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[-1,8]}}", KILN_AOT_E_FORMAT, "must be non-negative integers"},
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8.0]}}", KILN_AOT_E_FORMAT, "must be non-negative integers"},
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,18446744073709551616]}}", KILN_AOT_E_FORMAT, "must be non-negative integers"},
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":[-1],\"data_offsets\":[0,8]}}", KILN_AOT_E_FORMAT, "shape entries must be non-negative integers, found -1"},
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":[\"1\"],\"data_offsets\":[0,8]}}", KILN_AOT_E_FORMAT, "non-negative integers, found string"},
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":[9223372036854775808],\"data_offsets\":[0,8]}}", KILN_AOT_E_FORMAT, "found 9223372036854775808"},
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}", KILN_AOT_E_FORMAT, "too large"},
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1]}}", KILN_AOT_E_FORMAT, "tensor \"a\": missing \"data_offsets\""},
      {"{\"a\":{\"shape\":[1]}}", KILN_AOT_E_FORMAT, "missing \"dtype\""},
      {"{\"a\":{\"dtype\":8,\"shape\":[1],\"data_offsets\":[0,8]}}", KILN_AOT_E_FORMAT, "\"dtype\" must be a string, found a number"},
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":1,\"data_offsets\":[0,8]}}", KILN_AOT_E_FORMAT, "\"shape\" must be an array"},
      {"{\"a\":[]}", KILN_AOT_E_FORMAT, "expected an object with dtype, shape and data_offsets, found a array"},
      {"{\"a\":{},\"a\":{}}", KILN_AOT_E_FORMAT, "duplicate key \"a\""},
      {"{\"a\":{\"dtype\":\"F64\",\"dtype\":\"F64\"}}", KILN_AOT_E_FORMAT, "duplicate key \"dtype\""},
      {"{\"a\\u0062\":1,\"ab\":2}", KILN_AOT_E_FORMAT, "duplicate key \"ab\""},
      {"{\"__metadata__\":{\"k\":1}}", KILN_AOT_E_FORMAT, "\"__metadata__\" value for \"k\" must be a string, found a number"},
      {"{\"__metadata__\":[]}", KILN_AOT_E_FORMAT, "\"__metadata__\" must be an object of strings"},
      {"{\"\xff\":1}", KILN_AOT_E_FORMAT, "invalid utf-8"},
      {"{\"\xc0\x80\":1}", KILN_AOT_E_FORMAT, "invalid utf-8"},
      {"{\"\xed\xa0\x80\":1}", KILN_AOT_E_FORMAT, "invalid utf-8"},
      {"{\"\\ud800\":1}", KILN_AOT_E_FORMAT, "unpaired high surrogate"},
      {"{\"\\udc00\":1}", KILN_AOT_E_FORMAT, "unpaired low surrogate"},
      {"{\"\\x\":1}", KILN_AOT_E_FORMAT, "invalid escape"},
      {"{\"\\u12g4\":1}", KILN_AOT_E_FORMAT, "invalid hex digit"},
      {"{\"a\":01}", KILN_AOT_E_FORMAT, "leading zeros"},
      {"{\"a\":1.}", KILN_AOT_E_FORMAT, "expected a digit"},
      {"{\"a\":tru}", KILN_AOT_E_FORMAT, "unknown literal"},
      {"{\"a\":\"x\ty\"}", KILN_AOT_E_FORMAT, "control character"},
      {"{\"a\":\"abc", KILN_AOT_E_FORMAT, "unterminated string"},
      {"{\"a\" 1}", KILN_AOT_E_FORMAT, "expected ':'"},
      {"{1:1}", KILN_AOT_E_FORMAT, "expected a string key"},
      {"{\"a\":[1 2]}", KILN_AOT_E_FORMAT, "expected ']'"},
      {"{\"a\":", KILN_AOT_E_FORMAT, "unexpected end of input"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    static unsigned char buf[4096];
    size_t n = build_st(buf, cases[i].json, false, names_data, sizeof names_data);
    write_bytes(tmpfile_("bad.safetensors"), buf, n);
    kaot_error_text[0] = 0;
    rc = kiln_aot_load_weights(c, tmpfile_("bad.safetensors"));
    if (rc != cases[i].code || !strstr(kiln_aot_error(), cases[i].text) || !strstr(kiln_aot_error(), "bad.safetensors'")) {
      fprintf(stderr, "malformed case %zu (%s): got %d '%s', expected %d with '%s'\n", i, cases[i].json, rc, kiln_aot_error(),
              cases[i].code, cases[i].text);
      ++failures;
    }
  }
  /* Nesting: 64 levels are fine, 65 are not. */
  char deep[300] = "{\"__x\":";
  for (int d = 0; d < 63; ++d) strcat(deep, "[");
  for (int d = 0; d < 63; ++d) strcat(deep, "]");
  strcat(deep, "}");
  static unsigned char buf[4096];
  write_bytes(tmpfile_("bad.safetensors"), buf, build_st(buf, deep, false, names_data, sizeof names_data));
  EXPECT_FAIL(kiln_aot_load_weights(c, tmpfile_("bad.safetensors")), KILN_AOT_E_FORMAT, "expected an object with dtype");
  memmove(deep + 8, deep + 7, strlen(deep + 7) + 1);
  deep[7] = '[';
  char* end = strrchr(deep, '}');
  memmove(end + 1, end, strlen(end) + 1);
  *end = ']';
  write_bytes(tmpfile_("bad.safetensors"), buf, build_st(buf, deep, false, names_data, sizeof names_data));
  EXPECT_FAIL(kiln_aot_load_weights(c, tmpfile_("bad.safetensors")), KILN_AOT_E_FORMAT, "nesting deeper than 64 levels");
  /* The frame: truncated files, absurd header lengths, bool bytes, paths. */
  write_bytes(tmpfile_("bad.safetensors"), names_file, 5);
  EXPECT_FAIL(kiln_aot_load_weights(c, tmpfile_("bad.safetensors")), KILN_AOT_E_FORMAT, "5 bytes, shorter than the 8-byte header length");
  write_bytes(tmpfile_("bad.safetensors"), names_file, names_file_len - 1);
  EXPECT_FAIL(kiln_aot_load_weights(c, tmpfile_("bad.safetensors")), KILN_AOT_E_FORMAT, "run past the end of the 17-byte data buffer");
  write_bytes(tmpfile_("bad.safetensors"), names_file, 30);
  EXPECT_FAIL(kiln_aot_load_weights(c, tmpfile_("bad.safetensors")), KILN_AOT_E_FORMAT, "exceeds the 22 bytes after the length field");
  memcpy(buf, names_file, names_file_len);
  buf[5] = 1; /* 2^40 + n */
  write_bytes(tmpfile_("bad.safetensors"), buf, names_file_len);
  EXPECT_FAIL(kiln_aot_load_weights(c, tmpfile_("bad.safetensors")), KILN_AOT_E_FORMAT, "exceeds the limit of 100000000 bytes");
  memcpy(buf, names_file, names_file_len);
  buf[names_file_len - 1] = 2; /* flag[1] */
  write_bytes(tmpfile_("bad.safetensors"), buf, names_file_len);
  EXPECT_FAIL(kiln_aot_load_weights(c, tmpfile_("bad.safetensors")), KILN_AOT_E_FORMAT, "tensor \"flag\": BOOL element 1 has byte value 2");
  EXPECT_FAIL(kiln_aot_load_weights(c, tmpfile_("missing.safetensors")), KILN_AOT_E_IO, "cannot open weights file '");
  EXPECT_FAIL(kiln_aot_load_weights(c, dir), KILN_AOT_E_IO, "not a regular file");
  /* Nothing changed. */
  CHECK(kiln_aot_save_weights(c, tmpfile_("after.safetensors")) == KILN_AOT_OK);
  static unsigned char before[4096];
  size_t nb = read_bytes(tmpfile_("before.safetensors"), before, sizeof before);
  expect_same_file(tmpfile_("after.safetensors"), before, nb);
  /* And a good load still works. */
  CHECK(kiln_aot_load_weights(c, tmpfile_("before.safetensors")) == KILN_AOT_OK);
  kiln_aot_destroy(c);
}

static void test_conversions(void) {
  static const struct { float f; uint16_t h, b; } cases[] = {
      {1.0f, 0x3c00, 0x3f80},      {-2.0f, 0xc000, 0xc000},       {0.1f, 0x2e66, 0x3dcd},
      {65504.0f, 0x7bff, 0x4780},  {65520.0f, 0x7c00, 0x4780},    {5.9604645e-8f, 0x0001, 0x3380},
      {1e-9f, 0x0000, 0x3089},     {1.00390625f, 0x3c04, 0x3f80}, {1.01171875f, 0x3c0c, 0x3f82},
      {INFINITY, 0x7c00, 0x7f80},  {-0.0f, 0x8000, 0x8000}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    if (kaot_f32_to_f16(cases[i].f) != cases[i].h || kaot_f32_to_bf16(cases[i].f) != cases[i].b) {
      fprintf(stderr, "conversion of %g: f16 %04x (want %04x), bf16 %04x (want %04x)\n", (double)cases[i].f,
              kaot_f32_to_f16(cases[i].f), cases[i].h, kaot_f32_to_bf16(cases[i].f), cases[i].b);
      ++failures;
    }
  }
  CHECK(kaot_f32_to_f16(NAN) == 0x7e00 && (kaot_f32_to_bf16(NAN) & 0x7fc0) == 0x7fc0);
  CHECK(kaot_f16_to_f32(0x3c00) == 1.0f && kaot_f16_to_f32(0x0001) == 5.9604645e-8f && kaot_f16_to_f32(0xfc00) == -INFINITY);
  for (uint32_t h = 0; h < 0x10000; ++h) /* every finite f16 round-trips */
    if (((h >> 10) & 0x1f) != 0x1f && kaot_f32_to_f16(kaot_f16_to_f32((uint16_t)h)) != h) {
      CHECK(!"f16 round trip");
      break;
    }
}

int main(void) {
  if (begin_tests("aotrt_files_test")) return 1;
  printf("conversions\n"), test_conversions();
  printf("writer\n"), test_writer();
  printf("malformed files\n"), test_malformed();
  return finish_tests();
}
