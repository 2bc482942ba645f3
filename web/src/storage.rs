//! The storage line at the foot of the page: how much of this browser's storage the page uses,
//! how much it may use, and whether the browser keeps it (`navigator.storage`), read again a
//! second after the engine's news (the engine saves the corpus, results and sessions as they
//! change). A full disk (the estimate near the quota, or the engine told that a write was
//! refused, which the estimate does not always know) says what to free.

use std::time::Duration;

use leptos::prelude::*;
use verity_messages::FromWorker;

/// What `navigator.storage` says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Bytes the origin uses.
    pub usage: f64,
    /// Bytes the browser allows it.
    pub quota: f64,
    /// Whether the browser keeps the storage under pressure (`persisted()`).
    pub kept: bool,
}

/// The line's state. `Copy`: signals.
#[derive(Debug, Clone, Copy)]
pub struct StorageLine {
    estimate: RwSignal<Option<Estimate>>,
    /// The engine was refused a write since the last one that landed (or results cleared).
    refused: RwSignal<bool>,
    /// A read is due.
    pending: StoredValue<bool>,
}

impl Default for StorageLine {
    fn default() -> Self {
        Self {
            estimate: RwSignal::new(None),
            refused: RwSignal::new(false),
            pending: StoredValue::new(false),
        }
    }
}

impl StorageLine {
    /// Takes the engine's news: a write refused (`NotSaved`) or landing again (`Saved`, or the
    /// results cleared), and a read of the estimate a second later.
    pub fn news(&self, message: &FromWorker) {
        match message {
            FromWorker::NotSaved { .. } => self.refused.set(true),
            FromWorker::Saved { .. } | FromWorker::ResultsCleared => self.refused.set(false),
            _ => {}
        }
        self.read_soon();
    }

    /// Reads the estimate in a second, once for any news meanwhile.
    pub fn read_soon(&self) {
        if self.pending.get_value() {
            return;
        }
        self.pending.set_value(true);
        let line = *self;
        set_timeout(
            move || {
                line.pending.set_value(false);
                wasm_bindgen_futures::spawn_local(async move {
                    if let Some(estimate) = browser::estimate().await {
                        line.estimate.set(Some(estimate));
                    }
                });
            },
            Duration::from_secs(1),
        );
    }
}

/// The line's state (`full`, `kept` or `best-effort`, for the style sheet) and its words.
#[must_use]
pub fn words(estimate: Estimate, refused: bool) -> (&'static str, String) {
    let Estimate { usage, quota, kept } = estimate;
    let full = refused || (quota > 0.0 && usage >= quota * 0.95);
    let state = if full {
        "full"
    } else if kept {
        "kept"
    } else {
        "best-effort"
    };
    let used = format!("{} used of the {} this browser allows this page", size(usage), size(quota));
    let free = "new results are kept only until the page closes. Export the ones you want to \
                keep, then clear old results or the corpus, or free space in the browser's \
                settings.";
    let text = if refused {
        format!("Storage: the browser refused the last save ({used}): {free}")
    } else if full {
        format!("Storage: {used}. It is full: {free}")
    } else if kept {
        format!("Storage: {used}; the browser keeps it.")
    } else {
        format!("Storage: {used}; the browser may clear it if the disk runs low on space.")
    };
    (state, text)
}

/// Bytes in KB, MB or GB (decimal), as a person reads them (in integers: float formatting
/// would add ~10 KB gzip to the page's wasm).
fn size(bytes: f64) -> String {
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let tenths = |unit: f64| (bytes / unit * 10.0).round() as u64;
    if bytes >= 1e9 {
        let t = tenths(1e9);
        format!("{}.{} GB", t / 10, t % 10)
    } else if bytes >= 1e6 {
        let t = tenths(1e6);
        format!("{}.{} MB", t / 10, t % 10)
    } else {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let kb = (bytes / 1e3).ceil().max(0.0) as u64;
        format!("{kb} KB")
    }
}

/// The line, once the first estimate is read (none where the browser has no
/// `navigator.storage`).
#[component]
pub fn StorageView(line: StorageLine) -> impl IntoView {
    move || {
        line.estimate.get().map(|estimate| {
            let (state, text) = words(estimate, line.refused.get());
            view! { <p class="storage-state" data-testid="storage" data-state=state>{text}</p> }
        })
    }
}

/// `navigator.storage`, read from the page (a worker's would be the same origin's; the page
/// asks, as it asks to persist).
mod browser {
    use wasm_bindgen::prelude::*;
    use wasm_bindgen_futures::JsFuture;

    use super::Estimate;

    #[wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(catch, js_namespace = ["navigator", "storage"], js_name = estimate)]
        fn storage_estimate() -> Result<js_sys::Promise, JsValue>;
        #[wasm_bindgen(catch, js_namespace = ["navigator", "storage"], js_name = persisted)]
        fn storage_persisted() -> Result<js_sys::Promise, JsValue>;
    }

    /// The estimate, or `None` where there is no `navigator.storage` (not a secure context).
    pub async fn estimate() -> Option<Estimate> {
        let estimate = JsFuture::from(storage_estimate().ok()?).await.ok()?;
        let number = |name: &str| {
            js_sys::Reflect::get(&estimate, &JsValue::from_str(name))
                .ok()
                .and_then(|value| value.as_f64())
                .unwrap_or(0.0)
        };
        let kept = match storage_persisted() {
            Ok(promise) => JsFuture::from(promise).await.ok().and_then(|kept| kept.as_bool()),
            Err(_) => None,
        };
        Some(Estimate {
            usage: number("usage"),
            quota: number("quota"),
            kept: kept.unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_what_is_used_and_what_to_free_when_full() {
        let estimate = Estimate { usage: 17_400.0, quota: 10.7e9, kept: false };
        let (state, text) = words(estimate, false);
        assert_eq!(state, "best-effort");
        assert_eq!(
            text,
            "Storage: 18 KB used of the 10.7 GB this browser allows this page; the browser may \
             clear it if the disk runs low on space."
        );
        let kept = Estimate { kept: true, ..estimate };
        assert_eq!(
            words(kept, false),
            (
                "kept",
                "Storage: 18 KB used of the 10.7 GB this browser allows this page; the browser keeps it.".to_owned()
            )
        );
        let (state, text) = words(estimate, true);
        assert_eq!(state, "full");
        assert!(text.starts_with("Storage: the browser refused the last save (18 KB used of"));
        assert!(text.contains("Export the ones you want to keep"));
        let near = Estimate { usage: 9.6e6, quota: 10e6, kept: true };
        assert_eq!(words(near, false).0, "full");
        assert!(words(near, false).1.starts_with(
            "Storage: 9.6 MB used of the 10.0 MB this browser allows this page. It is full:"
        ));
    }
}
