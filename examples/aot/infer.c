/* Fashion-MNIST test accuracy through libmnist.so, a library written by
 *
 *     kiln aot mnist_mlp --batch 100 --name mnist -o DIR
 *
 * Plain C: no kiln, no LLVM, no C++ at run time.
 *
 *     aot_infer WEIGHTS.safetensors [DATA_DIR] [--min-accuracy A]
 *
 * exits 0 (1 when the accuracy is below A, 77 when the data set is missing). */
#include "mnist.h"

#include "fashion.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if MNIST_INPUT_X_DTYPE != MNIST_F32 || MNIST_OUTPUT_LOGITS_DTYPE != MNIST_F32
#error "expected f32 images and logits"
#endif

int main(int argc, char** argv) {
  const char* weights = NULL;
  const char* dir = "/usr/share/datasets/fashion-mnist";
  double minAccuracy = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--min-accuracy") && i + 1 < argc) minAccuracy = atof(argv[++i]);
    else if (!weights) weights = argv[i];
    else dir = argv[i];
  }
  if (!weights) {
    fprintf(stderr, "usage: %s WEIGHTS.safetensors [DATA_DIR] [--min-accuracy A]\n", argv[0]);
    return 2;
  }
  fashion_split test;
  if (fashion_load(dir, "t10k", &test) != 0) return 77;

  mnist_context* ctx = NULL;
  if (mnist_create(&ctx, weights, 0) != MNIST_OK) {
    fprintf(stderr, "mnist_create: %s\n", mnist_error_message());
    return 1;
  }
  const int64_t shape[] = MNIST_INPUT_X_SHAPE;
  const int64_t batch = shape[0], features = shape[1];
  static float logits[MNIST_OUTPUT_LOGITS_NUMEL];
  float* x = calloc((size_t)MNIST_INPUT_X_NUMEL, sizeof(float));
  int64_t correct = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int64_t start = 0; start < test.count; start += batch) {
    int64_t n = test.count - start < batch ? test.count - start : batch; /* the last batch is padded */
    memcpy(x, test.images + start * features, (size_t)(n * features) * sizeof(float));
    if (mnist_forward(ctx, x, logits) != MNIST_OK) {
      fprintf(stderr, "mnist_forward: %s\n", mnist_error_message());
      return 1;
    }
    for (int64_t i = 0; i < n; ++i) {
      int best = 0;
      for (int c = 1; c < 10; ++c)
        if (logits[i * 10 + c] > logits[i * 10 + best]) best = c;
      correct += best == test.labels[start + i];
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  double accuracy = (double)correct / (double)test.count;
  printf("test accuracy: %lld/%lld = %.2f%% (%.1f ms for %lld images, %d threads)\n", (long long)correct,
         (long long)test.count, 100 * accuracy, 1e3 * seconds, (long long)test.count, mnist_num_threads(ctx));
  mnist_destroy(ctx);
  free(x);
  fashion_free(&test);
  return accuracy >= minAccuracy ? 0 : 1;
}
