//! The corpora: the main one (stored, indexed after every change) and the named ones of the
//! embedding (in memory), and how their changes are answered.

use verity_core::corpus::Passage;
use verity_messages::{CorpusSummary, FromWorker, Item, NamedText};

use super::{Engine, Host};
use crate::corpus::Rejected;
use crate::demo::{DEMO_CLAIMS, demo_passages};

impl<H: Host> Engine<H> {
    /// Reads files into the main corpus: each all or nothing (a bad file is rejected, named,
    /// and changes nothing); the corpus is indexed and saved once if any was added.
    pub(super) fn add_files(&self, files: Vec<NamedText>) {
        let mut changed = false;
        for file in files {
            let added = self.inner.state.borrow_mut().corpus.add_file(&file.name, &file.text);
            match added {
                Ok(_) => changed = true,
                Err(rejected) => self.reject(rejected),
            }
        }
        if changed {
            self.corpus_changed();
        }
    }

    /// Adds a page's items to the main corpus (all or nothing).
    pub(super) fn add_items(&self, items: Vec<Item>) {
        let passages = items.into_iter().map(|Item { id, text }| Passage { id, text }).collect();
        let added = self.inner.state.borrow_mut().corpus.add(passages, "items");
        match added {
            Ok(_) => self.corpus_changed(),
            Err(rejected) => self.reject(rejected),
        }
    }

    /// Adds the demo passages the corpus lacks, and answers with the demo's claims.
    pub(super) fn load_demo(&self) {
        let passages: Vec<Passage> = {
            let state = self.inner.state.borrow();
            let corpus = state.corpus.current().corpus();
            demo_passages().into_iter().filter(|p| corpus.get(&p.id).is_none()).collect()
        };
        if !passages.is_empty() {
            let added = self.inner.state.borrow_mut().corpus.add(passages, "demo");
            if let Err(rejected) = added {
                self.reject(rejected);
            } else {
                self.corpus_changed();
            }
        }
        self.reply(&FromWorker::Demo {
            claims: DEMO_CLAIMS.iter().map(|claim| (*claim).to_owned()).collect(),
        });
    }

    /// The main corpus as the pages show it, with where it stands with storage.
    pub(super) fn corpus_summary(&self) -> CorpusSummary {
        let mut summary = self.inner.state.borrow().corpus.summary();
        summary.stored = Some(self.inner.host.corpus_storage(summary.id.as_deref()));
        summary
    }

    pub(super) fn reject(&self, rejected: Rejected) {
        self.reply(&FromWorker::FileRejected {
            file: rejected.file,
            line: rejected.line,
            message: rejected.message,
        });
    }

    /// Adds the passages the host read from the file `name` (a large file the page handed
    /// over as it is, which the browser worker reads a block at a time), or names why it was
    /// refused: what `AddFiles` does with a file's text.
    pub fn add_read_file(&self, name: &str, read: Result<Vec<Passage>, Rejected>) {
        let added =
            read.and_then(|passages| self.inner.state.borrow_mut().corpus.add(passages, name));
        match added {
            Ok(_) => self.corpus_changed(),
            Err(rejected) => self.reject(rejected),
        }
    }

    /// Starts saving the new corpus (in the background), posts it (not indexed yet, and
    /// saving), indexes it and posts again: the corpus is searchable before its new parts are
    /// written. Checks waiting for their corpus resume if it is theirs again.
    pub(super) fn corpus_changed(&self) {
        let current = self.inner.state.borrow().corpus.current().clone();
        self.inner.host.save_corpus(&current);
        self.post(&FromWorker::Corpus { corpus: self.corpus_summary() });
        self.index();
        self.resume_stranded();
    }

    pub(super) fn index(&self) {
        {
            let mut state = self.inner.state.borrow_mut();
            if state.corpus.current().corpus().is_empty() || state.corpus.current().is_indexed() {
                return;
            }
            let host = &self.inner.host;
            state.corpus.index(|| host.now_ms());
        }
        self.post(&FromWorker::Corpus { corpus: self.corpus_summary() });
    }

    /// Adds items and files to the named corpus `name` (created when missing), all or
    /// nothing, indexes it, and answers with one message.
    pub(super) fn add_to_corpus(&self, name: String, items: Vec<Item>, files: Vec<NamedText>) {
        let mut next = self.inner.state.borrow().named.get(&name).cloned().unwrap_or_default();
        let mut added = Ok(0);
        if !items.is_empty() {
            let passages =
                items.into_iter().map(|Item { id, text }| Passage { id, text }).collect();
            added = next.add(passages, "items");
        }
        for file in &files {
            if added.is_err() {
                break;
            }
            added = next.add_file(&file.name, &file.text);
        }
        match added {
            Err(rejected) => self.post(&FromWorker::NamedCorpusRejected {
                name,
                file: rejected.file,
                line: rejected.line,
                message: rejected.message,
            }),
            Ok(_) => {
                let host = &self.inner.host;
                if !next.current().corpus().is_empty() {
                    next.index(|| host.now_ms());
                }
                let corpus = next.summary();
                self.inner.state.borrow_mut().named.insert(name.clone(), next);
                self.post(&FromWorker::NamedCorpus { name, corpus });
            }
        }
    }
}
