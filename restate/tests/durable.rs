//! Durable claim checking on a real Restate server (from npm), on loopback only: a batch that
//! survives a killed worker and a restarted server, a tool interrupted between its start and
//! its result, and bad inputs. The server binary must be installed (`npm ci`, which
//! `cargo xtask test` runs): these tests fail, never skip, without it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use verity_core::{JobFailureKind, NoTools};
use verity_restate::batch::{self, Row};
use verity_restate::cluster::{self, Cluster, Outcome, Ports, Server, Workers};
use verity_restate::corpus::{CorpusFile, CorpusSource, sha256_hex};
use verity_restate::host::{Host, Model};
use verity_restate::workflow::{
    BatchInput, BatchResult, CheckInput, CheckResult, ClaimRow, Limits, build_job,
};
use verity_tests::http::Aimock;

/// One Restate server at a time: they are heavy for a two-core machine.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_verity-restate"))
}

/// A fresh directory under `target/restate-tests/`.
fn scratch(name: &str) -> PathBuf {
    let dir = cluster::workspace_root().join("target/restate-tests").join(name);
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

const EIFFEL: &str =
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.";

fn corpus_file(dir: &Path) -> CorpusFile {
    let passages = [
        ("eiffel", EIFFEL),
        ("louvre", "The Louvre is the world's most-visited art museum."),
        ("tokyo", "Tokyo Tower is a communications and observation tower in Minato."),
        ("height", "Its antenna tops out at three hundred thirty-three metres, finished in 1958."),
    ];
    let text: String = passages
        .iter()
        .map(|(id, text)| json!({"id": id, "text": text}).to_string() + "\n")
        .collect();
    let path = dir.join("corpus.jsonl");
    std::fs::write(&path, &text).unwrap();
    CorpusFile { path: path.display().to_string(), sha256: sha256_hex(text.as_bytes()) }
}

/// An OpenAI-compatible provider at `mock`; streamed (the mock then sends each response in
/// pieces, with its fixture's latency between them).
fn provider_file(dir: &Path, mock: &Aimock) -> PathBuf {
    let path = dir.join("provider.json");
    let config = json!({
        "api": "openai", "baseUrl": format!("{}/v1", mock.url()), "model": "gpt-4o-mini",
        "stream": true,
    });
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

fn progress(server: &Server, key: &str) -> Value {
    cluster::query(&server.ingress_url(), "Batch", key, "progress").unwrap_or(Value::Null)
}

/// The `BatchCheck` invocations the server holds that have not completed (the checks in
/// flight, by the server's own tables, not the batch's counter); `None` when it does not
/// answer.
fn checks_in_flight(server: &Server) -> Option<u64> {
    let rows = cluster::admin_query(
        &server.admin_url(),
        "SELECT count(*) AS n FROM sys_invocation \
         WHERE target_service_name = 'BatchCheck' AND status <> 'completed'",
    )
    .ok()?;
    rows.first()?["n"].as_u64()
}

/// Waits until the batch has finished at least `done` checks, checking all along that no more
/// than 4 are in flight; the most seen in flight.
fn wait_for_done(server: &Server, key: &str, done: u64) -> u64 {
    let start = Instant::now();
    let mut most = 0;
    loop {
        let now = progress(server, key);
        // The fan-out is bounded: never more checks in flight than the batch allows.
        if let Some(in_flight) = checks_in_flight(server) {
            assert!(in_flight <= 4, "{in_flight} checks in flight: {now}");
            most = most.max(in_flight);
        }
        if now["done"].as_u64().unwrap_or(0) >= done {
            break most;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the batch stalled: {}",
            progress(server, key)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The request bodies the mock received.
fn journal(mock: &Aimock) -> Vec<String> {
    let (status, body) =
        cluster::blocking_get(&format!("{}/__aimock/journal", mock.url())).unwrap();
    assert_eq!(status, 200, "{body}");
    let value: Value = serde_json::from_str(&body).unwrap();
    let entries = match value {
        Value::Array(entries) => entries,
        other => other["entries"].as_array().cloned().unwrap_or_default(),
    };
    entries.iter().map(|entry| entry["body"].to_string()).collect()
}

/// The same checks in one process, without Restate: `drive` over the same transport (each
/// on its own thread, so the mock's latency is paid once, not sixty times).
fn in_process(provider: &Path, input: &BatchInput) -> Vec<Result<Value, verity_core::JobFailed>> {
    std::thread::scope(|scope| {
        let checks: Vec<_> = input
            .claims
            .iter()
            .map(|row| {
                scope.spawn(move || {
                    let runtime =
                        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                    let host = Host::with_corpus_policy(
                        Model::provider(batch::read_provider(provider).unwrap()),
                        batch::corpus_policy(input).unwrap(),
                    );
                    let mut job = input.job.clone();
                    job.insert("kind".into(), json!("claim"));
                    job.insert("claim".into(), json!(row.claim));
                    let check = CheckInput {
                        job: Value::Object(job),
                        corpus: Some(CorpusSource::File(input.corpus.clone().unwrap())),
                        rate: None,
                    };
                    let job = runtime.block_on(build_job(&host, &check)).expect("the job builds");
                    runtime.block_on(verity_core::drive(job, &host.model, &NoTools))
                })
            })
            .collect();
        checks.into_iter().map(|check| check.join().unwrap()).collect()
    })
}

/// `claims` rows about the Eiffel Tower, each its own (id `{prefix}{i}`, the claim ending
/// "({word} i).", which the fixtures match), against the batch's corpus.
fn tower_rows(claims: usize, prefix: &str, word: &str) -> Vec<ClaimRow> {
    (0..claims)
        .map(|i| ClaimRow {
            id: Some(format!("{prefix}{i}")),
            claim: format!("The Eiffel Tower stands in Paris, France ({word} {i})."),
            corpus: None,
        })
        .collect()
}

/// Asserts that a batch's results equal an in-process run of the same claims, against a
/// fresh mock of `fixtures` (the batch's mock dropped first: its journal is the batch's).
/// The value is the whole report: verdict, citations, summary, requests, tokens, cost.
fn assert_same_as_in_process(
    result: &BatchResult,
    fixtures: &Path,
    dir: &Path,
    input: &BatchInput,
) {
    let fresh = Aimock::start(fixtures).unwrap();
    let expected = in_process(&provider_file(dir, &fresh), input);
    assert_eq!(result.results.len(), expected.len());
    for (n, (claim, expected)) in result.results.iter().zip(&expected).enumerate() {
        let expected = CheckResult::of(expected.clone(), claim.result.spent);
        assert_eq!(claim.result.value, expected.value, "claim {n}");
        assert_eq!(claim.result.failure, expected.failure, "claim {n}");
    }
    // What the batch spent, as its progress counts it, is what one run in a process spends:
    // a request made again after an interruption is not counted twice, nor paid twice.
    let spent = |outcome: &Result<Value, verity_core::JobFailed>| match outcome {
        Ok(report) => (
            report["requests"].as_u64().unwrap_or(0),
            report["usage"]["input"].as_u64().unwrap_or(0)
                + report["usage"]["output"].as_u64().unwrap_or(0),
        ),
        Err(failed) => {
            let spent = failed.spent();
            (u64::from(spent.requests), spent.usage.input + spent.usage.output)
        }
    };
    let (requests, tokens) =
        expected.iter().map(spent).fold((0, 0), |(r, t), (dr, dt)| (r + dr, t + dt));
    assert_eq!(
        (result.progress.requests, result.progress.tokens),
        (requests, tokens),
        "requests and tokens the batch counted, against one in-process run"
    );
}

/// Fixtures for `claims` claims whose requests all differ: claim `i` (its text ends "(check
/// i).") is assessed with a rationale naming it, so its summary request (which carries the
/// assessment) names it too; every seventh claim is contradicted.
fn distinct_fixtures(dir: &Path, claims: usize) -> PathBuf {
    let mut fixtures: Vec<Value> = (0..claims)
        .map(|i| {
            let verdict = if i % 7 == 3 { "contradicted" } else { "supported" };
            json!({
                "match": {"toolName": "record_assessment", "userMessage": format!("(check {i}).")},
                "response": {
                    "toolCalls": [{"id": "call_assess", "name": "record_assessment", "arguments": {
                        "verdict": verdict, "confidence": 0.93, "citations": [EIFFEL],
                        "rationale": format!("The passage places the tower in Paris (check {i})."),
                    }}],
                    "usage": {"prompt_tokens": 400, "completion_tokens": 60},
                },
                "latency": 25, "chunkSize": 20,
            })
        })
        .collect();
    fixtures.push(json!({
        "match": {"toolName": "submit"},
        "response": {
            "toolCalls": [{"id": "call_summary", "name": "submit", "arguments": {
                "text": "Summarized: the evidence speaks to where the Eiffel Tower is.",
            }}],
            "usage": {"prompt_tokens": 200, "completion_tokens": 20},
        },
        "latency": 25, "chunkSize": 20,
    }));
    let path = dir.join("fixtures.json");
    std::fs::write(&path, json!({"fixtures": fixtures}).to_string()).unwrap();
    path
}

fn epoch_ms() -> u64 {
    u64::try_from(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis(),
    )
    .unwrap()
}

#[test]
fn a_batch_survives_a_killed_worker_and_a_restarted_server() {
    let _serial = serial();
    let dir = scratch("survives");
    const CLAIMS: usize = 60;
    let fixtures = distinct_fixtures(&dir, CLAIMS);
    let mock = Aimock::start(&fixtures).unwrap();
    let provider = provider_file(&dir, &mock);
    let corpus = corpus_file(&dir);
    let input = BatchInput {
        corpus: Some(corpus),
        claims: tower_rows(CLAIMS, "c", "check"),
        job: Map::from_iter([("retriever".to_owned(), json!({"bm25": {"k": 4}}))]),
        limits: Limits { concurrency: 4, ..Limits::default() },
        claims_file: None,
        // Three parts (25, 25, 10): the crash and the restart fall inside and between parts.
        part_size: Some(25),
    };
    let ports = Ports::free();
    let mut server = Server::start(&dir.join("data"), ports).unwrap();
    let args = vec![
        "--provider".to_owned(),
        provider.display().to_string(),
        "--corpus-root".to_owned(),
        dir.display().to_string(),
    ];
    let mut workers = Workers::start(&binary(), 2, &args, &[]).unwrap();
    cluster::register(&server.admin_url(), &workers.url()).unwrap();
    let key = "survives";
    cluster::submit(&server.ingress_url(), "Batch", key, &serde_json::to_value(&input).unwrap())
        .unwrap();

    // kill -9 one worker in the middle, and start it again.
    let mut most = wait_for_done(&server, key, 10);
    let killed = epoch_ms();
    workers.workers[0].kill9();
    // The kill's instant: from the signal to the process gone (kill9 waits for it).
    let dead = epoch_ms();
    std::thread::sleep(Duration::from_millis(300));
    workers.workers[0].restart().unwrap();
    // Stop the server in the middle, and start it again on the same data directory.
    most = most.max(wait_for_done(&server, key, 30));
    eprintln!("at most {most} checks in flight (the server's count)");
    assert!(most >= 2, "the checks never ran side by side");
    let before_stop = progress(&server, key)["done"].as_u64().unwrap();
    assert!(before_stop < CLAIMS as u64, "the batch finished before the server was stopped");
    let stopping = epoch_ms();
    server.stop();
    let stopped = epoch_ms();
    std::thread::sleep(Duration::from_millis(500));
    server.restart().unwrap();
    // And kill -9 the server later (nothing flushed), and start it again.
    wait_for_done(&server, key, before_stop + 10);
    assert!(
        progress(&server, key)["done"].as_u64().unwrap() < CLAIMS as u64,
        "the batch finished before the server was killed"
    );
    let server_killed = epoch_ms();
    server.kill9();
    let server_dead = epoch_ms();
    std::thread::sleep(Duration::from_millis(300));
    server.restart().unwrap();
    let server_back = epoch_ms();
    let _ = ports;

    let result: BatchResult = batch::wait(&server.ingress_url(), key, false).unwrap();
    // Every claim ends with exactly one result, in order.
    assert_eq!(result.results.len(), CLAIMS);
    for (index, claim) in result.results.iter().enumerate() {
        assert_eq!(claim.index, index);
        assert_eq!(claim.id.as_deref(), Some(format!("c{index}").as_str()));
        let report = claim.result.value.as_ref().unwrap_or_else(|| panic!("{claim:?}"));
        let verdict = if index % 7 == 3 { "contradicted" } else { "supported" };
        assert_eq!(report["assessment"]["verdict"], verdict, "claim {index}");
        let rationale = report["assessment"]["rationale"].as_str().unwrap_or_default();
        assert!(rationale.ends_with(&format!("(check {index}).")), "claim {index}: {rationale}");
    }
    assert_eq!(result.progress.done, CLAIMS as u64);
    // The results as they finished, part by part (what the batch command appends while it
    // waits): each claim once, each part holding its own slice only.
    let finished = batch::results(&server.ingress_url(), key).unwrap();
    let indexes: Vec<usize> = finished.iter().map(|r| r.index).collect();
    assert_eq!(indexes, (0..CLAIMS).collect::<Vec<_>>());
    let part = |n: u64, from: u64| {
        let part = verity_restate::workflow::part_key(key, n);
        let value = cluster::query_with(
            &server.ingress_url(),
            "BatchPart",
            &part,
            "finished",
            Some(&json!(from)),
        )
        .unwrap();
        value.as_array().unwrap().iter().map(|r| r["index"].as_u64().unwrap()).collect::<Vec<_>>()
    };
    let mut second = part(1, 0);
    second.sort_unstable();
    assert_eq!(second, (25..50).collect::<Vec<_>>());
    assert_eq!(part(2, 4).len(), 6);
    let progress = batch::batch_progress(&server.ingress_url(), key).unwrap();
    assert_eq!((progress.parts, progress.started, progress.running_parts.len()), (3, 3, 0));
    assert_eq!(result.progress.failed, 0);
    assert_eq!(result.progress.running, 0);
    assert_eq!(result.progress.tokens, CLAIMS as u64 * 680);

    // No request was made twice for a response that had been journaled. Every request here
    // differs (each claim's assessment names its claim, its summary its assessment), so a
    // request seen twice is a model call made again. That is right only for a call whose
    // response was not journaled when its worker died or the server stopped: its first
    // occurrence began before the interruption ended, and not so long before it began that its
    // response (streamed in about 15 pieces 25 ms apart, then journaled) was surely in.
    let _ = server_back;
    let repeats = repeats_only_in_flight(
        &mock,
        2 * CLAIMS,
        &[
            ("the worker's kill -9", killed, dead),
            ("the server's stop", stopping, stopped),
            ("the server's kill -9", server_killed, server_dead),
        ],
        input.limits.concurrency as usize,
    );
    eprintln!("requests repeated: {repeats:?} (kill -9 of a worker, stop, kill -9 of the server)");
    let first = first_requests(&mock);
    // What "in flight" means here, measured: from a claim's assessment request to its summary
    // request (the assessment streamed, journaled, the summary's slot taken) in the run.
    let mut gaps: Vec<u64> = (0..CLAIMS)
        .filter_map(|i| {
            let mark = format!("(check {i}).");
            let start = |assessment: bool| {
                first
                    .iter()
                    .filter(|(body, _)| {
                        body.contains(&mark) && body.contains("record_assessment") == assessment
                    })
                    .map(|(_, at)| *at)
                    .min()
            };
            Some(start(false)?.saturating_sub(start(true)?))
        })
        .collect();
    gaps.sort_unstable();
    eprintln!(
        "assessment to summary: median {} ms, most {} ms (the in-flight bound is {IN_FLIGHT_MS} ms)",
        gaps[gaps.len() / 2],
        gaps[gaps.len() - 1]
    );
    drop(mock);
    assert_same_as_in_process(&result, &fixtures, &dir, &input);
    drop(workers);
}

/// A batch that cannot move (its only worker gone) is not waited for in silence: the CLI's
/// watch gives up after its stall bound, naming what the server reports of the batch's
/// invocations.
#[test]
fn a_batch_that_makes_no_progress_ends_the_wait_with_what_the_server_says() {
    let _serial = serial();
    let dir = scratch("stall");
    let server = Server::start(&dir.join("data"), Ports::free()).unwrap();
    let mut workers = Workers::start(&binary(), 1, &[], &[]).unwrap();
    cluster::register(&server.admin_url(), &workers.url()).unwrap();
    workers.workers[0].kill9();
    let input = BatchInput {
        corpus: None,
        claims: vec![ClaimRow {
            id: None,
            claim: "The Eiffel Tower is in Paris.".into(),
            corpus: Some(BTreeMap::from([("e1".to_owned(), EIFFEL.to_owned())])),
        }],
        claims_file: None,
        job: Map::new(),
        limits: Limits::default(),
        part_size: None,
    };
    cluster::submit(
        &server.ingress_url(),
        "Batch",
        "stall",
        &serde_json::to_value(&input).unwrap(),
    )
    .unwrap();
    let watch = batch::Watch {
        admin: Some(server.admin_url()),
        stall_after: Some(Duration::from_secs(8)),
        ..batch::Watch::of(&[server.ingress_url()], false)
    };
    let started = Instant::now();
    let error = watch.wait("stall", &mut |_| Ok(())).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
    assert!(error.contains("no progress for 8 s"), "{error}");
    assert!(error.contains("Batch") && !error.contains("says: nothing"), "{error}");
    drop(workers);
}

/// The same worker binary on a three-node Restate cluster (replicated metadata and log, each
/// partition on two nodes): a batch of 200 claims in four parts, with one node and one worker
/// killed with SIGKILL in the middle and both started again. Every claim ends with exactly one
/// result, equal to an in-process run, and no request whose response had been journaled is
/// made again.
#[test]
fn a_batch_on_a_three_node_cluster_survives_a_killed_node_and_a_killed_worker() {
    let _serial = serial();
    let dir = scratch("cluster");
    const CLAIMS: usize = 200;
    let fixtures = distinct_fixtures(&dir, CLAIMS);
    let mock = Aimock::start(&fixtures).unwrap();
    let provider = provider_file(&dir, &mock);
    let input = BatchInput {
        corpus: Some(corpus_file(&dir)),
        claims: tower_rows(CLAIMS, "c", "check"),
        claims_file: None,
        job: Map::from_iter([("retriever".to_owned(), json!({"bm25": {"k": 4}}))]),
        limits: Limits { concurrency: 8, ..Limits::default() },
        part_size: Some(50),
    };
    let started = Instant::now();
    let mut cluster = Cluster::start(&dir.join("cluster"), 3).unwrap();
    eprintln!("a 3-node cluster serving in {:.1} s", started.elapsed().as_secs_f64());
    let args = vec![
        "--provider".to_owned(),
        provider.display().to_string(),
        "--corpus-root".to_owned(),
        dir.display().to_string(),
    ];
    let mut workers = Workers::start(&binary(), 2, &args, &[]).unwrap();
    // Registered through one node, submitted through another: any node serves the cluster.
    cluster::register(&cluster.nodes[0].admin_url(), &workers.url()).unwrap();
    cluster.wait_for_service("Batch", "progress").unwrap();
    let key = "cluster";
    let ingress = cluster.nodes[2].ingress_url();
    // Submitted once the leaders have settled (a new cluster moves them for its first seconds).
    let settling = Instant::now();
    loop {
        let last = cluster.leadership_changes().last().copied().unwrap_or(0);
        if epoch_ms().saturating_sub(last) >= SETTLED_MS {
            break;
        }
        assert!(settling.elapsed() < Duration::from_secs(60), "the leaders never settled");
        std::thread::sleep(Duration::from_millis(200));
    }
    let submitted = epoch_ms();
    cluster::submit(&ingress, "Batch", key, &serde_json::to_value(&input).unwrap()).unwrap();
    let done = |ingress: &str| batch::batch_progress(ingress, key).map_or(0, |p| p.progress.done);
    let wait_for = |ingress: &str, at_least: u64| {
        let start = Instant::now();
        while done(ingress) < at_least {
            assert!(
                start.elapsed() < Duration::from_secs(180),
                "the batch stalled at {}",
                done(ingress)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for(&ingress, 40);
    // The CLI's watch, asking node 2 first: killed below, it must go on through node 3.
    let watcher = {
        let nodes = [cluster.nodes[1].ingress_url(), ingress.clone()];
        std::thread::spawn(move || {
            let mut seen = 0;
            let result = batch::Watch::of(&nodes, false).wait(key, &mut |finished| {
                seen += finished.len();
                Ok(())
            });
            (result, seen)
        })
    };
    // kill -9 node 2 (not the one the test asks, the one the watch asks) and a worker
    // together; the worker back after a moment, the node only once the batch has ended (the
    // two others carry it; a node that comes back makes the leaders move again, while the old
    // leader may still be acting, which no log bounds).
    let killed = epoch_ms();
    cluster.nodes[1].kill9();
    workers.workers[0].kill9();
    // From the first signal to both processes gone (kill9 waits for each).
    let dead = epoch_ms();
    assert!(done(&ingress) < CLAIMS as u64, "the batch finished before the kill");
    std::thread::sleep(Duration::from_millis(1_000));
    workers.workers[0].restart().unwrap();
    eprintln!("node 2 and worker 1 killed at {} done; the worker back", done(&ingress));

    let result: BatchResult = batch::wait(&ingress, key, false).unwrap();
    assert_eq!(result.results.len(), CLAIMS);
    let (watched, seen) = watcher.join().unwrap();
    let watched = watched.expect("the watch went on through another node");
    assert_eq!(watched, result, "the watch that lost its node saw the same batch");
    assert_eq!(seen, CLAIMS, "each result handed on once");
    for (index, claim) in result.results.iter().enumerate() {
        assert_eq!((claim.index, claim.id.clone()), (index, Some(format!("c{index}"))));
    }
    assert_eq!((result.progress.done, result.progress.failed), (CLAIMS as u64, 0));
    // Every check ran once to its end: each claim's BatchCheck completed once on the cluster.
    let rows = cluster::admin_query(
        &cluster.nodes[0].admin_url(),
        "SELECT count(*) AS n FROM sys_invocation WHERE target_service_name = 'BatchCheck'",
    )
    .unwrap();
    assert_eq!(rows[0]["n"], CLAIMS, "{rows:?}");
    // Interruptions: the kills, and the leadership moves the nodes logged since. The leaders
    // had settled before the batch was submitted, so every move came from the kill (the killed
    // node's partitions taken over); each lasts from the new leader's takeover to the old
    // leader's stepping down, as they logged them (a killed leader logs none).
    let moves: Vec<(u64, u64)> =
        cluster.leadership_moves().into_iter().filter(|(from, _)| *from > submitted).collect();
    assert!(
        moves.iter().all(|(from, _)| *from >= killed),
        "a partition changed leader in a healthy cluster, before the kill: {moves:?} (killed at {killed})"
    );
    let mut interruptions = vec![("the kills", killed, dead)];
    interruptions.extend(moves.iter().map(|&(from, to)| ("a leadership move", from, to)));
    let repeats = repeats_only_in_flight(
        &mock,
        2 * CLAIMS,
        &interruptions,
        input.limits.concurrency as usize,
    );
    eprintln!(
        "requests repeated: {} in flight at the kills, {} at {} leadership moves",
        repeats[0],
        repeats[1..].iter().sum::<usize>(),
        moves.len()
    );
    // The node back: it serves the finished batch as the others do.
    cluster.nodes[1].restart().unwrap();
    let back = Instant::now();
    let at_node_2 = loop {
        if let Ok(progress) = batch::batch_progress(&cluster.nodes[1].ingress_url(), key) {
            break progress;
        }
        assert!(back.elapsed() < Duration::from_secs(60), "node 2 did not serve again");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(at_node_2.progress.done, CLAIMS as u64);
    drop(mock);
    assert_same_as_in_process(&result, &fixtures, &dir, &input);
    drop(workers);
}

#[test]
fn a_tool_interrupted_between_its_start_and_its_result_comes_back_as_an_unknown_outcome() {
    let _serial = serial();
    let dir = scratch("tally");
    let mock = Aimock::start(&fixture("tally.json")).unwrap();
    let provider = provider_file(&dir, &mock);
    let count = dir.join("count");
    let server = Server::start(&dir.join("data"), Ports::free()).unwrap();
    let args =
        vec!["--provider".to_owned(), provider.display().to_string(), "--allow-steps".to_owned()];
    let env = [
        ("VERITY_TALLY_FILE".to_owned(), count.display().to_string()),
        ("VERITY_TALLY_HOLD_MS".to_owned(), "60000".to_owned()),
    ];
    let mut workers = Workers::start(&binary(), 1, &args, &env).unwrap();
    cluster::register(&server.admin_url(), &workers.url()).unwrap();
    let step = CheckInput {
        job: json!({
            "kind": "step",
            "prompt": "Tally once, then submit.",
            "schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            "tools": [{"name": "tally", "description": "Counts its runs.", "parameters": {"type": "object"}}],
        }),
        corpus: None,
        rate: None,
    };
    cluster::submit(
        &server.ingress_url(),
        "ClaimCheck",
        "tally",
        &serde_json::to_value(&step).unwrap(),
    )
    .unwrap();
    // The tool has started (it counted) and holds its result: kill the worker now.
    let start = Instant::now();
    while std::fs::read_to_string(&count).unwrap_or_default().trim() != "1" {
        assert!(start.elapsed() < Duration::from_secs(60), "the tool never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    workers.workers[0].kill9();
    workers.workers[0].remove_env("VERITY_TALLY_HOLD_MS");
    workers.workers[0].restart().unwrap();

    let start = Instant::now();
    let result = loop {
        match cluster::output(&server.ingress_url(), "ClaimCheck", "tally") {
            Outcome::Done(value) => break value,
            Outcome::Failed(message) => panic!("the step failed: {message}"),
            Outcome::Pending => {}
        }
        assert!(start.elapsed() < Duration::from_secs(60), "the step did not finish");
        std::thread::sleep(Duration::from_millis(50));
    };
    let result: CheckResult = serde_json::from_value(result).unwrap();
    // The step went on: the model was told the outcome is unknown and submitted.
    assert_eq!(result.value, Some(json!({"text": "tallied"})), "{result:?}");
    assert_eq!(result.spent.requests, 2);
    // The tool ran once.
    assert_eq!(std::fs::read_to_string(&count).unwrap().trim(), "1");
    let bodies = journal(&mock);
    assert_eq!(bodies.len(), 2, "{bodies:?}");
    assert!(bodies[1].contains("unknown outcome"), "{}", bodies[1]);
    assert!(!bodies[1].contains("counted: this is run"), "{}", bodies[1]);

    // The same with a tool declared replay-safe: it is run again instead.
    std::fs::remove_file(&count).unwrap();
    let worker = &mut workers.workers[0];
    worker.kill9();
    worker.set_env("VERITY_TALLY_HOLD_MS", "60000");
    worker.restart().unwrap();
    let mut safe = step.clone();
    safe.job["tools"][0]["replaySafe"] = json!(true);
    let safe = serde_json::to_value(&safe).unwrap();
    cluster::submit(&server.ingress_url(), "ClaimCheck", "tally-safe", &safe).unwrap();
    let start = Instant::now();
    while std::fs::read_to_string(&count).unwrap_or_default().trim() != "1" {
        assert!(start.elapsed() < Duration::from_secs(60), "the tool never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    worker.kill9();
    worker.remove_env("VERITY_TALLY_HOLD_MS");
    worker.restart().unwrap();
    let start = Instant::now();
    while !matches!(
        cluster::output(&server.ingress_url(), "ClaimCheck", "tally-safe"),
        Outcome::Done(_)
    ) {
        assert!(start.elapsed() < Duration::from_secs(60), "the step did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        std::fs::read_to_string(&count).unwrap().trim(),
        "2",
        "a replay-safe tool runs again"
    );
    let bodies = journal(&mock);
    assert!(bodies[3].contains("counted: this is run 2"), "{}", bodies[3]);
}

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

#[test]
fn a_corpus_whose_hash_does_not_match_is_refused_by_the_workers() {
    let _serial = serial();
    let dir = scratch("mismatch");
    let mut corpus = corpus_file(&dir);
    let wrong = sha256_hex(b"another corpus");
    corpus.sha256.clone_from(&wrong);
    let server = Server::start(&dir.join("data"), Ports::free()).unwrap();
    let workers =
        Workers::start(&binary(), 1, &["--corpus-root".to_owned(), dir.display().to_string()], &[])
            .unwrap();
    cluster::register(&server.admin_url(), &workers.url()).unwrap();
    let input = BatchInput {
        corpus: Some(corpus.clone()),
        claims: vec![ClaimRow {
            id: None,
            claim: "The Eiffel Tower is in Paris.".into(),
            corpus: None,
        }],
        job: Map::new(),
        limits: Limits::default(),
        claims_file: None,
        part_size: None,
    };
    cluster::submit(
        &server.ingress_url(),
        "Batch",
        "mismatch",
        &serde_json::to_value(&input).unwrap(),
    )
    .unwrap();
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
    cluster::submit(
        &server.ingress_url(),
        "ClaimCheck",
        "mismatch",
        &serde_json::to_value(&check).unwrap(),
    )
    .unwrap();
    let start = Instant::now();
    loop {
        match cluster::output(&server.ingress_url(), "ClaimCheck", "mismatch") {
            Outcome::Failed(message) => {
                assert!(message.contains("refused"), "{message}");
                break;
            }
            Outcome::Done(value) => panic!("a refused corpus was used: {value}"),
            Outcome::Pending => {}
        }
        assert!(start.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(50));
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
        cluster::submit(
            &server.ingress_url(),
            "ClaimCheck",
            key,
            &serde_json::to_value(&check).unwrap(),
        )
        .unwrap();
        let start = Instant::now();
        let message = loop {
            match cluster::output(&server.ingress_url(), "ClaimCheck", key) {
                Outcome::Failed(message) => break message,
                Outcome::Done(value) => panic!("{key}: the worker ran it: {value}"),
                Outcome::Pending => {}
            }
            assert!(start.elapsed() < Duration::from_secs(60));
            std::thread::sleep(Duration::from_millis(50));
        };
        let expected = if key == "step" { "--allow-steps" } else { "refused" };
        assert!(message.contains(expected), "{key}: {message}");
        assert!(!message.contains("hunter2"), "{key}: {message}");
    }
    assert_eq!(*served.lock().unwrap(), 0, "the worker fetched a URL it was not given");
    std::fs::remove_file(&secret).ok();
}

/// Only what a person submits is public on the ingress: the rate limiter (whose `hold` with
/// `u64::MAX` would stall a batch and any re-run of it) and a batch part's `run` are Restate
/// private handlers, callable only from the batch's own workflows; what the batch CLI reads
/// (a part's `finished`, a batch's `progress`) stays readable.
#[test]
fn the_ingress_reaches_only_what_a_person_submits() {
    let _serial = serial();
    let dir = scratch("private");
    let server = Server::start(&dir.join("data"), Ports::free()).unwrap();
    let workers = Workers::start(&binary(), 1, &[], &[]).unwrap();
    cluster::register(&server.admin_url(), &workers.url()).unwrap();
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
    let server = Server::start(&dir.join("data"), Ports::free()).unwrap();
    let workers = Workers::start(&binary(), 1, &[], &[]).unwrap();
    cluster::register(&server.admin_url(), &workers.url()).unwrap();
    let ingress = server.ingress_url();
    let forged = CheckInput {
        job: json!({"kind": "claim", "claim": "Tokyo Tower is in Osaka."}),
        corpus: Some(CorpusSource::Passages(
            [("e1".to_owned(), "Tokyo Tower is in Minato, Tokyo.".to_owned())].into(),
        )),
        rate: None,
    };
    let forged = serde_json::to_value(&forged).unwrap();
    for key in ["known.0", "known.1"] {
        cluster::submit(&ingress, "ClaimCheck", key, &forged).unwrap();
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
    std::fs::write(&claims, rows.iter().map(|r| r.to_string() + "\n").collect::<String>()).unwrap();
    let server = Server::start(&dir.join("data"), Ports::free()).unwrap();
    // The operator's worker, granted the claim file the batch names.
    let grant = ["--corpus-file".to_owned(), claims.display().to_string()];
    let workers = Workers::start(&binary(), 1, &grant, &[]).unwrap();
    cluster::register(&server.admin_url(), &workers.url()).unwrap();
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
    std::fs::write(&claims, rows.iter().map(|r| r.to_string() + "\n").collect::<String>()).unwrap();
    let out = dir.join("results.jsonl");
    let options = batch::Options {
        claims: claims.clone(),
        corpus: None,
        provider: None,
        workers: 1,
        limits: Limits::default(),
        job: Map::from_iter([("retriever".to_owned(), json!({"bm25": {"k": 4}}))]),
        out: out.clone(),
        data_dir: dir.join("data"),
        batch_id: None,
        binary: binary(),
        progress: false,
        part_size: None,
        stall_after: None,
        measure_replay: false,
        ingress: Vec::new(),
    };
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

/// How long a model call is in flight at most here: its request, its response (streamed in
/// about 15 pieces 25 ms apart) and the journaling of it (the run prints what it measured).
const IN_FLIGHT_MS: u64 = 1_500;

/// How long no partition may have changed leader before a batch is submitted to a cluster:
/// a new cluster spreads its leaders over its first seconds, and a move is an interruption.
const SETTLED_MS: u64 = 3_000;

/// Each distinct request body the mock received, with when it first arrived.
fn first_requests(mock: &Aimock) -> HashMap<String, u64> {
    let mut first = HashMap::new();
    for entry in journal_entries(mock) {
        let at = entry["timestamp"].as_u64().expect("a journal entry has a timestamp");
        first.entry(entry["body"].to_string()).or_insert(at);
    }
    first
}

/// Asserts that the mock saw `calls` distinct requests (every request of the run differs, so
/// a request seen twice is a model call made again) and that each one made again was in
/// flight when one of `interruptions` happened (`(what, from, to)`, ms since the epoch: a
/// kill is an instant, `from == to`; a graceful stop runs from its start to the server gone;
/// a leadership move from the new leader's takeover to the old leader's stepping down, as the
/// nodes logged them): its first attempt began by `to`, no more than [`IN_FLIGHT_MS`] before
/// `from`, and it was made again after `from`. Restate runs a side effect again only when its
/// result was not recorded ("the closure should tolerate retries, that is Restate might
/// re-execute the closure multiple times until it records a result": the SDK docs of `run`),
/// and at an interruption no more than `concurrency` calls are in flight, so none excuses
/// more. The number repeated at each.
fn repeats_only_in_flight(
    mock: &Aimock,
    calls: usize,
    interruptions: &[(&str, u64, u64)],
    concurrency: usize,
) -> Vec<usize> {
    let entries = journal_entries(mock);
    let mut first: HashMap<String, u64> = HashMap::new();
    let mut repeated: Vec<(u64, u64)> = Vec::new();
    for entry in &entries {
        let body = entry["body"].to_string();
        let at = entry["timestamp"].as_u64().expect("a journal entry has a timestamp");
        match first.get(&body) {
            Some(earlier) => repeated.push((*earlier, at)),
            None => {
                first.insert(body, at);
            }
        }
    }
    assert_eq!(first.len(), calls, "one distinct request per model call");
    let mut counts = vec![0; interruptions.len()];
    for (began, again) in &repeated {
        // The latest interruption it was in flight at.
        let at = interruptions
            .iter()
            .enumerate()
            .filter(|(_, (_, from, to))| {
                began <= to && began + IN_FLIGHT_MS >= *from && again > from
            })
            .max_by_key(|(_, (_, from, _))| *from)
            .map(|(n, _)| n);
        let Some(at) = at else {
            panic!(
                "a request first made at {began} was made again at {again}, though it was not \
                 in flight at any interruption: {interruptions:?}"
            );
        };
        counts[at] += 1;
    }
    for ((what, from, _), count) in interruptions.iter().zip(&counts) {
        assert!(
            *count <= concurrency,
            "{count} requests made again after {what} at {from}, more than the {concurrency} in flight"
        );
    }
    counts
}

/// The mock's journal entries (for their timestamps).
fn journal_entries(mock: &Aimock) -> Vec<Value> {
    let (_, body) = cluster::blocking_get(&format!("{}/__aimock/journal", mock.url())).unwrap();
    match serde_json::from_str::<Value>(&body).unwrap() {
        Value::Array(entries) => entries,
        other => other["entries"].as_array().cloned().unwrap_or_default(),
    }
}

#[test]
fn a_retry_after_wait_is_a_durable_timer_that_a_worker_restart_does_not_reset() {
    let _serial = serial();
    let dir = scratch("timer");
    let mock = Aimock::start(&fixture("retry.json")).unwrap();
    let provider = provider_file(&dir, &mock);
    let server = Server::start(&dir.join("data"), Ports::free()).unwrap();
    let args =
        vec!["--provider".to_owned(), provider.display().to_string(), "--allow-steps".to_owned()];
    let mut workers = Workers::start(&binary(), 1, &args, &[]).unwrap();
    cluster::register(&server.admin_url(), &workers.url()).unwrap();
    let step = CheckInput {
        job: json!({
            "kind": "step",
            "prompt": "Wait for the rate limit, then submit.",
            "schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            "retry": {"maxRetries": 2},
        }),
        corpus: None,
        rate: None,
    };
    cluster::submit(
        &server.ingress_url(),
        "ClaimCheck",
        "timer",
        &serde_json::to_value(&step).unwrap(),
    )
    .unwrap();
    // The first request is answered 429 with Retry-After: 4 s. Two seconds into the wait, the
    // worker dies; it is started again at once.
    let start = Instant::now();
    while journal_entries(&mock).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(30), "no request was made");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_secs(2));
    workers.workers[0].kill9();
    workers.workers[0].restart().unwrap();
    let start = Instant::now();
    let result = loop {
        match cluster::output(&server.ingress_url(), "ClaimCheck", "timer") {
            Outcome::Done(value) => break value,
            Outcome::Failed(message) => panic!("the step failed: {message}"),
            Outcome::Pending => {}
        }
        assert!(start.elapsed() < Duration::from_secs(60), "the step did not finish");
        std::thread::sleep(Duration::from_millis(50));
    };
    let result: CheckResult = serde_json::from_value(result).unwrap();
    assert_eq!(result.value, Some(json!({"text": "after the wait"})), "{result:?}");
    assert_eq!((result.spent.requests, result.spent.retries), (2, 1));
    // Two requests: the failed one was journaled and not made again. The retry came when the
    // wait begun before the restart ended (4 s after the first), not 4 s after the restart.
    let entries = journal_entries(&mock);
    assert_eq!(entries.len(), 2, "{entries:?}");
    let at = |n: usize| entries[n]["timestamp"].as_f64().unwrap();
    let waited = at(1) - at(0);
    eprintln!("the retry came {waited} ms after the first request");
    assert!(waited >= 4000.0, "the Retry-After wait was cut short: {waited} ms");
    assert!(waited < 5500.0, "the wait restarted with the worker: {waited} ms");
}

/// The mock's request start instants (milliseconds since the Unix epoch), in order.
fn request_instants(mock: &Aimock) -> Vec<u64> {
    let mut at: Vec<u64> = journal_entries(mock)
        .iter()
        .map(|entry| entry["timestamp"].as_u64().expect("a journal entry has a timestamp"))
        .collect();
    at.sort_unstable();
    at
}

#[test]
fn every_model_request_of_a_batch_waits_for_the_shared_rate_limiter() {
    let _serial = serial();
    let dir = scratch("rate");
    let mock = Aimock::start(&fixture("claims.json")).unwrap();
    let provider = provider_file(&dir, &mock);
    // 20 claims of two requests each, 6 requests per 2-second window (the window is a minute
    // outside tests), 8 checks in flight: the limiter, not the fan-out, is the bound.
    const CLAIMS: usize = 20;
    const PER_WINDOW: usize = 6;
    const WINDOW_MS: u64 = 2_000;
    let input = BatchInput {
        corpus: Some(corpus_file(&dir)),
        claims: tower_rows(CLAIMS, "r", "rate"),
        job: Map::from_iter([("retriever".to_owned(), json!({"bm25": {"k": 4}}))]),
        limits: Limits {
            concurrency: 8,
            requests_per_minute: Some(PER_WINDOW as u64),
            rate_window_ms: Some(WINDOW_MS),
            ..Limits::default()
        },
        claims_file: None,
        part_size: None,
    };
    let server = Server::start(&dir.join("data"), Ports::free()).unwrap();
    let args = vec![
        "--provider".to_owned(),
        provider.display().to_string(),
        "--corpus-root".to_owned(),
        dir.display().to_string(),
    ];
    let workers = Workers::start(&binary(), 2, &args, &[]).unwrap();
    cluster::register(&server.admin_url(), &workers.url()).unwrap();
    cluster::submit(&server.ingress_url(), "Batch", "rate", &serde_json::to_value(&input).unwrap())
        .unwrap();
    let result: BatchResult = batch::wait(&server.ingress_url(), "rate", false).unwrap();
    assert_eq!(result.results.len(), CLAIMS);
    for claim in &result.results {
        let report = claim.result.value.as_ref().unwrap_or_else(|| panic!("{claim:?}"));
        assert_eq!(report["assessment"]["verdict"], "supported");
    }

    let at = request_instants(&mock);
    assert_eq!(at.len(), 2 * CLAIMS, "one request per model call");
    // No window holds more requests than allowed. The limiter bounds the instants it grants;
    // a check sends its request a little after its instant (a timer wakes it), so the windows
    // measured here from the mock's clock are shorter than the limiter's by that slack.
    const SLACK_MS: u64 = 500;
    let mut fullest = 0;
    for (n, start) in at.iter().enumerate() {
        let inside = at[n..].iter().take_while(|t| **t < start + WINDOW_MS - SLACK_MS).count();
        fullest = fullest.max(inside);
        assert!(
            inside <= PER_WINDOW,
            "{inside} requests within {} ms from {start}: more than {PER_WINDOW}: {at:?}",
            WINDOW_MS - SLACK_MS
        );
    }
    // And the limiter really held requests back: 40 requests at 6 a window need 6 windows
    // after the first (unlimited, 8 checks in flight take well under a second).
    let span = at[at.len() - 1] - at[0];
    let windows = (2 * CLAIMS).div_ceil(PER_WINDOW) as u64 - 1;
    eprintln!("40 requests over {span} ms, at most {fullest} in any window");
    assert!(
        span + SLACK_MS >= windows * WINDOW_MS,
        "the requests took {span} ms: the limiter did not hold them back ({at:?})"
    );
    assert_eq!(fullest, PER_WINDOW, "the limiter let whole windows through");
    drop(workers);
}

/// A loopback HTTP server that answers `GET /corpus.jsonl` with `body` the first `serve`
/// times and 404 after; how many requests it answered.
fn corpus_server(body: String, serve: usize) -> (String, Arc<Mutex<usize>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/corpus.jsonl", listener.local_addr().unwrap());
    let count = Arc::new(Mutex::new(0));
    let counted = Arc::clone(&count);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buffer = [0; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buffer[..n]),
                }
            }
            let mut served = counted.lock().unwrap();
            *served += 1;
            let reply = if *served <= serve && request.starts_with(b"GET /corpus.jsonl ") {
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else {
                "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    .to_owned()
            };
            stream.write_all(reply.as_bytes()).ok();
        }
    });
    (url, count)
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
    std::fs::write(&claims, rows.iter().map(|r| r.to_string() + "\n").collect::<String>()).unwrap();
    let options = batch::Options {
        claims: claims.clone(),
        corpus: Some(url.clone()),
        provider: None,
        workers: 2,
        limits: Limits::default(),
        job: Map::from_iter([("retriever".to_owned(), json!({"bm25": {"k": 4}}))]),
        out: dir.join("results.jsonl"),
        data_dir: dir.join("data"),
        batch_id: None,
        binary: binary(),
        progress: false,
        part_size: None,
        stall_after: None,
        measure_replay: false,
        ingress: Vec::new(),
    };
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
    let server = Server::start(&dir.join("data2"), Ports::free()).unwrap();
    let workers =
        Workers::start(&binary(), 1, &["--corpus-url".to_owned(), url.clone()], &[]).unwrap();
    cluster::register(&server.admin_url(), &workers.url()).unwrap();
    let wrong = sha256_hex(b"another corpus");
    let input = BatchInput {
        corpus: Some(CorpusFile { path: url.clone(), sha256: wrong.clone() }),
        claims: vec![ClaimRow {
            id: None,
            claim: "The Eiffel Tower is in Paris.".into(),
            corpus: None,
        }],
        job: Map::new(),
        limits: Limits::default(),
        claims_file: None,
        part_size: None,
    };
    cluster::submit(
        &server.ingress_url(),
        "Batch",
        "wrong",
        &serde_json::to_value(&input).unwrap(),
    )
    .unwrap();
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
    let server = Server::start(&dir.join("data"), Ports::free()).unwrap();
    let workers =
        Workers::start(&binary(), 2, &["--corpus-url".to_owned(), url.clone()], &[]).unwrap();
    cluster::register(&server.admin_url(), &workers.url()).unwrap();
    const CLAIMS: usize = 8;
    let input = BatchInput {
        corpus: Some(CorpusFile { path: url, sha256: local.sha256 }),
        claims: (0..CLAIMS)
            .map(|i| ClaimRow {
                id: Some(format!("x{i}")),
                claim: format!("The Eiffel Tower is in Paris ({i})."),
                corpus: None,
            })
            .collect(),
        job: Map::from_iter([("retriever".to_owned(), json!({"bm25": {"k": 4}}))]),
        limits: Limits { concurrency: 2, ..Limits::default() },
        claims_file: None,
        part_size: None,
    };
    cluster::submit(
        &server.ingress_url(),
        "Batch",
        "refused",
        &serde_json::to_value(&input).unwrap(),
    )
    .unwrap();
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
    let out = dir.join("results.jsonl");
    let options = batch::Options {
        claims,
        corpus: Some(corpus.path),
        provider: Some(provider),
        workers: 1,
        limits: Limits::default(),
        job: Map::from_iter([("retriever".to_owned(), json!({"bm25": {"k": 4}}))]),
        out: out.clone(),
        data_dir: dir.join("data"),
        batch_id: None,
        binary: binary(),
        progress: false,
        part_size: None,
        stall_after: None,
        measure_replay: false,
        ingress: Vec::new(),
    };
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

#[test]
fn a_retry_after_seen_by_one_check_holds_the_whole_batch_back() {
    let _serial = serial();
    let dir = scratch("hold");
    // Claim 0's first assessment is answered 429 with Retry-After: 3 s; everything else as in
    // claims.json.
    let mut fixtures: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("claims.json")).unwrap()).unwrap();
    let limited = json!({
        "match": {"toolName": "record_assessment", "userMessage": "(hold 0).", "sequenceIndex": 0},
        "response": {
            "error": {"message": "Rate limit reached for requests.", "type": "rate_limit_error"},
            "status": 429,
            "retryAfter": 3,
        },
    });
    fixtures["fixtures"].as_array_mut().unwrap().insert(0, limited);
    let path = dir.join("fixtures.json");
    std::fs::write(&path, fixtures.to_string()).unwrap();
    let mock = Aimock::start(&path).unwrap();
    let provider = provider_file(&dir, &mock);
    let input = BatchInput {
        corpus: Some(corpus_file(&dir)),
        claims: tower_rows(2, "h", "hold"),
        job: Map::from_iter([
            ("retriever".to_owned(), json!({"bm25": {"k": 4}})),
            ("retry".to_owned(), json!({"maxRetries": 1})),
        ]),
        // A limit far above what two claims use: only the hold can slow them.
        limits: Limits { concurrency: 2, requests_per_minute: Some(1_000), ..Limits::default() },
        claims_file: None,
        part_size: None,
    };
    let server = Server::start(&dir.join("data"), Ports::free()).unwrap();
    let args = vec![
        "--provider".to_owned(),
        provider.display().to_string(),
        "--corpus-root".to_owned(),
        dir.display().to_string(),
    ];
    let workers = Workers::start(&binary(), 1, &args, &[]).unwrap();
    cluster::register(&server.admin_url(), &workers.url()).unwrap();
    cluster::submit(&server.ingress_url(), "Batch", "hold", &serde_json::to_value(&input).unwrap())
        .unwrap();
    let result: BatchResult = batch::wait(&server.ingress_url(), "hold", false).unwrap();
    for claim in &result.results {
        assert!(claim.result.value.is_some(), "{claim:?}");
    }
    // Five requests: both assessments at once (claim 0's answered 429), then, after the hold,
    // claim 1's summary and claim 0's retried assessment and its summary. Claim 1 saw no 429
    // itself: without the shared hold its summary would follow its assessment at once.
    let entries = journal_entries(&mock);
    assert_eq!(entries.len(), 5, "{entries:?}");
    let at = |entry: &Value| entry["timestamp"].as_u64().unwrap();
    let limited = entries
        .iter()
        .find(|entry| entry["body"].to_string().contains("(hold 0)."))
        .map(at)
        .unwrap();
    let mut after = Vec::new();
    for entry in &entries {
        let body = entry["body"].to_string();
        if at(entry) < limited || body.contains("(hold 1).") || at(entry) == limited {
            continue;
        }
        let waited = at(entry) - limited;
        assert!(waited >= 2_900, "a request came {waited} ms after the 429, inside the hold");
        after.push(waited);
    }
    eprintln!("after the 429: {after:?} ms");
    assert_eq!(after.len(), 3, "{entries:?}");
    drop(workers);
}

/// A provider that answers a batch's request 429 with `Retry-After: 31536000` (a year, in
/// seconds) does not stop the batch: the check that saw it fails at once (a wait beyond its
/// job's `retryAfterCapMs`, 2 s here, is not waited for), and the whole batch is held back by
/// the rate limiter for the cap, not the year: the next check's first request goes out at
/// least 2 s and at most 8 s after the 429, and the batch ends. Its watch gives up after 20 s
/// without progress, so a hold of the year (or of the default cap, 60 s) fails the test
/// instead of hanging it.
#[test]
fn a_retry_after_of_a_year_holds_a_batch_on_restate_at_most_the_cap() {
    const CAP_MS: u64 = 2_000;
    let _serial = serial();
    let dir = scratch("year");
    // Claim 0's first assessment is answered 429 with a year's Retry-After; everything else as
    // in claims.json.
    let mut fixtures: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("claims.json")).unwrap()).unwrap();
    let limited = json!({
        "match": {"toolName": "record_assessment", "userMessage": "(year 0).", "sequenceIndex": 0},
        "response": {
            "error": {"message": "Rate limit reached for requests.", "type": "rate_limit_error"},
            "status": 429,
            "retryAfter": 31_536_000,
        },
    });
    fixtures["fixtures"].as_array_mut().unwrap().insert(0, limited);
    let path = dir.join("fixtures.json");
    std::fs::write(&path, fixtures.to_string()).unwrap();
    let mock = Aimock::start(&path).unwrap();
    let provider = provider_file(&dir, &mock);
    let input = BatchInput {
        corpus: Some(corpus_file(&dir)),
        claims: tower_rows(2, "y", "year"),
        job: Map::from_iter([
            ("retriever".to_owned(), json!({"bm25": {"k": 4}})),
            ("retry".to_owned(), json!({"maxRetries": 1, "retryAfterCapMs": CAP_MS})),
        ]),
        // One check at a time, claim 0 first, so claim 1 starts after the 429; a limit far
        // above what two claims use: only the hold can slow it.
        limits: Limits { concurrency: 1, requests_per_minute: Some(1_000), ..Limits::default() },
        claims_file: None,
        part_size: None,
    };
    let server = Server::start(&dir.join("data"), Ports::free()).unwrap();
    let args = vec![
        "--provider".to_owned(),
        provider.display().to_string(),
        "--corpus-root".to_owned(),
        dir.display().to_string(),
    ];
    let workers = Workers::start(&binary(), 1, &args, &[]).unwrap();
    cluster::register(&server.admin_url(), &workers.url()).unwrap();
    cluster::submit(&server.ingress_url(), "Batch", "year", &serde_json::to_value(&input).unwrap())
        .unwrap();
    let watch = batch::Watch {
        stall_after: Some(Duration::from_secs(20)),
        ..batch::Watch::of(&[server.ingress_url()], false)
    };
    let result = watch.wait("year", &mut |_| Ok(())).unwrap();
    let [limited, other] = &result.results[..] else { panic!("{result:?}") };
    let failure = limited.result.failure.as_ref().unwrap_or_else(|| panic!("{limited:?}"));
    assert_eq!(failure.kind(), JobFailureKind::AssessRequest, "{failure:?}");
    assert!(failure.to_string().contains("HTTP 429"), "{failure:?}");
    assert_eq!((limited.result.spent.requests, limited.result.spent.retries), (1, 0));
    assert_eq!(
        other.result.value.as_ref().map(|report| &report["assessment"]["verdict"]),
        Some(&json!("supported")),
        "{other:?}"
    );
    // Three requests: claim 0's assessment, answered 429, then claim 1's assessment, which
    // waited for the hold (claim 1 saw no 429 itself), and its summary.
    let entries = journal_entries(&mock);
    assert_eq!(entries.len(), 3, "{entries:?}");
    let at = |entry: &Value| entry["timestamp"].as_u64().unwrap();
    assert!(entries[0]["body"].to_string().contains("(year 0)."), "{entries:?}");
    assert!(entries[1]["body"].to_string().contains("(year 1)."), "{entries:?}");
    let held = at(&entries[1]).saturating_sub(at(&entries[0]));
    eprintln!("claim 1's first request went out {held} ms after the 429");
    assert!(held >= CAP_MS - 100, "claim 1's first request came {held} ms after the 429: no hold");
    assert!(held <= CAP_MS + 6_000, "the batch was held {held} ms, past the {CAP_MS} ms cap");
    drop(workers);
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
    let input = CheckInput {
        job: json!({"kind": "claim", "claim": "The Eiffel Tower is in Paris.",
                    "retriever": {"bm25": {"k": 4}}}),
        corpus: Some(CorpusSource::Passages(BTreeMap::from([(
            "eiffel".to_owned(),
            EIFFEL.to_owned(),
        )]))),
        rate: None,
    };
    cluster::submit(
        &server.ingress_url(),
        "ClaimCheck",
        "signed",
        &serde_json::to_value(&input).unwrap(),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let result = loop {
        match cluster::output(&server.ingress_url(), "ClaimCheck", "signed") {
            Outcome::Done(value) => break value,
            Outcome::Failed(message) => panic!("the check failed: {message}"),
            Outcome::Pending if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Outcome::Pending => panic!("no result within a minute"),
        }
    };
    let result: CheckResult = serde_json::from_value(result).unwrap();
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
