//! Token prices per model, edited by the user, and the cost they give a response's usage.
//!
//! The table is plain JSON, in US dollars per million tokens:
//!
//! ```json
//! {
//!   "gpt-4o-mini": { "input": 0.15, "output": 0.6, "cacheRead": 0.075 },
//!   "claude-sonnet-4-5": { "input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75 }
//! }
//! ```
//!
//! No prices ship with the core: they change, and a wrong built-in figure is worse than none.
//! A model with no entry costs 0 (a local server), unless its provider reports the cost itself
//! (OpenRouter's `usage.cost`), which the codecs then keep.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::message::Usage;

/// What one model costs, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Price {
    /// Input tokens not served from a cache.
    pub input: f64,
    /// Output tokens (reasoning included).
    pub output: f64,
    /// Input tokens read from the prompt cache; the input price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    /// Input tokens written to the prompt cache; the input price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
}

impl Price {
    /// The cost of `usage` at this price, in US dollars.
    #[must_use]
    #[allow(clippy::cast_precision_loss)] // token counts are far below 2^52
    pub fn cost(&self, usage: &Usage) -> f64 {
        let per_token = |tokens: u64, per_million: f64| tokens as f64 * per_million / 1e6;
        per_token(usage.input, self.input)
            + per_token(usage.output, self.output)
            + per_token(usage.cache_read, self.cache_read.unwrap_or(self.input))
            + per_token(usage.cache_write, self.cache_write.unwrap_or(self.input))
    }
}

/// The user's price table: model name to [`Price`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PriceTable {
    models: BTreeMap<String, Price>,
}

impl PriceTable {
    /// An empty table.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads a table from its JSON form (see the module docs).
    ///
    /// # Errors
    /// When the text is not such a table (unknown fields are refused, to catch typos).
    pub fn from_json(text: &str) -> Result<Self, String> {
        serde_json::from_str(text).map_err(|error| format!("not a price table: {error}"))
    }

    /// The table as JSON, for the user to edit.
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Sets the price of `model`.
    pub fn insert(&mut self, model: impl Into<String>, price: Price) {
        self.models.insert(model.into(), price);
    }

    /// The price of `model`: its own entry, else the entry it is a dated snapshot of
    /// (`gpt-4o-2024-08-06` and `claude-3-5-haiku-20241022` take the prices of `gpt-4o` and
    /// `claude-3-5-haiku`). Other prefixes never match: `gpt-4o-mini` is not `gpt-4o`.
    #[must_use]
    pub fn get(&self, model: &str) -> Option<&Price> {
        if let Some(price) = self.models.get(model) {
            return Some(price);
        }
        self.models.iter().find_map(|(name, price)| {
            let rest = model.strip_prefix(name.as_str())?.strip_prefix('-')?;
            is_snapshot_suffix(rest).then_some(price)
        })
    }

    /// The models priced, in name order.
    pub fn models(&self) -> impl Iterator<Item = (&str, &Price)> {
        self.models.iter().map(|(name, price)| (name.as_str(), price))
    }
}

/// `2024-08-06`, `20241022` or `latest`.
fn is_snapshot_suffix(rest: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<&str> = rest.split('-').collect();
    match parts.as_slice() {
        [date] => (date.len() == 8 && digits(date)) || *date == "latest",
        [year, month, day] => {
            year.len() == 4 && month.len() == 2 && day.len() == 2 && parts.iter().all(|p| digits(p))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn table() -> PriceTable {
        PriceTable::from_json(
            r#"{
                "gpt-4o": {"input": 2.5, "output": 10, "cacheRead": 1.25},
                "gpt-4o-mini": {"input": 0.15, "output": 0.6},
                "claude-3-5-haiku": {"input": 0.8, "output": 4, "cacheRead": 0.08, "cacheWrite": 1}
            }"#,
        )
        .unwrap()
    }

    #[test]
    fn cost_counts_every_kind_of_token() {
        let price = table().get("claude-3-5-haiku").copied().unwrap();
        let usage =
            Usage { input: 1_000, output: 500, cache_read: 10_000, cache_write: 2_000, cost: 0.0 };
        let expected = (1_000.0 * 0.8 + 500.0 * 4.0 + 10_000.0 * 0.08 + 2_000.0 * 1.0) / 1e6;
        assert!((price.cost(&usage) - expected).abs() < 1e-12);
        // Without cache prices, cached tokens cost as much as input.
        let mini = table().get("gpt-4o-mini").copied().unwrap();
        let cached = Usage { cache_read: 1_000_000, ..Usage::default() };
        assert!((mini.cost(&cached) - 0.15).abs() < 1e-12);
    }

    #[test]
    fn snapshots_take_their_model_s_price_and_nothing_else_does() {
        let table = table();
        assert_eq!(table.get("gpt-4o-2024-08-06"), table.get("gpt-4o"));
        assert_eq!(table.get("claude-3-5-haiku-20241022"), table.get("claude-3-5-haiku"));
        assert_eq!(table.get("claude-3-5-haiku-latest"), table.get("claude-3-5-haiku"));
        assert_eq!(table.get("gpt-4o-mini").unwrap().input, 0.15);
        assert_eq!(table.get("gpt-4o-mini-2024-07-18").unwrap().input, 0.15);
        assert_eq!(table.get("gpt-4o-audio-preview"), None);
        assert_eq!(table.get("gpt-4"), None);
        assert_eq!(table.get("llama3.1:8b"), None);
    }

    #[test]
    fn the_table_round_trips_and_refuses_typos() {
        let table = table();
        assert_eq!(PriceTable::from_json(&table.to_json()).unwrap(), table);
        assert!(PriceTable::from_json(r#"{"m": {"input": 1, "ouput": 2}}"#).is_err());
        let mut edited = PriceTable::new();
        edited.insert(
            "local",
            Price { input: 0.0, output: 0.0, cache_read: None, cache_write: None },
        );
        assert_eq!(edited.models().count(), 1);
    }
}
