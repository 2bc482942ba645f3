//! A running check's live progress: its stage, requests, tokens and cost so far, the streamed
//! text of the current model call, and the log of model calls, tool calls and retries.

use leptos::prelude::*;

use crate::engine_view::{CheckState, Phase};
use crate::results::{count, usage_text};

/// The progress of a queued or running check.
#[component]
pub fn ProgressView(state: RwSignal<CheckState>) -> impl IntoView {
    let stage = move || {
        state.with(|s| match (&s.phase, &s.stage) {
            (_, _) if s.cancelling => "Cancelling…".to_owned(),
            (Phase::Queued, _) => "Waiting for a free slot".to_owned(),
            (_, Some(stage)) => stage.clone(),
            (_, None) => "Starting".to_owned(),
        })
    };
    let spent = move || {
        state.with(|s| format!("{} · {}", count(s.requests, "request"), usage_text(&s.usage)))
    };
    let has_live = move || state.with(|s| !s.live.is_empty());
    let log_len = move || state.with(|s| s.log.len());
    view! {
        <div class="progress">
            <p class="stage" role="status" data-testid="check-stage">
                <span class="spinner" aria-hidden="true"></span>
                {stage}
            </p>
            <Show when=move || state.with(|s| s.requests != 0)>
                <p class="hint">{spent}</p>
            </Show>
            // While a call is in flight, every event swaps the class between two identical
            // animations, which restarts the style sheet's 15 s delay: the notice shows only
            // after 15 s without one (the page keeps no clock).
            <p
                class=move || {
                    state.with(|s| match (s.awaiting, s.signs % 2) {
                        (false, _) => "stalled",
                        (true, 0) => "stalled wait-a",
                        _ => "stalled wait-b",
                    })
                }
                role="status"
                data-testid="check-stalled"
            >
                "Stalled: nothing from the model for 15 s."
            </p>
            <Show when=has_live>
                <div class="live" data-testid="check-live" role="region" aria-label="Streamed model text" tabindex="0">
                    {move || state.with(|s| s.live.clone())}
                </div>
            </Show>
            <Show when=move || log_len() != 0>
                <p class="latest" data-testid="check-latest">
                    {move || state.with(|s| s.log.last().cloned().unwrap_or_default())}
                </p>
                <details class="log">
                    <summary>{move || format!("Activity ({})", log_len())}</summary>
                    <ol data-testid="check-log">
                        {move || {
                            state.with(|s| s.log.iter().map(|line| view! { <li>{line.clone()}</li> }).collect_view())
                        }}
                    </ol>
                </details>
            </Show>
        </div>
    }
}
