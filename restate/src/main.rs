//! `verity-restate`: the worker, the balancer in front of workers, and the batch command.
//!
//! - `worker --port P [--provider CONFIG.json]`: serves the `ClaimCheck` and `Batch`
//!   workflows on 127.0.0.1:P (`--bind ADDR:PORT` for another interface), with the offline
//!   model unless a provider configuration is given (its key, if the file has none, from
//!   `VERITY_API_KEY`; never logged, and never sent over plain HTTP to a host that is not
//!   loopback). `--identity-key publickeyv1_...` (repeatable, or `RESTATE_IDENTITY_KEYS`,
//!   comma-separated): answer only requests signed by a Restate server holding the matching
//!   private key. Register it with any Restate server:
//!   `restate deployments register http://HOST:P` or `POST /deployments` on the admin API.
//!   A non-loopback `--bind` needs an identity key (or `--allow-unsigned`). Corpus files: only
//!   under `--corpus-root DIR` (opened beneath it: a symbolic link cannot lead out) or named by
//!   `--corpus-file FILE` (that file alone, the very file granted; the batch command grants its
//!   workers its corpus and claim files so), URLs only under `--corpus-url PREFIX` (repeatable), neither by
//!   default, each at most `--corpus-max-bytes` (256 MiB); at most `--corpus-cache-bytes` of
//!   passages kept loaded (1 GiB; the least recently used go first). `--allow-steps`: run `kind: "step"`
//!   jobs too (off by default: a step is a model call on the worker's key).
//! - `balance --port P WORKER...`: an HTTP/2 balancer over worker addresses.
//! - `batch CLAIMS.jsonl [--corpus C.jsonl|URL] [--provider CONFIG.json] [--workers N]
//!   [--concurrency N] [--sentences-at-once N] [--rpm N] [--tpm N] [--retriever bm25|keyword]
//!   [--k N] [--retries N] [--out FILE] [--data-dir DIR] [--batch-id KEY] [--part-size N]
//!   [--stall-after SECONDS] [--ingress URL]...`: starts a Restate server and N workers (or, with `--ingress`, uses an
//!   existing cluster's nodes and the workers its operator registered, whose corpus policy must
//!   allow the batch's files; when the node asked stops answering, the next one is),
//!   checks the claims as one batch (keyed by its input, so the same command run again
//!   attaches to it; the data directory, `target/restate/data` by default, is kept), writes
//!   the results (JSONL, as they finish) and prints the summary.

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    match native::main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("verity-restate: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::net::SocketAddr;
    use std::path::PathBuf;
    use std::sync::Arc;

    use serde_json::{Map, Value, json};
    use verity_restate::batch::{self, Options};
    use verity_restate::corpus::{CorpusPolicy, CorpusSource};
    use verity_restate::host::{Host, Model};
    use verity_restate::workflow::{CheckInput, Limits, build_job};

    const USAGE: &str = "usage: verity-restate worker --port P|--bind ADDR:PORT [--provider CONFIG.json] \
        [--identity-key KEY]... [--allow-unsigned] [--corpus-root DIR]... [--corpus-file FILE]... [--corpus-url PREFIX]... \
        [--corpus-max-bytes N] [--corpus-cache-bytes N] [--allow-steps] \
        | balance --port P WORKER... | batch CLAIMS.jsonl [--corpus C.jsonl|URL] [--provider CONFIG.json] \
        [--workers N] [--concurrency N] [--sentences-at-once N] [--rpm N] [--tpm N] [--retriever bm25|keyword] [--k N] \
        [--retries N] [--out FILE] [--data-dir DIR] [--batch-id KEY] [--part-size N] [--stall-after SECONDS] [--measure-replay] [--ingress URL]...";

    fn value<T: std::str::FromStr>(
        args: &mut impl Iterator<Item = String>,
        flag: &str,
    ) -> Result<T, String> {
        let given = args.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        given.parse().map_err(|_| format!("{flag} {given:?} is not a valid value\n{USAGE}"))
    }

    fn runtime() -> Result<tokio::runtime::Runtime, String> {
        tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())
    }

    pub fn main() -> Result<(), String> {
        let mut args = std::env::args().skip(1);
        match args.next().as_deref() {
            Some("worker") => worker(args),
            Some("balance") => balance(args),
            Some("batch") => run_batch(args),
            Some("inprocess") => in_process(args),
            _ => Err(USAGE.to_owned()),
        }
    }

    fn worker(mut args: impl Iterator<Item = String>) -> Result<(), String> {
        let mut address: Option<SocketAddr> = None;
        let mut model = Model::Offline;
        let mut identity_keys: Vec<String> = Vec::new();
        let mut policy = CorpusPolicy::none();
        let (mut allow_steps, mut allow_unsigned) = (false, false);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--corpus-root" => {
                    policy = policy.with_root(&value::<PathBuf>(&mut args, "--corpus-root")?)?;
                }
                "--corpus-file" => {
                    policy = policy.with_file(&value::<PathBuf>(&mut args, "--corpus-file")?)?;
                }
                "--corpus-url" => {
                    policy =
                        policy.with_url_prefix(&value::<String>(&mut args, "--corpus-url")?)?;
                }
                "--corpus-max-bytes" => {
                    policy = policy.with_max_bytes(value(&mut args, "--corpus-max-bytes")?);
                }
                "--corpus-cache-bytes" => {
                    policy = policy.with_cache_bytes(value(&mut args, "--corpus-cache-bytes")?);
                }
                "--allow-steps" => allow_steps = true,
                "--allow-unsigned" => allow_unsigned = true,
                "--port" => {
                    let port: u16 = value(&mut args, "--port")?;
                    address = Some(SocketAddr::from(([127, 0, 0, 1], port)));
                }
                "--bind" => address = Some(value(&mut args, "--bind")?),
                "--provider" => {
                    let path: PathBuf = value(&mut args, "--provider")?;
                    let provider = batch::read_provider(&path)?;
                    verity_restate::http::refuse_key_in_the_clear(&provider)
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                    model = Model::provider(provider);
                }
                "--identity-key" => identity_keys.push(value(&mut args, "--identity-key")?),
                other => return Err(format!("unknown argument {other}\n{USAGE}")),
            }
        }
        let address = address.ok_or_else(|| format!("worker needs --port\n{USAGE}"))?;
        if let Ok(keys) = std::env::var("RESTATE_IDENTITY_KEYS") {
            identity_keys.extend(
                keys.split([',', ' ', '\n', '\t']).filter(|k| !k.is_empty()).map(str::to_owned),
            );
        }
        if !address.ip().is_loopback() && identity_keys.is_empty() && !allow_unsigned {
            return Err(format!(
                "refusing to serve {address} without --identity-key: any host that reaches it \
                 could run jobs on this worker's model and corpora. Give the Restate server's \
                 request-identity public key (or --allow-unsigned, behind a network that only \
                 the server reaches)"
            ));
        }
        let mut host = Host::with_corpus_policy(model, policy);
        if allow_steps {
            host = host.allowing_steps();
        }
        let endpoint = verity_restate::endpoint(Arc::new(host), &identity_keys)?;
        runtime()?
            .block_on(verity_restate::serve_worker(endpoint, address))
            .map_err(|e| format!("{address}: {e}"))
    }

    fn balance(mut args: impl Iterator<Item = String>) -> Result<(), String> {
        let mut port = None;
        let mut workers: Vec<SocketAddr> = Vec::new();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--port" => port = Some(value::<u16>(&mut args, "--port")?),
                other => workers.push(other.parse().map_err(|e| format!("{other}: {e}"))?),
            }
        }
        let port = port.ok_or_else(|| format!("balance needs --port\n{USAGE}"))?;
        if workers.is_empty() {
            return Err(format!("balance needs worker addresses\n{USAGE}"));
        }
        runtime()?.block_on(async move {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .map_err(|e| format!("port {port}: {e}"))?;
            verity_restate::balance::serve(listener, workers).await.map_err(|e| e.to_string())
        })
    }

    /// `inprocess CLAIMS.jsonl [--corpus C.jsonl]`: the same checks as `batch` with the
    /// offline model, in this process without Restate (the benchmark's baseline); prints
    /// `{"claims": N, "seconds": S}`. The corpus is loaded, hashed and indexed once, as a
    /// worker does.
    fn in_process(mut args: impl Iterator<Item = String>) -> Result<(), String> {
        let mut claims = None;
        let mut corpus = None;
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--corpus" => corpus = Some(value::<String>(&mut args, "--corpus")?),
                other => claims = Some(PathBuf::from(other)),
            }
        }
        let claims = claims.ok_or(USAGE)?;
        let started = std::time::Instant::now();
        let rows = batch::read_claims(&claims)?;
        let mut job = Map::new();
        job.insert("retriever".to_owned(), json!({"bm25": {"k": 4}}));
        let options = Options {
            claims,
            corpus,
            provider: None,
            workers: 1,
            limits: Limits::default(),
            job,
            out: PathBuf::new(),
            data_dir: PathBuf::new(),
            batch_id: None,
            binary: PathBuf::new(),
            progress: false,
            part_size: None,
            stall_after: None,
            measure_replay: false,
            ingress: Vec::new(),
        };
        let (input, _) = batch::batch_input(&options, &rows)?;
        let host = Host::with_corpus_policy(Model::Offline, batch::corpus_policy(&input)?);
        let runtime = runtime()?;
        let mut done = 0usize;
        for row in &batch::inline_rows(&rows) {
            let mut job = input.job.clone();
            verity_restate::claims::set_work(&mut job, row);
            let corpus = match &row.corpus {
                Some(passages) => CorpusSource::Passages(passages.clone()),
                None => CorpusSource::File(input.corpus.clone().ok_or("no corpus")?),
            };
            let check = CheckInput { job: Value::Object(job), corpus: Some(corpus), rate: None };
            let job = runtime.block_on(build_job(&host, &check)).map_err(|e| format!("{e:?}"))?;
            let outcome =
                runtime.block_on(verity_core::drive(job, &host.model, &verity_core::NoTools));
            done += usize::from(outcome.is_ok() || outcome.is_err());
        }
        let seconds = started.elapsed().as_secs_f64();
        println!("{}", json!({"claims": done, "seconds": seconds}));
        Ok(())
    }

    fn run_batch(mut args: impl Iterator<Item = String>) -> Result<(), String> {
        let mut claims = None;
        let mut corpus = None;
        let mut provider = None;
        let mut workers = 2;
        let mut limits = Limits::default();
        let (mut kind, mut k, mut retries) = ("bm25".to_owned(), 4u32, 0u32);
        let mut out = None;
        let mut data_dir = None;
        let mut batch_id = None;
        let mut part_size = None;
        let mut stall_after = std::time::Duration::from_secs(600);
        let mut measure_replay = false;
        let mut ingress = Vec::new();
        let mut sentences_at_once: Option<u32> = None;
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--corpus" => corpus = Some(value::<String>(&mut args, "--corpus")?),
                "--provider" => provider = Some(value::<PathBuf>(&mut args, "--provider")?),
                "--workers" => workers = value(&mut args, "--workers")?,
                "--concurrency" => limits.concurrency = value(&mut args, "--concurrency")?,
                "--sentences-at-once" => {
                    sentences_at_once = Some(value(&mut args, "--sentences-at-once")?);
                }
                "--rpm" => limits.requests_per_minute = Some(value(&mut args, "--rpm")?),
                "--tpm" => limits.tokens_per_minute = Some(value(&mut args, "--tpm")?),
                "--retriever" => kind = value(&mut args, "--retriever")?,
                "--k" => k = value(&mut args, "--k")?,
                "--retries" => retries = value(&mut args, "--retries")?,
                "--out" => out = Some(value::<PathBuf>(&mut args, "--out")?),
                "--data-dir" => data_dir = Some(value::<PathBuf>(&mut args, "--data-dir")?),
                "--batch-id" => batch_id = Some(value::<String>(&mut args, "--batch-id")?),
                "--part-size" => part_size = Some(value::<u64>(&mut args, "--part-size")?.max(1)),
                "--measure-replay" => measure_replay = true,
                "--ingress" => ingress.push(value::<String>(&mut args, "--ingress")?),
                "--stall-after" => {
                    stall_after =
                        std::time::Duration::from_secs(value(&mut args, "--stall-after")?);
                }
                other if other.starts_with('-') => {
                    return Err(format!("unknown flag {other}\n{USAGE}"));
                }
                other => claims = Some(PathBuf::from(other)),
            }
        }
        let claims = claims.ok_or(USAGE)?;
        let retriever = match kind.as_str() {
            "bm25" => json!({"bm25": {"k": k}}),
            "keyword" => json!("keyword"),
            other => return Err(format!("unknown retriever {other:?} (bm25 or keyword)")),
        };
        let mut job = Map::new();
        job.insert("retriever".to_owned(), retriever);
        job.insert("retry".to_owned(), json!({"maxRetries": retries}));
        if let Some(n) = sentences_at_once {
            // An answer row's sentences checked at once (the job refuses 0 or more than 16).
            job.insert("concurrency".to_owned(), json!(n));
        }
        let target = verity_restate::cluster::workspace_root().join("target/restate");
        let default_out = claims
            .file_stem()
            .map_or_else(|| "results".to_owned(), |stem| stem.to_string_lossy().into_owned());
        // The data directory is kept: the same command run again (after Ctrl-C, a crash or a
        // finished run) attaches to the batch in it instead of checking the claims again.
        let options = Options {
            out: out.unwrap_or_else(|| target.join(format!("{default_out}.results.jsonl"))),
            data_dir: data_dir.unwrap_or_else(|| target.join("data")),
            batch_id,
            claims,
            corpus,
            provider,
            workers,
            limits,
            job,
            binary: std::env::current_exe().map_err(|e| e.to_string())?,
            progress: true,
            part_size,
            stall_after: Some(stall_after),
            measure_replay,
            ingress,
        };
        let summary: Value = batch::run(&options)?;
        println!("{summary:#}");
        Ok(())
    }
}
