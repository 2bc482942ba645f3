// Checks our kernels (web/llama/patches) against ggml's reference C kernels, in the same wasm32
// build of ggml as the tab's llama.cpp: `cargo xtask test` builds it with that build and runs
// it under Node.
//
// - Each patched dot product (Q5_0 x Q8_0, Q4_K x Q8_K, Q6_K x Q8_K) on one row by one column,
//   two by two and two by four, against the reference kernel on each pair.
// - ggml's matrix product (whose tiling the patch changes: two rows by up to four columns where
//   they are left, one where not) on shapes with odd row and column counts, several matrices
//   (broadcast), on one thread and two, against the reference kernel on every row and column.
//
// Random weights and activations, the same each run. Prints one line per check and exits 1
// if any result is further from the reference than float rounding (1e-5 of the sum of its
// terms' magnitudes; a product whose terms are all 0 fails, as it would show nothing).
#include "ggml.h"
#include "ggml-cpu.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*vec_dot_t)(int, float *, size_t, const void *, size_t, const void *, size_t, int);

// ggml-cpu's reference kernels (its quants.c, plain C).
void ggml_vec_dot_q5_0_q8_0_generic(int, float *, size_t, const void *, size_t, const void *, size_t, int);
void ggml_vec_dot_q4_K_q8_K_generic(int, float *, size_t, const void *, size_t, const void *, size_t, int);
void ggml_vec_dot_q6_K_q8_K_generic(int, float *, size_t, const void *, size_t, const void *, size_t, int);

static const struct {
    enum ggml_type type;
    vec_dot_t reference;
    int n; // a row's length: several blocks, an odd number of them
} KERNELS[] = {
    { GGML_TYPE_Q5_0, ggml_vec_dot_q5_0_q8_0_generic, 896 },
    { GGML_TYPE_Q4_K, ggml_vec_dot_q4_K_q8_K_generic, 4864 },
    { GGML_TYPE_Q6_K, ggml_vec_dot_q6_K_q8_K_generic, 4864 },
};

static uint32_t state = 12345;
static float random_float(void) {
    state = state * 1664525u + 1013904223u;
    return (float) (state >> 8) / (float) (1u << 24) * 2.0f - 1.0f;
}

static void fill(float * values, int n, float scale) {
    for (int i = 0; i < n; i++) values[i] = random_float() * scale * (1 + i % 7);
}

// Within float rounding of the reference: the kernels add the same integer products in
// another order, and a sum that cancels (small beside its terms) keeps the terms' rounding,
// so the bound is relative to the sum of the terms' magnitudes (dequantized), not the sum's.
static int close_to(float got, float want, double magnitude) {
    return magnitude > 0 && fabs((double) got - want) <= 1e-5 * magnitude;
}

// The sum of |x_i y_i| over a row of x and a column of y, both dequantized.
static double magnitude(enum ggml_type type, const void * x, enum ggml_type vec_dot_type, const void * y, int n) {
    float * a = malloc(2 * n * sizeof(float)), * b = a + n;
    ggml_get_type_traits(type)->to_float(x, a, n);
    if (vec_dot_type == GGML_TYPE_Q8_K) {
        // ggml has no dequantizer for Q8_K (block_q8_K: a float scale, 256 int8, 16 sums)
        const size_t block = ggml_type_size(GGML_TYPE_Q8_K);
        for (int i = 0; i < n; i++) {
            const char * q8 = (const char *) y + (i / 256) * block;
            float d;
            memcpy(&d, q8, sizeof d);
            b[i] = d * (float) ((const int8_t *) (q8 + sizeof d))[i % 256];
        }
    } else {
        ggml_get_type_traits(vec_dot_type)->to_float(y, b, n);
    }
    double sum = 0;
    for (int i = 0; i < n; i++) sum += fabs((double) a[i] * b[i]);
    free(a);
    return sum;
}

// The kernel on R rows by C columns at once (nrc = C; one row by one column when C is 1)
// against the reference on each pair.
static int check_tiles(enum ggml_type type, vec_dot_t reference, int n) {
    const struct ggml_type_traits_cpu * traits = ggml_get_type_traits_cpu(type);
    const enum ggml_type vec_dot_type = traits->vec_dot_type;
    const size_t row = ggml_row_size(type, n), col = ggml_row_size(vec_dot_type, n);
    char * x = malloc(2 * row), * y = malloc(4 * col);
    float * values = malloc(n * sizeof(float));
    for (int r = 0; r < 2; r++) {
        fill(values, n, 1.0f);
        traits->from_float(values, x + r * row, n);
    }
    for (int c = 0; c < 4; c++) {
        fill(values, n, 3.0f);
        ggml_get_type_traits_cpu(vec_dot_type)->from_float(values, y + c * col, n);
    }
    int failed = 0;
    static const int shapes[][2] = { { 1, 1 }, { 2, 2 }, { 2, 4 } };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int rows = shapes[k][0], cols = shapes[k][1];
        float got[8], want;
        traits->vec_dot(n, got, rows == 1 ? 0 : 2, x, row, y, col, cols);
        float worst = 0;
        int wrong = 0;
        for (int c = 0; c < cols; c++) {
            for (int r = 0; r < rows; r++) {
                reference(n, &want, 0, x + r * row, 0, y + c * col, 0, 1);
                const double bound = magnitude(type, x + r * row, vec_dot_type, y + c * col, n);
                worst = fmaxf(worst, fabsf(got[c * 2 + r] - want) / bound);
                wrong += !close_to(got[c * 2 + r], want, bound);
            }
        }
        printf("%s: %s x %s, %d by %d: %s (largest difference %.1e of the terms' magnitude)\n", wrong ? "FAILED" : "ok",
               ggml_type_name(type), ggml_type_name(vec_dot_type), rows, cols, wrong ? "differs" : "the reference's", worst);
        failed += wrong != 0;
    }
    free(x);
    free(y);
    free(values);
    return failed;
}

// ggml's matrix product of `matrices` M x n weight matrices by `batches` (a multiple) n x N
// activation matrices, on `threads` threads, against the reference kernel on every entry.
static int check_mul_mat(enum ggml_type type, vec_dot_t reference, int n, int M, int N, int matrices, int batches, int threads) {
    struct ggml_init_params params = { 64 * 1024 * 1024, NULL, false }; // the tensors and the work buffer
    struct ggml_context * ctx = ggml_init(params);
    struct ggml_tensor * a = ggml_new_tensor_3d(ctx, type, n, M, matrices);
    struct ggml_tensor * b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, n, N, batches);
    const struct ggml_type_traits_cpu * traits = ggml_get_type_traits_cpu(type);
    const enum ggml_type vec_dot_type = traits->vec_dot_type;
    float * values = malloc(n * sizeof(float));
    for (int m = 0; m < M * matrices; m++) {
        fill(values, n, 1.0f);
        traits->from_float(values, (char *) a->data + m * a->nb[1], n);
    }
    fill((float *) b->data, n * N * batches, 3.0f);
    struct ggml_tensor * product = ggml_mul_mat(ctx, a, b);
    struct ggml_cgraph * graph = ggml_new_graph(ctx);
    ggml_build_forward_expand(graph, product);
    int failed = 0;
    if (ggml_graph_compute_with_ctx(ctx, graph, threads) != GGML_STATUS_SUCCESS) {
        printf("FAILED: the graph did not compute\n");
        failed = 1;
    }
    // The reference: each column quantized as ggml quantizes it, each entry by the C kernel.
    char * column = malloc(ggml_row_size(vec_dot_type, n));
    int wrong = 0;
    float worst = 0;
    for (int batch = 0; batch < batches && !failed; batch++) {
        const int matrix = batch / (batches / matrices);
        for (int j = 0; j < N; j++) {
            ggml_get_type_traits_cpu(vec_dot_type)->from_float((const float *) ((const char *) b->data + j * b->nb[1] + batch * b->nb[2]), column, n);
            for (int i = 0; i < M; i++) {
                float want;
                const char * weights = (const char *) a->data + i * a->nb[1] + matrix * a->nb[2];
                reference(n, &want, 0, weights, 0, column, 0, 1);
                const float got = *(const float *) ((const char *) product->data + i * product->nb[0] + j * product->nb[1] + batch * product->nb[2]);
                const double bound = magnitude(type, weights, vec_dot_type, column, n);
                worst = fmaxf(worst, fabsf(got - want) / bound);
                wrong += !close_to(got, want, bound);
            }
        }
    }
    printf("%s: %s matrix product, %d rows x %d columns x %d (%d weight matrices), %d thread%s: %d of %d entries differ (largest difference %.1e of the terms' magnitude)\n",
           wrong || failed ? "FAILED" : "ok", ggml_type_name(type), M, N, batches, matrices, threads, threads == 1 ? "" : "s",
           wrong, M * N * batches, worst);
    free(column);
    free(values);
    ggml_free(ctx);
    return failed + (wrong != 0);
}

int main(void) {
    ggml_cpu_init(); // its FP16 table: without it every block's scale reads as 0
    int failed = 0, checks = 0;
    for (size_t k = 0; k < sizeof KERNELS / sizeof KERNELS[0]; k++) {
        failed += check_tiles(KERNELS[k].type, KERNELS[k].reference, KERNELS[k].n);
        checks += 3;
    }
    // Odd and even row counts (a pair's tail), column counts below, at and past 2 and 4 and a
    // 16-column block's end, and two weight matrices broadcast over four activation matrices
    // (a tile must not cross from one matrix into the next).
    static const int shapes[][4] = { { 37, 1, 1, 1 }, { 37, 3, 1, 1 }, { 38, 7, 1, 1 }, { 37, 21, 1, 1 }, { 19, 6, 2, 4 } };
    for (size_t k = 0; k < sizeof KERNELS / sizeof KERNELS[0]; k++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            for (int threads = 1; threads <= 2; threads++) {
                failed += check_mul_mat(KERNELS[k].type, KERNELS[k].reference, KERNELS[k].n, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], threads);
                checks++;
            }
        }
    }
    if (failed) {
        printf("kernel check: %d of %d FAILED\n", failed, checks);
    } else {
        printf("kernel check: all %d passed\n", checks);
    }
    return failed ? 1 : 0;
}
