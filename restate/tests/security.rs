//! Who can make a worker do what, on a real Restate server (SECURITY.md's table): corpora only
//! by their hash and only from the worker's root or its URLs, steps only where allowed, the
//! ingress kept from Restate's private handlers and a batch's rows, identity keys, and a
//! provider's key never over plain HTTP.

use std::time::Duration;

use serde_json::{Value, json};
use verity_restate::batch;
use verity_restate::cluster::{self, Ports, Server, Workers};
use verity_restate::corpus::{CorpusFile, CorpusSource, sha256_hex};
use verity_restate::workflow::{BatchInput, BatchResult, CheckInput};

mod common;

use common::{
    EIFFEL, batch_of, binary, check_outcome, check_result, corpus_file, corpus_server,
    eiffel_check, fixture, restate, row, scratch, serial, submit_batch, submit_check,
};

#[test]
fn a_corpus_whose_hash_does_not_match_is_refused_by_the_workers() {
    let _serial = serial();
    let dir = scratch("mismatch");
    let mut corpus = corpus_file(&dir);
    let wrong = sha256_hex(b"another corpus");
    corpus.sha256.clone_from(&wrong);
    let (server, _workers) =
        restate(&dir, 1, &["--corpus-root".to_owned(), dir.display().to_string()], &[]);
    let input = BatchInput {
        corpus: Some(corpus.clone()),
        ..batch_of(vec![row("The Eiffel Tower is in Paris.")])
    };
    submit_batch(&server.ingress_url(), "mismatch", &input);
    let error = batch::wait(&server.ingress_url(), "mismatch", false).unwrap_err();
    assert!(error.contains("refused"), "{error}");
    assert!(error.contains(&wrong), "{error}");
    assert!(error.contains("corpus.jsonl"), "{error}");
    // A single check given the file directly is refused the same way.
    let check = CheckInput {
        job: json!({"kind": "claim", "claim": "The Eiffel Tower is in Paris."}),
        corpus: Some(CorpusSource::File(corpus)),
        rate: None,
    };
    submit_check(&server.ingress_url(), "mismatch", &check);
    match check_outcome(&server.ingress_url(), "mismatch") {
        Err(message) => assert!(message.contains("refused"), "{message}"),
        Ok(value) => panic!("a refused corpus was used: {value}"),
    }

    // A file outside the worker's --corpus-root, named with its real hash (what a caller who
    // reaches the ingress would try, to read the worker's files), and a URL it was not given
    // are refused before they are read; a step job (the worker's model as a free proxy) is
    // refused on a worker not started with --allow-steps.
    let secret = dir.parent().unwrap().join(format!("secret-{}.txt", std::process::id()));
    std::fs::write(&secret, "{\"id\": \"s\", \"text\": \"The password is hunter2.\"}\n").unwrap();
    let hash = sha256_hex(&std::fs::read(&secret).unwrap());
    let (url, served) = corpus_server("{\"id\": \"u\", \"text\": \"x\"}\n".to_owned(), usize::MAX);
    let attempts = [
        (
            "outside",
            json!({"kind": "claim", "claim": "c"}),
            Some(CorpusFile { path: secret.display().to_string(), sha256: hash }),
        ),
        (
            "url",
            json!({"kind": "claim", "claim": "c"}),
            Some(CorpusFile { path: url, sha256: sha256_hex(b"x") }),
        ),
        ("step", json!({"kind": "step", "prompt": "Say hi.", "schema": {"type": "object"}}), None),
    ];
    for (key, job, corpus) in attempts {
        let check = CheckInput { job, corpus: corpus.map(CorpusSource::File), rate: None };
        submit_check(&server.ingress_url(), key, &check);
        let message = match check_outcome(&server.ingress_url(), key) {
            Err(message) => message,
            Ok(value) => panic!("{key}: the worker ran it: {value}"),
        };
        let expected = if key == "step" { "--allow-steps" } else { "refused" };
        assert!(message.contains(expected), "{key}: {message}");
        assert!(!message.contains("hunter2"), "{key}: {message}");
    }
    assert_eq!(*served.lock().unwrap(), 0, "the worker fetched a URL it was not given");
    std::fs::remove_file(&secret).ok();
}

/// Only what a person submits is public on the ingress: the rate limiter (whose `hold` with
/// `u64::MAX` would stall a batch and any re-run of it), a batch part's `run` and the worker's
/// `ModelCall` (which would spend the worker's model and key on any request) are Restate
/// private handlers, callable only from the workflows; what the batch CLI reads
/// (a part's `finished`, a batch's `progress`) stays readable.
#[test]
fn the_ingress_reaches_only_what_a_person_submits() {
    let _serial = serial();
    let dir = scratch("private");
    let (server, workers) = restate(&dir, 1, &[], &[]);
    let ingress = server.ingress_url();
    let post = |path: &str, body: Value| {
        cluster::blocking(reqwest::Method::POST, &format!("{ingress}/{path}"), Some(&body)).unwrap()
    };
    for (path, body) in [
        ("RateLimiter/victim/hold", json!(u64::MAX)),
        ("RateLimiter/victim/acquire", json!({"id": "x", "tokens": 1, "window": {"windowMs": 1}})),
        ("BatchPart/victim.0/run", json!({})),
        // A batch's row: a caller who knows the batch id cannot start it first.
        ("BatchCheck/victim.0/run", json!({"job": {"kind": "claim", "claim": "x"}})),
        // The worker's model (and its key): only a check's workflow calls it.
        ("ModelCall/complete", json!({"system": "", "messages": [], "tools": []})),
    ] {
        let (status, text) = post(path, body);
        assert!((400..500).contains(&status), "{path}: {status} {text}");
    }
    // Readable: a part's results (none yet) through its shared handler.
    let (status, text) = post("BatchPart/nothing/finished", json!(0));
    assert!(!text.to_lowercase().contains("private"), "{status} {text}");
    drop(workers);
}

/// A caller who knows a batch's id (one given with `--batch-id`, say) starts the check of its
/// first row before the batch does, with a job of their own: the batch's row is still its own
/// claim's check (its rows run as private `BatchCheck`s, not as the public `ClaimCheck` a
/// caller can start with any key).
#[test]
fn a_caller_who_knows_a_batch_id_cannot_write_its_rows() {
    let _serial = serial();
    let dir = scratch("rows");
    let (server, workers) = restate(&dir, 1, &[], &[]);
    let ingress = server.ingress_url();
    let forged = CheckInput {
        job: json!({"kind": "claim", "claim": "Tokyo Tower is in Osaka."}),
        corpus: Some(CorpusSource::Passages(
            [("e1".to_owned(), "Tokyo Tower is in Minato, Tokyo.".to_owned())].into(),
        )),
        rate: None,
    };
    for key in ["known.0", "known.1"] {
        submit_check(&ingress, key, &forged);
    }
    let input = json!({
        "claims": [
            {"id": "a", "claim": "The Eiffel Tower is in Paris.", "corpus": {"e1": EIFFEL}},
            {"id": "b", "claim": "The Eiffel Tower is in Paris.", "corpus": {"e1": EIFFEL}},
        ],
        "job": {},
    });
    cluster::submit(&ingress, "Batch", "known", &input).unwrap();
    let result: BatchResult = batch::wait(&ingress, "known", false).unwrap();
    for row in &result.results {
        let report = row.result.value.as_ref().unwrap_or_else(|| panic!("{row:?}"));
        assert_eq!(report["claim"], json!("The Eiffel Tower is in Paris."), "{row:?}");
    }
    drop(workers);
}

/// A worker bound to an address others reach, without an identity key, would run jobs for
/// anyone: it refuses to start unless told `--allow-unsigned`.
#[test]
fn a_worker_on_a_non_loopback_address_needs_an_identity_key() {
    let output = std::process::Command::new(binary())
        .args(["worker", "--bind", "0.0.0.0:1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("--identity-key"), "{stderr}");
    assert!(stderr.contains("--allow-unsigned"), "{stderr}");
    // With the flag it gets past the check (and fails only to bind port 1 unprivileged, or
    // serves: either way not the refusal).
    let mut child = std::process::Command::new(binary())
        .args(["worker", "--bind", "0.0.0.0:1", "--allow-unsigned"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    child.kill().ok();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("refusing to serve"), "{stderr}");
}

/// A POST to a worker's `ClaimCheck` over HTTP/2 (as Restate speaks to it), unsigned: the
/// status.
fn unsigned_post(port: u16, path: &str) -> u16 {
    let url = format!("http://127.0.0.1:{port}{path}");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::builder().no_proxy().http2_prior_knowledge().build().unwrap();
        let response = client
            .post(&url)
            .header("content-type", "application/vnd.restate.invocation.v5")
            .body(Vec::new())
            .send()
            .await
            .unwrap();
        response.status().as_u16()
    })
}

#[test]
fn a_worker_with_an_identity_key_answers_only_its_signed_server() {
    let _serial = serial();
    let dir = scratch("identity");
    let public = std::fs::read_to_string(fixture("identity.pub")).unwrap().trim().to_owned();
    let signing = vec![(
        "RESTATE_WORKER__INVOKER__REQUEST_IDENTITY_PRIVATE_KEY_PEM_FILE".to_owned(),
        fixture("identity.pem").display().to_string(),
    )];
    let server = Server::start_with_env(&dir.join("data"), Ports::free(), &signing).unwrap();
    // The server names the public key of the private key it signs with (as docs/restate.md says to
    // find it): the fixture's.
    let log = std::fs::read_to_string(dir.join("data/server.log")).unwrap();
    assert!(log.contains(&format!("kid: \"{public}\"")), "the server's log does not name {public}");

    // The key by flag: the server that signs with its private key registers and runs a check.
    let args = vec!["--identity-key".to_owned(), public.clone()];
    let workers = Workers::start(&binary(), 1, &args, &[]).unwrap();
    cluster::register(&server.admin_url(), &workers.url()).unwrap();
    let job = json!({"kind": "claim", "claim": "The Eiffel Tower is in Paris.",
                     "retriever": {"bm25": {"k": 4}}});
    submit_check(&server.ingress_url(), "signed", &eiffel_check(job, "eiffel"));
    let result = check_result(&server.ingress_url(), "signed");
    assert!(result.value.is_some(), "{result:?}");

    // An unsigned request to the same worker (anyone on its network) is refused: discovery and
    // an invocation alike. Without a key, the same requests get through to the SDK.
    let port = workers.workers[0].port;
    assert_eq!(unsigned_post(port, "/discover"), 401);
    assert_eq!(unsigned_post(port, "/invoke/ClaimCheck/run"), 401);
    let open = Workers::start(&binary(), 1, &[], &[]).unwrap();
    assert_ne!(unsigned_post(open.workers[0].port, "/invoke/ClaimCheck/run"), 401);

    // The key from RESTATE_IDENTITY_KEYS, and another server's key: registration is refused.
    let other = "publickeyv1_w7YHemBctH5Ck2nQRQ47iBBqhNHy4FV7t2Usbye2A6f";
    let env = vec![("RESTATE_IDENTITY_KEYS".to_owned(), other.to_owned())];
    let wrong = Workers::start(&binary(), 1, &[], &env).unwrap();
    assert_eq!(unsigned_post(wrong.workers[0].port, "/discover"), 401);
    let refused = cluster::register(&server.admin_url(), &wrong.url()).unwrap_err();
    assert!(
        refused.contains("401") || refused.to_lowercase().contains("unauthorized"),
        "{refused}"
    );

    // A key that is not one stops the worker at start, naming it.
    let output = std::process::Command::new(binary())
        .args(["worker", "--port", "1", "--identity-key", "not-a-key"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("\"not-a-key\""), "{stderr}");
    drop((workers, open, wrong));
}

#[test]
fn a_worker_refuses_a_provider_key_over_plain_http_to_another_host() {
    let dir = scratch("clear");
    let provider = dir.join("provider.json");
    std::fs::write(
        &provider,
        json!({"api": "openai", "baseUrl": "http://192.0.2.7:8080/v1", "model": "m",
               "apiKey": "sk-secret-1"})
        .to_string(),
    )
    .unwrap();
    let output = std::process::Command::new(binary())
        .args(["worker", "--port", "1", "--provider"])
        .arg(&provider)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("plain HTTP") && stderr.contains("192.0.2.7"), "{stderr}");
    assert!(!stderr.contains("sk-secret-1"), "{stderr}");
}
