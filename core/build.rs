//! Writes the builtin verifier weights files as the engine compiles them in: without their
//! `note` (how and on what they were fitted, in words: the repository's files keep it) and
//! without the whitespace between their tokens. The numbers stay as the files write them.
//! Every byte compiled into the app's engine is downloaded before it is ready: the two notes
//! are most of the files' bytes (docs/BENCHMARKS.md, the page's size).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::value::RawValue;

const FILES: [&str; 2] = [
    "verifier-weights-qwen2.5-coder-0.5b-instruct.json",
    "verifier-weights-qwen2.5-coder-1.5b-instruct.json",
];

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for file in FILES {
        let path = format!("src/claim/{file}");
        println!("cargo::rerun-if-changed={path}");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut fields: BTreeMap<String, Box<RawValue>> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        fields.remove("note");
        let kept = serde_json::to_string(&fields).expect("raw JSON values serialise");
        std::fs::write(out.join(file), minified(&kept))
            .unwrap_or_else(|e| panic!("{}: {e}", out.join(file).display()));
    }
}

/// `json` without whitespace outside its strings.
fn minified(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_whitespace() {
            out.push(c);
        }
    }
    out
}
