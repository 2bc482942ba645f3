//! The corpus the worker holds: one [`IndexedCorpus`] per version (the passages are moved into
//! it, never kept twice), edited by building the next version.

use std::collections::HashSet;
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
}

impl Default for CorpusState {
    fn default() -> Self {
        Self { current: IndexedCorpus::new(Corpus::default()), index_ms: None }
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
    /// A state holding `passages` (as restored from storage). Duplicate ids keep the first.
    #[must_use]
    pub fn from_passages(mut passages: Vec<Passage>) -> Self {
        let mut seen = HashSet::with_capacity(passages.len());
        passages.retain(|passage| seen.insert(passage.id.clone()));
        let corpus = Corpus::new(passages).expect("ids are unique");
        Self { current: IndexedCorpus::new(corpus), index_ms: None }
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

    /// Adds `passages` (from `source`, named in a refusal), all or nothing.
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
        let added = passages.len();
        let next = if corpus.is_empty() {
            passages
        } else {
            let mut next = Vec::with_capacity(corpus.len() + added);
            next.extend_from_slice(corpus.passages());
            next.extend(passages);
            next
        };
        self.replace(next);
        Ok(added)
    }

    /// Removes the items with these ids; returns how many were removed.
    pub fn remove(&mut self, ids: &[String]) -> usize {
        let ids: HashSet<&str> = ids.iter().map(String::as_str).collect();
        let corpus = self.current.corpus();
        let kept: Vec<Passage> =
            corpus.passages().iter().filter(|p| !ids.contains(p.id.as_str())).cloned().collect();
        let removed = corpus.len() - kept.len();
        if removed > 0 {
            self.replace(kept);
        }
        removed
    }

    /// Empties the corpus.
    pub fn clear(&mut self) {
        self.replace(Vec::new());
    }

    fn replace(&mut self, passages: Vec<Passage>) {
        let corpus = Corpus::new(passages).expect("ids were checked");
        self.current = IndexedCorpus::new(corpus);
        self.index_ms = None;
    }

    /// Builds the BM25 index of the current version, timing it with `now_ms` (the host's
    /// clock); returns the milliseconds it took.
    pub fn index(&mut self, now_ms: impl Fn() -> f64) -> f64 {
        let started = now_ms();
        let _ = self.current.bm25();
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
            bytes: corpus.passages().iter().map(|p| p.id.len() + p.text.len()).sum(),
            indexed: self.current.is_indexed(),
            index_ms: self.index_ms.filter(|_| self.current.is_indexed()),
        }
    }

    /// A page of the items whose id or text contains `query` (any case): the total number of
    /// matches and the items from `offset`, at most `limit`.
    #[must_use]
    pub fn list(&self, query: &str, offset: usize, limit: usize) -> (usize, Vec<Item>) {
        let query = query.trim().to_lowercase();
        let passages = self.current.corpus().passages();
        let item = |p: &Passage| Item { id: p.id.clone(), text: p.text.clone() };
        if query.is_empty() {
            let page = passages.iter().skip(offset).take(limit).map(item).collect();
            return (passages.len(), page);
        }
        let mut total = 0;
        let mut page = Vec::new();
        for passage in passages {
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
