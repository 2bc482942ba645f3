//! `web/embed/verity.js` keeps its own copy of two of the core's rules, since the page cannot
//! call the core before it refuses an API key in markup: which headers are public
//! (`PUBLIC_HEADERS`) and which query parameter names look like credentials. This test pins the
//! copy to the core, so the two cannot drift apart.
#![cfg(not(target_arch = "wasm32"))]

use verity_core::provider::http::{
    CREDENTIAL_PARAMETER_WORDS, PUBLIC_HEADERS, is_credential_parameter,
};

const VERITY_JS: &str = include_str!("../../web/embed/verity.js");

/// The string literals of the JavaScript array assigned to `name`.
fn js_array(name: &str) -> Vec<String> {
    let start = VERITY_JS.find(&format!("const {name} = [")).expect("the array is there");
    let body = &VERITY_JS[start..];
    let body = &body[body.find('[').unwrap() + 1..body.find("];").unwrap()];
    body.split(',')
        .map(|item| item.trim().trim_matches('\'').to_owned())
        .filter(|item| !item.is_empty())
        .collect()
}

#[test]
fn the_embeds_public_headers_are_the_cores() {
    assert_eq!(js_array("PUBLIC_HEADERS"), PUBLIC_HEADERS);
}

#[test]
fn the_embeds_credential_parameter_words_are_the_cores() {
    let pattern = VERITY_JS
        .split("return /")
        .nth(1)
        .and_then(|rest| rest.split("/i.test(decoded)").next())
        .expect("the parameter pattern is there");
    let words: Vec<&str> = pattern.split('|').collect();
    assert_eq!(words, CREDENTIAL_PARAMETER_WORDS);
    assert!(!is_credential_parameter("api-version") && !pattern.contains("version"));
}
