//! One list of failure kinds: the core's (`JobFailureKind::ALL`). The WIT interface names them
//! in its own enum (`wit/types.wit`, `failure-kind`), by hand; this test pins that list to the
//! core's, so a kind added to one cannot be missing from the other. (The messages crate's
//! advice per kind is pinned in `web/worker/tests/results.rs`.)
#![cfg(not(target_arch = "wasm32"))]

use verity_core::JobFailureKind;

const TYPES_WIT: &str = include_str!("../../wit/types.wit");

/// The cases of the WIT enum `name`, in order (doc comments skipped).
fn wit_enum(name: &str) -> Vec<String> {
    let start = TYPES_WIT.find(&format!("enum {name} {{")).expect("the enum is there");
    let body = &TYPES_WIT[start..];
    let body = &body[body.find('{').unwrap() + 1..body.find('}').unwrap()];
    body.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("//"))
        .map(|line| line.trim_end_matches(',').to_owned())
        .collect()
}

#[test]
fn the_wit_failure_kinds_are_the_cores() {
    let core: Vec<&str> = JobFailureKind::ALL.iter().map(|kind| kind.as_str()).collect();
    assert_eq!(wit_enum("failure-kind"), core);
}
