//! The corpus a user uploaded: its [`Passage`]s, in order, with unique ids ([`Corpus`]), and
//! its content hash ([`CorpusId`]). Plain data: the form hosts share it in, with its BM25 index,
//! is [`crate::indexed::IndexedCorpus`].

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use sha2::{Digest, Sha256};

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
}
