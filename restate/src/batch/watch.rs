//! Waiting for a batch: its progress and results read from the server's ingress (any node
//! of a cluster), a progress line, and the server's own view of a batch that stopped moving.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cluster::{self, Outcome};
use crate::workflow::{BatchProgress, BatchResult, ClaimResult, part_key};

/// Waits for batch `key`, printing its progress; the result.
///
/// # Errors
/// The batch's terminal error.
pub fn wait(ingress: &str, key: &str, show: bool) -> Result<BatchResult, String> {
    Watch::of(&[ingress.to_owned()], show).wait(key, &mut |_| Ok(()))
}

/// The results of batch `key` finished so far, from its parts, in the batch's order.
///
/// # Errors
/// A server that does not answer.
pub fn results(ingress: &str, key: &str) -> Result<Vec<ClaimResult>, String> {
    let progress = batch_progress(ingress, key)?;
    let mut results = Vec::new();
    for n in 0..progress.started {
        results.extend(part_results(ingress, key, n, 0)?);
    }
    results.sort_by_key(|result| result.index);
    Ok(results)
}

/// The live progress of batch `key` (its `progress` handler).
///
/// # Errors
/// A server that does not answer, or an answer that is not a batch's progress.
pub fn batch_progress(ingress: &str, key: &str) -> Result<BatchProgress, String> {
    let value = cluster::query_within(ingress, "Batch", key, "progress", None, QUERY_LIMIT)?;
    serde_json::from_value(value).map_err(|e| format!("the batch's progress: {e}"))
}

/// How long a progress or results query may take: a shared handler runs on a worker, and
/// with none reachable it would wait; the watch goes on (and notices the stall) instead.
const QUERY_LIMIT: Duration = Duration::from_secs(5);

/// The results part `n` of batch `key` finished, from its `from`-th on.
fn part_results(ingress: &str, key: &str, n: u64, from: u64) -> Result<Vec<ClaimResult>, String> {
    let (part, from) = (part_key(key, n), json!(from));
    let value =
        cluster::query_within(ingress, "BatchPart", &part, "finished", Some(&from), QUERY_LIMIT)?;
    serde_json::from_value(value).map_err(|e| format!("part {n}'s results: {e}"))
}

/// How the CLI waits for a batch: where the server is, whether a person watches (a progress
/// line, redrawn only on a terminal), and when silence means something is wrong.
#[derive(Debug, Clone)]
pub struct Watch {
    /// The ingress URLs: the nodes of one cluster, any of which serves the batch. The first
    /// is asked until it stops answering, then the next that answers (see
    /// `Watch::ingress`).
    pub ingress: Vec<String>,
    /// The one that answered last (an index into `ingress`).
    pub current: std::cell::Cell<usize>,
    /// The admin URL: with it, a batch that has stopped moving is explained by the server's
    /// own view of its invocations (paused, retrying, and the last error).
    pub admin: Option<String>,
    /// Print progress to stderr.
    pub show: bool,
    /// Give up (an error, so the command exits non-zero) after this long without progress.
    pub stall_after: Option<Duration>,
}

impl Watch {
    /// A watch of the server at `ingress` alone, no admin URL, no stall bound.
    #[must_use]
    pub fn of(ingress: &[String], show: bool) -> Self {
        Self {
            ingress: ingress.to_vec(),
            current: std::cell::Cell::new(0),
            admin: None,
            show,
            stall_after: None,
        }
    }

    /// The ingress asked now.
    fn ingress(&self) -> &str {
        self.ingress.get(self.current.get()).or(self.ingress.first()).map_or("", String::as_str)
    }

    /// Batch `key`'s progress from the ingress asked now, or, when it does not answer (a node
    /// down), from the next one that does, which is asked from then on.
    fn progress(&self, key: &str) -> Option<BatchProgress> {
        let n = self.ingress.len().max(1);
        (0..n).find_map(|step| {
            let at = (self.current.get() + step) % n;
            let progress = batch_progress(self.ingress.get(at)?, key).ok()?;
            self.current.set(at);
            Some(progress)
        })
    }

    /// Waits for batch `key`, handing `sink` the results as they finish (each once; the parts
    /// in turn, each part's in the order they finished); the result, in the batch's order.
    ///
    /// # Errors
    /// The batch's terminal error, a paused invocation or a stall (with what the server says),
    /// or the sink's error.
    pub fn wait(
        &self,
        key: &str,
        sink: &mut dyn FnMut(&[ClaimResult]) -> Result<(), String>,
    ) -> Result<BatchResult, String> {
        self.wait_with(key, sink, &mut |_| Ok(()))
    }

    /// As [`Watch::wait`], handing `tick` each progress it reads.
    ///
    /// # Errors
    /// As [`Watch::wait`], or `tick`'s error.
    pub fn wait_with(
        &self,
        key: &str,
        sink: &mut dyn FnMut(&[ClaimResult]) -> Result<(), String>,
        tick: &mut dyn FnMut(&BatchProgress) -> Result<(), String>,
    ) -> Result<BatchResult, String> {
        let terminal = self.show && std::io::stderr().is_terminal();
        let mut received = Received::default();
        let mut line = ProgressLine { terminal, last: String::new(), printed: Instant::now() };
        let (mut last_moved, mut last_seen) = (Instant::now(), (0u64, 0u64));
        let mut last_server_check = Instant::now();
        let end_line = |shown: bool| {
            if shown && terminal {
                eprintln!();
            }
        };
        loop {
            let progress = self.progress(key);
            if let Some(progress) = &progress {
                tick(progress)?;
                received.poll(self, key, progress.started, sink)?;
            }
            match cluster::output(self.ingress(), "Batch", key) {
                Outcome::Done(value) => {
                    end_line(self.show);
                    let done: BatchProgress = serde_json::from_value(value)
                        .map_err(|e| format!("the batch's result: {e}"))?;
                    return received.finish(self, key, &done, sink);
                }
                Outcome::Failed(message) => {
                    end_line(self.show);
                    return Err(format!("the batch failed: {message}"));
                }
                Outcome::Pending => {}
            }
            let seen =
                progress.as_ref().map_or(last_seen, |p| (p.progress.done, p.progress.tokens));
            if seen != last_seen {
                (last_moved, last_seen) = (Instant::now(), seen);
            }
            if let Some(trouble) = self.trouble(key, last_moved, &mut last_server_check) {
                end_line(self.show);
                return Err(trouble);
            }
            if self.show
                && let Some(progress) = &progress
            {
                line.show(progress);
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Why the watch gives up on batch `key`, if it does: an invocation the server paused
    /// (asked every few seconds, when there is an admin URL), or no progress since
    /// `last_moved` for `stall_after` (with what the server says of its invocations).
    fn trouble(
        &self,
        key: &str,
        last_moved: Instant,
        last_server_check: &mut Instant,
    ) -> Option<String> {
        // The server's view, every few seconds: a paused invocation is an error at once.
        if let Some(admin) = &self.admin
            && last_server_check.elapsed() >= Duration::from_secs(5)
        {
            *last_server_check = Instant::now();
            if let Some(paused) = paused_invocations(admin, key) {
                return Some(format!("the batch is paused on the server: {paused}"));
            }
        }
        if let Some(limit) = self.stall_after
            && last_moved.elapsed() >= limit
        {
            let said = self
                .admin
                .as_deref()
                .and_then(|admin| stuck_invocations(admin, key))
                .unwrap_or_else(|| "nothing (no invocation reports an error)".to_owned());
            return Some(format!(
                "the batch has made no progress for {} s; the server says: {said}",
                limit.as_secs()
            ));
        }
        None
    }
}

/// The results of a batch a watch has received, part by part.
#[derive(Default)]
struct Received {
    /// Per part started, how many of its results have been received.
    from: Vec<u64>,
    /// Every result received, in the order received.
    all: Vec<ClaimResult>,
}

impl Received {
    /// Asks each of the `started` parts for the results it finished since the last look and
    /// hands them to `sink` (a part that does not answer is asked again next time).
    fn poll(
        &mut self,
        watch: &Watch,
        key: &str,
        started: u64,
        sink: &mut dyn FnMut(&[ClaimResult]) -> Result<(), String>,
    ) -> Result<(), String> {
        self.from.resize(usize::try_from(started).unwrap_or(0).max(self.from.len()), 0);
        for (n, from) in self.from.iter_mut().enumerate() {
            if let Ok(finished) = part_results(watch.ingress(), key, n as u64, *from)
                && !finished.is_empty()
            {
                sink(&finished)?;
                *from += finished.len() as u64;
                self.all.extend(finished);
            }
        }
        Ok(())
    }

    /// The batch ended with `done`: whatever arrived after the last look, handed to `sink`,
    /// then the result, in the batch's order.
    fn finish(
        mut self,
        watch: &Watch,
        key: &str,
        done: &BatchProgress,
        sink: &mut dyn FnMut(&[ClaimResult]) -> Result<(), String>,
    ) -> Result<BatchResult, String> {
        for n in 0..done.started {
            let from = self.from.get(n as usize).copied().unwrap_or(0);
            let finished = part_results(watch.ingress(), key, n, from)?;
            sink(&finished)?;
            self.all.extend(finished);
        }
        self.all.sort_by_key(|result| result.index);
        Ok(BatchResult { results: self.all, progress: done.progress })
    }
}

/// The progress line on stderr: redrawn in place on a terminal when it changes; in a log, a
/// line now and then, not one per redraw.
struct ProgressLine {
    /// Whether stderr is a terminal.
    terminal: bool,
    /// The line last drawn.
    last: String,
    /// When a line was last printed to a log.
    printed: Instant,
}

impl ProgressLine {
    fn show(&mut self, progress: &BatchProgress) {
        let line = progress_line(progress);
        if self.terminal && line != self.last {
            eprint!("\r{line}");
            std::io::stderr().flush().ok();
            self.last = line;
        } else if !self.terminal && self.printed.elapsed() >= Duration::from_secs(10) {
            eprintln!("{line}");
            self.printed = Instant::now();
        }
    }
}

/// The invocations of batch `key` (its own, its parts', its checks') the server has paused,
/// with their last error; `None` when there are none (or the server does not say).
fn paused_invocations(admin: &str, key: &str) -> Option<String> {
    let rows = cluster::admin_query(
        admin,
        &format!(
            "SELECT target, last_failure FROM sys_invocation WHERE status = 'paused' AND \
             (target_service_key = '{key}' OR target_service_key LIKE '{key}.%') LIMIT 5"
        ),
    )
    .ok()?;
    describe_invocations(&rows)
}

/// The invocations of batch `key` that are retrying or paused, with their last error.
fn stuck_invocations(admin: &str, key: &str) -> Option<String> {
    let rows = cluster::admin_query(
        admin,
        &format!(
            "SELECT target, status, last_failure FROM sys_invocation WHERE status <> 'completed' \
             AND last_failure IS NOT NULL AND (target_service_key = '{key}' OR \
             target_service_key LIKE '{key}.%') LIMIT 5"
        ),
    )
    .ok()?;
    describe_invocations(&rows)
}

fn describe_invocations(rows: &[Value]) -> Option<String> {
    if rows.is_empty() {
        return None;
    }
    Some(
        rows.iter()
            .map(|row| {
                let text = |field: &str| row[field].as_str().unwrap_or_default().to_owned();
                format!("{} {}: {}", text("target"), text("status"), text("last_failure"))
            })
            .collect::<Vec<_>>()
            .join("; "),
    )
}

fn progress_line(batch: &BatchProgress) -> String {
    let progress = &batch.progress;
    let total = progress.total.max(1);
    let done = progress.done;
    let width = 30;
    let filled = usize::try_from(done * width / total).unwrap_or(0);
    format!(
        "batch [{}{}] {done}/{total} done, {} failed, {} running, {} tokens, ${:.4}",
        "#".repeat(filled),
        ".".repeat(usize::try_from(width).unwrap_or(30) - filled.min(30)),
        progress.failed,
        progress.running,
        progress.tokens,
        progress.cost
    )
}
