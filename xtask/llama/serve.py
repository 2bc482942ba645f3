"""Runs llama.cpp's own HTTP server in this process (the PyPI wheel `xllamacpp`) until killed.

    python serve.py --model FILE.gguf --port N [--threads N] [--ctx N] [--parallel N]
        [--chat-template FILE]

It listens on 127.0.0.1 only, prints "listening <url>" once it answers, and allows the
headers a browser client sends (CORS). `cargo xtask test` starts it for the real-model tests.
`--parallel N` gives it N slots, each with `--ctx` tokens of context, decoding up to N requests
together (default 1: requests wait their turn).
"""

import argparse
import signal
import sys
import threading

import xllamacpp


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--chat-template")
    args = parser.parse_args()

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_ctx = args.ctx * args.parallel
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.use_jinja = True
    params.ui = False
    params.cors_headers = "Authorization, Content-Type, *"
    if args.chat_template:
        with open(args.chat_template, encoding="utf-8") as template:
            params.chat_template = template.read()
    server = xllamacpp.Server(params)
    print("listening", server.listening_address, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    sys.exit(0)


if __name__ == "__main__":
    main()
