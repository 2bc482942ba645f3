//! The worker's readers of untrusted input, fuzzed: saved records (results, the unfinished
//! checks, the corpus's order and parts), claim files and `.jsonl` corpus blocks. Whatever the
//! text, each answers with a value or a typed refusal: never a panic, never a runaway.

use proptest::prelude::*;
use verity_worker::claims_file::read_claims;
use verity_worker::corpus::JsonlBlocks;
use verity_worker::records::{
    RawRecord, read_corpus_order, read_corpus_part, read_results, read_unfinished,
};

/// Text that is often JSON of roughly the right shape, sometimes not: the records' own
/// fields and values, nested and cut anywhere.
fn jsonish() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("-1".to_owned()),
        Just("1e999".to_owned()),
        Just("18446744073709551616".to_owned()),
        "\"[a-z0-9 \\\\u{202e}\\u{200b}]{0,12}\"".prop_map(|s| s),
        Just("\"version\"".to_owned()),
    ];
    let key = prop_oneof![
        Just("version"),
        Just("order"),
        Just("result"),
        Just("id"),
        Just("claim"),
        Just("outcome"),
        Just("checks"),
        Just("budgets"),
        Just("concurrency"),
        Just("parts"),
        Just("text"),
        Just("corpus"),
        Just("limit"),
        Just("ended"),
        Just("run"),
        Just("type"),
    ];
    let leaf = atom.boxed();
    leaf.prop_recursive(4, 32, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5)
                .prop_map(|items| format!("[{}]", items.join(","))),
            proptest::collection::vec((key.clone(), inner), 0..5).prop_map(|fields| {
                let fields: Vec<String> =
                    fields.into_iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!("{{{}}}", fields.join(","))
            }),
        ]
    })
    .prop_flat_map(|text| {
        // Sometimes cut short, as a half-written record would be.
        let len = text.len();
        (Just(text), 0..=len)
    })
    .prop_map(|(text, cut)| {
        if cut % 3 == 0 { text[..text.floor_char_boundary(cut)].to_owned() } else { text }
    })
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![jsonish(), "\\PC{0,200}"]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn saved_records_read_as_values_or_typed_refusals(
        unfinished in proptest::option::of(proptest::option::of(text())),
        order in proptest::option::of(proptest::option::of(text())),
        part in proptest::option::of(proptest::option::of(text())),
        blob in proptest::option::of(proptest::option::of(text())),
        records in proptest::collection::vec(("[a-z0-9]{1,6}", proptest::option::of(text())), 0..6),
    ) {
        let _ = read_unfinished(unfinished.as_ref().map(|o| o.as_deref()));
        let _ = read_corpus_order(order.as_ref().map(|o| o.as_deref()));
        let _ = read_corpus_part("p", part.as_ref().map(|o| o.as_deref()));
        let records: Vec<RawRecord> =
            records.into_iter().map(|(key, text)| RawRecord { key, text }).collect();
        let stored = read_results(blob.as_ref().map(|o| o.as_deref()), &records);
        prop_assert!(stored.results.len() <= records.len() + 10_000);
    }

    #[test]
    fn claim_files_read_as_claims_or_named_bad_lines(
        lines in proptest::collection::vec(text(), 0..8),
        name in prop_oneof![Just("claims.txt"), Just("claims.csv"), Just("claims.jsonl")],
    ) {
        let _ = read_claims(name, &lines.join("\n"));
    }

    #[test]
    fn jsonl_blocks_read_as_passages_or_a_named_refusal(
        lines in proptest::collection::vec(text(), 0..8),
        cuts in proptest::collection::vec(0usize..64, 0..6),
    ) {
        let bytes = lines.join("\n").into_bytes();
        let mut blocks = JsonlBlocks::new("corpus.jsonl");
        let mut at = 0;
        let mut refused = false;
        for cut in cuts {
            let end = (at + cut).min(bytes.len());
            if blocks.push(&bytes[at..end]).is_err() {
                refused = true;
                break;
            }
            at = end;
        }
        if !refused && blocks.push(&bytes[at..]).is_ok() {
            let _ = blocks.finish();
        }
    }
}
