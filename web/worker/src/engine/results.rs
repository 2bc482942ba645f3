//! A finished check: posted, saved with the results and its session deleted (one write), the
//! next one started.

use verity_core::indexed::IndexedCorpus;
use verity_messages::{CheckResult, FromWorker, Provenance, ProviderChoice};

use super::check::Ended;
use super::{Engine, Host};

impl<H: Host> Engine<H> {
    /// Where a check's result comes from: `provider` (in any form; no key is read), `corpus`
    /// (`None` when there was none), this app's version and the host's date now.
    pub(super) fn provenance(
        &self,
        provider: &ProviderChoice,
        corpus: Option<&IndexedCorpus>,
    ) -> Option<serde_json::Value> {
        let (id, items) = corpus.map_or((None, 0), |corpus| {
            let items = corpus.corpus().len();
            ((items > 0).then(|| corpus.id().to_string()), items)
        });
        let version = env!("CARGO_PKG_VERSION");
        let provenance = Provenance::new(provider, id, items, version, self.inner.host.date());
        serde_json::to_value(provenance).ok()
    }

    /// A check's run ended: [`finished`](Self::finished), unless another engine took its
    /// session over. Then that engine owns the session and will save the result: this one only
    /// tells its pages (the card ends saying so) and forgets the check, writing nothing.
    pub(super) fn ended(&self, ended: Ended) {
        let Ended { result, taken_over } = ended;
        let result = result.advised();
        if !taken_over {
            self.finished(result);
            return;
        }
        self.inner.state.borrow_mut().remove(&result.id);
        self.post(&FromWorker::Finished { result });
        self.pump();
    }

    /// Records a finished check: posts it, saves the results and deletes its session (one
    /// write), starts the next queued check.
    pub(super) fn finished(&self, result: CheckResult) {
        self.all_finished(vec![result]);
    }

    /// [`finished`](Self::finished) for several checks at once (a run's queued checks ended by
    /// its limit): each is posted, then all are saved in one write.
    pub(super) fn all_finished(&self, results: Vec<CheckResult>) {
        let mut recorded = Vec::with_capacity(results.len());
        for result in results {
            let result = result.advised();
            self.inner.state.borrow_mut().remove(&result.id);
            self.post(&FromWorker::Finished { result: result.clone() });
            recorded.push(result);
        }
        // The results, their sessions' end and the unfinished checks without them (with what
        // their runs have spent) in one write.
        self.record_results(recorded);
        self.pump();
    }

    /// Keeps `results` with the results, saves them, deletes their sessions and saves the
    /// unfinished checks with their runs' spending, in one write ([`Host::record_results`]): a
    /// reload between two writes could find the session of a finished check and run it
    /// again, or a run that forgot what the check spent, and pay twice.
    pub(super) fn record_results(&self, results: Vec<CheckResult>) {
        if results.is_empty() {
            return;
        }
        let results: Vec<CheckResult> = results.into_iter().map(CheckResult::advised).collect();
        let unfinished = self.unfinished();
        let mut state = self.inner.state.borrow_mut();
        state.results.retain(|kept| !results.iter().any(|result| result.id == kept.id));
        self.inner.host.record_results(&results, &unfinished);
        state.results.extend(results);
    }
}
