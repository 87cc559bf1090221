/* One epoch of Fashion-MNIST training through libmnist_train.so, a whole training step (forward,
 * backward, Adam) written by
 *
 *     kiln aot mnist_mlp --train --batch 100 --name mnist_train -o DIR
 *
 * then the trained weights saved as safetensors (which libmnist.so, the inference library, loads).
 *
 *     aot_train START.safetensors OUT.safetensors [DATA_DIR] [--epochs N] [--lr LR]
 *
 * exits 0 (77 when the data set is missing). */
#include "mnist_train.h"

#include "fashion.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if MNIST_TRAIN_INPUT_X_DTYPE != MNIST_TRAIN_F32 || MNIST_TRAIN_INPUT_LABELS_DTYPE != MNIST_TRAIN_I64
#error "expected f32 images and i64 labels"
#endif

int main(int argc, char** argv) {
  const char *start = NULL, *out = NULL, *dir = "/usr/share/datasets/fashion-mnist";
  int epochs = 1;
  float lr = 1e-3f;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--epochs") && i + 1 < argc) epochs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--lr") && i + 1 < argc) lr = (float)atof(argv[++i]);
    else if (!start) start = argv[i];
    else if (!out) out = argv[i];
    else dir = argv[i];
  }
  if (!start || !out) {
    fprintf(stderr, "usage: %s START.safetensors OUT.safetensors [DATA_DIR] [--epochs N] [--lr LR]\n", argv[0]);
    return 2;
  }
  fashion_split train;
  if (fashion_load(dir, "train", &train) != 0) return 77;

  mnist_train_context* ctx = NULL;
  if (mnist_train_create(&ctx, start, 0) != MNIST_TRAIN_OK) {
    fprintf(stderr, "mnist_train_create: %s\n", mnist_train_error_message());
    return 1;
  }
  const int64_t shape[] = MNIST_TRAIN_INPUT_X_SHAPE;
  const int64_t batch = shape[0], features = shape[1], steps = train.count / batch;
  float* x = malloc((size_t)MNIST_TRAIN_INPUT_X_BYTES);
  int64_t* labels = malloc((size_t)MNIST_TRAIN_INPUT_LABELS_BYTES);
  int64_t* order = malloc((size_t)train.count * sizeof(int64_t));
  for (int64_t i = 0; i < train.count; ++i) order[i] = i;
  uint64_t rng = 42;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (int64_t i = train.count - 1; i > 0; --i) { /* Fisher-Yates with a 64-bit LCG */
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      int64_t j = (int64_t)((rng >> 33) % (uint64_t)(i + 1)), t = order[i];
      order[i] = order[j], order[j] = t;
    }
    double sum = 0;
    for (int64_t s = 0; s < steps; ++s) {
      for (int64_t i = 0; i < batch; ++i) {
        int64_t e = order[s * batch + i];
        memcpy(x + i * features, train.images + e * features, (size_t)features * sizeof(float));
        labels[i] = train.labels[e];
      }
      float loss = 0;
      if (mnist_train_train_step(ctx, x, labels, lr, &loss) != MNIST_TRAIN_OK) {
        fprintf(stderr, "mnist_train_train_step: %s\n", mnist_train_error_message());
        return 1;
      }
      sum += loss;
      if ((s + 1) % 200 == 0) printf("epoch %d step %lld: mean loss %.4f\n", epoch + 1, (long long)(s + 1), sum / 200), sum = 0;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  printf("%d epoch(s), %lld steps of %lld in %.2f s (%.3f ms per step, %d threads)\n", epochs,
         (long long)(steps * epochs), (long long)batch, seconds, 1e3 * seconds / (double)(steps * epochs),
         mnist_train_num_threads(ctx));
  if (mnist_train_save_weights(ctx, out) != MNIST_TRAIN_OK) {
    fprintf(stderr, "mnist_train_save_weights: %s\n", mnist_train_error_message());
    return 1;
  }
  printf("saved %s\n", out);
  mnist_train_destroy(ctx);
  free(x), free(labels), free(order);
  fashion_free(&train);
  return 0;
}
