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

/// The bytes at `location`: a file read, or a URL fetched (GET, over [`ReqwestClient`], five
/// minutes at most) on a thread of its own, so it works from sync code and inside a runtime
/// alike.
///
/// # Errors
/// A message naming the location: unreadable, unreachable, or an answer other than 200.
///
/// [`ReqwestClient`]: crate::http::ReqwestClient
pub fn load_bytes(location: &str) -> Result<Vec<u8>, String> {
    if !is_url(location) {
        return std::fs::read(location).map_err(|e| format!("corpus {location}: {e}"));
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
            let mut bytes = Vec::new();
            while let Some(chunk) = body.next_chunk().await.map_err(|e| format!("{e:?}"))? {
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

/// Reads (or fetches) a corpus file, checks its hash and parses it (no index yet).
///
/// # Errors
/// A message naming the file: unreadable, a hash that does not match, or unparsable.
pub fn read_file(file: &CorpusFile) -> Result<Corpus, String> {
    let bytes = load_bytes(&file.path)?;
    let actual = sha256_hex(&bytes);
    if !actual.eq_ignore_ascii_case(file.sha256.trim()) {
        return Err(format!(
            "corpus {} refused: its SHA-256 is {actual}, but the batch names {} (the file \
             changed, or the batch names another file)",
            file.path, file.sha256
        ));
    }
    parse(&file.path, bytes)
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
}

impl Corpora {
    /// No corpus loaded yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
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
                        let owned = file.clone();
                        tokio::task::spawn_blocking(move || load(&owned))
                            .await
                            .map_err(|e| format!("corpus {}: the load failed: {e}", file.path))?
                    })
                    .await?;
                Ok(Arc::clone(corpus))
            }
        }
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

    /// How many loads have started (failed ones included): once per file, however many checks
    /// asked for it at the same time.
    #[must_use]
    pub fn loads_started(&self) -> usize {
        self.loads.load(Ordering::Relaxed)
    }
}

/// Reads (or fetches), checks, parses and indexes `file`, BM25 included, so that no check pays
/// for the index later: the blocking part of [`Corpora::get`].
fn load(file: &CorpusFile) -> Result<Arc<IndexedCorpus>, String> {
    let started = std::time::Instant::now();
    let corpus = IndexedCorpus::new(read_file(file)?);
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

    use super::{Corpora, CorpusFile, CorpusSource, sha256_hex};

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
        let corpora = Corpora::new();
        let first = corpora.get(&source).await.unwrap();
        assert!(first.is_indexed());
        let second = corpora.get(&source).await.unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!((corpora.files_loaded(), corpora.loads_started()), (1, 1));
        // The id the job sees is the core's content id, not the file's hash.
        assert!(first.id().as_str().starts_with("sha256:"));

        // Another hash is refused, naming the file and both hashes; the refusal is not kept.
        let CorpusSource::File(mut wrong) = source else { unreachable!() };
        wrong.sha256 = sha256_hex(b"something else");
        let error = corpora.get(&CorpusSource::File(wrong.clone())).await.unwrap_err();
        assert!(error.contains("refused") && error.contains(&wrong.sha256), "{error}");
        assert!(
            error.contains(&sha256_hex(text.as_bytes())) && error.contains("c.jsonl"),
            "{error}"
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
        let source =
            CorpusSource::File(CorpusFile { path: url, sha256: sha256_hex(text.as_bytes()) });
        let corpora = Corpora::new();
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

    #[test]
    fn sha256_is_lower_case_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
