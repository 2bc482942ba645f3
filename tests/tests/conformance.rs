//! The shipped conformance suite passes through the real machines, and the runner notices when
//! an outcome differs from the expectation. Runs natively and, through wasm-bindgen-test, in
//! wasm under Node.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use verity_tests::{Observed, Suite, compare, json_eq};

fn shipped() -> Suite {
    let text = include_str!("../conformance/scenarios.json");
    Suite::parse(text).expect("the shipped suite parses")
}

#[test]
fn every_shipped_scenario_passes() {
    let suite = shipped();
    let verdicts = suite.verdicts(None);
    assert_eq!(verdicts.len(), 73);
    let failures: Vec<String> = verdicts
        .iter()
        .filter_map(|v| v.result.as_ref().err().map(|why| format!("{}: {why}", v.name)))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The project's own scenarios for the answer job, in the suite's format.
#[test]
fn every_answer_scenario_passes() {
    let suite = Suite::parse(include_str!("../conformance/answers.json")).expect("it parses");
    let verdicts = suite.verdicts(None);
    assert_eq!(verdicts.len(), 10);
    let failures: Vec<String> = verdicts
        .iter()
        .filter_map(|v| v.result.as_ref().err().map(|why| format!("{}: {why}", v.name)))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_runner_reports_a_wrong_outcome() {
    let suite = shipped();
    let scenario = suite.scenarios.iter().find(|s| s.name == "step/valid-first-try").unwrap();
    let observed = suite.run(scenario).unwrap();
    assert!(compare(&scenario.expected, &observed).is_ok());
    let Observed::Return { value, requests } = observed else { panic!("expected a return") };
    let wrong_count = Observed::Return { value: value.clone(), requests: requests + 1 };
    assert!(compare(&scenario.expected, &wrong_count).is_err());
    let wrong_value = Observed::Return { value: serde_json::json!({"answer": "41"}), requests };
    assert!(compare(&scenario.expected, &wrong_value).is_err());
    let wrong_kind = Observed::Throw { kind: "provider".into(), message: String::new(), requests };
    assert!(compare(&scenario.expected, &wrong_kind).is_err());
}

#[test]
fn json_equality_follows_the_suite_rules() {
    use serde_json::json;
    assert!(json_eq(&json!({"a": 1, "b": [1.0]}), &json!({"b": [1], "a": 1.0})));
    assert!(!json_eq(&json!({"a": true}), &json!({"a": 1})));
    assert!(!json_eq(&json!({"a": 1}), &json!({"a": 1, "b": null})));
}

#[test]
fn a_file_that_is_not_a_suite_is_refused() {
    assert!(Suite::parse("{\"scenarios\": 3}").is_err());
    let suite = Suite::parse(
        r#"{"scenarios": [{"name": "x", "kind": "mystery", "config": {}, "script": [],
            "expected": {"outcome": "return", "requests": 0}}]}"#,
    )
    .unwrap();
    let verdicts = suite.verdicts(None);
    assert!(verdicts[0].result.as_ref().unwrap_err().contains("cannot run"));
}

#[test]
fn every_scenario_constrained_output_can_express_passes_in_that_mode() {
    let suite = shipped();
    let verdicts = suite.constrained_verdicts();
    let failures: Vec<String> = verdicts
        .iter()
        .filter_map(|v| v.result.as_ref().err().map(|why| format!("{}: {why}", v.name)))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {}:\n{}",
        failures.len(),
        verdicts.len(),
        failures.join("\n")
    );
    // Most of the suite is one call per answer; the rest (parallel calls, text beside a call)
    // cannot be said in one JSON object.
    assert!(verdicts.len() >= 50, "only {} scenarios apply", verdicts.len());
}
