//! Corpora as a worker holds them: a file (a path on the worker's machine or an `http(s)://`
//! URL) named with the SHA-256 of its bytes, loaded, checked and indexed (BM25) once per
//! process, or a small corpus carried inline by a claim.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use verity_core::corpus::Corpus;
use verity_core::indexed::IndexedCorpus;

use crate::claims::{ClaimRow, inline_rows, parse_claims};

/// A corpus file by reference: where it is and the SHA-256 of its bytes (64 hex digits). A
/// worker refuses a file whose bytes hash otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CorpusFile {
    /// A path on the worker's machine, or an `http://` or `https://` URL every worker fetches
    /// (`.jsonl`, `.json`, `.csv`, `.txt`, `.md`: the formats of `verity_core::files`, told by
    /// the name's extension).
    pub path: String,
    /// The SHA-256 of the file's bytes, lower-case hex.
    pub sha256: String,
}

/// Where a claim's corpus comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum CorpusSource {
    /// A file shared by the batch.
    File(CorpusFile),
    /// A small corpus of the claim's own: passage id → text.
    Passages(BTreeMap<String, String>),
}

/// The SHA-256 of `bytes` as lower-case hex.
#[must_use]
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut text = String::with_capacity(64);
    for byte in digest {
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

/// Whether `location` is a URL (`http://` or `https://`) rather than a path.
#[must_use]
pub fn is_url(location: &str) -> bool {
    let lower = location.trim_start().to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// The name whose extension tells a corpus's format: the path, or the URL's path without
/// its query and fragment.
#[must_use]
pub fn format_name(location: &str) -> &str {
    if is_url(location) { location.split(['?', '#']).next().unwrap_or(location) } else { location }
}

/// The largest corpus file a worker reads or fetches unless told otherwise
/// (`--corpus-max-bytes`): 256 MiB, about 50 times the 26,259-passage VitaminC corpus.
pub const DEFAULT_MAX_CORPUS_BYTES: u64 = 256 << 20;

/// What corpus files a worker may read for whoever can reach its Restate ingress: paths only
/// under a root directory, URLs only under listed prefixes, neither by default, and no file
/// larger than a cap. A claim job names its corpus, so without this a job could read any file
/// the worker can (and learn its hash) or make the worker fetch any URL.
#[derive(Debug, Clone)]
pub struct CorpusPolicy {
    /// Canonical: every path is canonicalized (symbolic links and `..` resolved), must lie
    /// under one of them, and is opened beneath it (a symbolic link swapped in after the
    /// check cannot lead out of it).
    roots: Vec<std::path::PathBuf>,
    /// Single files granted (`--corpus-file`): the canonical path and the file's identity
    /// when granted (the file opened must be that very file, not one swapped in for it).
    files: Vec<(std::path::PathBuf, Option<(u64, u64)>)>,
    /// Parsed and normalized: a URL must have the same origin and start with one of them.
    url_prefixes: Vec<reqwest::Url>,
    max_bytes: u64,
    cache_bytes: u64,
}

/// How many bytes of passages a long-lived worker keeps loaded unless told otherwise
/// (`--corpus-cache-bytes`): 1 GiB; past it the least recently used corpora are let go.
pub const DEFAULT_CORPUS_CACHE_BYTES: u64 = 1 << 30;

impl Default for CorpusPolicy {
    fn default() -> Self {
        Self {
            roots: Vec::new(),
            files: Vec::new(),
            url_prefixes: Vec::new(),
            max_bytes: DEFAULT_MAX_CORPUS_BYTES,
            cache_bytes: DEFAULT_CORPUS_CACHE_BYTES,
        }
    }
}

impl CorpusPolicy {
    /// No files, no URLs, the default cap.
    #[must_use]
    pub fn none() -> Self {
        Self::default()
    }

    /// Also files under `dir` (which must exist; repeatable).
    ///
    /// # Errors
    /// `dir` is not a directory.
    pub fn with_root(mut self, dir: &std::path::Path) -> Result<Self, String> {
        let root = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if !root.is_dir() {
            return Err(format!("{} is not a directory", dir.display()));
        }
        self.roots.push(root);
        Ok(self)
    }

    /// Also the file `path` itself, and nothing beside it (which must exist; repeatable).
    ///
    /// # Errors
    /// `path` is not a file.
    pub fn with_file(mut self, path: &std::path::Path) -> Result<Self, String> {
        let canonical =
            std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let meta = std::fs::metadata(&canonical).map_err(|e| format!("{}: {e}", path.display()))?;
        if !meta.is_file() {
            return Err(format!("{} is not a file", path.display()));
        }
        self.files.push((canonical, identity(&meta)));
        Ok(self)
    }

    /// Also URLs that start with `prefix` (an `http://` or `https://` URL; end it with `/` to
    /// name a directory: `https://data.example/corpora/`).
    ///
    /// # Errors
    /// `prefix` is not an HTTP(S) URL.
    pub fn with_url_prefix(mut self, prefix: &str) -> Result<Self, String> {
        let url = reqwest::Url::parse(prefix.trim())
            .map_err(|e| format!("corpus URL prefix {prefix:?}: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(format!("corpus URL prefix {prefix:?} is not an http(s) URL"));
        }
        self.url_prefixes.push(url);
        Ok(self)
    }

    /// With a cap of `max_bytes` on a corpus file's size.
    #[must_use]
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// With at most `cache_bytes` of passages kept loaded (see [`Corpora`]).
    #[must_use]
    pub fn with_cache_bytes(mut self, cache_bytes: u64) -> Self {
        self.cache_bytes = cache_bytes;
        self
    }

    /// The cap on a corpus file's size.
    #[must_use]
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Where `location` may be read from: a canonical path under the root, or a URL under a
    /// prefix. A refusal says what the worker allows, and the same for a path outside the root
    /// as for one that does not exist (no probing the worker's disk).
    ///
    /// # Errors
    /// The refusal.
    pub fn admit(&self, location: &str) -> Result<String, String> {
        if is_url(location) {
            let refused = || {
                format!(
                    "corpus {location} refused: this worker fetches corpora only under the URL \
                     prefixes it was started with (--corpus-url), and {}",
                    if self.url_prefixes.is_empty() { "it has none" } else { "this is not one" }
                )
            };
            let url = reqwest::Url::parse(location.trim()).map_err(|_| refused())?;
            let under = self.url_prefixes.iter().any(|prefix| {
                prefix.origin() == url.origin()
                    && url.username().is_empty()
                    && url.password().is_none()
                    && url.as_str().starts_with(prefix.as_str())
            });
            return if under { Ok(url.to_string()) } else { Err(refused()) };
        }
        self.open(location).map(|opened| opened.location)
    }

    /// `location` admitted (see [`CorpusPolicy::admit`]) and, for a file, opened: the file
    /// read is the file checked (opened beneath its root, or a granted file checked to be that
    /// very file), whatever is swapped in on the path meanwhile.
    ///
    /// # Errors
    /// The refusal.
    fn open(&self, location: &str) -> Result<Opened, String> {
        if is_url(location) {
            return Ok(Opened { location: self.admit(location)?, file: None });
        }
        if self.roots.is_empty() && self.files.is_empty() {
            return Err(format!(
                "corpus {location} refused: this worker reads no local corpus files (start it \
                 with --corpus-root DIR or --corpus-file FILE)"
            ));
        }
        let refused =
            || format!("corpus {location} refused: not a file under this worker's corpus root");
        let path = std::fs::canonicalize(location).map_err(|_| refused())?;
        let file = if let Some(root) = self.roots.iter().find(|root| path.starts_with(root)) {
            let relative = path.strip_prefix(root).map_err(|_| refused())?;
            let dir = cap_std::fs::Dir::open_ambient_dir(root, cap_std::ambient_authority())
                .map_err(|_| refused())?;
            dir.open(relative).map_err(|_| refused())?.into_std()
        } else if let Some((granted, id)) = self.files.iter().find(|(file, _)| *file == path) {
            let file = std::fs::File::open(granted).map_err(|_| refused())?;
            let meta = file.metadata().map_err(|_| refused())?;
            if identity(&meta) != *id {
                return Err(format!(
                    "corpus {location} refused: not the file this worker was granted (it was \
                     replaced since the worker started)"
                ));
            }
            file
        } else {
            return Err(refused());
        };
        if !file.metadata().is_ok_and(|meta| meta.is_file()) {
            return Err(refused());
        }
        Ok(Opened { location: path.display().to_string(), file: Some(file) })
    }
}

/// A file's identity on its device (`None` where the platform gives none).
fn identity(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

/// An admitted location: a URL (no file), or a file opened as [`CorpusPolicy::open`] says.
#[derive(Debug)]
struct Opened {
    location: String,
    file: Option<std::fs::File>,
}

impl Opened {
    /// What says the bytes are unchanged since they were last hashed: a file's length and
    /// modification time; a URL's, none (see [`Hashes`]).
    fn fingerprint(&self) -> Option<(u64, Option<std::time::SystemTime>)> {
        let meta = self.file.as_ref()?.metadata().ok()?;
        Some((meta.len(), meta.modified().ok()))
    }

    /// Its bytes, at most `max_bytes` of them (see [`load_bytes`]).
    fn read(self, max_bytes: u64) -> Result<Vec<u8>, String> {
        match self.file {
            Some(file) => read_capped(file, &self.location, max_bytes),
            None => load_bytes(&self.location, max_bytes),
        }
    }
}

/// The bytes at `location` as `policy` admits and opens it (opened beneath its root, or the
/// very file granted), at most `max_bytes` of them.
///
/// # Errors
/// The refusal, or why it cannot be read.
pub fn read_admitted(
    policy: &CorpusPolicy,
    location: &str,
    max_bytes: u64,
) -> Result<Vec<u8>, String> {
    policy.open(location)?.read(max_bytes)
}

/// At most `max_bytes` of `file` (a larger one is refused).
fn read_capped(file: std::fs::File, location: &str, max_bytes: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("corpus {location}: {e}"))?;
    if bytes.len() as u64 > max_bytes {
        return Err(format!("corpus {location}: larger than the cap of {max_bytes} bytes"));
    }
    Ok(bytes)
}

/// What the bytes at each location hashed to when last read, kept while they are unchanged
/// (a file's length and modification time; a fetched URL's for [`FETCHED_HASH_KEPT`]): a
/// batch that names the wrong hash is refused without the worker reading (or fetching) a file
/// of up to the cap again for every check that names it. At most [`MAX_HASHES`] locations.
#[derive(Debug, Default)]
struct Hashes(Mutex<HashMap<String, (Known, String)>>);

/// How long a fetched file's hash is taken as still true.
const FETCHED_HASH_KEPT: std::time::Duration = std::time::Duration::from_secs(60);
/// The most locations whose hash is kept (past it, all are let go).
const MAX_HASHES: usize = 1024;

#[derive(Debug, Clone, PartialEq)]
enum Known {
    File(u64, Option<std::time::SystemTime>),
    Fetched(std::time::Instant),
}

impl Hashes {
    /// The hash the bytes at `opened` had when last read, if they are unchanged since.
    fn known(&self, opened: &Opened) -> Option<String> {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (known, hash) = map.get(&opened.location)?;
        let fresh = match (known, opened.fingerprint()) {
            (Known::File(len, modified), Some(now)) => {
                (*len, *modified) == now && modified.is_some()
            }
            (Known::Fetched(at), None) if opened.file.is_none() => at.elapsed() < FETCHED_HASH_KEPT,
            _ => false,
        };
        fresh.then(|| hash.clone())
    }

    fn record(&self, location: &str, known: Known, hash: String) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= MAX_HASHES && !map.contains_key(location) {
            map.clear();
        }
        map.insert(location.to_owned(), (known, hash));
    }
}

/// The bytes at `location`: a file read, or a URL fetched (GET, over [`ReqwestClient`], no
/// redirect followed, five minutes at most) on a thread of its own, so it works from sync code
/// and inside a runtime alike; at most `max_bytes` of them (a larger file is refused, a
/// download stopped once it passes the cap). No policy applies here: a worker calls it with a
/// location [`CorpusPolicy::admit`] let through.
///
/// # Errors
/// A message naming the location: unreadable, unreachable, larger than `max_bytes`, or an
/// answer other than 200.
///
/// [`ReqwestClient`]: crate::http::ReqwestClient
pub fn load_bytes(location: &str, max_bytes: u64) -> Result<Vec<u8>, String> {
    if !is_url(location) {
        let file = std::fs::File::open(location).map_err(|e| format!("corpus {location}: {e}"))?;
        return read_capped(file, location, max_bytes);
    }
    let url = location.trim().to_owned();
    let fetched = std::thread::spawn(move || {
        use verity_core::provider::{HttpBody, HttpClient, HttpRequest};
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(async move {
            let request = HttpRequest {
                method: "GET".to_owned(),
                url,
                headers: Vec::new(),
                body: String::new(),
                timeout_ms: Some(300_000),
                idle_timeout_ms: Some(60_000),
            };
            let client = crate::http::ReqwestClient::new();
            let (head, mut body) = client.send(&request).await.map_err(|e| format!("{e:?}"))?;
            if head.status != 200 {
                return Err(format!("the server answered {}", head.status));
            }
            let declared =
                verity_core::provider::http::find_header(&head.headers, "content-length")
                    .and_then(|length| length.trim().parse::<u64>().ok());
            if declared.is_some_and(|length| length > max_bytes) {
                return Err(format!("larger than the cap of {max_bytes} bytes"));
            }
            let mut bytes = Vec::new();
            while let Some(chunk) = body.next_chunk().await.map_err(|e| format!("{e:?}"))? {
                if (bytes.len() + chunk.len()) as u64 > max_bytes {
                    return Err(format!("larger than the cap of {max_bytes} bytes"));
                }
                bytes.extend(chunk);
            }
            Ok(bytes)
        })
    })
    .join()
    .map_err(|_| "the fetching thread panicked".to_owned())?;
    fetched.map_err(|e| format!("corpus {location}: {e}"))
}

/// Parses corpus bytes named `location` (its extension tells the format).
///
/// # Errors
/// A message naming the location: not UTF-8, or not a corpus (with the line, when there is one).
pub fn parse(location: &str, bytes: Vec<u8>) -> Result<Corpus, String> {
    let text = String::from_utf8(bytes).map_err(|e| format!("corpus {location}: {e}"))?;
    let passages = verity_core::files::passages_from_file(format_name(location), &text)
        .map_err(|e| format!("corpus {location}: {e}"))?;
    Corpus::new(passages).map_err(|e| format!("corpus {location}: {e}"))
}

/// Reads (or fetches) a corpus file `policy` admits, checks its hash and parses it (no index
/// yet).
///
/// # Errors
/// A message naming the file: refused by the policy, unreadable, a hash that does not match
/// (the refusal names no hash of what was read: it would let the next job pass), or
/// unparsable.
pub fn read_file(file: &CorpusFile, policy: &CorpusPolicy) -> Result<Corpus, String> {
    read_corpus(file, policy, &Hashes::default())
}

/// [`read_file`], with what the bytes hashed to kept in `hashes`.
fn read_corpus(
    file: &CorpusFile,
    policy: &CorpusPolicy,
    hashes: &Hashes,
) -> Result<Corpus, String> {
    parse(&file.path, read_checked(file, policy, "corpus", hashes)?)
}

/// The bytes of `file` (a corpus or a claim file, `what` in messages): admitted by `policy`,
/// read (or fetched) within its cap, and refused unless they have the SHA-256 the batch names
/// (the refusal names no hash of what was read: it would let the next job pass).
/// What the bytes hashed to is kept in `hashes` (see [`Hashes`]).
fn read_checked(
    file: &CorpusFile,
    policy: &CorpusPolicy,
    what: &str,
    hashes: &Hashes,
) -> Result<Vec<u8>, String> {
    let mismatch = || {
        format!(
            "{what} {} refused: its bytes do not have the SHA-256 the batch names ({}; the \
             file changed, or the batch names another file)",
            file.path, file.sha256
        )
    };
    let named = file.sha256.trim().to_ascii_lowercase();
    let opened = policy.open(&file.path)?;
    if hashes.known(&opened).is_some_and(|hash| hash != named) {
        return Err(mismatch());
    }
    let location = opened.location.clone();
    let known = match opened.fingerprint() {
        Some((len, modified)) => Known::File(len, modified),
        None => Known::Fetched(std::time::Instant::now()),
    };
    let bytes = opened.read(policy.max_bytes())?;
    let hash = sha256_hex(&bytes);
    let matches = hash == named;
    hashes.record(&location, known, hash);
    if matches { Ok(bytes) } else { Err(mismatch()) }
}

/// One corpus file's slot: empty until its first load succeeds, then the indexed corpus.
type Slot = Arc<tokio::sync::OnceCell<Arc<IndexedCorpus>>>;

/// The corpora a worker process has loaded: each file read (or fetched), checked and indexed
/// once, kept by its hash (the same bytes at two locations are one corpus).
///
/// A load runs on tokio's blocking pool, not on the runtime's threads: checks that need the
/// same corpus wait (asynchronously) for its one load, and everything else on the worker (other
/// checks, other corpora, the journal's acknowledgements) goes on meanwhile.
#[derive(Debug, Default)]
pub struct Corpora {
    files: Mutex<HashMap<String, Slot>>,
    loads: AtomicUsize,
    policy: CorpusPolicy,
    /// Claim files (a batch's claims by reference), read once each like corpora.
    claims: Mutex<HashMap<String, ClaimsSlot>>,
    /// The loaded corpora and claim files by last use, oldest first, with their bytes: past
    /// [`CorpusPolicy::cache_bytes`] the oldest are let go.
    used: Mutex<Vec<(Cached, u64)>>,
    /// What each location's bytes hashed to (see [`Hashes`]).
    hashes: Arc<Hashes>,
}

/// A loaded file, by kind and hash.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cached {
    Corpus(String),
    Claims(String),
}

/// One claim file's slot: empty until its first read succeeds.
type ClaimsSlot = Arc<tokio::sync::OnceCell<Arc<Vec<ClaimRow>>>>;

impl Corpora {
    /// No corpus loaded yet; files as `policy` allows.
    #[must_use]
    pub fn new(policy: CorpusPolicy) -> Self {
        Self {
            files: Mutex::default(),
            loads: AtomicUsize::new(0),
            policy,
            claims: Mutex::default(),
            used: Mutex::default(),
            hashes: Arc::default(),
        }
    }

    /// The indexed corpus of `source`: a file is loaded (and its hash checked) on first use
    /// and kept; inline passages are indexed each time (they are small, and indexed here on
    /// the caller's thread). A failed load is not kept: the next check tries again.
    ///
    /// A file is loaded inside a tokio runtime (it uses [`tokio::task::spawn_blocking`]).
    ///
    /// # Errors
    /// Why the corpus cannot be used (see [`read_file`]).
    pub async fn get(&self, source: &CorpusSource) -> Result<Arc<IndexedCorpus>, String> {
        match source {
            CorpusSource::Passages(passages) => {
                let corpus = Corpus::from_pairs(passages.iter())
                    .map_err(|e| format!("the claim's corpus: {e}"))?;
                Ok(IndexedCorpus::new(corpus))
            }
            CorpusSource::File(file) => {
                let hash = file.sha256.trim().to_ascii_lowercase();
                // Refused before anything is looked up: a corpus another job loaded is no
                // more this job's to read than one on disk.
                self.policy.admit(&file.path)?;
                // The lock is held only to find or make the slot, never across a load.
                let slot: Slot = Arc::clone(
                    self.files
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .entry(hash)
                        .or_default(),
                );
                let corpus = slot
                    .get_or_try_init(|| async {
                        self.loads.fetch_add(1, Ordering::Relaxed);
                        let (owned, policy) = (file.clone(), self.policy.clone());
                        let hashes = Arc::clone(&self.hashes);
                        tokio::task::spawn_blocking(move || load(&owned, &policy, &hashes))
                            .await
                            .map_err(|e| format!("corpus {}: the load failed: {e}", file.path))?
                    })
                    .await?;
                let bytes: u64 = corpus
                    .corpus()
                    .passages()
                    .iter()
                    .map(|passage| (passage.id.len() + passage.text.len()) as u64)
                    .sum();
                self.used_now(Cached::Corpus(file.sha256.trim().to_ascii_lowercase()), bytes);
                Ok(Arc::clone(corpus))
            }
        }
    }

    /// Records a use of a loaded file holding `bytes`, and lets the least recently used
    /// files go while the loaded ones hold more than the policy's cache bound (never the one
    /// just used; a corpus or claim list a check still holds lives on until it lets it go).
    fn used_now(&self, file: Cached, bytes: u64) {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        used.retain(|(known, _)| *known != file);
        used.push((file, bytes));
        let mut total: u64 = used.iter().map(|(_, bytes)| bytes).sum();
        while total > self.policy.cache_bytes && used.len() > 1 {
            let (oldest, bytes) = used.remove(0);
            total -= bytes;
            match oldest {
                Cached::Corpus(hash) => {
                    self.files.lock().unwrap_or_else(PoisonError::into_inner).remove(&hash);
                }
                Cached::Claims(hash) => {
                    self.claims.lock().unwrap_or_else(PoisonError::into_inner).remove(&hash);
                }
            }
        }
    }

    /// The rows of a claim file (a batch's claims by reference): read (or fetched) under the
    /// same policy and cap as a corpus, its hash checked, parsed once per process and kept
    /// within the cache bound, like corpora.
    ///
    /// # Errors
    /// Why it cannot be used (refused, unreadable, another hash, a bad line).
    pub async fn claims(&self, file: &CorpusFile) -> Result<Arc<Vec<ClaimRow>>, String> {
        self.policy.admit(&file.path)?;
        let hash = file.sha256.trim().to_ascii_lowercase();
        let slot: ClaimsSlot = Arc::clone(
            self.claims
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(hash.clone())
                .or_default(),
        );
        let rows = slot
            .get_or_try_init(|| async {
                let (owned, policy) = (file.clone(), self.policy.clone());
                let hashes = Arc::clone(&self.hashes);
                tokio::task::spawn_blocking(move || read_claims_file(&owned, &policy, &hashes))
                    .await
                    .map_err(|e| format!("claims {}: the read failed: {e}", file.path))?
            })
            .await?;
        let bytes: u64 = rows
            .iter()
            .map(|row| {
                let corpus = row.corpus.iter().flatten().map(|(id, text)| id.len() + text.len());
                let answer = row.answer.as_ref().map_or(0, String::len);
                let marks: usize = row.marks.iter().map(|(mark, id)| mark.len() + id.len()).sum();
                let text = row.claim.len() + answer + marks;
                (row.id.as_ref().map_or(0, String::len) + text + corpus.sum::<usize>()) as u64
            })
            .sum();
        self.used_now(Cached::Claims(hash), bytes);
        Ok(Arc::clone(rows))
    }

    /// How many files are loaded.
    #[must_use]
    pub fn files_loaded(&self) -> usize {
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|slot| slot.initialized())
            .count()
    }

    /// How many claim files are loaded.
    #[must_use]
    pub fn claim_files_loaded(&self) -> usize {
        self.claims
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|slot| slot.initialized())
            .count()
    }

    /// How many loads have started (failed ones included): once per file, however many checks
    /// asked for it at the same time.
    #[must_use]
    pub fn loads_started(&self) -> usize {
        self.loads.load(Ordering::Relaxed)
    }
}

/// Reads (or fetches) a claim file `policy` admits, checks its hash and parses its rows.
fn read_claims_file(
    file: &CorpusFile,
    policy: &CorpusPolicy,
    hashes: &Hashes,
) -> Result<Arc<Vec<ClaimRow>>, String> {
    let bytes = read_checked(file, policy, "claims", hashes)?;
    let text = String::from_utf8(bytes).map_err(|e| format!("claims {}: {e}", file.path))?;
    let rows = parse_claims(&file.path, &text)?;
    Ok(Arc::new(inline_rows(&rows)))
}

/// Reads (or fetches), checks, parses and indexes `file`, BM25 included, so that no check pays
/// for the index later: the blocking part of [`Corpora::get`].
fn load(
    file: &CorpusFile,
    policy: &CorpusPolicy,
    hashes: &Hashes,
) -> Result<Arc<IndexedCorpus>, String> {
    let started = std::time::Instant::now();
    let corpus = IndexedCorpus::new(read_corpus(file, policy, hashes)?);
    let _ = corpus.bm25();
    eprintln!(
        "verity-restate: corpus {}: {} passages, SHA-256 checked, indexed in {} ms",
        file.path,
        corpus.corpus().len(),
        started.elapsed().as_millis()
    );
    Ok(corpus)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    use super::{Corpora, CorpusFile, CorpusPolicy, CorpusSource, sha256_hex};

    fn under(dir: &std::path::Path) -> CorpusPolicy {
        CorpusPolicy::none().with_root(dir).unwrap()
    }

    fn file(dir: &std::path::Path, text: &str) -> CorpusFile {
        let path = dir.join("c.jsonl");
        std::fs::write(&path, text).unwrap();
        CorpusFile { path: path.display().to_string(), sha256: sha256_hex(text.as_bytes()) }
    }

    #[tokio::test]
    async fn a_file_is_loaded_checked_and_indexed_once_per_process() {
        let dir = std::env::temp_dir().join(format!("verity-corpus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = "{\"id\": \"a\", \"text\": \"The bridge opened in 1932.\"}\n";
        let source = CorpusSource::File(file(&dir, text));
        let corpora = Corpora::new(under(&dir));
        let first = corpora.get(&source).await.unwrap();
        assert!(first.is_indexed());
        let second = corpora.get(&source).await.unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!((corpora.files_loaded(), corpora.loads_started()), (1, 1));
        // The id the job sees is the core's content id, not the file's hash.
        assert!(first.id().as_str().starts_with("sha256:"));

        // Another hash is refused, naming the file but no hash of what it read (a second job
        // could name that hash and pass); the refusal is not kept.
        let CorpusSource::File(mut wrong) = source else { unreachable!() };
        wrong.sha256 = sha256_hex(b"something else");
        let error = corpora.get(&CorpusSource::File(wrong.clone())).await.unwrap_err();
        assert!(error.contains("refused") && error.contains("c.jsonl"), "{error}");
        assert!(
            !error.contains(&sha256_hex(text.as_bytes())),
            "the refusal leaks the hash: {error}"
        );
        assert!(corpora.get(&CorpusSource::File(wrong)).await.is_err());
        assert_eq!((corpora.files_loaded(), corpora.loads_started()), (1, 3));
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A loopback HTTP/1.1 server on a thread of its own that answers every GET with `body`
    /// after `delay`; returns its URL and the count of requests it has answered.
    fn slow_server(body: String, delay: Duration) -> (String, Arc<AtomicUsize>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/corpus.jsonl", listener.local_addr().unwrap());
        let served = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&served);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut head = [0u8; 4096];
                let _ = stream.read(&mut head);
                std::thread::sleep(delay);
                count.fetch_add(1, Ordering::SeqCst);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        (url, served)
    }

    /// Two checks that need one corpus while it loads slowly (a fetch that takes 800 ms), on a
    /// runtime of one thread: it is fetched once, both get the same index, and a timer set for
    /// 100 ms meanwhile fires on time (a load that held the runtime's thread would delay it to
    /// the load's end).
    #[tokio::test(flavor = "current_thread")]
    async fn concurrent_gets_share_one_load_and_the_runtime_stays_responsive() {
        let text = "{\"id\": \"a\", \"text\": \"The bridge opened in 1932.\"}\n";
        let delay = Duration::from_millis(800);
        let (url, served) = slow_server(text.to_owned(), delay);
        let policy = CorpusPolicy::none().with_url_prefix(&url).unwrap();
        let source =
            CorpusSource::File(CorpusFile { path: url, sha256: sha256_hex(text.as_bytes()) });
        let corpora = Corpora::new(policy);
        let started = Instant::now();
        let timer = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            started.elapsed()
        };
        let (first, second, fired) =
            tokio::join!(corpora.get(&source), corpora.get(&source), timer);
        let loaded = started.elapsed();
        let (first, second) = (first.unwrap(), second.unwrap());
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(served.load(Ordering::SeqCst), 1, "the corpus was fetched more than once");
        assert_eq!((corpora.loads_started(), corpora.files_loaded()), (1, 1));
        assert!(loaded >= delay, "the load took {loaded:?}, less than the server's delay");
        assert!(
            fired < Duration::from_millis(400),
            "a 100 ms timer fired after {fired:?} while the corpus loaded ({loaded:?})"
        );
    }

    /// What a claim job can name is what the operator allowed: no file and no URL by default;
    /// with a root, files under it only (not `..` out of it, not a symbolic link out of it, not
    /// a directory), the same refusal whether or not the file exists; with a prefix, URLs
    /// under it only (not another host that starts the same, not another port).
    #[test]
    fn a_worker_reads_only_the_files_and_urls_its_operator_allowed() {
        let base = std::env::temp_dir().join(format!("verity-policy-{}", std::process::id()));
        let root = base.join("corpora");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("ok.jsonl"), "{}").unwrap();
        std::fs::write(base.join("secret.txt"), "password").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(base.join("secret.txt"), root.join("link.txt")).ok();

        let none = CorpusPolicy::none();
        for location in ["/etc/passwd", "http://127.0.0.1:9/c.jsonl", "https://example.com/c"] {
            let refused = none.admit(location).unwrap_err();
            assert!(refused.contains("refused"), "{refused}");
        }
        let policy = under(&root);
        assert!(policy.admit(&root.join("ok.jsonl").display().to_string()).is_ok());
        let outside = [
            base.join("secret.txt"),
            root.join("../secret.txt"),
            root.join("link.txt"),
            root.join("missing.jsonl"),
            root.clone(),
            "/etc/passwd".into(),
        ];
        let refusals: Vec<String> = outside
            .iter()
            .map(|path| policy.admit(&path.display().to_string()).unwrap_err())
            .collect();
        for (path, refused) in outside.iter().zip(&refusals) {
            let shown = path.display().to_string();
            assert_eq!(
                refused.replace(&shown, "PATH"),
                refusals[0].replace(&outside[0].display().to_string(), "PATH")
            );
        }

        let urls = CorpusPolicy::none().with_url_prefix("https://data.example/corpora/").unwrap();
        assert!(urls.admit("https://data.example/corpora/c.jsonl").is_ok());
        assert!(urls.admit("HTTPS://DATA.EXAMPLE/corpora/c.jsonl?v=2").is_ok());
        for url in [
            "https://data.example/other/c.jsonl",
            "https://data.example/corpora/../secret",
            "https://data.example.evil.com/corpora/c.jsonl",
            "https://data.example:8443/corpora/c.jsonl",
            "http://data.example/corpora/c.jsonl",
            "https://user@data.example/corpora/c.jsonl",
            "http://127.0.0.1/corpora/c.jsonl",
        ] {
            assert!(urls.admit(url).is_err(), "{url} was admitted");
        }
        std::fs::remove_dir_all(&base).ok();
    }

    /// A corpus larger than the cap is refused, read from disk or fetched (the download stops
    /// at the cap; a server that declares a larger length is refused before its body).
    #[test]
    fn a_corpus_larger_than_the_cap_is_refused() {
        let dir = std::env::temp_dir().join(format!("verity-cap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("big.txt");
        std::fs::write(&path, "x".repeat(1_000)).unwrap();
        let path = path.display().to_string();
        assert_eq!(super::load_bytes(&path, 1_000).unwrap().len(), 1_000);
        assert!(super::load_bytes(&path, 999).unwrap_err().contains("larger than the cap"));
        let (url, _) = slow_server("y".repeat(1_000), Duration::ZERO);
        assert_eq!(super::load_bytes(&url, 1_000).unwrap().len(), 1_000);
        assert!(super::load_bytes(&url, 999).unwrap_err().contains("larger than the cap"));
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A loopback HTTP/1.1 server on a thread of its own that answers one GET with a body of
    /// `total` bytes and no `Content-Length`, chunked or delimited by closing the connection,
    /// written 64 KiB at a time until it is all sent or the client hangs up. The thread
    /// returns how many body bytes the client's end accepted.
    fn undeclared_server(chunked: bool, total: usize) -> (String, std::thread::JoinHandle<usize>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/corpus.jsonl", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut head = [0u8; 4096];
            let _ = stream.read(&mut head);
            let framing = if chunked { "transfer-encoding: chunked" } else { "connection: close" };
            write!(stream, "HTTP/1.1 200 OK\r\n{framing}\r\n\r\n").unwrap();
            let block = vec![b'z'; 64 * 1024];
            let mut written = 0;
            while written < total {
                let sent = if chunked {
                    write!(stream, "{:x}\r\n", block.len())
                        .and_then(|()| stream.write_all(&block))
                        .and_then(|()| stream.write_all(b"\r\n"))
                } else {
                    stream.write_all(&block)
                };
                if sent.is_err() {
                    return written;
                }
                written += block.len();
            }
            if chunked {
                let _ = stream.write_all(b"0\r\n\r\n");
            }
            written
        });
        (url, server)
    }

    /// A server that declares no length (chunked, or a body ended by closing the connection)
    /// and sends 1 GiB is refused at a cap of 1,000 bytes, the refusal naming the cap, and the
    /// download is stopped while it streams: the connection is dropped after at most 64 MiB
    /// has left the server (what the client read, plus what the kernel's loopback buffers
    /// held). Weighing only the declared length lets the whole 1 GiB in; weighing the body
    /// after reading it refuses it with the 1 GiB read.
    #[test]
    fn a_download_without_a_declared_length_stops_at_the_cap() {
        const TOTAL: usize = 1 << 30;
        for chunked in [true, false] {
            let (url, server) = undeclared_server(chunked, TOTAL);
            let refused = super::load_bytes(&url, 1_000).map(|bytes| bytes.len());
            let written = server.join().unwrap();
            let framing = if chunked { "chunked" } else { "close-delimited" };
            assert_eq!(
                refused,
                Err(format!("corpus {url}: larger than the cap of 1000 bytes")),
                "{framing}"
            );
            assert!(written <= 64 << 20, "{framing}: the server sent {written} bytes");
        }
    }

    /// A long-lived worker lets the least recently used corpora go past its cache bound: with
    /// room for two corpora, a third loaded evicts the one used longest ago (loaded again
    /// when asked for), never the one in use.
    #[tokio::test]
    async fn corpora_past_the_cache_bound_are_let_go_oldest_first() {
        let dir = std::env::temp_dir().join(format!("verity-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let source = |name: &str| {
            let text = format!("{{\"id\": \"a\", \"text\": \"{}\"}}\n", name.repeat(100));
            let path = dir.join(format!("{name}.jsonl"));
            std::fs::write(&path, &text).unwrap();
            CorpusSource::File(CorpusFile {
                path: path.display().to_string(),
                sha256: sha256_hex(text.as_bytes()),
            })
        };
        let (a, b, c) = (source("a"), source("b"), source("c"));
        // Each corpus holds 101 bytes of passages: room for two.
        let corpora = Corpora::new(under(&dir).with_cache_bytes(250));
        corpora.get(&a).await.unwrap();
        corpora.get(&b).await.unwrap();
        corpora.get(&a).await.unwrap();
        assert_eq!((corpora.files_loaded(), corpora.loads_started()), (2, 2));
        corpora.get(&c).await.unwrap();
        assert_eq!(corpora.files_loaded(), 2, "b, used longest ago, was let go");
        corpora.get(&a).await.unwrap();
        assert_eq!(corpora.loads_started(), 3, "a stayed");
        corpora.get(&b).await.unwrap();
        assert_eq!(corpora.loads_started(), 4, "b was loaded again");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A batch that names the wrong hash does not make the worker read (or fetch) the file
    /// again for every check that names it: what the file's bytes hash to is remembered while
    /// the file is unchanged (its length and modification time; a fetched one for a minute),
    /// and a changed file is read again.
    #[tokio::test]
    async fn a_wrong_hash_is_refused_without_reading_the_file_again() {
        let text = "{\"id\": \"a\", \"text\": \"The bridge opened in 1932.\"}\n";
        let (url, served) = slow_server(text.to_owned(), Duration::ZERO);
        let corpora = Corpora::new(CorpusPolicy::none().with_url_prefix(&url).unwrap());
        let wrong = CorpusFile { path: url.clone(), sha256: sha256_hex(b"another file") };
        for _ in 0..3 {
            let error = corpora.get(&CorpusSource::File(wrong.clone())).await.unwrap_err();
            assert!(error.contains("refused"), "{error}");
            let error = corpora.claims(&wrong).await.unwrap_err();
            assert!(error.contains("refused"), "{error}");
        }
        assert_eq!(served.load(Ordering::SeqCst), 1, "fetched again for each wrong hash");
        // The right hash still loads (the bytes are fetched: nothing was kept of them).
        let right = CorpusFile { path: url, sha256: sha256_hex(text.as_bytes()) };
        corpora.get(&CorpusSource::File(right)).await.unwrap();

        let dir = std::env::temp_dir().join(format!("verity-wrong-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let corpora = Corpora::new(under(&dir));
        let mut named = file(&dir, text);
        named.sha256 = sha256_hex(b"the file as it will be");
        assert!(corpora.get(&CorpusSource::File(named.clone())).await.is_err());
        // Made unreadable, the file is not read again: the refusal stands on what was read.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let path = std::path::Path::new(&named.path);
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o000)).unwrap();
            // (root reads whatever the mode: then this says nothing, and is skipped)
            if std::fs::read(path).is_err() {
                let error = corpora.get(&CorpusSource::File(named.clone())).await.unwrap_err();
                assert!(error.contains("SHA-256"), "read again: {error}");
            }
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        // Changed to what the batch names, it is read again and loads.
        let changed = "{\"id\": \"b\", \"text\": \"The ferry ran until 1966.\"}\n";
        std::fs::write(&named.path, changed).unwrap();
        named.sha256 = sha256_hex(changed.as_bytes());
        corpora.get(&CorpusSource::File(named)).await.unwrap();
        std::fs::remove_dir_all(&dir).ok();
    }

    /// Claim files count against the cache bound like corpora: a long-lived worker that reads
    /// many batches' claim files lets the oldest go.
    #[tokio::test]
    async fn claim_files_past_the_cache_bound_are_let_go() {
        let dir = std::env::temp_dir().join(format!("verity-claims-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let claims = |name: &str| {
            let text = format!(
                "{{\"id\": \"{name}\", \"claim\": \"{}\", \"label\": \"supported\"}}\n",
                name.repeat(100)
            );
            let path = dir.join(format!("{name}.jsonl"));
            std::fs::write(&path, &text).unwrap();
            CorpusFile { path: path.display().to_string(), sha256: sha256_hex(text.as_bytes()) }
        };
        let corpora = Corpora::new(under(&dir).with_cache_bytes(250));
        for name in ["a", "b", "c", "d"] {
            corpora.claims(&claims(name)).await.unwrap();
        }
        assert_eq!(corpora.claim_files_loaded(), 2, "every claim file read was kept");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The file a worker checked is the file it reads: a directory under the root swapped for
    /// a symbolic link to one outside it, again and again while the worker reads, never lets
    /// it read the outside file (the file is opened beneath the root, not checked by its path
    /// and opened again).
    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_swapped_in_while_reading_never_leads_outside_the_root() {
        use std::sync::atomic::AtomicBool;
        let base = std::env::temp_dir().join(format!("verity-swap-{}", std::process::id()));
        let (root, outside) = (base.join("root"), base.join("outside"));
        for dir in [root.join("sub"), root.join("real"), outside.clone()] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let inside = "{\"id\": \"a\", \"text\": \"inside\"}\n";
        std::fs::write(root.join("sub/c.jsonl"), inside).unwrap();
        std::fs::write(root.join("real/c.jsonl"), inside).unwrap();
        std::fs::write(outside.join("c.jsonl"), "secret").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        let policy = under(&root);
        let location = root.join("sub/c.jsonl").display().to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (root, stop) = (root.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    // sub: the real directory, then the link out of the root, and back.
                    let _ = std::fs::rename(root.join("sub"), root.join("real2"));
                    let _ = std::fs::rename(root.join("link"), root.join("sub"));
                    let _ = std::fs::rename(root.join("sub"), root.join("link"));
                    let _ = std::fs::rename(root.join("real2"), root.join("sub"));
                }
            })
        };
        let mut read_outside = 0;
        for _ in 0..20000 {
            if let Ok(bytes) = super::read_admitted(&policy, &location, 1_000) {
                read_outside += usize::from(bytes == b"secret");
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        assert_eq!(read_outside, 0, "the outside file was read {read_outside} times");
        std::fs::remove_dir_all(&base).ok();
    }

    #[test]
    fn sha256_is_lower_case_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
