//! The Claims section: the claims (one per line), Run, Cancel all, the concurrency; then one
//! card per check with its progress or its result, Cancel and Re-run, and the exports.

use leptos::prelude::*;

use crate::answer::AnswerText;
use crate::engine_view::{CheckCard, Engine, Phase};
use crate::export;
use crate::progress::ProgressView;
use crate::provider::{ProviderSettings, for_check};
use crate::results::ResultView;
use verity_messages::CheckKind;
use verity_messages::text::{VERDICT_FILTERS, verdict_counts};

/// The first `chars` characters of `text`, with an ellipsis when it is longer.
pub fn excerpt(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", text[..at].trim_end()),
        None => text.to_owned(),
    }
}

/// The claims typed, one per non-empty line.
pub fn claims_of(text: &str) -> Vec<String> {
    text.lines().map(str::trim).filter(|line| !line.is_empty()).map(str::to_owned).collect()
}

/// Brings a new check card into view once it is painted (it may be below the fold).
fn show_card(n: usize) {
    request_animation_frame(move || {
        let card = web_sys::window().and_then(|window| window.document()).and_then(|document| {
            document.query_selector(&format!("[data-testid=check-{n}]")).ok().flatten()
        });
        if let Some(card) = card {
            let options = web_sys::ScrollIntoViewOptions::new();
            options.set_block(web_sys::ScrollLogicalPosition::Nearest);
            card.scroll_into_view_with_scroll_into_view_options(&options);
        }
    });
}

/// The concurrency choices.
const CONCURRENCY: [usize; 5] = [1, 2, 3, 4, 8];

/// The Claims section and the check cards.
#[component]
pub fn ClaimsSection(engine: Engine, settings: RwSignal<ProviderSettings>) -> impl IntoView {
    let text = engine.claims;
    let concurrency = RwSignal::new(2usize);
    // Claims one per line, or a whole answer checked sentence by sentence.
    let answer_mode = RwSignal::new(false);
    let answer = RwSignal::new(String::new());
    let decompose = RwSignal::new(false);
    let claim_count = move || text.with(|text| claims_of(text).len());
    let corpus_empty = move || engine.corpus.with(|c| c.items == 0);
    let run = move || {
        let first = engine.checks.with_untracked(Vec::len) + 1;
        if answer_mode.get_untracked() {
            engine.run_answer(
                answer.get_untracked().trim().to_owned(),
                decompose.get_untracked(),
                settings.with_untracked(for_check),
                concurrency.get_untracked(),
            );
        } else {
            let claims = claims_of(&text.get_untracked());
            engine.run(claims, settings.with_untracked(for_check), concurrency.get_untracked());
        }
        show_card(first);
    };
    // Checks asked for and not yet in the saved list would be lost with the app's last tab.
    let saving = move || {
        engine
            .checks
            .with_untracked(|cards| cards.iter().any(|c| c.state.with_untracked(|s| s.saving)))
    };
    let warn = window_event_listener(leptos::ev::beforeunload, move |ev| {
        if saving() {
            // The browser shows its own words; setting the return value is what asks it to.
            ev.prevent_default();
            ev.set_return_value("Checks are still being saved.");
        }
    });
    on_cleanup(move || warn.remove());
    let why_disabled = move || {
        if !engine.is_ready() {
            "The engine is loading.".to_owned()
        } else if corpus_empty() {
            "Add a corpus first: the claims are checked against it.".to_owned()
        } else if answer_mode.get() && answer.with(|a| a.trim().is_empty()) {
            "Paste an answer to check.".to_owned()
        } else if !answer_mode.get() && claim_count() == 0 {
            "Type a claim to check.".to_owned()
        } else if let Some(problem) = settings.with(crate::provider::problem) {
            format!("Provider: {problem}")
        } else {
            String::new()
        }
    };
    view! {
        <section class="panel" aria-labelledby="claims-title">
            <h2 id="claims-title">"Claims"</h2>
            <fieldset class="mode row" data-testid="check-mode">
                <legend class="inline-label">"Check"</legend>
                <label>
                    <input type="radio" name="check-mode" data-testid="mode-claims" prop:checked=move || !answer_mode.get() on:change=move |_| answer_mode.set(false) />
                    " claims, one per line"
                </label>
                <label>
                    <input type="radio" name="check-mode" data-testid="mode-answer" prop:checked=move || answer_mode.get() on:change=move |_| answer_mode.set(true) />
                    " a whole answer, sentence by sentence"
                </label>
            </fieldset>
            <Show
                when=move || answer_mode.get()
                fallback=move || view! { <ClaimsInput engine run why_disabled /> }
            >
                <AnswerInput answer decompose run why_disabled />
            </Show>
            <RunControls engine concurrency run why_disabled answer_mode />
            <p class="hint" id="run-why">{why_disabled}" "<span class="kbd-hint">"Ctrl+Enter runs."</span></p>
        </section>
        <ChecksList engine settings concurrency />
    }
}

/// The claims box (Ctrl+Enter runs them when nothing `why_disabled` says stands in the way)
/// and the claims file.
#[component]
fn ClaimsInput(
    engine: Engine,
    run: impl Fn() + Copy + Send + Sync + 'static,
    why_disabled: impl Fn() -> String + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let text = engine.claims;
    view! {
        <div class="field">
            <label for="claims-input">"Claims to check, one per line"</label>
            <textarea
                id="claims-input"
                data-testid="claims-input"
                rows="3"
                placeholder="The Golden Gate Bridge opened in 1937."
                prop:value=move || text.get()
                on:input=move |ev| text.set(event_target_value(&ev))
                on:keydown=move |ev: leptos::ev::KeyboardEvent| {
                    if ev.key() == "Enter" && (ev.ctrl_key() || ev.meta_key()) && why_disabled().is_empty() {
                        ev.prevent_default();
                        run();
                    }
                }
            ></textarea>
            <input
                id="claims-file"
                class="visually-hidden"
                data-testid="claims-file"
                type="file"
                accept=".txt,.csv,.jsonl"
                on:change=move |ev| {
                    let input = event_target::<web_sys::HtmlInputElement>(&ev);
                    if let Some(files) = input.files() {
                        crate::corpus::read_files(engine, files, false);
                    }
                    input.set_value("");
                }
            />
            <label for="claims-file" class="button small">"Read claims from a file…"</label>
            <span class="hint" role="status" data-testid="claims-read">{move || engine.claims_read.get()}</span>
        </div>
    }
}

/// The answer box (Ctrl+Enter checks it).
#[component]
fn AnswerInput(
    answer: RwSignal<String>,
    decompose: RwSignal<bool>,
    run: impl Fn() + Copy + Send + Sync + 'static,
    why_disabled: impl Fn() -> String + Copy + Send + Sync + 'static,
) -> impl IntoView {
    view! {
        <div class="field">
            <label for="answer-input">"The answer to check (a model's answer, with its citation marks such as [e1] if it has them)"</label>
            <textarea
                id="answer-input"
                data-testid="answer-input"
                rows="6"
                placeholder="The Golden Gate Bridge opened in 1937 [demo#2]. Its towers rise 746 feet above the water."
                prop:value=move || answer.get()
                on:input=move |ev| answer.set(event_target_value(&ev))
                on:keydown=move |ev: leptos::ev::KeyboardEvent| {
                    if ev.key() == "Enter" && (ev.ctrl_key() || ev.meta_key()) && why_disabled().is_empty() {
                        ev.prevent_default();
                        run();
                    }
                }
            ></textarea>
            <p class="hint">"Each sentence that states something is checked as a claim against the corpus; a mark such as [e1] is checked against the passage with that id."</p>
            <label class="row">
                <input type="checkbox" data-testid="decompose" prop:checked=move || decompose.get() on:change=move |ev| decompose.set(event_target_checked(&ev)) />
                " Split each sentence into its claims first (one more request a sentence; the sentence holds only if every claim does)"
            </label>
        </div>
    }
}

/// Run (disabled while `why_disabled` says why), Cancel all, and the checks at once.
#[component]
fn RunControls(
    engine: Engine,
    concurrency: RwSignal<usize>,
    run: impl Fn() + Copy + Send + Sync + 'static,
    why_disabled: impl Fn() -> String + Copy + Send + Sync + 'static,
    answer_mode: RwSignal<bool>,
) -> impl IntoView {
    let run_label = move || match engine.claims.with(|text| claims_of(text).len()) {
        _ if answer_mode.get() => "Check the answer".to_owned(),
        0 | 1 => "Check claim".to_owned(),
        n => format!("Check {n} claims"),
    };
    view! {
        <div class="row controls">
            <button
                type="button"
                class="button primary"
                data-testid="run"
                aria-describedby="run-why"
                disabled=move || !why_disabled().is_empty()
                on:click=move |_| run()
            >
                {run_label}
            </button>
            <button
                type="button"
                class="button"
                data-testid="cancel-all"
                disabled=move || !engine.any_active()
                on:click=move |_| engine.cancel_all()
            >
                "Cancel all"
            </button>
            <span class="concurrency">
                <label for="claims-concurrency" class="inline-label">
                    {move || if answer_mode.get() { "Sentences at once" } else { "Checks at once" }}
                </label>
                <select
                    id="claims-concurrency"
                    data-testid="concurrency"
                    prop:value=move || concurrency.get().to_string()
                    on:change=move |ev| concurrency.set(event_target_value(&ev).parse().unwrap_or(2))
                >
                    {CONCURRENCY
                        .iter()
                        .map(|n| view! { <option value=n.to_string()>{n.to_string()}</option> })
                        .collect_view()}
                </select>
            </span>
        </div>
    }
}

/// The check cards and the result actions.
#[component]
fn ChecksList(
    engine: Engine,
    settings: RwSignal<ProviderSettings>,
    concurrency: RwSignal<usize>,
) -> impl IntoView {
    let any_results = move || !engine.results().is_empty();
    let export_json = move |_| {
        let written = crate::js::pretty(&export::to_json(&engine.results()));
        if let Err(error) = written
            .and_then(|text| export::download("verity-results.json", "application/json", &text))
        {
            engine.notify(None, None, format!("The export failed: {error}"));
        }
    };
    let export_md = move |_| engine.export_markdown();
    view! {
        <section class="panel checks" aria-labelledby="checks-title">
            <div class="panel-head">
                <h2 id="checks-title">"Results"</h2>
                <div class="row">
                    <button type="button" class="button small" data-testid="export-json" disabled=move || !any_results() on:click=export_json>
                        "Export JSON"
                    </button>
                    <button type="button" class="button small" data-testid="export-md" disabled=move || !any_results() on:click=export_md>
                        "Export Markdown"
                    </button>
                    <button type="button" class="button small" data-testid="export-csv" disabled=move || !any_results() on:click=move |_| engine.export_csv()>
                        "Export CSV"
                    </button>
                    <button type="button" class="button small" data-testid="clear-results" disabled=move || !any_results() on:click=move |_| engine.clear_results()>
                        "Clear results"
                    </button>
                </div>
            </div>
            <Show
                when=move || engine.checks.with(|cards| !cards.is_empty())
                fallback=|| view! { <p class="empty">"No checks yet. Type a claim above and run it; its verdict, citations and cost appear here."</p> }
            >
                <p class="row filters">
                    <label for="show" class="inline-label">"Show"</label>
                    // No handler: the style sheet hides the other cards (`:has(… :checked)`).
                    <select id="show" data-testid="filter">
                        {VERDICT_FILTERS
                            .iter()
                            .map(|(key, words)| view! { <option value=*key>{*words}</option> })
                            .collect_view()}
                    </select>
                    <span class="hint" data-testid="verdict-counts">
                        {move || verdict_counts(engine.checks.with(Vec::len), &engine.results())}
                    </span>
                </p>
                <ol class="cards">
                    <For
                        each=move || engine.checks.get()
                        key=|card| (card.n, card.state)
                        children=move |card| view! { <CheckCardView engine settings concurrency card /> }
                    />
                </ol>
            </Show>
        </section>
    }
}

/// One check.
#[component]
fn CheckCardView(
    engine: Engine,
    settings: RwSignal<ProviderSettings>,
    concurrency: RwSignal<usize>,
    card: CheckCard,
) -> impl IntoView {
    let state = card.state;
    let status = move || {
        state.with(|s| match &s.phase {
            Phase::Queued => ("queued", "Queued"),
            Phase::Running if s.cancelling => ("running", "Cancelling"),
            Phase::Running => ("running", "Running"),
            // A failure that amounts to a verdict (research found nothing new) is done.
            Phase::Finished(result) if result.outcome.has_verdict() => ("done", "Done"),
            Phase::Finished(_) => ("failed", "Failed"),
        })
    };
    let active = move || state.with(|s| s.is_active());
    let rerun = move |_| {
        engine.rerun(card, settings.with_untracked(for_check), concurrency.get_untracked());
    };
    // Only the end of the check swaps progress for the result (not every streamed piece).
    let finished = Memo::new(move |_| {
        state.with(|s| match &s.phase {
            Phase::Finished(result) => Some(verity_messages::CheckResult::clone(result)),
            _ => None,
        })
    });
    let title_id = format!("check-{}-title", card.n);
    let labelled_by = title_id.clone();
    view! {
        <li class="card" data-testid=format!("check-{}", card.n) data-check-id=move || state.with(|s| s.id.clone()) aria-labelledby=labelled_by>
            <div class="card-head">
                <span class=move || format!("status status-{}", status().0)>{move || status().1}</span>
                <Show when=move || state.with(|s| s.not_saved)>
                    <span class="status status-failed" data-testid="not-saved">"Not saved"</span>
                </Show>
                <Show when=move || state.with(|s| s.saving)>
                    <span class="hint" data-testid="check-saving">"saving…"</span>
                </Show>
                <h3 id=title_id>{move || state.with(|s| match s.kind {
                    CheckKind::Claim => s.claim.clone(),
                    CheckKind::Answer => format!("Answer: {}", excerpt(&s.claim, 120)),
                })}</h3>
                <Show
                    when=active
                    fallback=move || view! {
                        <button type="button" class="button small" data-testid="rerun" on:click=rerun>"Re-run"</button>
                    }
                >
                    <button
                        type="button"
                        class="button small"
                        data-testid="cancel"
                        disabled=move || state.with(|s| s.cancelling)
                        on:click=move |_| engine.cancel(card)
                    >
                        "Cancel"
                    </button>
                </Show>
            </div>
            {move || {
                match finished.get() {
                    Some(result) => view! { <ResultView n=card.n result /> }.into_any(),
                    None => view! { <ProgressView state /> }.into_any(),
                }
            }}
            // An answer being checked: its sentences marked as each one ends.
            {move || {
                let (answer, sentences, running) = state.with(|s| {
                    (s.claim.clone(), s.sentences.clone(), s.kind == CheckKind::Answer && s.is_active())
                });
                running.then(|| view! { <AnswerText n=card.n answer sentences /> })
            }}
        </li>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_the_non_empty_lines() {
        assert_eq!(claims_of(" A.\n\n  B. \r\n"), vec!["A.".to_owned(), "B.".to_owned()]);
    }
}
