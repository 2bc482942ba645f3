//! The processes around a batch on this machine: the Restate server (from npm), worker
//! processes behind a [balancer](crate::balance), and the admin and ingress calls that
//! register them and submit work. Everything listens on loopback ports picked free at start.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod calls;

pub use calls::{
    Outcome, admin_query, blocking, blocking_get, blocking_within, output, query, query_with,
    query_within, register, submit, submit_or_attach,
};

/// The version of `@restatedev/restate-server` pinned in the workspace's package.json.
pub const SERVER_VERSION: &str = "1.7.12";

/// The workspace root (this crate's parent).
#[must_use]
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("restate/ is in the workspace").to_owned()
}

/// The `restate-server` binary: `VERITY_RESTATE_SERVER`, else the one npm installed in the
/// workspace's `node_modules` for this platform (the package ships Linux and macOS, x64 and
/// arm64).
///
/// # Errors
/// When it is missing (with what to run), or when npm has no build for this platform.
pub fn server_binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("VERITY_RESTATE_SERVER") {
        return Ok(PathBuf::from(path));
    }
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => other,
    };
    if !matches!((os, arch), ("linux" | "darwin", "x64" | "arm64")) {
        return Err(format!(
            "@restatedev/restate-server has no build for {os}-{arch}: install a Restate server \
             {SERVER_VERSION} yourself and set VERITY_RESTATE_SERVER to its binary"
        ));
    }
    let path = workspace_root()
        .join(format!("node_modules/@restatedev/restate-server-{os}-{arch}/bin/restate-server"));
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "the Restate server is missing ({}): run `npm ci` at the workspace root (`cargo xtask \
             test` and `cargo xtask batch` do), which installs @restatedev/restate-server \
             {SERVER_VERSION}",
            path.display()
        ))
    }
}

/// A free loopback port (bound, read, released).
///
/// # Panics
/// When no port can be bound on loopback.
#[must_use]
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a loopback port").port()
}

fn accepts(port: u16) -> bool {
    TcpStream::connect_timeout(
        &SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(200),
    )
    .is_ok()
}

fn wait_until(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) -> Result<(), String> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("{what} was not ready within {} s", limit.as_secs()))
}

/// The ports a server listens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    /// Ingress (invocations).
    pub ingress: u16,
    /// Admin API (deployments, health).
    pub admin: u16,
    /// Node-to-node (the message fabric).
    pub node: u16,
}

impl Ports {
    /// Three free loopback ports.
    #[must_use]
    pub fn free() -> Self {
        Self { ingress: free_port(), admin: free_port(), node: free_port() }
    }

    /// The ports a server on `base_dir` used before (with the balancer's, `ports.json`) when
    /// they are all free again, else free ones; written back. A server restarted on its data
    /// directory then listens where it did, and the deployment it knows (the balancer's URL)
    /// is reached again, so the invocations it holds go on.
    #[must_use]
    pub fn kept(base_dir: &Path) -> (Self, u16) {
        let file = base_dir.join("ports.json");
        let saved = std::fs::read_to_string(&file)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .and_then(|value| {
                let port = |name: &str| value[name].as_u64().and_then(|p| u16::try_from(p).ok());
                Some((
                    Self { ingress: port("ingress")?, admin: port("admin")?, node: port("node")? },
                    port("deployment")?,
                ))
            });
        let is_free = |port: u16| TcpListener::bind(("127.0.0.1", port)).is_ok();
        let (ports, deployment) = match saved {
            Some((ports, deployment))
                if [ports.ingress, ports.admin, ports.node, deployment]
                    .into_iter()
                    .all(is_free) =>
            {
                (ports, deployment)
            }
            _ => (Self::free(), free_port()),
        };
        std::fs::create_dir_all(base_dir).ok();
        let saved = json!({"ingress": ports.ingress, "admin": ports.admin, "node": ports.node, "deployment": deployment});
        std::fs::write(&file, saved.to_string()).ok();
        (ports, deployment)
    }
}

/// A Restate server process, stopped on drop.
#[derive(Debug)]
pub struct Server {
    child: Option<Child>,
    /// Its ports.
    pub ports: Ports,
    /// Its data directory.
    pub base_dir: PathBuf,
    log: PathBuf,
    /// Its arguments and environment, to start it again the same way.
    args: Vec<String>,
    env: Vec<(String, String)>,
}

impl Server {
    /// Starts the server on `ports` with its data in `base_dir` (kept across restarts), and
    /// waits until its admin API is healthy and its ingress accepts connections.
    ///
    /// # Errors
    /// A missing binary, or a server that does not come up within a minute.
    pub fn start(base_dir: &Path, ports: Ports) -> Result<Self, String> {
        Self::start_with_env(base_dir, ports, &[])
    }

    /// As [`Server::start`], with more of the server's configuration as `RESTATE_...`
    /// environment variables (e.g. `RESTATE_WORKER__INVOKER__REQUEST_IDENTITY_PRIVATE_KEY_PEM_FILE`).
    ///
    /// # Errors
    /// As [`Server::start`].
    pub fn start_with_env(
        base_dir: &Path,
        ports: Ports,
        env: &[(String, String)],
    ) -> Result<Self, String> {
        let args = ["--no-logo", "--node-name", "verity", "--default-num-partitions", "4"];
        let mut all = loopback_env(ports);
        all.extend_from_slice(env);
        let mut server = Self {
            child: None,
            ports,
            base_dir: base_dir.to_owned(),
            log: base_dir.join("server.log"),
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            env: all,
        };
        server.restart()?;
        Ok(server)
    }

    /// Starts it again (after [`stop`](Self::stop) or [`kill9`](Self::kill9)) with the same
    /// data directory, ports, arguments and environment, and waits until it is healthy.
    ///
    /// # Errors
    /// As [`Server::start`].
    pub fn restart(&mut self) -> Result<(), String> {
        self.spawn()?;
        self.wait_ready()
    }

    /// Starts the process, without waiting for it.
    fn spawn(&mut self) -> Result<(), String> {
        let binary = server_binary()?;
        let base_dir = &self.base_dir;
        std::fs::create_dir_all(base_dir).map_err(|e| format!("{}: {e}", base_dir.display()))?;
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("{}: {e}", self.log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(&binary)
            .arg("--base-dir")
            .arg(base_dir)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        self.child = Some(child);
        Ok(())
    }

    /// Waits until the started server's admin API is healthy and its ingress accepts
    /// connections (stopping it if it does not within a minute).
    fn wait_ready(&mut self) -> Result<(), String> {
        let ports = self.ports;
        let health = format!("http://127.0.0.1:{}/health", ports.admin);
        let ready = wait_until("the Restate server", Duration::from_secs(60), || {
            accepts(ports.ingress) && blocking_get(&health).is_ok_and(|(status, _)| status == 200)
        });
        if let Err(error) = ready {
            self.stop();
            return Err(format!("{error}; its log is {}", self.log.display()));
        }
        Ok(())
    }

    /// `http://127.0.0.1:ADMIN`.
    #[must_use]
    pub fn admin_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports.admin)
    }

    /// `http://127.0.0.1:INGRESS`.
    #[must_use]
    pub fn ingress_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports.ingress)
    }

    /// Stops the server (SIGTERM, then SIGKILL after 20 s) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            terminate(&mut child, Duration::from_secs(20));
        }
    }

    /// Its peak resident memory so far (see [`peak_rss`]).
    #[must_use]
    pub fn peak_rss(&self) -> Option<u64> {
        peak_rss(self.child.as_ref()?.id())
    }

    /// `kill -9`: the server dies at once, nothing flushed, mid-whatever.
    pub fn kill9(&mut self) {
        kill_now(&mut self.child);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A Restate cluster on this machine: `size` server processes of one cluster, each with its
/// own ports and data directory, the metadata store and the log replicated (each log and
/// partition on 2 nodes, so a cluster of 3 goes on serving with any one node killed). Node 0
/// provisions the cluster; any node's ingress and admin API serve it.
#[derive(Debug)]
pub struct Cluster {
    /// The nodes, in order.
    pub nodes: Vec<Server>,
}

impl Cluster {
    /// Starts `size` nodes with their data under `base_dir` (`n1`, `n2`, ...) and waits until
    /// each is healthy and the cluster serves (its partitions have leaders: a query of the
    /// invocation table answers on node 0).
    ///
    /// # Errors
    /// A node that does not come up, or a cluster that does not serve within two minutes.
    pub fn start(base_dir: &Path, size: usize) -> Result<Self, String> {
        let ports: Vec<Ports> = (0..size).map(|_| Ports::free()).collect();
        let peers = ports
            .iter()
            .map(|p| format!("\"http://127.0.0.1:{}/\"", p.node))
            .collect::<Vec<_>>()
            .join(",");
        let mut pending = Vec::new();
        for (n, ports) in ports.iter().enumerate() {
            let name = format!("n{}", n + 1);
            let env = vec![
                ("RESTATE_NODE_NAME".to_owned(), name.clone()),
                ("RESTATE_CLUSTER_NAME".to_owned(), "verity-cluster".to_owned()),
                ("RESTATE_AUTO_PROVISION".to_owned(), (n == 0).to_string()),
                ("RESTATE_DEFAULT_REPLICATION".to_owned(), "2".to_owned()),
                ("RESTATE_BIFROST__DEFAULT_PROVIDER".to_owned(), "replicated".to_owned()),
                ("RESTATE_METADATA_CLIENT__ADDRESSES".to_owned(), format!("[{peers}]")),
                (
                    "RESTATE_ROLES".to_owned(),
                    r#"["worker","admin","metadata-server","log-server","http-ingress"]"#
                        .to_owned(),
                ),
                ("RESTATE_ROCKSDB_TOTAL_MEMORY_SIZE".to_owned(), "256 MiB".to_owned()),
                ("RESTATE_LOG_DISABLE_ANSI_CODES".to_owned(), "true".to_owned()),
            ];
            pending.push((base_dir.join(&name), *ports, name, env));
        }
        // Every node starts before any is waited for: a node's metadata store needs its peers.
        let mut nodes = Vec::new();
        for (dir, ports, name, env) in pending {
            let mut node = Server::unstarted(&dir, ports, &name, env);
            node.spawn()?;
            nodes.push(node);
        }
        for node in &mut nodes {
            node.wait_ready()?;
        }
        let cluster = Self { nodes };
        let admin = cluster.nodes[0].admin_url();
        wait_until("the cluster's partitions", Duration::from_secs(120), || {
            admin_query(&admin, "SELECT count(*) AS n FROM sys_invocation").is_ok()
        })?;
        Ok(cluster)
    }
}

impl Cluster {
    /// When a partition got a new leader, in milliseconds since the Unix epoch, from the
    /// nodes' logs (`Processor became Leader`): the moments an invocation in flight on the
    /// old leader is taken over, and a side effect not yet journaled may run again. A new
    /// cluster moves leaders for its first seconds (the controller spreads them over the
    /// nodes), and again after a node dies or comes back.
    #[must_use]
    pub fn leadership_changes(&self) -> Vec<u64> {
        let mut changes: Vec<u64> =
            self.leadership_moves().into_iter().map(|(took_over, _)| took_over).collect();
        changes.sort_unstable();
        changes
    }

    /// Every partition's change of leader since the cluster started, from the nodes' logs:
    /// when the new leader took over (`Processor became Leader of epoch E`) and when the old
    /// one learned it and stopped (`Every reign must end ... at epoch E`, for the same partition
    /// and epoch; the moment it took over when the old one logged nothing, as a killed node
    /// does). Between the two both may act on the partition's invocations: the old leader can
    /// still begin a request the new one will make again. In ms since the Unix epoch, sorted.
    #[must_use]
    pub fn leadership_moves(&self) -> Vec<(u64, u64)> {
        // (partition, epoch) -> (took over, stepped down)
        let mut moves: std::collections::BTreeMap<(String, String), (Option<u64>, Option<u64>)> =
            std::collections::BTreeMap::new();
        for node in &self.nodes {
            let text = std::fs::read_to_string(&node.log).unwrap_or_default();
            let mut at = None;
            let mut event: Option<(bool, String)> = None;
            for line in text.lines() {
                if line.starts_with("20") {
                    at = line
                        .contains("restate_worker::partition::leadership")
                        .then(|| line.split_whitespace().next().and_then(epoch_ms_of))
                        .flatten();
                    event = None;
                } else if let Some(rest) =
                    line.trim().strip_prefix("Processor became Leader of epoch ")
                {
                    event =
                        at.map(|_| (true, rest.split_whitespace().next().unwrap_or("").to_owned()));
                } else if line.contains("Every reign must end")
                    && let Some(epoch) = line.rsplit("at epoch ").next()
                {
                    event = at.map(|_| (false, epoch.trim().to_owned()));
                } else if let Some(partition) = line.trim().strip_prefix("partition_id: ")
                    && let (Some((took_over, epoch)), Some(when)) = (event.take(), at)
                {
                    let entry = moves.entry((partition.to_owned(), epoch)).or_default();
                    if took_over {
                        entry.0 = Some(when);
                    } else {
                        entry.1 = Some(when);
                    }
                }
            }
        }
        let mut out: Vec<(u64, u64)> = moves
            .into_values()
            .filter_map(|(took_over, stepped_down)| {
                let from = took_over?;
                Some((from, stepped_down.map_or(from, |to| to.max(from))))
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// Waits until every node's ingress knows `service` (a deployment registered through one
    /// node reaches the others' ingress a moment later): its shared `handler` answers there
    /// for a key nobody uses.
    ///
    /// # Errors
    /// A node that does not know it within a minute.
    pub fn wait_for_service(&self, service: &str, handler: &str) -> Result<(), String> {
        for node in &self.nodes {
            let ingress = node.ingress_url();
            wait_until(&format!("{service} on {ingress}"), Duration::from_secs(60), || {
                !matches!(
                    query(&ingress, service, "verity-probe", handler),
                    Err(error) if error.contains(" 404 ")
                )
            })?;
        }
        Ok(())
    }
}

impl Server {
    /// A server not started yet: node `name` of a cluster, configured by `env`.
    fn unstarted(base_dir: &Path, ports: Ports, name: &str, env: Vec<(String, String)>) -> Self {
        // A node of a cluster also says where its peers reach its admin API and ingress.
        let mut all = loopback_env(ports);
        all.extend([
            (
                "RESTATE_ADMIN__ADVERTISED_ADDRESS".to_owned(),
                format!("http://127.0.0.1:{}/", ports.admin),
            ),
            (
                "RESTATE_INGRESS__ADVERTISED_ADDRESS".to_owned(),
                format!("http://127.0.0.1:{}/", ports.ingress),
            ),
        ]);
        all.extend(env);
        Self {
            child: None,
            ports,
            base_dir: base_dir.to_owned(),
            log: base_dir.join(format!("{name}.log")),
            args: vec![
                "--no-logo".to_owned(),
                "--default-num-partitions".to_owned(),
                "4".to_owned(),
            ],
            env: all,
        }
    }
}

/// The environment of a server listening on loopback only, on `ports`, with no telemetry.
fn loopback_env(ports: Ports) -> Vec<(String, String)> {
    vec![
        ("RESTATE_LISTEN_MODE".to_owned(), "tcp".to_owned()),
        ("RESTATE_BIND_ADDRESS".to_owned(), format!("127.0.0.1:{}", ports.node)),
        ("RESTATE_ADVERTISED_ADDRESS".to_owned(), format!("http://127.0.0.1:{}/", ports.node)),
        ("RESTATE_ADMIN__BIND_ADDRESS".to_owned(), format!("127.0.0.1:{}", ports.admin)),
        ("RESTATE_INGRESS__BIND_ADDRESS".to_owned(), format!("127.0.0.1:{}", ports.ingress)),
        ("RESTATE_DISABLE_TELEMETRY".to_owned(), "true".to_owned()),
    ]
}

/// `kill -9` of `child`, if there is one, waited for.
fn kill_now(child: &mut Option<Child>) {
    if let Some(mut child) = child.take() {
        child.kill().ok();
        child.wait().ok();
    }
}

/// Milliseconds since the Unix epoch of an RFC 3339 UTC timestamp as the server logs them
/// (`2026-12-02T04:01:08.165009Z`).
fn epoch_ms_of(stamp: &str) -> Option<u64> {
    let (date, time) = stamp.strip_suffix('Z')?.split_once('T')?;
    let mut ymd = date.split('-').map(str::parse::<i64>);
    let (y, m, d) = (ymd.next()?.ok()?, ymd.next()?.ok()?, ymd.next()?.ok()?);
    let mut hms = time.split(':');
    let (h, min) = (hms.next()?.parse::<i64>().ok()?, hms.next()?.parse::<i64>().ok()?);
    let seconds: f64 = hms.next()?.parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let ms = ((days * 86_400 + h * 3_600 + min * 60) as f64 + seconds) * 1_000.0;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Some(ms.round() as u64)
}

/// The peak resident memory of process `pid` (`VmHWM` in `/proc/PID/status`), in bytes;
/// `None` where there is no such file (not Linux, or the process is gone).
#[must_use]
pub fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Sends SIGTERM and waits up to `grace`, then kills.
fn terminate(child: &mut Child, grace: Duration) {
    Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().ok();
    let start = Instant::now();
    while start.elapsed() < grace {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().ok();
    child.wait().ok();
}

/// A process of this crate's binary (a worker or the balancer), killed on drop.
#[derive(Debug)]
pub struct Process {
    child: Option<Child>,
    /// The port it serves on.
    pub port: u16,
    command: Vec<String>,
    env: Vec<(String, String)>,
    binary: PathBuf,
}

impl Process {
    /// Starts `binary ARGS` serving on `port`, with `env`, and waits until it accepts
    /// connections.
    ///
    /// # Errors
    /// When it cannot start or does not listen within 30 s.
    pub fn start(
        binary: &Path,
        port: u16,
        args: &[String],
        env: &[(String, String)],
    ) -> Result<Self, String> {
        let mut process = Self {
            child: None,
            port,
            command: args.to_vec(),
            env: env.to_vec(),
            binary: binary.to_owned(),
        };
        process.restart()?;
        Ok(process)
    }

    /// Starts it again (after [`kill9`](Self::kill9)) with the same arguments and port.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn restart(&mut self) -> Result<(), String> {
        let child = Command::new(&self.binary)
            .args(&self.command)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.binary.display()))?;
        self.child = Some(child);
        let port = self.port;
        wait_until(
            &format!("{} on port {port}", self.command.join(" ")),
            Duration::from_secs(30),
            || accepts(port),
        )
    }

    /// Its peak resident memory so far (see [`peak_rss`]).
    #[must_use]
    pub fn peak_rss(&self) -> Option<u64> {
        peak_rss(self.child.as_ref()?.id())
    }

    /// `kill -9`: the process dies at once, mid-whatever.
    pub fn kill9(&mut self) {
        kill_now(&mut self.child);
    }

    /// Sets an environment variable for the next [`restart`](Self::restart).
    pub fn set_env(&mut self, name: &str, value: &str) {
        self.env.retain(|(k, _)| k != name);
        self.env.push((name.to_owned(), value.to_owned()));
    }

    /// Removes an environment variable for the next [`restart`](Self::restart).
    pub fn remove_env(&mut self, name: &str) {
        self.env.retain(|(k, _)| k != name);
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Worker processes behind a balancer: what a deployment's URL points at.
#[derive(Debug)]
pub struct Workers {
    /// The workers.
    pub workers: Vec<Process>,
    /// The balancer in front of them.
    pub balancer: Process,
}

impl Workers {
    /// Starts `count` workers of `binary` (each `worker --port P` plus `worker_args`, with
    /// `env`) and a balancer in front of them.
    ///
    /// # Errors
    /// When one does not start.
    pub fn start(
        binary: &Path,
        count: usize,
        worker_args: &[String],
        env: &[(String, String)],
    ) -> Result<Self, String> {
        Self::start_at(binary, count, worker_args, env, free_port())
    }

    /// As [`Workers::start`], with the balancer (the deployment's URL) on `port`.
    ///
    /// # Errors
    /// When one does not start.
    pub fn start_at(
        binary: &Path,
        count: usize,
        worker_args: &[String],
        env: &[(String, String)],
        port: u16,
    ) -> Result<Self, String> {
        let mut workers = Vec::new();
        for _ in 0..count.max(1) {
            let port = free_port();
            let mut args = vec!["worker".to_owned(), "--port".to_owned(), port.to_string()];
            args.extend_from_slice(worker_args);
            workers.push(Process::start(binary, port, &args, env)?);
        }
        let mut args = vec!["balance".to_owned(), "--port".to_owned(), port.to_string()];
        for worker in &workers {
            args.push(format!("127.0.0.1:{}", worker.port));
        }
        let balancer = Process::start(binary, port, &args, &[])?;
        Ok(Self { workers, balancer })
    }

    /// The URL to register as a deployment.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.balancer.port)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_log_timestamp_is_read_as_epoch_milliseconds() {
        assert_eq!(super::epoch_ms_of("1970-01-01T00:00:01.5Z"), Some(1_500));
        assert_eq!(super::epoch_ms_of("2026-12-02T04:01:08.165009Z"), Some(1_796_184_068_165));
        assert_eq!(super::epoch_ms_of("2000-02-29T00:00:00Z"), Some(951_782_400_000));
        assert_eq!(super::epoch_ms_of("not a time"), None);
    }
}
