//! Durable claim checking on a real Restate server (from npm), on loopback only: a batch that
//! survives a killed worker and a restarted server, and a killed node of a three-node cluster;
//! a tool interrupted between its start and its result; a `Retry-After` wait across a worker's
//! restart; a batch that cannot move; and an answer's sentences checked at once, across a
//! killed worker and to a typed failure. The server binary must be installed (`npm ci`, which
//! `cargo xtask test` runs): these tests fail, never skip, without it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use verity_core::NoTools;
use verity_restate::batch;
use verity_restate::cluster::{self, Cluster, Server, Workers};
use verity_restate::corpus::CorpusSource;
use verity_restate::host::{Host, Model};
use verity_restate::workflow::{
    BatchInput, BatchResult, CheckInput, CheckResult, ClaimRow, Limits, build_job,
};
use verity_tests::http::Aimock;

mod common;

use common::{
    EIFFEL, batch_of, binary, check_outcome, check_result, claims_fixtures, eiffel_check, epoch_ms,
    fixture, journal, journal_entries, provider_and_root, provider_and_steps, provider_file,
    restate, row, scratch, serial, submit_batch, submit_check, tower_batch,
};

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

#[test]
fn a_batch_survives_a_killed_worker_and_a_restarted_server() {
    let _serial = serial();
    let dir = scratch("survives");
    const CLAIMS: usize = 60;
    let fixtures = distinct_fixtures(&dir, CLAIMS);
    let mock = Aimock::start(&fixtures).unwrap();
    let provider = provider_file(&dir, &mock);
    let input = BatchInput {
        limits: Limits { concurrency: 4, ..Limits::default() },
        // Three parts (25, 25, 10): the crash and the restart fall inside and between parts.
        part_size: Some(25),
        ..tower_batch(&dir, CLAIMS, "c", "check")
    };
    let (mut server, mut workers) = restate(&dir, 2, &provider_and_root(&provider, &dir), &[]);
    let key = "survives";
    submit_batch(&server.ingress_url(), key, &input);

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
    let (server, mut workers) = restate(&dir, 1, &[], &[]);
    workers.workers[0].kill9();
    let input = batch_of(vec![ClaimRow {
        corpus: Some(BTreeMap::from([("e1".to_owned(), EIFFEL.to_owned())])),
        ..row("The Eiffel Tower is in Paris.")
    }]);
    submit_batch(&server.ingress_url(), "stall", &input);
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
        limits: Limits { concurrency: 8, ..Limits::default() },
        part_size: Some(50),
        ..tower_batch(&dir, CLAIMS, "c", "check")
    };
    let started = Instant::now();
    let mut cluster = Cluster::start(&dir.join("cluster"), 3).unwrap();
    eprintln!("a 3-node cluster serving in {:.1} s", started.elapsed().as_secs_f64());
    let args = provider_and_root(&provider, &dir);
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
    submit_batch(&ingress, key, &input);
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
    let env = [
        ("VERITY_TALLY_FILE".to_owned(), count.display().to_string()),
        ("VERITY_TALLY_HOLD_MS".to_owned(), "60000".to_owned()),
    ];
    let (server, mut workers) = restate(&dir, 1, &provider_and_steps(&provider), &env);
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
    submit_check(&server.ingress_url(), "tally", &step);
    // The tool has started (it counted) and holds its result: kill the worker now.
    wait_for_a_run(&count);
    workers.workers[0].kill9();
    workers.workers[0].remove_env("VERITY_TALLY_HOLD_MS");
    workers.workers[0].restart().unwrap();

    let result = check_outcome(&server.ingress_url(), "tally")
        .unwrap_or_else(|message| panic!("the step failed: {message}"));
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
    submit_check(&server.ingress_url(), "tally-safe", &safe);
    wait_for_a_run(&count);
    worker.kill9();
    worker.remove_env("VERITY_TALLY_HOLD_MS");
    worker.restart().unwrap();
    let finished = check_outcome(&server.ingress_url(), "tally-safe");
    assert!(finished.is_ok(), "the step did not finish: {finished:?}");
    assert_eq!(
        std::fs::read_to_string(&count).unwrap().trim(),
        "2",
        "a replay-safe tool runs again"
    );
    let bodies = journal(&mock);
    assert!(bodies[3].contains("counted: this is run 2"), "{}", bodies[3]);
}

#[test]
fn a_retry_after_wait_is_a_durable_timer_that_a_worker_restart_does_not_reset() {
    let _serial = serial();
    let dir = scratch("timer");
    let mock = Aimock::start(&fixture("retry.json")).unwrap();
    let provider = provider_file(&dir, &mock);
    let (server, mut workers) = restate(&dir, 1, &provider_and_steps(&provider), &[]);
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
    submit_check(&server.ingress_url(), "timer", &step);
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
    let result = check_outcome(&server.ingress_url(), "timer")
        .unwrap_or_else(|message| panic!("the step failed: {message}"));
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

/// Waits until the tally tool has started once (it counted in `count`) and holds its result.
fn wait_for_a_run(count: &Path) {
    let start = Instant::now();
    while std::fs::read_to_string(count).unwrap_or_default().trim() != "1" {
        assert!(start.elapsed() < Duration::from_secs(60), "the tool never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How long a model call is in flight at most here: its request, its response (streamed in
/// about 15 pieces 25 ms apart) and the journaling of it (the run prints what it measured).
const IN_FLIGHT_MS: u64 = 1_500;

/// How long no partition may have changed leader before a batch is submitted to a cluster:
/// a new cluster spreads its leaders over its first seconds, and a move is an interruption.
const SETTLED_MS: u64 = 3_000;

/// How long after an interruption ended the mock may stamp a request its dying side wrote
/// before it: the mock (one Node process, streaming other responses on the same event loop)
/// stamps a request once it has read and matched it, not when its bytes left the worker. Seen
/// in CI: a request stamped 1 ms after its worker was gone, and rightly made again.
const IN_TRANSIT_MS: u64 = 100;

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
/// nodes logged them): its first attempt began by `to` (stamped by the mock no more than
/// [`IN_TRANSIT_MS`] later), no more than [`IN_FLIGHT_MS`] before `from`, and it was made
/// again after `from`. Restate runs a side effect again only when its
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
                *began <= to + IN_TRANSIT_MS && began + IN_FLIGHT_MS >= *from && again > from
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

/// The claim fixtures, each response streamed in pieces 40 ms apart: a call is in flight for
/// about 0.6 s.
fn slow_claims_fixtures() -> Value {
    let mut fixtures = claims_fixtures();
    for entry in fixtures["fixtures"].as_array_mut().unwrap() {
        entry["latency"] = json!(40);
        entry["chunkSize"] = json!(12);
    }
    fixtures
}

/// An answer's sentences on Restate are checked as many at once as its job's `concurrency`
/// says, as in every other host: their model calls are in flight together (each an invocation
/// of the worker's private `ModelCall` service, which the workflow awaits in whichever order
/// they finish). A worker killed while the second three are in flight comes back to the same
/// answer: the first three calls, whose results were journaled, are not made again; only the
/// ones in flight at the kill are.
#[test]
fn an_answers_sentences_are_checked_at_once_and_a_killed_worker_repeats_only_those_in_flight() {
    let _serial = serial();
    let dir = scratch("answer-at-once");
    // Three calls made one after another would start at least 0.6 s apart.
    let fixtures = slow_claims_fixtures();
    let slow = dir.join("slow.json");
    std::fs::write(&slow, fixtures.to_string()).unwrap();
    let mock = Aimock::start(&slow).unwrap();
    let provider = provider_file(&dir, &mock);
    let (server, mut workers) = restate(&dir, 1, &provider_and_root(&provider, &dir), &[]);
    let answer = "The Eiffel Tower is in Paris. The Eiffel Tower is a lattice tower. \
                  The Eiffel Tower is on the Champ de Mars. The Eiffel Tower is wrought iron. \
                  The Eiffel Tower is in France. The Eiffel Tower is a tower.";
    let job = json!({"kind": "answer", "answer": answer, "concurrency": 3});
    submit_check(&server.ingress_url(), "answer-at-once", &eiffel_check(job, "e1"));
    // A fourth sentence starts only when a first one's response is recorded: with six calls
    // made, the first three have their results in the journal and the last three are in
    // flight.
    let start = Instant::now();
    while journal_entries(&mock).len() < 6 {
        assert!(start.elapsed() < Duration::from_secs(60), "six calls were never made");
        std::thread::sleep(Duration::from_millis(10));
    }
    let killed = epoch_ms();
    workers.workers[0].kill9();
    let entries = journal_entries(&mock);
    let at = |n: usize| entries[n]["timestamp"].as_u64().unwrap();
    let (first, second) = (at(2) - at(0), at(5) - at(3));
    eprintln!(
        "the first three calls started within {first} ms, the next three within {second} ms; \
         the worker killed at {killed}"
    );
    assert!(
        first < 400,
        "the first three sentences' calls started {first} ms apart: one after another, not at once"
    );
    workers.workers[0].restart().unwrap();

    let result = check_result(&server.ingress_url(), "answer-at-once");
    let report = result.value.as_ref().unwrap_or_else(|| panic!("{result:?}"));
    let sentences = report["sentences"].as_array().unwrap();
    assert_eq!(sentences.len(), 6, "{report}");
    for sentence in sentences {
        assert_eq!(sentence["status"], "supported", "{sentence}");
    }
    let calls = usize::try_from(result.spent.requests).unwrap();
    assert_eq!(calls, 6, "one call a sentence: {result:?}");
    let bodies = journal(&mock);
    for body in &bodies[..3] {
        let times = bodies.iter().filter(|b| *b == body).count();
        assert_eq!(times, 1, "a call whose result was journaled was made again: {body}");
    }
    let repeated = repeats_only_in_flight(&mock, calls, &[("the kill", killed, killed)], 3);
    eprintln!("{calls} model calls; {} made again after the kill", repeated[0]);
}

/// An answer whose one sentence's call fails past its retries ends with that typed failure,
/// as in every other host, even with the other sentences' calls still in flight: their
/// responses, when they come back, belong to no pending call and are not recorded.
#[test]
fn an_answer_that_fails_with_calls_in_flight_ends_with_its_typed_failure() {
    let _serial = serial();
    let dir = scratch("answer-fails");
    let mut fixtures = slow_claims_fixtures();
    // The second sentence's call is refused at once; the others take about 0.6 s.
    fixtures["fixtures"].as_array_mut().unwrap().insert(
        0,
        json!({
            "match": {"userMessage": "wrought iron"},
            "response": {
                "error": {"message": "This request is refused.", "type": "invalid_request_error"},
                "status": 400
            }
        }),
    );
    let fixtures_file = dir.join("fails.json");
    std::fs::write(&fixtures_file, fixtures.to_string()).unwrap();
    let mock = Aimock::start(&fixtures_file).unwrap();
    let provider = provider_file(&dir, &mock);
    let (server, workers) = restate(&dir, 1, &provider_and_root(&provider, &dir), &[]);
    let answer = "The Eiffel Tower is in Paris. The Eiffel Tower is wrought iron. \
                  The Eiffel Tower is a lattice tower.";
    let job = json!({"kind": "answer", "answer": answer, "concurrency": 3,
                     "retry": {"maxRetries": 0}});
    submit_check(&server.ingress_url(), "answer-fails", &eiffel_check(job, "e1"));
    let result = check_result(&server.ingress_url(), "answer-fails");
    let failure = result.failure.as_ref().unwrap_or_else(|| panic!("{result:?}"));
    assert!(failure.message().contains("refused"), "{failure:?}");
    assert_eq!(journal(&mock).len(), 3, "each sentence's call made once");
    drop(workers);
}
