// Prompt and generation speed of a GGUF through llama.cpp's C API, as `llama-bench` measures
// them (its tools are not built for Emscripten): one batch of N_PROMPT tokens, then N_GEN
// single-token steps, REPS times, on THREADS threads. Built to wasm32 by
// `cargo xtask bench wasm-kernels`, once against llama.cpp's own kernels and once against ours,
// and run under Node. The first repetition also prints the last token's logits' argmax and
// sum, so the two builds can be seen to compute the same thing.
//
// usage: node harness.js MODEL.gguf THREADS N_PROMPT N_GEN REPS
#include "llama.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

static double seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static void quiet(ggml_log_level, const char *, void *) {}

int main(int argc, char ** argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: harness MODEL THREADS N_PROMPT N_GEN REPS\n");
        return 2;
    }
    const char * path = argv[1];
    const int threads = atoi(argv[2]), n_prompt = atoi(argv[3]), n_gen = atoi(argv[4]), reps = atoi(argv[5]);
    if (threads < 1 || n_prompt < 1 || n_prompt > 512 || n_gen < 0 || reps < 1) {
        fprintf(stderr, "harness: THREADS >= 1, 1 <= N_PROMPT <= 512, N_GEN >= 0, REPS >= 1\n");
        return 2;
    }
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model * model = llama_model_load_from_file(path, llama_model_default_params());
    if (!model) {
        fprintf(stderr, "harness: could not load %s\n", path);
        return 1;
    }
    llama_context_params params = llama_context_default_params();
    params.n_ctx = 1024;
    params.n_batch = 512;
    params.n_ubatch = 512;
    params.n_threads = threads;
    params.n_threads_batch = threads;
    llama_context * ctx = llama_init_from_model(model, params);
    if (!ctx) {
        fprintf(stderr, "harness: could not make a context\n");
        return 1;
    }
    const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    // Any tokens do for speed: the same ones every run, spread over the vocabulary.
    std::vector<llama_token> prompt(n_prompt);
    for (int i = 0; i < n_prompt; i++) prompt[i] = (1000 + i * 37) % vocab;
    for (int rep = 0; rep < reps; rep++) {
        llama_memory_clear(llama_get_memory(ctx), true);
        const double start = seconds();
        if (llama_decode(ctx, llama_batch_get_one(prompt.data(), n_prompt)) != 0) {
            fprintf(stderr, "harness: the prompt did not decode\n");
            return 1;
        }
        const double read = seconds();
        if (rep == 0) {
            const float * logits = llama_get_logits_ith(ctx, -1);
            int best = 0;
            double sum = 0;
            for (int i = 0; i < vocab; i++) {
                sum += logits[i];
                if (logits[i] > logits[best]) best = i;
            }
            printf("logits: argmax %d (%.4f), sum %.3f\n", best, logits[best], sum);
        }
        llama_token next = prompt[n_prompt - 1];
        for (int i = 0; i < n_gen; i++) {
            if (llama_decode(ctx, llama_batch_get_one(&next, 1)) != 0) {
                fprintf(stderr, "harness: a generation step did not decode\n");
                return 1;
            }
        }
        const double done = seconds();
        printf("threads %d: prompt %.2f tokens/s (%d), generation %.2f tokens/s (%d)\n", threads,
               n_prompt / (read - start), n_prompt, n_gen > 0 ? n_gen / (done - read) : 0.0, n_gen);
        fflush(stdout);
    }
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    // Emscripten's pthreads keep Node's event loop alive: end the process here.
    exit(0);
}
