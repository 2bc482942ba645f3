//! The derive reads what serde's own derive of the same internally tagged enum reads, and
//! refuses what it refuses, with the same words.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use verity_derive::TaggedDeserialize;

#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Inner {
    word: String,
    #[serde(default)]
    count: u32,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "camelCase")]
enum Stage {
    Started,
    Reading { passages: usize },
}

/// One enum, derived twice: `$derive` reads it.
macro_rules! twin {
    ($name:ident, $($derive:ident)::+) => {
        #[derive(Debug, PartialEq, Serialize, $($derive)::+)]
        #[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase")]
        enum $name {
            Unit,
            Pair {
                first_word: String,
                #[serde(default, skip_serializing_if = "Option::is_none")]
                count: Option<u32>,
            },
            Wrapped(Inner),
            Flat {
                #[serde(flatten)]
                stage: Stage,
            },
            #[serde(rename = "x", alias = "ex")]
            Renamed { a: Vec<u8> },
        }
    };
}
twin!(Theirs, serde::Deserialize);
twin!(Ours, TaggedDeserialize);

/// The same enum with unknown fields refused.
macro_rules! strict_twin {
    ($name:ident, $($derive:ident)::+) => {
        #[derive(Debug, PartialEq, Serialize, $($derive)::+)]
        #[serde(tag = "kind", deny_unknown_fields)]
        enum $name {
            One { value: i64 },
            Two,
        }
    };
}
strict_twin!(StrictTheirs, serde::Deserialize);
strict_twin!(StrictOurs, TaggedDeserialize);

/// What serde_json makes of `text` as `T`: the value written back, or the error's words
/// without their place in the text.
fn read<T: for<'de> Deserialize<'de> + Serialize>(text: &str) -> Result<Value, String> {
    serde_json::from_str::<T>(text).map(|value| serde_json::to_value(value).unwrap()).map_err(
        |error| {
            let words = error.to_string();
            words.split(" at line ").next().unwrap_or_default().to_owned()
        },
    )
}

#[test]
fn an_internally_tagged_enum_reads_and_refuses_as_serdes_own_derive_does() {
    let cases = [
        json!({"type": "unit"}),
        json!({"type": "unit", "extra": [1, 2]}),
        json!({"type": "pair", "firstWord": "é 😀"}),
        json!({"firstWord": "a", "type": "pair", "count": 3}),
        json!({"type": "pair", "first_word": "a"}),
        json!({"type": "pair", "firstWord": 5}),
        json!({"type": "pair", "firstWord": "a", "unknown": null}),
        json!({"type": "wrapped", "word": "w"}),
        json!({"type": "wrapped", "word": "w", "count": 2}),
        json!({"type": "wrapped"}),
        json!({"type": "flat", "stage": "started"}),
        json!({"type": "flat", "stage": "reading", "passages": 4}),
        json!({"stage": "reading", "type": "flat"}),
        json!({"type": "flat"}),
        json!({"type": "x", "a": [1, 2]}),
        json!({"type": "ex", "a": []}),
        json!({"type": "renamed", "a": []}),
        json!({"type": "nothing"}),
        json!({"type": 7}),
        json!({"kind": "unit"}),
        json!({}),
        json!([]),
        json!("unit"),
        json!(null),
    ];
    for case in cases {
        let text = case.to_string();
        let (ours, theirs) = (read::<Ours>(&text), read::<Theirs>(&text));
        match (&ours, &theirs) {
            (Ok(_), Ok(_)) => assert_eq!(ours, theirs, "{text}"),
            (Err(_), Err(_)) => {}
            _ => panic!("{text}: ours {ours:?}, serde's {theirs:?}"),
        }
    }
    let strict = [
        json!({"kind": "One", "value": 1}),
        json!({"kind": "One", "value": 1, "other": 2}),
        json!({"kind": "Two"}),
        json!({"kind": "Two", "other": 2}),
    ];
    for case in strict {
        let text = case.to_string();
        let (ours, theirs) = (read::<StrictOurs>(&text), read::<StrictTheirs>(&text));
        assert_eq!(ours.is_ok(), theirs.is_ok(), "{text}: ours {ours:?}, serde's {theirs:?}");
        assert_eq!(ours.as_ref().ok(), theirs.as_ref().ok(), "{text}");
    }
}

#[test]
fn a_refusal_names_what_is_wrong_as_serdes_own_derive_does() {
    for (case, words) in [
        (json!({"firstWord": "a"}), "missing field `type`"),
        (json!({"type": "pair"}), "missing field `firstWord`"),
        (json!({"type": "nothing"}), "unknown variant `nothing`"),
        (json!({"type": "pair", "firstWord": 5}), "invalid type: integer `5`, expected a string"),
    ] {
        let text = case.to_string();
        let theirs = read::<Theirs>(&text).unwrap_err();
        let ours = read::<Ours>(&text).unwrap_err();
        assert!(theirs.contains(words), "serde's: {theirs}");
        assert!(ours.contains(words), "{text}: ours says {ours}, serde's {theirs}");
    }
}
