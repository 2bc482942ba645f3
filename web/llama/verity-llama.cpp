// The model in the tab: llama.cpp's own server logic (its `server-context` library: the chat
// template, tool calls, JSON Schema output, `top_logprobs`, timings) behind four C functions a
// page's worker calls, with no HTTP in between. Built for wasm32 with pthreads by
// `cargo xtask dist` (web/llama/CMakeLists.txt); `web/llama/worker.js` drives it.
//
// Threads: the worker's own thread loads the model and then only polls; the server's loop runs
// on a thread of its own, and each request's handler on another (it blocks until its answer
// is made), so the worker's thread never blocks while the model works: it answers messages
// (a cancel) and lets emscripten start the threads ggml asks for.

#include "server-common.h"
#include "server-context.h"
#include "server-http.h"

#include "common.h"
#include "llama.h"
#include "log.h"

#include <emscripten/emscripten.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace {

struct request {
    std::thread thread;
    std::atomic<bool> done{false};
    std::atomic<bool> cancelled{false};
    std::string answer; // the status's three digits, then the body; set once `done`
};

struct runtime {
    common_params params;
    server_context context;
    std::unique_ptr<server_routes> routes;
    std::thread loop;
    std::mutex lock; // guards `requests`
    std::map<int, std::unique_ptr<request>> requests;
    int next_id = 1;
};

runtime * loaded = nullptr;
std::string last_error;
std::string answered; // the answer handed out last (its memory lives until the next one)

// An answer as the page reads it: the HTTP status's three digits, then the body.
std::string answer_text(int status, const std::string & body) {
    if (status < 100 || status > 999) {
        status = 500;
    }
    return std::to_string(status) + body;
}

// The answer to a handler that threw, as llama.cpp's server makes it (its `ex_wrapper`): a
// request it refuses (`std::invalid_argument`) is a 400, anything else a 500.
std::string refused(const std::string & message, error_type type) {
    json error = format_error_response(message, type);
    json body = json::object();
    body["error"] = error;
    return answer_text(json_value(error, "code", 500), safe_json_to_str(body));
}

} // namespace

extern "C" {

// Loads the GGUF file at `path` with a context of `n_ctx` tokens on `n_threads` threads, and
// starts the server's loop: 0, or -1 with the reason in `verity_llama_error()`.
EMSCRIPTEN_KEEPALIVE int verity_llama_load(const char * path, int n_ctx, int n_threads) {
    if (loaded != nullptr) {
        last_error = "a model is already loaded in this worker";
        return -1;
    }
    common_init();
    // Only errors are printed: the page is not a terminal.
    common_log_set_verbosity_thold(LOG_LEVEL_ERROR);
    llama_log_set([](ggml_log_level level, const char * text, void *) {
        if (level == GGML_LOG_LEVEL_ERROR) {
            fputs(text, stderr);
        }
    }, nullptr);
    llama_backend_init();

    auto * r = new runtime();
    common_params & p = r->params;
    p.model.path = path;
    p.n_ctx = n_ctx;
    p.n_parallel = 1;
    p.n_gpu_layers = 0;
    p.fit_params = false;   // no devices to fit to: the context asked for is the one made
    p.cache_ram_mib = 0;    // no prompt cache beside the context: the tab's memory is small
    p.load_mode = LLAMA_LOAD_MODE_NONE; // read into memory (a page's file is not mappable)
    // Every tensor read at load: "lazy" means "over 4 GiB", a constant wasm32's size_t
    // cannot hold (it wraps to 0, and every tensor would be asked to be read lazily).
    p.lazy_mode = LLAMA_LAZY_MODE_OFF;
    p.use_jinja = true;
    p.cpuparams.n_threads = n_threads;
    p.cpuparams_batch.n_threads = n_threads;
    try {
        r->routes = std::make_unique<server_routes>(p, r->context);
        if (!r->context.load_model(p)) {
            // Why, in llama.cpp's words, follows (its last error lines: web/llama/worker.js).
            last_error = "llama.cpp could not load the model";
            delete r;
            return -1;
        }
        r->routes->update_meta(r->context);
    } catch (const std::exception & e) {
        last_error = e.what();
        delete r;
        return -1;
    }
    r->loop = std::thread([r] { r->context.start_loop(); });
    loaded = r;
    return 0;
}

// Why the last call failed.
EMSCRIPTEN_KEEPALIVE const char * verity_llama_error() {
    return last_error.c_str();
}

// Starts an OpenAI-compatible chat completion (`body`, not streamed): its id, or -1 when no
// model is loaded.
EMSCRIPTEN_KEEPALIVE int verity_llama_chat(const char * body) {
    if (loaded == nullptr) {
        last_error = "no model is loaded";
        return -1;
    }
    runtime * r = loaded;
    auto owned = std::make_unique<request>();
    request * q = owned.get();
    int id;
    {
        std::lock_guard<std::mutex> guard(r->lock);
        id = r->next_id++;
        r->requests[id] = std::move(owned);
    }
    std::string text = body;
    q->thread = std::thread([r, q, text] {
        std::function<bool()> should_stop = [q] { return q->cancelled.load(); };
        server_http_req req{{}, {}, "/v1/chat/completions", "", text, {}, should_stop};
        std::string answer;
        try {
            server_http_res_ptr res = r->routes->post_chat_completions(req);
            if (res->is_stream()) {
                // Asked for a stream: the chunks, joined (the page asks for none).
                std::string all;
                std::string chunk;
                while (true) {
                    chunk.clear();
                    bool more = res->next(chunk);
                    all += chunk;
                    if (!more) {
                        break;
                    }
                }
                answer = answer_text(res->status, all);
            } else {
                answer = answer_text(res->status, res->data);
            }
            res->on_complete();
        } catch (const std::invalid_argument & e) {
            answer = refused(e.what(), ERROR_TYPE_INVALID_REQUEST);
        } catch (const std::exception & e) {
            answer = refused(e.what(), ERROR_TYPE_SERVER);
        } catch (...) {
            answer = refused("unknown error", ERROR_TYPE_SERVER);
        }
        q->answer = std::move(answer);
        q->done.store(true);
    });
    return id;
}

// The answer of chat `id` once made (the HTTP status's three digits, then the body; the
// request is then forgotten), or null while it is being made or when there is no such request.
EMSCRIPTEN_KEEPALIVE const char * verity_llama_answer(int id) {
    if (loaded == nullptr) {
        return nullptr;
    }
    std::unique_ptr<request> q;
    {
        std::lock_guard<std::mutex> guard(loaded->lock);
        auto found = loaded->requests.find(id);
        if (found == loaded->requests.end() || !found->second->done.load()) {
            return nullptr;
        }
        q = std::move(found->second);
        loaded->requests.erase(found);
    }
    q->thread.join();
    answered = std::move(q->answer);
    return answered.c_str();
}

// Asks chat `id` to stop (its answer then comes soon, as the server's for a stopped request).
EMSCRIPTEN_KEEPALIVE void verity_llama_cancel(int id) {
    if (loaded == nullptr) {
        return;
    }
    std::lock_guard<std::mutex> guard(loaded->lock);
    auto found = loaded->requests.find(id);
    if (found != loaded->requests.end()) {
        found->second->cancelled.store(true);
    }
}

} // extern "C"

int main() {
    // The runtime stays: the worker calls in after main returns.
    return 0;
}
