//! The small validator of a build without `jsonschema` (`schema/own.rs`, the app's engine)
//! agrees with `jsonschema` on every schema the core itself validates against, and on one that
//! uses each keyword it knows, over generated instances; and refuses a schema with any other
//! keyword. Here, above both the schemas' owners and the validator, so that neither reaches up.

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::schema::own;

/// The core's own schemas (an assessment, a lookup's arguments, a split, a summary), and
/// one with every other keyword the small validator checks.
fn schemas() -> Vec<Value> {
    vec![
        crate::claim::assessment_schema(),
        crate::claim::lookup::lookup_schema(),
        schemars::schema_for!(crate::answer::Decomposition).to_value(),
        schemars::schema_for!(crate::claim::Summary).to_value(),
        json!({"type": "object", "required": ["n", "kind"], "additionalProperties": {"type": "boolean"},
        "properties": {
            "n": {"type": ["integer", "null"], "exclusiveMinimum": 0, "exclusiveMaximum": 10},
            "kind": {"enum": ["a", 1, null]},
            "both": {"allOf": [{"type": "string"}, {"maxLength": 3}]},
            "one": {"oneOf": [{"type": "string"}, {"minLength": 2}]},
            "list": {"type": "array", "minItems": 1, "maxItems": 2, "items": true},
            "none": false
        }}),
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        prop_oneof![Just(-1.0), Just(0.0), Just(0.5), Just(1.0), Just(1.5), Just(10.0)]
            .prop_map(|n: f64| json!(n)),
        (-3i64..12).prop_map(Value::from),
        prop_oneof![
            Just(String::new()),
            Just("a".to_owned()),
            Just("supported".to_owned()),
            Just("contradicted".to_owned()),
            Just("éé".to_owned()),
            Just("x".repeat(2_000)),
            Just("é".repeat(2_001)),
            "[a-z]{0,5}",
        ]
        .prop_map(Value::from),
    ]
}

fn instance() -> impl Strategy<Value = Value> {
    let names = prop_oneof![
        Just("verdict"),
        Just("confidence"),
        Just("citations"),
        Just("rationale"),
        Just("query"),
        Just("claims"),
        Just("text"),
        Just("n"),
        Just("kind"),
        Just("both"),
        Just("one"),
        Just("list"),
        Just("none"),
        Just("other"),
    ];
    scalar().prop_recursive(3, 24, 5, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(names.clone(), inner, 0..6).prop_map(|fields| {
                Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]
    #[test]
    fn the_small_validator_agrees_with_jsonschema(value in instance(), which in 0usize..5) {
        let document = &schemas()[which];
        let full = jsonschema::validator_for(document).unwrap();
        let small = own::Validator::new(document).unwrap();
        prop_assert_eq!(small.is_valid(&value), full.is_valid(&value), "{} against {}", value, document);
        prop_assert_eq!(small.violations(&value, 20).is_empty(), full.is_valid(&value));
    }
}

#[test]
fn each_core_schema_has_valid_and_invalid_instances_checked() {
    let valid = [
        json!({"verdict": "supported", "confidence": 0.8, "citations": ["a"]}),
        json!({"query": "tower"}),
        json!({"claims": ["It opened in 1928."]}),
        json!({"text": "It holds."}),
    ];
    for (document, instance) in schemas().iter().zip(&valid) {
        assert!(own::Validator::new(document).unwrap().is_valid(instance), "{instance}");
    }
    let violations = own::Validator::new(&crate::claim::assessment_schema())
        .unwrap()
        .violations(&json!({"verdict": "maybe", "confidence": 2}), 20);
    let said: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert!(
        said.iter().any(|v| v.starts_with("(root): \"citations\" is a required property")),
        "{said:?}"
    );
    assert!(said.iter().any(|v| v.starts_with("verdict: ")), "{said:?}");
    assert!(said.iter().any(|v| v == "confidence: 2 is greater than the maximum of 1"), "{said:?}");
}

#[test]
fn a_keyword_it_does_not_check_is_refused_naming_it() {
    for (document, keyword) in [
        (json!({"type": "string", "pattern": "^a"}), "pattern"),
        (json!({"$ref": "#/$defs/x"}), "$ref"),
        (json!({"properties": {"a": {"uniqueItems": true}}}), "uniqueItems"),
    ] {
        let error = own::Validator::new(&document).unwrap_err().to_string();
        assert!(error.contains(&format!("\"{keyword}\"")) || error.contains(keyword), "{error}");
        assert!(error.contains("full engine"), "{error}");
    }
}
