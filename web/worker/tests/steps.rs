//! A page's steps (`runStep`): the model calls the page's tools with arguments checked against
//! their schema, the page's answers reach the model, and a step ends with its value or a typed
//! failure.

use serde_json::json;
use verity_messages::{FromWorker, ToWorker};

mod common;

use common::{completion, mock, started, step_config, step_finished, take};

/// A step's tools run in the page: the call is posted with validated arguments, the page's
/// answer reaches the model, and the submitted value ends the step.
#[test]
fn a_step_calls_the_pages_tools_with_validated_arguments() {
    let (engine, mut pool, recorded) = started();
    recorded.replies.borrow_mut().extend([
        completion("c0", "convert", &json!({"km": "three"})), // invalid: never reaches the page
        completion("c1", "convert", &json!({"km": 3})),
        completion("c2", "submit", &json!({"miles": 1.864})),
    ]);
    take(&recorded);
    engine.handle(ToWorker::RunStep {
        id: "s1".into(),
        config: step_config(),
        provider: mock().into(),
    });
    pool.run_until_stalled();
    let posted = take(&recorded);
    let calls: Vec<_> = posted
        .iter()
        .filter_map(|m| match m {
            FromWorker::ToolCall { id, call, tool, arguments } => {
                Some((id.clone(), call.clone(), tool.clone(), arguments.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(calls, [("s1".into(), "c1".into(), "convert".into(), json!({"km": 3}))]);
    assert!(step_finished(&posted).is_none(), "the step waits for the page");
    assert!(posted.iter().any(|m| matches!(m, FromWorker::Progress { id, .. } if id == "s1")));

    engine.handle_json(
        &json!({"type": "toolResult", "id": "s1", "call": "c1", "content": "1.864 miles"})
            .to_string(),
    );
    pool.run_until_stalled();
    let posted = take(&recorded);
    assert_eq!(
        step_finished(&posted),
        Some(verity_messages::StepOutcome::Value { value: json!({"miles": 1.864}) })
    );
    let requests = recorded.requests.borrow();
    assert_eq!(requests.len(), 3);
    assert!(requests[2].contains("1.864 miles"), "the page's answer reached the model");
    assert_eq!(engine.load(), (0, 0));
}

#[test]
fn a_step_waiting_for_a_page_tool_is_cancelled_and_bad_configs_fail_typed() {
    let (engine, mut pool, recorded) = started();
    recorded.replies.borrow_mut().push_back(completion("c1", "convert", &json!({"km": 3})));
    engine.handle(ToWorker::RunStep {
        id: "s1".into(),
        config: step_config(),
        provider: mock().into(),
    });
    pool.run_until_stalled();
    assert!(take(&recorded).iter().any(|m| matches!(m, FromWorker::ToolCall { .. })));
    engine.handle(ToWorker::Cancel { id: "s1".into() });
    pool.run_until_stalled();
    let Some(verity_messages::StepOutcome::Failed { failure }) = step_finished(&take(&recorded))
    else {
        panic!("a failure")
    };
    assert_eq!(failure["kind"], "cancelled");
    assert_eq!(failure["spent"]["requests"], 1);
    // A late answer is ignored.
    engine.handle(ToWorker::ToolResult {
        id: "s1".into(),
        call: "c1".into(),
        content: "late".into(),
        is_error: false,
    });
    assert!(take(&recorded).is_empty());

    let mut config = step_config();
    config["maxTurns"] = json!(0);
    engine.handle(ToWorker::RunStep { id: "s2".into(), config, provider: mock().into() });
    let Some(verity_messages::StepOutcome::Failed { failure }) = step_finished(&take(&recorded))
    else {
        panic!("a failure")
    };
    assert_eq!(failure["kind"], "config");
    assert!(failure["message"].as_str().unwrap().starts_with("maxTurns"), "{failure}");
}
