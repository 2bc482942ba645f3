//! The scheduler: queued checks start while fewer than the concurrency bound run, and the
//! unfinished ones are saved so a reload re-queues them.

use verity_core::Cancel;

use super::state::Running;
use super::{Engine, Host};
use crate::saved::{SessionMeta, Unfinished};

impl<H: Host> Engine<H> {
    /// Starts queued checks while fewer than the concurrency bound run.
    pub(super) fn pump(&self) {
        if !self.inner.awaiting.borrow().is_empty()
            || !self.inner.awaiting_queue.borrow().is_empty()
        {
            // Checks resumed after a reload wait for the page's credentials: starting others
            // first could exceed the concurrency once they run.
            return;
        }
        loop {
            let (pending, corpus, cancel) = {
                let mut state = self.inner.state.borrow_mut();
                if state.running.len() >= state.concurrency {
                    return;
                }
                let Some(pending) = state.queue.pop_front() else { return };
                let cancel = Cancel::new();
                state.running.push(Running {
                    id: pending.check.id.clone(),
                    cancel: cancel.clone(),
                    check: Some(pending.check.clone()),
                });
                let corpus =
                    pending.corpus.clone().unwrap_or_else(|| state.corpus.current().clone());
                (pending, corpus, cancel)
            };
            let store =
                self.inner.host.new_session(&SessionMeta::new(&pending.check, &pending.provider));
            let engine = self.clone();
            self.inner.host.spawn(Box::pin(async move {
                let result =
                    engine.run(&pending.check, &pending.provider, &corpus, cancel, store, None);
                engine.ended(result.await);
            }));
        }
    }

    pub(super) fn save_unfinished(&self) {
        let unfinished = {
            let state = self.inner.state.borrow();
            Unfinished { concurrency: state.concurrency, checks: state.unfinished.clone() }
        };
        self.inner.host.save_unfinished(&unfinished);
    }
}
