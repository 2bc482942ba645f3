//! The claim-check cases: the design's conformance scenarios `claim/cheap-route` and
//! `claim/escalation-route` (the same 4-item corpus, claim and script), driven through a real
//! [`Job`] made from its JSON configuration, with keyword retrieval; the job answers
//! `lookup_evidence` from its corpus, so the host runs no tool.

use std::sync::Arc;

use futures_util::FutureExt;
use serde_json::json;
use verity_core::claim::{self, Route};
use verity_core::corpus::Corpus;
use verity_core::indexed::IndexedCorpus;
use verity_core::{AssistantMessage, Job, NoTools, Report, ScriptedModel, Verdict, drive};

const CORPUS: [(&str, &str); 4] = [
    ("e1", "The storage migration finished in March without data loss."),
    ("e2", "Two earlier attempts at the migration were rolled back."),
    ("e3", "An April audit found every account record intact."),
    ("e4", "Quarterly revenue grew four percent."),
];
const CLAIM: &str = "The storage migration lost no customer data.";
const SUMMARY: &str = "The migration kept all data.";

/// The machine a case drives. The only place that knows how a claim check is built: the
/// corpus is indexed and the job made from its configuration on every run, as a host would for
/// a new corpus.
fn claim_job() -> Job {
    let corpus = IndexedCorpus::new(Corpus::from_pairs(CORPUS).expect("a valid corpus"));
    let config =
        json!({"kind": "claim", "claim": CLAIM, "corpus": corpus.id(), "retriever": "keyword"});
    Job::from_json(&config.to_string(), &[Arc::clone(&corpus)]).expect("a valid job")
}

fn assessment(id: &str, verdict: &str, confidence: f64, citations: &[&str]) -> AssistantMessage {
    AssistantMessage::tool_call(
        id,
        claim::RECORD_ASSESSMENT,
        json!({"verdict": verdict, "confidence": confidence, "citations": citations}),
    )
}

/// Runs a claim case once; `None` if `case` is not one.
///
/// # Panics
/// If the check does not end with the scenario's verdict, route, citations, summary and request
/// count.
pub fn run_once(case: &str) -> Option<()> {
    let submit = AssistantMessage::tool_call("s1", "submit", json!({"text": SUMMARY}));
    let (script, route, citations) = match case {
        "claim-cheap" => {
            (vec![assessment("a1", "supported", 0.8, &[CORPUS[0].1]), submit], Route::SingleCall, 1)
        }
        "claim-escalation" => (
            vec![
                assessment("a1", "insufficient", 0.3, &[]),
                AssistantMessage::tool_call(
                    "r1",
                    claim::LOOKUP_EVIDENCE,
                    json!({"query": "audit records"}),
                ),
                AssistantMessage::text("Found an audit."),
                assessment("a2", "supported", 0.9, &[CORPUS[0].1, CORPUS[2].1]),
                submit,
            ],
            Route::AgentEscalation,
            2,
        ),
        _ => return None,
    };
    let requests = u32::try_from(script.len()).expect("a short script");
    let model = ScriptedModel::new(script);
    let outcome = drive(claim_job(), &model, &NoTools).now_or_never();
    let report: Report = match outcome.expect("scripted futures never wait") {
        Ok(value) => serde_json::from_value(value).expect("a claim job's value is a report"),
        Err(failed) => panic!("{case}: the check failed: {failed}"),
    };
    assert_eq!(report.route, route, "{case}: route");
    assert_eq!(report.assessment.verdict, Verdict::Supported, "{case}: verdict");
    assert_eq!(report.assessment.citations.len(), citations, "{case}: citations");
    assert_eq!(report.summary, SUMMARY, "{case}: summary");
    assert_eq!(report.requests, requests, "{case}: requests the check counted");
    assert_eq!(model.requests(), requests, "{case}: requests the model answered");
    Some(())
}
