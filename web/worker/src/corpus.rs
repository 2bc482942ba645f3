//! The corpus the worker holds: one [`IndexedCorpus`] per version (the passages are moved into
//! it, never kept twice), edited by building the next version.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use verity_core::corpus::{Corpus, Passage};
use verity_core::files::{FileError, passages_from_file};
use verity_core::indexed::IndexedCorpus;
use verity_messages::{CorpusSummary, Item};

/// The current corpus and how long its index took.
#[derive(Debug, Clone)]
pub struct CorpusState {
    current: Arc<IndexedCorpus>,
    index_ms: Option<f64>,
    /// The ids as the table's search reads them.
    ids: RefCell<FoldedIds>,
}

impl Default for CorpusState {
    fn default() -> Self {
        Self::of(IndexedCorpus::new(Corpus::default()))
    }
}

/// Why items were refused: nothing of them was added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The file (or `"items"` for items given as data).
    pub file: String,
    /// The line at fault, if one is.
    pub line: Option<usize>,
    /// Why.
    pub message: String,
}

impl From<FileError> for Rejected {
    fn from(error: FileError) -> Self {
        Self { file: error.file, line: error.line, message: error.message }
    }
}

impl CorpusState {
    /// A state holding `passages` (as restored from storage). Duplicate ids keep the first;
    /// what is not an id is left out.
    #[must_use]
    pub fn from_passages(passages: Vec<Passage>) -> Self {
        Self::of(IndexedCorpus::new(crate::records::restorable(passages)))
    }

    fn of(current: Arc<IndexedCorpus>) -> Self {
        Self { current, index_ms: None, ids: RefCell::default() }
    }

    /// The current version (what a check starting now runs over).
    #[must_use]
    pub fn current(&self) -> &Arc<IndexedCorpus> {
        &self.current
    }

    /// Reads `name` and adds its passages, all or nothing: a bad file, or an id that another
    /// file already gave, is refused naming the file (and line).
    ///
    /// # Errors
    /// What is wrong; the corpus is unchanged.
    pub fn add_file(&mut self, name: &str, text: &str) -> Result<usize, Rejected> {
        let passages = passages_from_file(name, text)?;
        self.add(passages, name)
    }

    /// Adds `passages` (from `source`, named in a refusal), all or nothing. The corpus's
    /// chunks are shared with the next version, not copied: only the last one is cut again,
    /// and the index, when built, reads only the new chunks.
    ///
    /// # Errors
    /// An id already in the corpus, an empty id, or one given twice.
    pub fn add(&mut self, passages: Vec<Passage>, source: &str) -> Result<usize, Rejected> {
        let refuse = |message: String| Rejected { file: source.to_owned(), line: None, message };
        let corpus = self.current.corpus();
        let mut seen = HashSet::with_capacity(passages.len());
        for passage in &passages {
            if passage.id.trim().is_empty() {
                return Err(refuse("an item has an empty id".to_owned()));
            }
            if corpus.get(&passage.id).is_some() {
                return Err(refuse(format!(
                    "the id {:?} is already in the corpus (from another file); nothing of {source} was added",
                    passage.id
                )));
            }
            if !seen.insert(passage.id.as_str()) {
                return Err(refuse(format!("the id {:?} is given twice", passage.id)));
            }
        }
        drop(seen);
        let added = passages.len();
        let next = corpus.appended(passages).map_err(|error| refuse(error.to_string()))?;
        self.replace(next);
        Ok(added)
    }

    /// Removes the items with these ids; returns how many were removed. Only the chunks that
    /// held them are cut and indexed again.
    pub fn remove(&mut self, ids: &[String]) -> usize {
        let ids: HashSet<&str> = ids.iter().map(String::as_str).collect();
        let (next, removed) = self.current.corpus().without(&ids);
        if removed > 0 {
            self.replace(next);
        }
        removed
    }

    /// Empties the corpus.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    fn replace(&mut self, corpus: Corpus) {
        self.current = self.current.next(corpus);
        self.index_ms = None;
    }

    /// Builds the BM25 index of the current version, timing it with `now_ms` (the host's
    /// clock); returns the milliseconds it took.
    pub fn index(&mut self, now_ms: impl Fn() -> f64) -> f64 {
        let started = now_ms();
        let _ = self.current.bm25();
        self.ids.borrow_mut().update(self.current.corpus());
        let took = (now_ms() - started).max(0.0);
        self.index_ms = Some(took);
        took
    }

    /// What the page shows.
    #[must_use]
    pub fn summary(&self) -> CorpusSummary {
        let corpus = self.current.corpus();
        CorpusSummary {
            id: (!corpus.is_empty()).then(|| self.current.id().to_string()),
            items: corpus.len(),
            bytes: corpus.bytes(),
            indexed: self.current.is_indexed(),
            index_ms: self.index_ms.filter(|_| self.current.is_indexed()),
            // Storage is the host's to say (the engine fills it in for the main corpus).
            stored: None,
        }
    }

    /// A page of the items whose id contains `query` (any case) or whose text does: the
    /// total number of matches and the items from `offset`, at most `limit`, in corpus order.
    ///
    /// Once the corpus is indexed, ids are searched in a folded copy of them (one string per
    /// chunk), and texts through the BM25 index's postings: a text matches when it has every
    /// word of the query as BM25 reads words (any case, plurals folded; the index keeps which
    /// passages have each stop word for this), which is not quite a substring search:
    /// `albums` finds `album`, `Albums` and `albums`, not `albumsong`. A query without a word
    /// (punctuation only), or a search before the index is built, reads every item instead
    /// (`contains`, any case).
    #[must_use]
    pub fn list(&self, query: &str, offset: usize, limit: usize) -> (usize, Vec<Item>) {
        let query = query.trim();
        let corpus = self.current.corpus();
        let item = |p: &Passage| Item { id: p.id.clone(), text: p.text.clone() };
        if query.is_empty() {
            let page = corpus.passages().iter().skip(offset).take(limit).map(item).collect();
            return (corpus.len(), page);
        }
        if self.current.is_indexed() {
            let ids = self.ids.borrow_mut().containing(corpus, &query.to_lowercase());
            let bm25 = self.current.bm25();
            let item_at = |index: usize| corpus.passages().get(index).map(item);
            if ids.is_empty() {
                if let Some((total, indices)) = bm25.containing_all(query, offset, limit) {
                    return (total, indices.into_iter().filter_map(item_at).collect());
                }
            } else if let Some((_, words)) = bm25.containing_all(query, 0, usize::MAX) {
                // Ids match too: the union, in corpus order.
                let matches = merged(&ids, &words);
                let page = matches.iter().skip(offset).take(limit).copied();
                return (matches.len(), page.filter_map(item_at).collect());
            }
        }
        let query = query.to_lowercase();
        let mut total = 0;
        let mut page = Vec::new();
        for passage in corpus.passages() {
            if contains_folded(&passage.id, &query) || contains_folded(&passage.text, &query) {
                if total >= offset && page.len() < limit {
                    page.push(item(passage));
                }
                total += 1;
            }
        }
        (total, page)
    }

    /// The items whose text equals one of `citations` (a citation quotes an item whole).
    #[must_use]
    pub fn cited(corpus: &IndexedCorpus, citations: &[String]) -> Vec<Item> {
        let mut cited = Vec::new();
        for citation in citations {
            let wanted = citation.trim();
            if let Some(p) = corpus.corpus().passages().iter().find(|p| p.text.trim() == wanted)
                && !cited.iter().any(|item: &Item| item.id == p.id)
            {
                cited.push(Item { id: p.id.clone(), text: p.text.clone() });
            }
        }
        cited
    }
}

/// The longest line of a `.jsonl` corpus file read in blocks: no passage needs more, and a file
/// without line breaks (not JSON Lines) is refused at this point instead of held whole.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Reads a `.jsonl` corpus file given in blocks of bytes (a large file the page hands over
/// whole, read a block at a time so that its text is never held whole): each block's complete
/// lines are read as [`passages_from_file`] reads them, the rest waits for the next block.
#[derive(Debug)]
pub struct JsonlBlocks {
    name: String,
    rest: Vec<u8>,
    lines_before: usize,
    passages: Vec<Passage>,
}

impl JsonlBlocks {
    /// Whether a file named `name` is read this way.
    #[must_use]
    pub fn reads(name: &str) -> bool {
        name.rsplit_once('.').is_some_and(|(_, ext)| {
            ext.eq_ignore_ascii_case("jsonl") || ext.eq_ignore_ascii_case("ndjson")
        })
    }

    /// A reader of the file `name`.
    #[must_use]
    pub fn new(name: &str) -> Self {
        Self { name: name.to_owned(), rest: Vec::new(), lines_before: 0, passages: Vec::new() }
    }

    /// Reads the complete lines of `block` (with what the previous block left).
    ///
    /// # Errors
    /// A line that is not a passage, or text that is not UTF-8, named with its line.
    pub fn push(&mut self, block: &[u8]) -> Result<(), Rejected> {
        // What is held has no line break (it was cut after the last one): only the new block
        // is searched, so a file read in n blocks is scanned once, not n times.
        let held = self.rest.len();
        let Some(at) = block.iter().rposition(|&byte| byte == b'\n') else {
            if held + block.len() > MAX_LINE_BYTES {
                return Err(Rejected {
                    file: self.name.clone(),
                    line: Some(self.lines_before + 1),
                    message: format!(
                        "the line is longer than {} MB, which no passage needs (JSON Lines has \
                         one passage per line)",
                        MAX_LINE_BYTES / (1024 * 1024)
                    ),
                });
            }
            self.rest.extend_from_slice(block);
            return Ok(());
        };
        self.rest.extend_from_slice(block);
        let end = held + at;
        let rest = self.rest.split_off(end + 1);
        let lines = std::mem::replace(&mut self.rest, rest);
        self.read(&lines)
    }

    fn read(&mut self, lines: &[u8]) -> Result<(), Rejected> {
        let text = std::str::from_utf8(lines).map_err(|_| Rejected {
            file: self.name.clone(),
            line: None,
            message: "the file is not UTF-8 text".to_owned(),
        })?;
        let before = self.lines_before;
        self.lines_before += text.matches('\n').count();
        if text.trim().is_empty() {
            return Ok(());
        }
        let passages = passages_from_file(&self.name, text).map_err(|error| Rejected {
            line: error.line.map(|line| line + before),
            ..Rejected::from(error)
        })?;
        self.passages.extend(passages);
        Ok(())
    }

    /// The passages of the file.
    ///
    /// # Errors
    /// The last line is not a passage, or the file has none.
    pub fn finish(mut self) -> Result<Vec<Passage>, Rejected> {
        let rest = std::mem::take(&mut self.rest);
        self.read(&rest)?;
        if self.passages.is_empty() {
            return Err(Rejected {
                file: self.name,
                line: None,
                message: "no passage in the file".to_owned(),
            });
        }
        Ok(self.passages)
    }
}

/// The union of two ascending lists, ascending.
fn merged(a: &[usize], b: &[usize]) -> Vec<usize> {
    let mut all = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let next = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) if x == y => {
                i += 1;
                j += 1;
                x
            }
            (Some(&x), Some(&y)) if x < y => {
                i += 1;
                x
            }
            (Some(&x), None) => {
                i += 1;
                x
            }
            (_, Some(&y)) => {
                j += 1;
                y
            }
            (None, None) => break,
        };
        all.push(next);
    }
    all
}

/// The corpus's ids, folded to lower case, one string per chunk (kept per chunk content
/// hash, so a new version of the corpus folds only its new chunks): what the table's search
/// looks ids up in.
#[derive(Debug, Clone, Default)]
pub struct FoldedIds {
    chunks: HashMap<[u8; 32], Arc<ChunkIds>>,
}

/// One chunk's ids, folded, each followed by a line break (never in an id).
#[derive(Debug)]
struct ChunkIds {
    text: String,
    /// Where each id starts in `text`.
    starts: Vec<u32>,
}

impl FoldedIds {
    /// Folds the chunks of `corpus` not folded yet, and forgets the others.
    pub fn update(&mut self, corpus: &Corpus) {
        let mut next = HashMap::with_capacity(corpus.chunks().len());
        for chunk in corpus.chunks() {
            let ids = self.chunks.get(chunk.digest()).cloned().unwrap_or_else(|| {
                let mut text = String::new();
                let mut starts = Vec::with_capacity(chunk.passages().len());
                for passage in chunk.passages() {
                    starts.push(u32::try_from(text.len()).unwrap_or(u32::MAX));
                    text.extend(passage.id.chars().flat_map(char::to_lowercase));
                    text.push('\n');
                }
                Arc::new(ChunkIds { text, starts })
            });
            next.insert(*chunk.digest(), ids);
        }
        self.chunks = next;
    }

    /// The indices of the passages whose id contains `query` (lower case), ascending.
    fn containing(&mut self, corpus: &Corpus, query: &str) -> Vec<usize> {
        if query.contains('\n') {
            return Vec::new();
        }
        self.update(corpus);
        let mut found = Vec::new();
        let mut offset = 0;
        for chunk in corpus.chunks() {
            let ids = &self.chunks[chunk.digest()];
            let mut last = None;
            for (at, _) in ids.text.match_indices(query) {
                let line = ids.starts.partition_point(|&start| start as usize <= at) - 1;
                if last != Some(line) {
                    found.push(offset + line);
                    last = Some(line);
                }
            }
            offset += chunk.passages().len();
        }
        found
    }
}

/// Whether `text` contains `query` (already lower case), ignoring case; ASCII text is
/// compared without allocating.
fn contains_folded(text: &str, query: &str) -> bool {
    if text.is_ascii() && query.is_ascii() {
        let (text, query) = (text.as_bytes(), query.as_bytes());
        return query.len() <= text.len()
            && text.windows(query.len()).any(|window| window.eq_ignore_ascii_case(query));
    }
    text.to_lowercase().contains(query)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jsonl_file_read_in_blocks_gives_what_its_text_gives() {
        let text: String = (0..500)
            .map(|i| format!("{{\"id\": \"p{i}\", \"text\": \"caf\u{e9} number {i}\"}}\n\n"))
            .collect();
        let whole = passages_from_file("c.jsonl", &text).unwrap();
        for size in [1, 7, 100, 4096, text.len()] {
            let mut blocks = JsonlBlocks::new("c.jsonl");
            for block in text.as_bytes().chunks(size) {
                blocks.push(block).unwrap();
            }
            assert_eq!(blocks.finish().unwrap(), whole, "blocks of {size}");
        }
        // A bad line is named by its line in the file, whichever block it was in.
        let bad = format!("{text}{{\"id\": 3}}\n");
        let mut blocks = JsonlBlocks::new("c.jsonl");
        let failed = bad.as_bytes().chunks(64).try_for_each(|block| blocks.push(block));
        let rejected = failed.err().or_else(|| blocks.finish().err()).unwrap();
        assert_eq!(rejected.line, passages_from_file("c.jsonl", &bad).unwrap_err().line);
        assert_eq!(rejected.line, Some(1001));
        assert!(JsonlBlocks::new("e.jsonl").finish().is_err());
        assert!(JsonlBlocks::reads("A.JSONL") && !JsonlBlocks::reads("a.json"));
    }

    #[test]
    fn a_jsonl_file_without_line_breaks_is_refused_at_the_line_cap_not_held_whole() {
        let mut blocks = JsonlBlocks::new("one-line.jsonl");
        blocks.push(b"{\"id\": \"a\", \"text\": \"x\"}\n{\"id\": \"b\", \"text\": \"").unwrap();
        let block = vec![b'y'; 1024 * 1024];
        let mut refused = None;
        for _ in 0..(MAX_LINE_BYTES / block.len() + 2) {
            if let Err(rejected) = blocks.push(&block) {
                refused = Some(rejected);
                break;
            }
        }
        let refused = refused.expect("refused once the line passes the cap");
        assert_eq!(refused.line, Some(2), "{refused:?}");
        assert!(refused.message.contains("16 MB"), "{refused:?}");
        assert!(blocks.rest.len() <= MAX_LINE_BYTES, "never held past the cap");
    }

    fn state(passages: usize) -> CorpusState {
        let mut state = CorpusState::default();
        let words = ["river city", "zeppelin over the city", "Albums of 1990", "river"];
        let items = (0..passages)
            .map(|i| Passage { id: format!("Item-{i}"), text: words[i % 4].to_owned() })
            .collect();
        state.add(items, "items").unwrap();
        state
    }

    fn ids(page: &[Item]) -> Vec<&str> {
        page.iter().map(|item| item.id.as_str()).collect()
    }

    #[test]
    fn the_indexed_table_search_finds_words_and_id_substrings_in_corpus_order() {
        let mut state = state(3_000);
        // Not indexed yet: the scan.
        assert_eq!(state.list("zeppelin", 0, 2).0, 750);
        state.index(|| 0.0);
        let (total, page) = state.list("Zeppelin CITY", 0, 3);
        assert_eq!((total, ids(&page)), (750, vec!["Item-1", "Item-5", "Item-9"]));
        // Plurals folded: "album" finds "Albums".
        assert_eq!(state.list("album", 0, 1).0, 750);
        // Ids by substring, any case, merged with the word matches in corpus order.
        let (total, page) = state.list("item-100", 0, 20);
        assert_eq!(total, 11, "Item-100 and Item-1000 to Item-1009");
        assert_eq!(ids(&page)[..2], ["Item-100", "Item-1000"]);
        let (total, page) = state.list("RIVER", 748, 4);
        assert_eq!(total, 1_500);
        assert_eq!(page.len(), 4);
        // Stop words, from the index too.
        assert_eq!(state.list("The", 0, 1).0, 750);
        assert_eq!(state.list("over the", 0, 1).0, 750);
        assert_eq!(state.list("the river", 0, 1).0, 0);
        // No word: the scan.
        assert_eq!(state.list("-", 0, 1).0, 3_000);
        // After a remove, the same answers without it.
        assert_eq!(state.remove(&["Item-1".to_owned()]), 1);
        state.index(|| 0.0);
        assert_eq!(ids(&state.list("zeppelin", 0, 1).1), ["Item-5"]);
        assert_eq!(state.list("zeppelin", 0, 1).0, 749);
    }
}
