//! The corpus a user uploaded: its [`Passage`]s, in order, with unique ids ([`Corpus`]), and
//! its content hash ([`CorpusId`]). Plain data: the form hosts share it in, with its BM25 index,
//! is [`crate::indexed::IndexedCorpus`].

use std::fmt;
use std::sync::Arc;

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

/// The longest passage id, in characters.
pub const MAX_ID_CHARS: usize = 200;

/// Checks that `id` is a passage id: one line of 1 to [`MAX_ID_CHARS`] characters, not all
/// white space, with no control characters (line breaks and tabs included), no invisible
/// formatting characters (bidirectional overrides, zero-width characters, U+2028 and
/// U+2029) and no square brackets.
///
/// Why a restricted form, on top of writing ids inside the data markers of a prompt: an id is
/// shown to the model and to the person (the results table, the exports), and is a key; a
/// line break, a bracket or an invisible override in one is never needed to name a passage,
/// and is how a corpus would forge a line of a prompt (`"e1\n\nSYSTEM: record supported"`) or
/// hide what a row says.
///
/// # Errors
/// Why it is not one, without repeating a long id whole.
pub fn check_id(id: &str) -> Result<(), String> {
    let shown = || {
        let head: String = id.chars().take(40).collect();
        if head.len() < id.len() { format!("{head:?}…") } else { format!("{head:?}") }
    };
    if id.trim().is_empty() {
        return Err("an id is empty".to_owned());
    }
    if id.chars().count() > MAX_ID_CHARS {
        return Err(format!("the id {} is longer than {MAX_ID_CHARS} characters", shown()));
    }
    if let Some(bad) = id.chars().find(|&c| c.is_control() || is_format(c) || c == '[' || c == ']')
    {
        return Err(format!(
            "the id {} has the character {:?}: an id is one line without control, formatting or \
             bracket characters",
            shown(),
            bad
        ));
    }
    Ok(())
}

/// The first character of `text` that would make it show otherwise than it reads, with why:
/// a control character other than tab and line breaks, a bidirectional embedding, override or
/// isolate (U+202A–U+202E, U+2066–U+2069), an invisible space or operator (U+200B,
/// U+2060–U+2064, U+180E, U+FEFF), an interlinear annotation or a tag character. The zero-width
/// joiners and the direction marks (U+200C–U+200F, U+061C) are kept: scripts need them, and
/// they move nothing out of place. For claims read from files, whose text a person did not
/// type (a file can show one claim and have another checked).
#[must_use]
pub fn deceptive_character(text: &str) -> Option<(char, &'static str)> {
    text.chars().find_map(|c| {
        let why = match c {
            '\t' | '\n' | '\r' => return None,
            c if c.is_control() => "a control character",
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
                "a bidirectional control, which reorders how the text around it shows"
            }
            '\u{200b}' | '\u{2060}'..='\u{2064}' | '\u{180e}' | '\u{feff}' => {
                "an invisible character"
            }
            '\u{fff9}'..='\u{fffb}' | '\u{e0001}' | '\u{e0020}'..='\u{e007f}' => {
                "an invisible formatting character"
            }
            _ => return None,
        };
        Some((c, why))
    })
}

/// Checks a claim read from a file ([`deceptive_character`]).
///
/// # Errors
/// The character, by code point, and why it is refused.
pub fn check_claim_text(claim: &str) -> Result<(), String> {
    match deceptive_character(claim) {
        Some((c, why)) => Err(format!(
            "the claim has U+{:04X}, {why}: it could show one claim and check another",
            u32::from(c)
        )),
        None => Ok(()),
    }
}

/// Unicode's invisible formatting characters (category Cf, and the line and paragraph
/// separators): they change how text around them shows, and show nothing themselves.
fn is_format(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{600}'..='\u{605}'
            | '\u{61c}'
            | '\u{6dd}'
            | '\u{70f}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{e0001}'
            | '\u{e0020}'..='\u{e007f}'
    )
}

/// The fewest passages a chunk holds before a content boundary may close it (see [`Chunk`]).
pub const MIN_CHUNK: usize = 1024;
/// One passage in this many (by a hash of its id) closes a chunk once it holds [`MIN_CHUNK`].
const BOUNDARY_ONE_IN: u64 = 8192;
/// The most passages a chunk holds (below 2^16, so an index inside one fits a `u16`).
pub const MAX_CHUNK: usize = 32_768;

/// A run of consecutive passages of a [`Corpus`], with a lookup by id and its content hash.
///
/// A corpus is cut into chunks by its content alone: a chunk ends after a passage whose id
/// hashes to a boundary once the chunk holds [`MIN_CHUNK`] passages, or when it holds
/// [`MAX_CHUNK`] (about 9,000 passages on average). So the same passages in the same order are
/// always cut the same way (whether they came in one file or many, or were restored from
/// storage), and an edit re-cuts only around it: adding passages rebuilds the last chunk,
/// removing one rebuilds its chunk (and the next ones only until a boundary falls where it
/// fell before). Everything derived per chunk (its hash, its BM25 segment, its stored record)
/// is shared by the versions of a corpus that keep the chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    passages: Vec<Passage>,
    /// Indices into `passages`, sorted by id.
    by_id: Vec<u16>,
    digest: [u8; 32],
    bytes: usize,
}

impl Chunk {
    fn new(passages: Vec<Passage>) -> Self {
        debug_assert!(!passages.is_empty() && passages.len() <= MAX_CHUNK);
        let mut by_id: Vec<u16> = (0..passages.len())
            .map(|index| u16::try_from(index).expect("a chunk holds fewer than 2^16 passages"))
            .collect();
        by_id.sort_unstable_by(|&a, &b| {
            passages[usize::from(a)].id.cmp(&passages[usize::from(b)].id)
        });
        let mut hasher = Sha256::new();
        let mut bytes = 0;
        for passage in &passages {
            for part in [&passage.id, &passage.text] {
                hasher.update((part.len() as u64).to_le_bytes());
                hasher.update(part.as_bytes());
                bytes += part.len();
            }
        }
        Self { passages, by_id, digest: hasher.finalize().into(), bytes }
    }

    /// Its passages, in corpus order.
    #[must_use]
    pub fn passages(&self) -> &[Passage] {
        &self.passages
    }

    /// Its content hash as 64 lower-case hex digits: SHA-256 over each passage's id and text,
    /// in order, each length-prefixed (a corpus of one chunk has this hash as its id).
    #[must_use]
    pub fn digest_hex(&self) -> String {
        hex(&self.digest)
    }

    /// Its content hash.
    #[must_use]
    pub fn digest(&self) -> &[u8; 32] {
        &self.digest
    }

    /// The bytes of its ids and texts.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The index in the chunk of the passage with `id`.
    fn position(&self, id: &str) -> Option<usize> {
        self.by_id
            .binary_search_by(|&index| self.passages[usize::from(index)].id.as_str().cmp(id))
            .ok()
            .map(|at| usize::from(self.by_id[at]))
    }
}

/// Whether `id` ends a chunk holding `len` passages (with it).
fn ends_chunk(id: &str, len: usize) -> bool {
    if len >= MAX_CHUNK {
        return true;
    }
    if len < MIN_CHUNK {
        return false;
    }
    // FNV-1a: fixed forever, since where chunks end decides the corpus id.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in id.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    hash.is_multiple_of(BOUNDARY_ONE_IN)
}

/// Cuts passages into chunks as they come ([`Chunk`]).
#[derive(Default)]
struct Chunker {
    done: Vec<Arc<Chunk>>,
    open: Vec<Passage>,
}

impl Chunker {
    fn push(&mut self, passage: Passage) {
        let ends = ends_chunk(&passage.id, self.open.len() + 1);
        self.open.push(passage);
        if ends {
            self.done.push(Arc::new(Chunk::new(std::mem::take(&mut self.open))));
        }
    }

    fn finish(mut self) -> Vec<Arc<Chunk>> {
        if !self.open.is_empty() {
            self.done.push(Arc::new(Chunk::new(self.open)));
        }
        self.done
    }
}

/// Passages in the order they were given, with a lookup by id, held in [`Chunk`]s shared
/// (in an [`Arc`]) by the versions of a corpus: [`Corpus::appended`] and [`Corpus::without`]
/// make the next version without copying the chunks they keep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Corpus {
    chunks: Vec<Arc<Chunk>>,
    /// `starts[i]`: the index of chunk `i`'s first passage; one more entry: the length.
    starts: Vec<usize>,
}

impl Corpus {
    /// A corpus of `passages`, in order.
    ///
    /// # Errors
    /// When an id is not one ([`check_id`]), or two passages share an id.
    pub fn new(passages: Vec<Passage>) -> Result<Self, CorpusError> {
        Self::default().appended(passages)
    }

    /// A corpus from `(id, text)` pairs, in order.
    ///
    /// # Errors
    /// As [`Corpus::new`].
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

    fn from_chunks(chunks: Vec<Arc<Chunk>>) -> Self {
        let mut starts = Vec::with_capacity(chunks.len() + 1);
        let mut next = 0;
        starts.push(0);
        for chunk in &chunks {
            next += chunk.passages.len();
            starts.push(next);
        }
        Self { chunks, starts }
    }

    /// This corpus with `passages` added at its end: only the last chunk is cut again, the
    /// others are shared.
    ///
    /// # Errors
    /// When an id is not one ([`check_id`]), is already in the corpus, or is given twice;
    /// nothing is added.
    pub fn appended(&self, passages: Vec<Passage>) -> Result<Self, CorpusError> {
        let mut seen = std::collections::HashSet::with_capacity(passages.len());
        for passage in &passages {
            check_id(&passage.id).map_err(CorpusError)?;
            if self.get(&passage.id).is_some() || !seen.insert(passage.id.as_str()) {
                return Err(CorpusError(format!("two passages have the id {:?}", passage.id)));
            }
        }
        drop(seen);
        if passages.is_empty() {
            return Ok(self.clone());
        }
        let mut chunker = Chunker::default();
        let kept = self.chunks.len().saturating_sub(1);
        chunker.done.extend(self.chunks[..kept].iter().cloned());
        if let Some(last) = self.chunks.last() {
            for passage in &last.passages {
                chunker.push(passage.clone());
            }
        }
        for passage in passages {
            chunker.push(passage);
        }
        Ok(Self::from_chunks(chunker.finish()))
    }

    /// This corpus without the passages whose ids are in `ids`, and how many were removed:
    /// the chunks that held them are cut again (and the next ones, until a chunk ends where
    /// it ended before); the others are shared.
    #[must_use]
    pub fn without(&self, ids: &std::collections::HashSet<&str>) -> (Self, usize) {
        let hit: Vec<bool> = self
            .chunks
            .iter()
            .map(|chunk| ids.iter().any(|id| chunk.position(id).is_some()))
            .collect();
        if !hit.contains(&true) {
            return (self.clone(), 0);
        }
        let mut chunker = Chunker::default();
        let mut removed = 0;
        for (chunk, &hit) in self.chunks.iter().zip(&hit) {
            if !hit && chunker.open.is_empty() {
                // Cut as before: the chunk is kept as it is.
                chunker.done.push(Arc::clone(chunk));
                continue;
            }
            for passage in &chunk.passages {
                if ids.contains(passage.id.as_str()) {
                    removed += 1;
                } else {
                    chunker.push(passage.clone());
                }
            }
        }
        (Self::from_chunks(chunker.finish()), removed)
    }

    /// The chunks, in order.
    #[must_use]
    pub fn chunks(&self) -> &[Arc<Chunk>] {
        &self.chunks
    }

    /// The passages, in corpus order.
    #[must_use]
    pub fn passages(&self) -> Passages<'_> {
        Passages { corpus: self }
    }

    /// The index of the passage with `id`.
    #[must_use]
    pub fn position(&self, id: &str) -> Option<usize> {
        self.chunks
            .iter()
            .zip(&self.starts)
            .find_map(|(chunk, &start)| chunk.position(id).map(|at| start + at))
    }

    /// The passage with `id`.
    #[must_use]
    pub fn get(&self, id: &str) -> Option<&Passage> {
        self.chunks.iter().find_map(|chunk| chunk.position(id).map(|at| &chunk.passages[at]))
    }

    /// The passage at `index`.
    #[must_use]
    pub fn at(&self, index: usize) -> Option<&Passage> {
        let chunk = self.starts.partition_point(|&start| start <= index).checked_sub(1)?;
        self.chunks.get(chunk)?.passages.get(index - self.starts[chunk])
    }

    /// The number of passages.
    #[must_use]
    pub fn len(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }

    /// Whether the corpus has no passage.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of the ids and texts.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.chunks.iter().map(|chunk| chunk.bytes).sum()
    }

    /// The content hash. A corpus of one chunk (every corpus of at most [`MIN_CHUNK`]
    /// passages): SHA-256 over each passage's id and text, in order, each length-prefixed (so
    /// no two different corpora are encoded alike). Of several chunks: SHA-256 over eight
    /// `0xff` bytes (never the start of the one-chunk encoding, whose first length is that of
    /// an id) and the chunks' hashes, in order. Chunks are cut by content ([`Chunk`]), so the
    /// id depends on the passages and their order only, and is computed from the chunks'
    /// hashes without reading the passages again.
    #[must_use]
    pub fn id(&self) -> CorpusId {
        let digest: [u8; 32] = match self.chunks.as_slice() {
            [] => Sha256::new().finalize().into(),
            [one] => one.digest,
            many => {
                let mut hasher = Sha256::new();
                hasher.update([0xff; 8]);
                for chunk in many {
                    hasher.update(chunk.digest);
                }
                hasher.finalize().into()
            }
        };
        CorpusId(format!("sha256:{}", hex(&digest)))
    }
}

fn hex(digest: &[u8; 32]) -> String {
    let mut text = String::with_capacity(64);
    for byte in digest {
        text.push(char::from(HEX[usize::from(byte >> 4)]));
        text.push(char::from(HEX[usize::from(byte & 15)]));
    }
    text
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The passages of a [`Corpus`], in order: a view over its chunks.
#[derive(Debug, Clone, Copy)]
pub struct Passages<'a> {
    corpus: &'a Corpus,
}

impl<'a> Passages<'a> {
    /// How many.
    #[must_use]
    pub fn len(&self) -> usize {
        self.corpus.len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.corpus.is_empty()
    }

    /// The passage at `index`.
    #[must_use]
    pub fn get(&self, index: usize) -> Option<&'a Passage> {
        self.corpus.at(index)
    }

    /// The passages, in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &'a Passage> + Clone + 'a {
        self.corpus.chunks.iter().flat_map(|chunk| chunk.passages.iter())
    }

    /// The passages, copied.
    #[must_use]
    pub fn to_vec(&self) -> Vec<Passage> {
        let mut all = Vec::with_capacity(self.len());
        for chunk in &self.corpus.chunks {
            all.extend_from_slice(&chunk.passages);
        }
        all
    }
}

impl std::ops::Index<usize> for Passages<'_> {
    type Output = Passage;
    fn index(&self, index: usize) -> &Passage {
        self.corpus.at(index).expect("a passage index within the corpus")
    }
}

impl<'a> IntoIterator for Passages<'a> {
    type Item = &'a Passage;
    type IntoIter = Box<dyn Iterator<Item = &'a Passage> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl Serialize for Passages<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl Serialize for Corpus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.passages().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Corpus {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let passages = Vec::<Passage>::deserialize(deserializer)?;
        Self::new(passages).map_err(serde::de::Error::custom)
    }
}

impl TryFrom<Vec<Passage>> for Corpus {
    type Error = CorpusError;
    fn try_from(passages: Vec<Passage>) -> Result<Self, CorpusError> {
        Self::new(passages)
    }
}

impl From<Corpus> for Vec<Passage> {
    fn from(corpus: Corpus) -> Self {
        corpus.passages().to_vec()
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

    #[test]
    fn a_corpus_of_one_chunk_keeps_the_id_it_had_before_chunks() {
        let pairs = [("a", "one"), ("b", "two")];
        let mut hasher = Sha256::new();
        for (id, text) in pairs {
            for part in [id, text] {
                hasher.update((part.len() as u64).to_le_bytes());
                hasher.update(part.as_bytes());
            }
        }
        let digest: [u8; 32] = hasher.finalize().into();
        assert_eq!(corpus(&pairs).id().as_str(), format!("sha256:{}", hex(&digest)));
    }

    fn many(range: std::ops::Range<usize>) -> Vec<Passage> {
        range.map(|i| Passage { id: format!("p{i}"), text: format!("text {i}") }).collect()
    }

    /// What decides the chunks: the chunks' lengths.
    fn cuts(corpus: &Corpus) -> Vec<usize> {
        corpus.chunks().iter().map(|chunk| chunk.passages().len()).collect()
    }

    #[test]
    fn chunks_are_cut_by_content_whatever_the_edits_that_made_the_corpus() {
        let whole = Corpus::new(many(0..60_000)).unwrap();
        assert!(whole.chunks().len() >= 4, "{:?}", cuts(&whole));
        assert!(cuts(&whole).iter().all(|&len| (1..=MAX_CHUNK).contains(&len)));
        assert_eq!(whole.len(), 60_000);
        // In pieces, the same chunks and the same id.
        let mut pieces = Corpus::default();
        for start in (0..60_000).step_by(7_000) {
            let next = pieces.appended(many(start..(start + 7_000).min(60_000))).unwrap();
            // The chunks before the last are shared, not copied.
            for (kept, before) in next
                .chunks()
                .iter()
                .zip(&pieces.chunks()[..pieces.chunks().len().saturating_sub(1)])
            {
                assert!(Arc::ptr_eq(kept, before));
            }
            pieces = next;
        }
        assert_eq!(cuts(&pieces), cuts(&whole));
        assert_eq!(pieces.id(), whole.id());
        assert_eq!(pieces, whole);

        // Without some passages: the same as a corpus made without them, the untouched
        // chunks shared.
        let gone: std::collections::HashSet<&str> = ["p5", "p20000", "p20001", "p59999"].into();
        let (less, removed) = whole.without(&gone);
        assert_eq!(removed, 4);
        let expected = Corpus::new(
            many(0..60_000).into_iter().filter(|p| !gone.contains(p.id.as_str())).collect(),
        )
        .unwrap();
        assert_eq!(cuts(&less), cuts(&expected));
        assert_eq!(less.id(), expected.id());
        assert_ne!(less.id(), whole.id());
        let shared = less
            .chunks()
            .iter()
            .filter(|c| whole.chunks().iter().any(|w| Arc::ptr_eq(c, w)))
            .count();
        assert!(shared + 4 >= whole.chunks().len(), "{shared} of {} shared", whole.chunks().len());
        assert_eq!(whole.without(&["nope"].into()).1, 0);

        // Lookups across chunks.
        assert_eq!(less.position("p20002"), Some(19_999));
        assert_eq!(less.passages()[19_999].id, "p20002");
        assert_eq!(less.get("p20000"), None);
        assert_eq!(less.passages().iter().count(), 59_996);
        assert_eq!(less.passages().get(59_996), None);
        assert_eq!(
            less.bytes(),
            less.passages().iter().map(|p| p.id.len() + p.text.len()).sum::<usize>()
        );
    }

    #[test]
    fn an_append_with_a_known_or_repeated_id_adds_nothing() {
        let base = corpus(&[("a", "one")]);
        assert!(
            base.appended(
                many(0..3)
                    .into_iter()
                    .chain([Passage { id: "a".into(), text: "x".into() }])
                    .collect()
            )
            .is_err()
        );
        assert!(base.appended(vec![Passage { id: "b".into(), text: "x".into() }; 2]).is_err());
        assert!(base.appended(vec![Passage { id: "b]".into(), text: "x".into() }]).is_err());
        assert_eq!(base.appended(Vec::new()).unwrap(), base);
    }
}
