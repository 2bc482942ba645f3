//! The corpus a user uploaded, and the form every host shares it in: an [`IndexedCorpus`]
//! carries the passages, their content hash ([`CorpusId`]) and the BM25 index, built once.
//!
//! A claim job refers to its corpus by [`CorpusId`] and never copies it into its state, so a
//! job saved after every input stays small however large the corpus is. Restoring a job needs
//! the corpus back from the host: [`with_corpora`] puts corpora in scope for deserialization,
//! and a saved job whose corpus is not in scope (or whose hash differs) is refused.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

use crate::retrieve::Bm25Index;

/// One passage of a corpus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Passage {
    /// Its id, unique in the corpus.
    pub id: String,
    /// Its text.
    pub text: String,
}

/// A corpus that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorpusError(String);

impl fmt::Display for CorpusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CorpusError {}

/// Passages in the order they were given, with a lookup by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<Passage>", into = "Vec<Passage>")]
pub struct Corpus {
    passages: Vec<Passage>,
    by_id: HashMap<String, usize>,
}

impl Corpus {
    /// A corpus of `passages`, in order.
    ///
    /// # Errors
    /// When two passages share an id.
    pub fn new(passages: Vec<Passage>) -> Result<Self, CorpusError> {
        let mut by_id = HashMap::with_capacity(passages.len());
        for (index, passage) in passages.iter().enumerate() {
            if by_id.insert(passage.id.clone(), index).is_some() {
                return Err(CorpusError(format!("two passages have the id {:?}", passage.id)));
            }
        }
        Ok(Self { passages, by_id })
    }

    /// A corpus from `(id, text)` pairs, in order.
    ///
    /// # Errors
    /// When two passages share an id.
    pub fn from_pairs<I, S, T>(pairs: I) -> Result<Self, CorpusError>
    where
        I: IntoIterator<Item = (S, T)>,
        S: Into<String>,
        T: Into<String>,
    {
        Self::new(
            pairs
                .into_iter()
                .map(|(id, text)| Passage { id: id.into(), text: text.into() })
                .collect(),
        )
    }

    /// The passages, in corpus order.
    #[must_use]
    pub fn passages(&self) -> &[Passage] {
        &self.passages
    }

    /// The passage with `id`.
    #[must_use]
    pub fn get(&self, id: &str) -> Option<&Passage> {
        self.by_id.get(id).map(|&index| &self.passages[index])
    }

    /// The number of passages.
    #[must_use]
    pub fn len(&self) -> usize {
        self.passages.len()
    }

    /// Whether the corpus has no passage.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.passages.is_empty()
    }

    /// The content hash: SHA-256 over each passage's id and text, in order, each
    /// length-prefixed (so no two different corpora are encoded alike).
    #[must_use]
    pub fn id(&self) -> CorpusId {
        let mut hasher = Sha256::new();
        for passage in &self.passages {
            for part in [&passage.id, &passage.text] {
                hasher.update((part.len() as u64).to_le_bytes());
                hasher.update(part.as_bytes());
            }
        }
        let digest = hasher.finalize();
        let mut text = String::with_capacity(7 + 64);
        text.push_str("sha256:");
        for byte in digest {
            text.push(char::from(HEX[usize::from(byte >> 4)]));
            text.push(char::from(HEX[usize::from(byte & 15)]));
        }
        CorpusId(text)
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl TryFrom<Vec<Passage>> for Corpus {
    type Error = CorpusError;
    fn try_from(passages: Vec<Passage>) -> Result<Self, CorpusError> {
        Self::new(passages)
    }
}

impl From<Corpus> for Vec<Passage> {
    fn from(corpus: Corpus) -> Self {
        corpus.passages
    }
}

/// A corpus's content hash, `sha256:` and 64 hex digits: how a job names its corpus.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct CorpusId(String);

impl CorpusId {
    /// The id as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CorpusId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for CorpusId {
    type Err = CorpusError;
    fn from_str(text: &str) -> Result<Self, CorpusError> {
        let well_formed = text.strip_prefix("sha256:").is_some_and(|hex| {
            hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if well_formed {
            Ok(Self(text.to_owned()))
        } else {
            Err(CorpusError(format!(
                "{text:?} is not a corpus id (\"sha256:\" and 64 lower-case hex digits)"
            )))
        }
    }
}

impl<'de> Deserialize<'de> for CorpusId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A corpus with its content hash and its BM25 index: built once per corpus, shared (in an
/// [`Arc`]) by every job over it. The index is built on first use, once.
#[derive(Debug)]
pub struct IndexedCorpus {
    corpus: Corpus,
    id: CorpusId,
    bm25: OnceLock<Bm25Index>,
}

impl IndexedCorpus {
    /// Hashes `corpus`; the BM25 index is built when first needed.
    #[must_use]
    pub fn new(corpus: Corpus) -> Arc<Self> {
        let id = corpus.id();
        Arc::new(Self { corpus, id, bm25: OnceLock::new() })
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
        self.bm25.get_or_init(|| Bm25Index::build(&self.corpus))
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
    fn duplicate_ids_are_refused() {
        assert!(Corpus::from_pairs([("a", "x"), ("a", "y")]).is_err());
    }

    #[test]
    fn the_id_depends_on_every_id_and_text_and_their_order() {
        let base = corpus(&[("a", "one"), ("b", "two")]).id();
        assert!(base.as_str().starts_with("sha256:"));
        assert_eq!(base.as_str().len(), 71);
        assert_eq!(base, corpus(&[("a", "one"), ("b", "two")]).id());
        for other in [
            corpus(&[("b", "two"), ("a", "one")]),
            corpus(&[("a", "one"), ("b", "two!")]),
            corpus(&[("a", "one"), ("c", "two")]),
            // The same bytes split differently between id and text.
            corpus(&[("ao", "ne"), ("b", "two")]),
            corpus(&[("a", "one")]),
        ] {
            assert_ne!(other.id(), base);
        }
        assert_eq!(base.as_str().parse::<CorpusId>().unwrap(), base);
        assert!("sha256:xyz".parse::<CorpusId>().is_err());
        assert!(serde_json::from_str::<CorpusId>("\"md5:00\"").is_err());
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
