//! The form every host shares a corpus in: an [`IndexedCorpus`] carries the passages, their
//! content hash ([`CorpusId`]) and the BM25 index, built once.
//!
//! A claim job refers to its corpus by [`CorpusId`] ([`CorpusRef`]) and never copies it into
//! its state, so a job saved after every input stays small however large the corpus is.
//! Restoring a job needs the corpus back from the host: [`with_corpora`] puts corpora in scope
//! for deserialization, and a saved job whose corpus is not in scope (or whose hash differs) is
//! refused.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::corpus::{Corpus, CorpusId};
use crate::retrieve::Bm25Index;

/// A corpus with its content hash and its BM25 index: built once per corpus, shared (in an
/// [`Arc`]) by every job over it. The index is built on first use, once.
#[derive(Debug)]
pub struct IndexedCorpus {
    corpus: Corpus,
    id: CorpusId,
    bm25: OnceLock<Bm25Index>,
    /// The index of the version this one was made from ([`IndexedCorpus::next`]): its
    /// segments are reused when this one's index is built, then it is dropped.
    previous: Mutex<Option<Bm25Index>>,
}

impl IndexedCorpus {
    /// Hashes `corpus` (from its chunks' hashes); the BM25 index is built when first needed.
    #[must_use]
    pub fn new(corpus: Corpus) -> Arc<Self> {
        let id = corpus.id();
        Arc::new(Self { corpus, id, bm25: OnceLock::new(), previous: Mutex::new(None) })
    }

    /// The next version of this corpus, `corpus` (made from this one's with
    /// [`Corpus::appended`] or [`Corpus::without`], sharing its chunks): its index, when
    /// built, reuses the segments of the chunks the two share, so only the changed chunks are
    /// indexed.
    #[must_use]
    pub fn next(&self, corpus: Corpus) -> Arc<Self> {
        let previous = self
            .bm25
            .get()
            .cloned()
            .or_else(|| self.previous.lock().ok().and_then(|previous| previous.clone()));
        let id = corpus.id();
        Arc::new(Self { corpus, id, bm25: OnceLock::new(), previous: Mutex::new(previous) })
    }

    /// The passages.
    #[must_use]
    pub fn corpus(&self) -> &Corpus {
        &self.corpus
    }

    /// The content hash.
    #[must_use]
    pub fn id(&self) -> &CorpusId {
        &self.id
    }

    /// The BM25 index, built on the first call and shared afterwards.
    #[must_use]
    pub fn bm25(&self) -> &Bm25Index {
        self.bm25.get_or_init(|| {
            let previous = self.previous.lock().ok().and_then(|mut previous| previous.take());
            Bm25Index::build_from(&self.corpus, previous.as_ref())
        })
    }

    /// Whether the BM25 index has been built.
    #[must_use]
    pub fn is_indexed(&self) -> bool {
        self.bm25.get().is_some()
    }
}

thread_local! {
    /// The corpora in scope for deserializing jobs (see [`with_corpora`]).
    static IN_SCOPE: RefCell<Vec<Arc<IndexedCorpus>>> = const { RefCell::new(Vec::new()) };
}

/// Runs `restore` with `corpora` in scope: a saved claim job deserialized inside it takes its
/// corpus from them (matched by [`CorpusId`]), and fails to deserialize when its corpus is not
/// among them. Scopes nest; the corpora leave scope when `restore` returns.
pub fn with_corpora<R>(corpora: &[Arc<IndexedCorpus>], restore: impl FnOnce() -> R) -> R {
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            IN_SCOPE.with(|scope| scope.borrow_mut().truncate(self.0));
        }
    }
    let depth = IN_SCOPE.with(|scope| {
        let mut scope = scope.borrow_mut();
        let depth = scope.len();
        scope.extend(corpora.iter().cloned());
        depth
    });
    let _restore = Restore(depth);
    restore()
}

/// A job's reference to its corpus: serialized as the [`CorpusId`] alone; deserialized by
/// taking the corpus with that id from the corpora in scope ([`with_corpora`]).
#[derive(Debug, Clone)]
pub struct CorpusRef(Arc<IndexedCorpus>);

impl CorpusRef {
    /// A reference to `corpus`.
    #[must_use]
    pub fn new(corpus: Arc<IndexedCorpus>) -> Self {
        Self(corpus)
    }

    /// The corpus.
    #[must_use]
    pub fn get(&self) -> &Arc<IndexedCorpus> {
        &self.0
    }
}

impl std::ops::Deref for CorpusRef {
    type Target = IndexedCorpus;
    fn deref(&self) -> &IndexedCorpus {
        &self.0
    }
}

impl Serialize for CorpusRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.id.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for CorpusRef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let id = CorpusId::deserialize(deserializer)?;
        IN_SCOPE.with(|scope| {
            let scope = scope.borrow();
            if let Some(corpus) = scope.iter().rev().find(|corpus| corpus.id == id) {
                return Ok(Self(Arc::clone(corpus)));
            }
            let given: Vec<&str> = scope.iter().map(|corpus| corpus.id.as_str()).collect();
            Err(serde::de::Error::custom(if given.is_empty() {
                format!("the saved job needs its corpus {id}, and no corpus was given")
            } else {
                format!(
                    "the saved job needs its corpus {id}, and the corpus given differs ({})",
                    given.join(", ")
                )
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn corpus(pairs: &[(&str, &str)]) -> Corpus {
        Corpus::from_pairs(pairs.iter().copied()).unwrap()
    }

    #[test]
    fn a_reference_serializes_as_the_id_and_needs_its_corpus_in_scope() {
        let shared = IndexedCorpus::new(corpus(&[("a", "one")]));
        let other = IndexedCorpus::new(corpus(&[("a", "uno")]));
        let saved = serde_json::to_string(&CorpusRef::new(Arc::clone(&shared))).unwrap();
        assert_eq!(saved, format!("\"{}\"", shared.id()));

        let missing = serde_json::from_str::<CorpusRef>(&saved).unwrap_err().to_string();
        assert!(missing.contains("no corpus was given"), "{missing}");
        let differs = with_corpora(&[Arc::clone(&other)], || {
            serde_json::from_str::<CorpusRef>(&saved).unwrap_err().to_string()
        });
        assert!(differs.contains("differs") && differs.contains(other.id().as_str()), "{differs}");
        let restored = with_corpora(&[other, Arc::clone(&shared)], || {
            serde_json::from_str::<CorpusRef>(&saved).unwrap()
        });
        assert!(Arc::ptr_eq(restored.get(), &shared));
        // The scope ended with the closure.
        assert!(serde_json::from_str::<CorpusRef>(&saved).is_err());
    }

    #[test]
    fn the_index_is_built_once_and_shared() {
        let shared = IndexedCorpus::new(corpus(&[("a", "zeppelin"), ("b", "river")]));
        assert!(!shared.is_indexed());
        let first: *const Bm25Index = shared.bm25();
        let second: *const Bm25Index = shared.bm25();
        assert!(shared.is_indexed());
        assert_eq!(first, second);
    }
}
