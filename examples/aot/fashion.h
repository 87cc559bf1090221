/* Reading Fashion-MNIST's idx files (raw, or gzip-compressed through the gzip tool) for the AOT
 * examples: plain C, no dependency beyond libc. */
#ifndef KILN_EXAMPLE_FASHION_H
#define KILN_EXAMPLE_FASHION_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int64_t count;
  float* images;  /* count x 784, pixels / 255 */
  int64_t* labels; /* count, 0..9 */
} fashion_split;

/* Opens DIR/NAME, or DIR/NAME.gz through `gzip -dc`; *piped says which (pclose vs fclose). */
static FILE* fashion_open(const char* dir, const char* name, int* piped) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(path, "rb");
  *piped = 0;
  if (f) return f;
  snprintf(path, sizeof path, "%s/%s.gz", dir, name);
  f = fopen(path, "rb");
  if (!f) return NULL;
  fclose(f);
  char command[4200];
  snprintf(command, sizeof command, "gzip -dc '%s'", path);
  *piped = 1;
  return popen(command, "r");
}

static uint32_t fashion_u32(const unsigned char* b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Loads "train" or "t10k" from dir; returns 0 on success, else prints why and returns -1. */
static int fashion_load(const char* dir, const char* split, fashion_split* out) {
  char name[256];
  int piped = 0, ok = 0;
  unsigned char head[16];
  memset(out, 0, sizeof *out);
  snprintf(name, sizeof name, "%s-images-idx3-ubyte", split);
  FILE* f = fashion_open(dir, name, &piped);
  if (!f) {
    fprintf(stderr, "cannot open %s/%s(.gz)\n", dir, name);
    return -1;
  }
  if (fread(head, 1, 16, f) == 16 && fashion_u32(head) == 0x803 && fashion_u32(head + 8) == 28 &&
      fashion_u32(head + 12) == 28) {
    out->count = fashion_u32(head + 4);
    unsigned char* raw = malloc((size_t)out->count * 784);
    out->images = malloc((size_t)out->count * 784 * sizeof(float));
    if (raw && out->images && fread(raw, 1, (size_t)out->count * 784, f) == (size_t)out->count * 784) {
      for (int64_t i = 0; i < out->count * 784; ++i) out->images[i] = raw[i] / 255.0f;
      ok = 1;
    }
    free(raw);
  }
  if (piped) pclose(f); else fclose(f);
  if (!ok) {
    fprintf(stderr, "%s/%s: not a 28x28 idx image file\n", dir, name);
    return -1;
  }
  snprintf(name, sizeof name, "%s-labels-idx1-ubyte", split);
  f = fashion_open(dir, name, &piped);
  if (!f) {
    fprintf(stderr, "cannot open %s/%s(.gz)\n", dir, name);
    return -1;
  }
  ok = 0;
  if (fread(head, 1, 8, f) == 8 && fashion_u32(head) == 0x801 && fashion_u32(head + 4) == (uint32_t)out->count) {
    unsigned char* raw = malloc((size_t)out->count);
    out->labels = malloc((size_t)out->count * sizeof(int64_t));
    if (raw && out->labels && fread(raw, 1, (size_t)out->count, f) == (size_t)out->count) {
      ok = 1;
      for (int64_t i = 0; i < out->count; ++i) ok &= raw[i] < 10, out->labels[i] = raw[i];
    }
    free(raw);
  }
  if (piped) pclose(f); else fclose(f);
  if (!ok) fprintf(stderr, "%s/%s: not an idx label file matching the images\n", dir, name);
  return ok ? 0 : -1;
}

static void fashion_free(fashion_split* s) {
  free(s->images);
  free(s->labels);
  memset(s, 0, sizeof *s);
}

#endif
