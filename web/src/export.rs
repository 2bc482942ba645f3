//! Export of the finished checks as JSON (the worker's results, as they came) and as Markdown
//! (which the worker writes: `verity_messages::markdown`), downloaded through a Blob and an
//! object URL.

use verity_messages::CheckResult;
use wasm_bindgen::JsCast;

/// The results as JSON (the worker's results, as they came); the page writes it with
/// [`crate::js::pretty`].
pub fn to_json(results: &[CheckResult]) -> serde_json::Value {
    serde_json::to_value(results).unwrap_or_else(|_| serde_json::Value::Array(Vec::new()))
}

/// Offers `text` as a file download.
pub fn download(name: &str, mime: &str, text: &str) -> Result<(), String> {
    let parts = js_sys::Array::of1(&text.into());
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options)
        .map_err(|error| crate::js::describe(&error))?;
    let url = web_sys::Url::create_object_url_with_blob(&blob)
        .map_err(|error| crate::js::describe(&error))?;
    let document = web_sys::window().and_then(|window| window.document()).ok_or("no document")?;
    let anchor: web_sys::HtmlAnchorElement =
        document.create_element("a").map_err(|error| crate::js::describe(&error))?.unchecked_into();
    anchor.set_href(&url);
    anchor.set_download(name);
    anchor.click();
    let _ = web_sys::Url::revoke_object_url(&url);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use verity_messages::Outcome;

    #[test]
    fn the_json_export_reads_back_as_the_results() {
        let results = vec![CheckResult {
            id: "c2".into(),
            claim: "Other.".into(),
            outcome: Outcome::Failed {
                failure: json!({"kind": "cancelled", "message": "stopped"}),
            },
            cited: Vec::new(),
            provenance: None,
        }];
        let back: Vec<CheckResult> = serde_json::from_value(to_json(&results)).unwrap();
        assert_eq!(back, results);
    }
}
