//! The batch command on a real Restate server: a claim file with a broken line refused before
//! anything starts, a labelled batch checked as `eval` checks it, a corpus by URL, an existing
//! cluster reached through whichever node answers, a check's error kept as its claim's
//! failure, and the same command run again paying for nothing twice.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use verity_core::NoTools;
use verity_restate::batch::{self, Row};
use verity_restate::cluster;
use verity_restate::corpus::{CorpusFile, CorpusSource, sha256_hex};
use verity_restate::host::{Host, Model};
use verity_restate::workflow::{BatchInput, BatchResult, CheckInput, ClaimRow, Limits, build_job};
use verity_tests::http::Aimock;

mod common;

use common::{
    EIFFEL, batch_of, batch_options, binary, bm25_job, corpus_file, corpus_server, fixture,
    journal, provider_file, restate, row, scratch, serial, submit_batch, write_jsonl,
};

#[test]
fn a_claim_file_with_a_broken_line_names_the_line_and_submits_nothing() {
    let dir = scratch("broken");
    let claims = dir.join("claims.jsonl");
    std::fs::write(
        &claims,
        "{\"id\": \"a\", \"claim\": \"One.\"}\n{\"id\": \"b\", \"claim\": \"Two.\"}\n{\"id\": \"c\", \"claim\": \n{\"id\": \"d\", \"claim\": \"Four.\"}\n",
    )
    .unwrap();
    let data = dir.join("data");
    let out = std::process::Command::new(binary())
        .args(["batch"])
        .arg(&claims)
        .args(["--corpus", "/nonexistent/never-read.jsonl", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains(&format!("{}:3:", claims.display())), "{stderr}");
    // Nothing was started, so nothing was submitted: the server's data directory was never made.
    assert!(!data.exists());
    // And a bad label names its line too.
    std::fs::write(&claims, "{\"claim\": \"One.\", \"label\": \"true\"}\n").unwrap();
    let error = batch::read_claims(&claims).unwrap_err();
    assert!(error.contains(":1: label \"true\""), "{error}");
    // And an id given twice.
    std::fs::write(
        &claims,
        "{\"id\": \"a\", \"claim\": \"One.\"}\n\n{\"id\": \"a\", \"claim\": \"Two.\"}\n",
    )
    .unwrap();
    let error = batch::read_claims(&claims).unwrap_err();
    assert!(error.contains(":3: the id \"a\" is given twice (first on line 1)"), "{error}");
    // A corpus that does not parse is named before anything starts.
    let corpus = dir.join("broken.jsonl");
    std::fs::write(&corpus, "{\"id\": \"p\", \"text\": \"Fine.\"}\n{\"id\": \"q\", \n").unwrap();
    std::fs::write(&claims, "{\"claim\": \"One.\"}\n").unwrap();
    let out = std::process::Command::new(binary())
        .args(["batch"])
        .arg(&claims)
        .arg("--corpus")
        .arg(&corpus)
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("broken.jsonl") && stderr.contains('2'), "{stderr}");
    assert!(!data.exists());
    // A flag's bad value is named as such.
    let out = std::process::Command::new(binary())
        .args(["batch"])
        .arg(&claims)
        .args(["--workers", "abc"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--workers \"abc\" is not a valid value"), "{stderr}");
}

/// The batch command on an existing cluster (`--ingress`, repeatable): nothing of its own is
/// started, and the node it names first does not answer (down), so it submits and waits
/// through the next; the batch ends with every claim's result, once.
#[test]
fn the_batch_command_uses_a_cluster_through_whichever_node_answers() {
    let _serial = serial();
    let dir = scratch("ingress");
    let claims = dir.join("claims.jsonl");
    let rows = [
        json!({"id": "a", "claim": "The Eiffel Tower is in Paris.", "corpus": {"e1": EIFFEL}}),
        json!({"id": "b", "claim": "Tokyo Tower is in Osaka.", "corpus": {"e1": "Tokyo Tower is in Minato, Tokyo."}}),
    ];
    write_jsonl(&claims, &rows);
    // The operator's worker, granted the claim file the batch names.
    let grant = ["--corpus-file".to_owned(), claims.display().to_string()];
    let (server, workers) = restate(&dir, 1, &grant, &[]);
    let down = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let out = dir.join("results.jsonl");
    let command = std::process::Command::new(binary())
        .arg("batch")
        .arg(&claims)
        .args(["--ingress", &down, "--ingress", &server.ingress_url(), "--data-dir"])
        .arg(dir.join("cli-data"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&command.stderr);
    assert!(command.status.success(), "{stderr}");
    let printed: Value = serde_json::from_slice(&command.stdout).unwrap();
    assert_eq!(printed["counts"]["claims"], 2, "{printed}");
    assert_eq!(printed["batch"]["workers"], Value::Null, "it started no workers: {printed}");
    let lines = std::fs::read_to_string(&out).unwrap();
    assert_eq!(lines.lines().count(), 2, "{lines}");
    // It ran on the cluster's own worker: the server holds its checks.
    let rows = cluster::admin_query(
        &server.admin_url(),
        "SELECT count(*) AS n FROM sys_invocation WHERE target_service_name = 'BatchCheck'",
    )
    .unwrap();
    assert_eq!(rows[0]["n"], 2, "{rows:?}");
    drop(workers);
}

#[test]
fn the_offline_model_checks_a_labelled_batch_with_its_own_corpora_like_eval() {
    let _serial = serial();
    let dir = scratch("offline");
    let claims = dir.join("claims.jsonl");
    let rows = [
        json!({"id": "a", "claim": "The Eiffel Tower is in Paris.", "corpus": {"e1": EIFFEL, "e2": "The Louvre is a museum."}, "label": "supported", "meta": {"gold": "e1"}}),
        json!({"id": "b", "claim": "Tokyo Tower is in Osaka.", "corpus": {"e1": "Tokyo Tower is in Minato, Tokyo."}, "label": "contradicted"}),
        json!({"id": "c", "claim": "The moon is made of cheese.", "corpus": {"e1": "The Louvre is a museum."}, "label": "insufficient"}),
    ];
    write_jsonl(&claims, &rows);
    let options = batch_options(&claims, &dir);
    let out = options.out.clone();
    let summary = batch::run(&options).unwrap();
    assert_eq!(summary["counts"]["claims"], 3);
    assert!(summary["accuracy"].is_number(), "{summary}");
    // The command itself, its stderr a pipe (a log, not a terminal): no progress line redrawn
    // with carriage returns, and the same counts.
    let command = std::process::Command::new(binary())
        .arg("batch")
        .arg(&claims)
        .args(["--workers", "1", "--data-dir"])
        .arg(dir.join("cli-data"))
        .arg("--out")
        .arg(dir.join("cli.jsonl"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&command.stderr);
    assert!(command.status.success(), "{stderr}");
    assert!(!stderr.contains('\r'), "a progress line redrawn in a log: {stderr:?}");
    let printed: Value = serde_json::from_slice(&command.stdout).unwrap();
    assert_eq!(printed["counts"], summary["counts"]);
    assert!(summary["confusion"].is_object(), "{summary}");
    // `eval` on the same file (in one process, no Restate) gives the same summary, field by
    // field, apart from the batch's own figures.
    let file_rows = batch::read_claims(&claims).unwrap();
    let evaluated = pollster::block_on(verity_restate::summary::evaluate(
        &claims.display().to_string(),
        &file_rows,
        &options.job,
        &verity_core::provider::offline::OfflineModel,
        verity_core::provider::offline::OFFLINE_MODEL_NAME,
        |_, _| {},
    ))
    .unwrap();
    let mut from_batch = summary.clone();
    from_batch.as_object_mut().unwrap().remove("batch");
    assert_eq!(from_batch, evaluated);
    // Two conclusive verdicts: row "a" cites its gold passage, row "b" has none.
    assert_eq!(evaluated["conclusive"], 2, "{evaluated}");
    assert_eq!(evaluated["conclusive_citing_gold_rate"], 0.5, "{evaluated}");
    let lines: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["id"], "a");
    // The same rows in one process give the same verdicts.
    let host = Arc::new(Host::new(Model::Offline));
    for (line, row) in lines.iter().zip(&rows) {
        let passages: BTreeMap<String, String> =
            serde_json::from_value(row["corpus"].clone()).unwrap();
        let check = CheckInput {
            job: json!({"kind": "claim", "claim": row["claim"], "retriever": {"bm25": {"k": 4}}}),
            corpus: Some(CorpusSource::Passages(passages)),
            rate: None,
        };
        let job = pollster::block_on(build_job(&host, &check)).unwrap();
        let outcome = pollster::block_on(verity_core::drive(job, &host.model, &NoTools));
        match outcome {
            Ok(value) => assert_eq!(line["result"]["value"], value),
            Err(failure) => assert_eq!(line["result"]["failure"]["kind"], failure.kind().as_str()),
        }
    }
    let _: Vec<Row> = batch::read_claims(&claims).unwrap();
}

/// Answers in a batch file (`"kind": "answer"`): each checked sentence by sentence through a
/// real Restate server, its result line the answer's report, the summary judging it faithful or
/// hallucinated as `eval` does in one process; a row's `decompose` reaches its job; a bad answer
/// is refused with its line.
#[test]
fn answers_in_a_batch_file_are_checked_sentence_by_sentence_like_eval() {
    let _serial = serial();
    let dir = scratch("answers");
    let claims = dir.join("answers.jsonl");
    let corpus = json!({"e1": EIFFEL, "e2": "The Louvre is a museum in Paris."});
    let rows = [
        json!({"id": "f", "kind": "answer", "answer": "The Eiffel Tower is in Paris [e1]. The Louvre is a museum.",
               "corpus": corpus, "label": "faithful", "decompose": true}),
        json!({"id": "h", "answer": "Hello! The Louvre is a museum. The moon is made of green cheese.",
               "corpus": corpus, "label": "hallucinated"}),
        json!({"id": "c", "claim": "The Eiffel Tower is in Paris.", "corpus": corpus, "label": "supported"}),
    ];
    write_jsonl(&claims, &rows);
    let mut options = batch_options(&claims, &dir);
    // Two sentences of an answer at once (`--sentences-at-once 2`); the claim's row has one
    // thing in flight and its job does not take the field.
    options.job.insert("concurrency".to_owned(), json!(2));
    let out = options.out.clone();
    let summary = batch::run(&options).unwrap();
    assert_eq!(summary["counts"]["claims"], 3, "{summary}");
    let lines: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let answer = &lines[1];
    assert_eq!(answer["id"], "h");
    assert_eq!(answer["answer"], rows[1]["answer"]);
    let report = &answer["result"]["value"];
    let sentences = report["sentences"].as_array().unwrap();
    assert_eq!(sentences.len(), 3, "{report}");
    assert_eq!(sentences[0]["status"], "not-checkable");
    assert_eq!(report["faithful"], false, "the moon's sentence is not supported: {report}");
    assert_eq!(lines[0]["result"]["value"]["sentences"][0]["marks"][0]["passage"], "e1");
    // The row that asks for its sentences split has them split (the baseline: one claim each);
    // the other row's are checked whole.
    let split = &lines[0]["result"]["value"]["sentences"][1];
    assert_eq!(split["claims"][0]["text"], "The Louvre is a museum.", "{split}");
    assert!(sentences[1].get("claims").is_none(), "{report}");
    assert!(lines[2]["result"]["value"]["assessment"].is_object(), "the claim's row is a claim");
    // `eval` in one process judges the same rows alike.
    let file_rows = batch::read_claims(&claims).unwrap();
    let evaluated = pollster::block_on(verity_restate::summary::evaluate(
        &claims.display().to_string(),
        &file_rows,
        &options.job,
        &verity_core::provider::offline::OfflineModel,
        verity_core::provider::offline::OFFLINE_MODEL_NAME,
        |_, _| {},
    ))
    .unwrap();
    let mut from_batch = summary.clone();
    from_batch.as_object_mut().unwrap().remove("batch");
    assert_eq!(from_batch, evaluated);
    assert_eq!(evaluated["confusion"]["hallucinated"]["hallucinated"], 1, "{evaluated}");

    let bad = dir.join("bad.jsonl");
    let hidden = "It opened in 1889.\u{202e} It is tall.";
    for (row, why) in [
        (json!({"kind": "answer", "answer": hidden}), "U+202E"),
        (json!({"kind": "answer", "claim": "x"}), "has no answer"),
        (json!({"answer": "It is tall.", "label": "supported"}), "faithful"),
        (json!({"kind": "answers", "claim": "x"}), "\"answer\""),
    ] {
        write_jsonl(&bad, &[json!({"claim": "A fine claim."}), row]);
        let error = batch::read_claims(&bad).unwrap_err();
        assert!(error.contains(":2: ") && error.contains(why), "{error}");
    }
}

#[test]
fn a_corpus_by_url_is_fetched_checked_and_refused_when_its_hash_does_not_match() {
    let _serial = serial();
    let dir = scratch("url");
    let local = corpus_file(&dir);
    let text = std::fs::read_to_string(&local.path).unwrap();
    let (url, _) = corpus_server(text, usize::MAX);
    // The batch command hashes the URL's bytes itself and the workers fetch it.
    let claims = dir.join("claims.jsonl");
    let rows = [
        json!({"id": "a", "claim": "The Eiffel Tower is in Paris.", "label": "supported", "meta": {"gold": "eiffel"}}),
        json!({"id": "b", "claim": "The moon is made of cheese.", "label": "insufficient"}),
    ];
    write_jsonl(&claims, &rows);
    let options =
        batch::Options { corpus: Some(url.clone()), workers: 2, ..batch_options(&claims, &dir) };
    let summary = batch::run(&options).unwrap();
    assert_eq!(summary["counts"]["claims"], 2, "{summary}");
    assert_eq!(summary["accuracy"], 1.0, "{summary}");
    // The gold passage is found in the shared corpus.
    assert_eq!(summary["confusion"]["supported"]["supported"], 1, "{summary}");
    assert_eq!(summary["conclusive_citing_gold_rate"], 1.0, "{summary}");
    let (input, _) = batch::batch_input(&options, &batch::read_claims(&claims).unwrap()).unwrap();
    assert_eq!(input.corpus.as_ref().unwrap().path, url);
    assert_eq!(input.corpus.as_ref().unwrap().sha256, local.sha256);

    // A wrong hash is refused by the workers, naming the URL and the hash it was given, not the one it read.
    // (A server of its own: the batch command's is in `data`.)
    let (server, workers) =
        restate(&dir.join("wrong"), 1, &["--corpus-url".to_owned(), url.clone()], &[]);
    let wrong = sha256_hex(b"another corpus");
    let input = BatchInput {
        corpus: Some(CorpusFile { path: url.clone(), sha256: wrong.clone() }),
        ..batch_of(vec![row("The Eiffel Tower is in Paris.")])
    };
    submit_batch(&server.ingress_url(), "wrong", &input);
    let error = batch::wait(&server.ingress_url(), "wrong", false).unwrap_err();
    assert!(error.contains("refused") && error.contains(&wrong), "{error}");
    assert!(
        !error.contains(&local.sha256) && error.contains(&url),
        "the refusal leaks the hash: {error}"
    );
    drop(workers);
}

#[test]
fn a_check_that_ends_with_an_error_is_its_claims_failure_not_the_batchs() {
    let _serial = serial();
    let dir = scratch("refused");
    let local = corpus_file(&dir);
    let text = std::fs::read_to_string(&local.path).unwrap();
    // The corpus is served once: to the worker that checks it when the batch starts. The
    // other worker's checks cannot fetch it (404) and end with a terminal error.
    let (url, _) = corpus_server(text, 1);
    let (server, workers) = restate(&dir, 2, &["--corpus-url".to_owned(), url.clone()], &[]);
    const CLAIMS: usize = 8;
    let rows = (0..CLAIMS)
        .map(|i| ClaimRow {
            id: Some(format!("x{i}")),
            claim: format!("The Eiffel Tower is in Paris ({i})."),
            ..ClaimRow::default()
        })
        .collect();
    let input = BatchInput {
        corpus: Some(CorpusFile { path: url, sha256: local.sha256 }),
        job: bm25_job(),
        limits: Limits { concurrency: 2, ..Limits::default() },
        ..batch_of(rows)
    };
    submit_batch(&server.ingress_url(), "refused", &input);
    let result: BatchResult = batch::wait(&server.ingress_url(), "refused", false).unwrap();
    assert_eq!(result.results.len(), CLAIMS);
    let refused: Vec<&str> =
        result.results.iter().filter_map(|claim| claim.result.refused.as_deref()).collect();
    let reports = result.results.iter().filter(|claim| claim.result.value.is_some()).count();
    eprintln!("{reports} reports, {} refused: {refused:?}", refused.len());
    assert!(!refused.is_empty(), "no check reached the worker without the corpus");
    assert!(reports > 0, "no check reached the worker with the corpus");
    assert_eq!(reports + refused.len(), CLAIMS);
    for message in &refused {
        assert!(message.contains("404") && message.contains("corpus.jsonl"), "{message}");
    }
    assert_eq!(result.progress.failed, refused.len() as u64);
    drop(workers);
}

#[test]
fn the_same_batch_command_run_again_attaches_to_its_batch_and_pays_nothing_twice() {
    let _serial = serial();
    let dir = scratch("again");
    let mock = Aimock::start(&fixture("claims.json")).unwrap();
    let provider = provider_file(&dir, &mock);
    let corpus = corpus_file(&dir);
    let claims = dir.join("claims.jsonl");
    let text: String = (0..6)
        .map(|i| {
            json!({"id": format!("a{i}"), "claim": format!("The Eiffel Tower is in Paris ({i}).")})
                .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(&claims, text).unwrap();
    let options = batch::Options {
        corpus: Some(corpus.path),
        provider: Some(provider),
        ..batch_options(&claims, &dir)
    };
    let out = options.out.clone();
    let first = batch::run(&options).unwrap();
    let results = std::fs::read_to_string(&out).unwrap();
    let requests = journal(&mock).len();
    assert_eq!(requests, 12, "two requests per claim");
    // Again, on the kept data directory: the same key, the same results, no new request.
    let again = batch::run(&options).unwrap();
    assert_eq!(again["batch"]["key"], first["batch"]["key"]);
    assert_eq!(again["counts"], first["counts"]);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), results);
    assert_eq!(journal(&mock).len(), requests, "the batch was checked again");
    // Another batch id is another batch.
    let other = batch::Options { batch_id: Some("other".to_owned()), ..options };
    let third = batch::run(&other).unwrap();
    assert_eq!(third["batch"]["key"], "other");
    assert_eq!(journal(&mock).len(), 2 * requests);
}
