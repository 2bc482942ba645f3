//! The [`Verdict`] on a claim: what the report states and what the verifier route decides
//! (both use it; neither is needed to name it).

use serde::{Deserialize, Serialize};

/// A verdict on a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The evidence supports the claim.
    Supported,
    /// The evidence contradicts the claim.
    Contradicted,
    /// The evidence does not decide.
    Insufficient,
}

impl Verdict {
    /// Whether the verdict decides the claim.
    #[must_use]
    pub fn is_conclusive(self) -> bool {
        self != Verdict::Insufficient
    }
}
