//! A run's spending limit: the checks asked for in one [`ToWorker::Check`] share a
//! [`RunBudget`]; before each of their requests the engine adds up what the run has spent
//! (the checks that ended, and what each running one has spent so far, its recorded responses
//! included), and once that reaches the limit the request is not sent: the check ends
//! `budget`, saying what was spent, and so does every check of the run still queued.
//!
//! What a response cost is the core's `Usage::cost`: the provider's `price` when the person set
//! one, else the cost the provider reports (OpenRouter), else nothing. A request in flight when
//! another check reaches the limit is not stopped: it was already paid for.
//!
//! [`ToWorker::Check`]: verity_messages::ToWorker::Check

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use verity_core::{AssistantMessage, Cancel, Delta, ModelRequest, Spent, Transport};

use verity_messages::ProviderChoice;

use crate::saved::SavedBudget;

/// The reason a check's cancel carries when its run's limit stopped it.
pub(super) const BUDGET_REACHED: &str = "the run's spending limit was reached";

/// One run's limit and what it has spent.
#[derive(Debug)]
pub(super) struct RunBudget {
    run: String,
    limit: f64,
    ended: Cell<f64>,
    /// What each running check has spent so far, by check id.
    running: RefCell<HashMap<String, f64>>,
}

impl RunBudget {
    pub(super) fn new(run: String, limit: f64) -> Rc<Self> {
        Rc::new(Self { run, limit, ended: Cell::new(0.0), running: RefCell::default() })
    }

    /// A run's limit as saved before a reload.
    pub(super) fn restored(saved: &SavedBudget) -> Rc<Self> {
        let budget = Self::new(saved.run.clone(), saved.limit);
        budget.ended.set(if saved.ended.is_finite() { saved.ended.max(0.0) } else { 0.0 });
        budget
    }

    pub(super) fn run(&self) -> &str {
        &self.run
    }

    pub(super) fn saved(&self) -> SavedBudget {
        SavedBudget { run: self.run.clone(), limit: self.limit, ended: self.ended.get() }
    }

    /// What the run has spent, in US dollars.
    pub(super) fn spent(&self) -> f64 {
        self.ended.get() + self.running.borrow().values().sum::<f64>()
    }

    pub(super) fn reached(&self) -> bool {
        self.spent() >= self.limit
    }

    /// Check `id` runs, having spent `spent` already (a resumed session's recorded responses).
    pub(super) fn started(&self, id: &str, spent: &Spent) {
        self.running.borrow_mut().insert(id.to_owned(), finite(spent.usage.cost));
    }

    /// Check `id` ended: what it spent counts as the run's for good.
    pub(super) fn ended(&self, id: &str) {
        if let Some(spent) = self.running.borrow_mut().remove(id) {
            self.ended.set(self.ended.get() + spent);
        }
    }

    fn paid(&self, id: &str, cost: f64) {
        *self.running.borrow_mut().entry(id.to_owned()).or_default() += finite(cost);
    }

    /// Why a check of this run ends `budget`: the limit and what was spent.
    pub(super) fn message(&self, check_spent: f64) -> String {
        format!(
            "the run's spending limit of ${:.2} was reached before this check's next request: \
             the run has spent ${:.4}, this check ${:.4}",
            self.limit,
            self.spent(),
            finite(check_spent),
        )
    }
}

/// Whether the engine can enforce a spending limit with `provider`: it adds up what each
/// response cost, which it knows from a typed price, or from the provider's report of it (only
/// OpenRouter reports one). The offline baseline spends nothing. Otherwise every response
/// would count as $0 and the limit stop nothing: refused, saying what is missing.
pub(super) fn enforceable(provider: &ProviderChoice) -> Result<(), String> {
    let ProviderChoice::Network { config } = provider else { return Ok(()) };
    let priced = config.get("price").is_some_and(|price| !price.is_null());
    let base = config.get("baseUrl").and_then(|url| url.as_str()).unwrap_or_default();
    // OpenRouter's own base URL, compared whole (no URL is read by hand here).
    let reports_cost = config.get("api").and_then(|api| api.as_str()) == Some("openai")
        && base.trim_end_matches('/') == verity_core::provider::openai::OPENROUTER_BASE_URL;
    if priced || reports_cost {
        Ok(())
    } else {
        Err("a spending limit needs the model's price: type its input and output price per \
             million tokens (only OpenRouter reports what a response cost; without a price \
             every response would count as $0 and the limit would stop nothing)"
            .to_owned())
    }
}

fn finite(cost: f64) -> f64 {
    if cost.is_finite() { cost.max(0.0) } else { 0.0 }
}

/// A check's transport under its run's limit: a request is sent only while the run has spent
/// less than the limit; otherwise the check's cancel fires with [`BUDGET_REACHED`] (the core
/// then records the cancel and ends the check) and nothing is sent. Each response's cost is
/// added to the run's.
pub(super) struct Budgeted<'a, T> {
    pub(super) inner: T,
    pub(super) budget: &'a RunBudget,
    pub(super) check: &'a str,
    pub(super) cancel: &'a Cancel,
}

impl<T: Transport> Budgeted<'_, T> {
    fn refused(&self) -> Option<AssistantMessage> {
        if !self.budget.reached() {
            return None;
        }
        self.cancel.cancel(BUDGET_REACHED);
        Some(AssistantMessage::aborted(BUDGET_REACHED))
    }
}

impl<T: Transport> Transport for Budgeted<'_, T> {
    async fn complete(&self, request: ModelRequest<'_>) -> AssistantMessage {
        if let Some(refused) = self.refused() {
            return refused;
        }
        let response = self.inner.complete(request).await;
        self.budget.paid(self.check, response.usage.cost);
        response
    }

    async fn complete_streaming(
        &self,
        request: ModelRequest<'_>,
        on_delta: &mut dyn FnMut(Delta),
    ) -> AssistantMessage {
        if let Some(refused) = self.refused() {
            return refused;
        }
        let response = self.inner.complete_streaming(request, on_delta).await;
        self.budget.paid(self.check, response.usage.cost);
        response
    }

    async fn wait(&self, delay_ms: u64) {
        self.inner.wait(delay_ms).await;
    }
}
