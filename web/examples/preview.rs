//! A preview of the page without the engine: the real components and [`Engine::apply`], fed
//! canned worker messages by a stand-in worker, to look at layouts. Not part of the app.
//!
//! `?state=` picks what it shows: `loading`, `empty`, `corpus`, `running`, `results`,
//! `failure` or `all` (the default).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use leptos::prelude::*;
use serde_json::json;
use verity_messages::{
    CheckRequest, CheckResult, CorpusSummary, FromWorker, Item, Outcome, ToWorker,
};
use verity_web::App;
use verity_web::engine_view::Engine;

fn demo_items() -> Vec<Item> {
    let texts = [
        (
            "bridge.md#1",
            "The Golden Gate Bridge opened to traffic on May 27, 1937, after four years of construction.",
        ),
        (
            "bridge.md#2",
            "Its main span is 1,280 metres long, which made it the longest suspension span in the world until 1964.",
        ),
        (
            "bridge.md#3",
            "The bridge is painted International Orange, a colour chosen to stand out in the fog while complementing the landscape.",
        ),
        (
            "notes.jsonl:1",
            "Joseph Strauss was the chief engineer; Charles Ellis and Leon Moisseiff did much of the structural design.",
        ),
        ("notes.jsonl:2", "About 112,000 vehicles cross the bridge on an average day."),
        (
            "notes.jsonl:3",
            "<img src=x onerror=alert(1)> A corpus item with markup renders as text, <script>alert(2)</script> too.",
        ),
        ("towers.csv:2", "The towers rise 227 metres above the water."),
        ("towers.csv:3", "The bridge was the tallest and longest suspension bridge of its time."),
    ];
    texts.iter().map(|(id, text)| Item { id: (*id).into(), text: (*text).into() }).collect()
}

fn summary(items: &[Item]) -> CorpusSummary {
    CorpusSummary {
        id: (!items.is_empty()).then(|| "sha256:5e1c…".into()),
        items: items.len(),
        bytes: items.iter().map(|item| item.text.len()).sum(),
        indexed: true,
        index_ms: Some(12.0),
        stored: Some(verity_messages::CorpusStorage::Saved),
    }
}

fn report(
    claim: &str,
    verdict: &str,
    confidence: f64,
    citations: &[&str],
    summary: &str,
) -> Outcome {
    Outcome::Report {
        report: json!({
            "claim": claim,
            "assessment": {"verdict": verdict, "confidence": confidence, "citations": citations},
            "route": "single call",
            "summary": summary,
            "requests": 2,
            "usage": {"input": 1843, "output": 212, "cacheRead": 0, "cost": 0.00041},
        }),
    }
}

fn results(items: &[Item]) -> Vec<CheckResult> {
    let cite = |i: usize| items[i].clone();
    vec![
        CheckResult {
            id: "r1".into(),
            claim: "The Golden Gate Bridge opened in 1937.".into(),
            outcome: report(
                "The Golden Gate Bridge opened in 1937.",
                "supported",
                0.93,
                &["opened to traffic on May 27, 1937"],
                "The corpus says the bridge opened to traffic on May 27, 1937.",
            ),
            cited: vec![cite(0)],
            provenance: None,
        },
        CheckResult {
            id: "r2".into(),
            claim: "The bridge is painted red.".into(),
            outcome: report(
                "The bridge is painted red.",
                "contradicted",
                0.71,
                &["painted International Orange", "<img src=x onerror=alert(1)>"],
                "The bridge's colour is International Orange, not red. <b>bold?</b> is shown as text.",
            ),
            cited: vec![cite(2), cite(5)],
            provenance: None,
        },
        CheckResult {
            id: "r3".into(),
            claim: "The bridge has a toll for pedestrians.".into(),
            outcome: report(
                "The bridge has a toll for pedestrians.",
                "insufficient",
                0.4,
                &[],
                "Nothing in the corpus speaks to tolls.",
            ),
            cited: Vec::new(),
            provenance: None,
        },
    ]
}

fn failures() -> Vec<CheckResult> {
    vec![
        CheckResult {
            id: "f1".into(),
            claim: "The towers are 300 metres tall.".into(),
            outcome: Outcome::Failed {
                failure: json!({"kind": "provider", "message": "the request was blocked by the browser (CORS?): http://localhost:11434/v1/chat/completions", "spent": {"turns": 1, "requests": 1, "retries": 0, "usage": {}}}),
            },
            cited: Vec::new(),
            provenance: None,
        },
        CheckResult {
            id: "f2".into(),
            claim: "Traffic doubled since 2000.".into(),
            outcome: Outcome::Failed {
                failure: json!({"kind": "no-new-evidence", "message": "research turn 2 found no evidence beyond what the assessment had", "spent": {"turns": 3, "requests": 4, "retries": 1, "usage": {"input": 5230, "output": 611, "cost": 0.0021}}}),
            },
            cited: Vec::new(),
            provenance: None,
        },
    ]
}

fn running(engine: Engine) {
    let checks = [
        CheckRequest::claim("p1", "Joseph Strauss designed every part of the bridge."),
        CheckRequest::claim("p2", "About 112,000 vehicles cross each day."),
    ];
    for check in &checks {
        engine.apply(FromWorker::Queued { check: check.clone() });
    }
    let events = [
        json!({"type": "stage", "stage": "retrieve", "evidence": 4}),
        json!({"type": "stage", "stage": "assess"}),
        json!({"type": "modelCall", "call": 1, "retry": 0, "delayMs": 0}),
        json!({"type": "modelAnswered", "call": 1, "stopReason": "tool_use", "usage": {"input": 1200, "output": 96, "cost": 0.00022}}),
        json!({"type": "stage", "stage": "research", "turn": 2, "of": 6}),
        json!({"type": "toolCall", "tool": "lookup_evidence", "host": false}),
        json!({"type": "toolSettled", "tool": "lookup_evidence", "isError": false}),
        json!({"type": "retry", "attempt": 1, "delayMs": 1500, "message": "429 Too Many Requests"}),
        json!({"type": "modelCall", "call": 2, "retry": 1, "delayMs": 1500}),
        json!({"type": "delta", "call": 2, "delta": {"type": "text", "text": "Looking at the evidence, Strauss was the chief engineer, but Charles Ellis and Leon Moisseiff "}}),
        json!({"type": "delta", "call": 2, "delta": {"type": "text", "text": "did much of the structural design, so the claim that he designed every part <b>is</b>"}}),
    ];
    for event in events {
        engine.apply(FromWorker::Progress { id: "p1".into(), event });
    }
}

/// A stand-in worker: answers the page's messages from canned data, a moment later.
fn stand_in(
    engine: Rc<RefCell<Option<Engine>>>,
    items: Rc<RefCell<Vec<Item>>>,
) -> impl Fn(&ToWorker) -> Result<(), String> {
    move |message: &ToWorker| {
        let engine = engine.borrow().expect("the engine is set before messages flow");
        let items = Rc::clone(&items);
        let message = message.clone();
        set_timeout(move || reply(engine, &items, message), Duration::from_millis(30));
        Ok(())
    }
}

/// The stand-in's answer to one message, over the canned `items`.
fn reply(engine: Engine, items: &RefCell<Vec<Item>>, message: ToWorker) {
    let answer = |message| engine.apply(message);
    match message {
        ToWorker::ListItems { query, offset, limit } => {
            answer(items_page(&items.borrow(), query, offset, limit));
        }
        ToWorker::LoadDemo => {
            *items.borrow_mut() = demo_items();
            answer(FromWorker::Corpus { corpus: summary(&items.borrow()) });
        }
        ToWorker::RemoveItems { ids } => {
            items.borrow_mut().retain(|item| !ids.contains(&item.id));
            answer(FromWorker::Corpus { corpus: summary(&items.borrow()) });
        }
        ToWorker::ClearCorpus => {
            items.borrow_mut().clear();
            answer(FromWorker::Corpus { corpus: summary(&items.borrow()) });
        }
        ToWorker::AddFiles { files } => {
            for file in files {
                answer(FromWorker::FileRejected {
                    file: file.name,
                    line: Some(1),
                    message: "the preview reads no files".into(),
                });
            }
        }
        ToWorker::Check { checks, .. } => {
            for check in checks {
                preview_check(engine, check);
            }
        }
        ToWorker::Cancel { id } => answer(FromWorker::Finished {
            result: CheckResult {
                id,
                claim: String::new(),
                outcome: Outcome::Failed {
                    failure: json!({"kind": "cancelled", "message": "cancelled by the page"}),
                },
                cited: Vec::new(),
                provenance: None,
            },
        }),
        _ => {}
    }
}

/// The page of `items` whose id or text holds `query` (any case), from `offset`.
fn items_page(items: &[Item], query: String, offset: usize, limit: usize) -> FromWorker {
    let needle = query.to_lowercase();
    let matching: Vec<Item> = items
        .iter()
        .filter(|item| {
            item.id.to_lowercase().contains(&needle) || item.text.to_lowercase().contains(&needle)
        })
        .cloned()
        .collect();
    FromWorker::Items {
        query,
        offset,
        total: matching.len(),
        items: matching.into_iter().skip(offset).take(limit).collect(),
    }
}

/// A check in the preview: queued at once, and `insufficient` a moment later.
fn preview_check(engine: Engine, check: CheckRequest) {
    let result = CheckResult {
        id: check.id.clone(),
        claim: check.claim.clone(),
        outcome: report(&check.claim, "insufficient", 0.5, &[], "A preview answer."),
        cited: Vec::new(),
        provenance: None,
    };
    engine.apply(FromWorker::Queued { check });
    set_timeout(move || engine.apply(FromWorker::Finished { result }), Duration::from_millis(1500));
}

fn main() {
    let state = web_sys::window()
        .and_then(|window| window.location().search().ok())
        .and_then(|search| search.strip_prefix("?state=").map(str::to_owned))
        .unwrap_or_else(|| "all".to_owned());
    let slot = Rc::new(RefCell::new(None));
    let corpus = if state == "empty" || state == "loading" { Vec::new() } else { demo_items() };
    let items = Rc::new(RefCell::new(corpus));
    let engine = Engine::new("preview", stand_in(Rc::clone(&slot), Rc::clone(&items)));
    *slot.borrow_mut() = Some(engine);
    leptos::mount::mount_to_body(move || view! { <App engine /> });
    if state == "loading" {
        return;
    }
    let finished = match state.as_str() {
        "results" => results(&items.borrow()),
        "failure" => failures(),
        "all" => results(&items.borrow()).into_iter().chain(failures()).collect(),
        _ => Vec::new(),
    };
    engine.apply(FromWorker::Ready {
        corpus: summary(&items.borrow()),
        results: finished,
        resumed: Vec::new(),
        queued: Vec::new(),
    });
    if state == "running" || state == "all" {
        running(engine);
    }
    if state == "corpus" || state == "all" {
        engine.apply(FromWorker::FileRejected {
            file: "claims.jsonl".into(),
            line: Some(3),
            message: "expected an object with \"id\" and \"text\", found a string".into(),
        });
    }
}
