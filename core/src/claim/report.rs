//! What a claim check reports: the [`Verdict`], the [`Assessment`] the model recorded (and the
//! schema of its arguments), the [`Route`] the check took, the [`Summary`] sentence and the
//! whole [`Report`].

use std::sync::OnceLock;

use crate::schema::Schema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::message::Usage;

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

/// An assessment: exactly the arguments of the `record_assessment` call that validated,
/// undeclared properties kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assessment {
    /// The verdict.
    pub verdict: Verdict,
    /// How sure, from 0 to 1.
    pub confidence: f64,
    /// Evidence items quoted whole.
    pub citations: Vec<String>,
    /// Why, if the model said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// Anything else the model put in its arguments.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The schema of `record_assessment`'s arguments.
#[must_use]
pub fn assessment_schema() -> Value {
    let verdicts: Vec<Value> = ["supported", "contradicted", "insufficient"]
        .iter()
        .map(|v| json!({"type": "string", "const": v}))
        .collect();
    json!({
        "type": "object",
        "required": ["verdict", "confidence", "citations"],
        "properties": {
            "verdict": {"anyOf": verdicts},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "citations": {"type": "array", "items": {"type": "string"}},
            "rationale": {"type": "string"}
        }
    })
}

/// The compiled schema of `record_assessment`'s arguments, built once per process: a claim
/// check uses it for every assessment (its document is the tool's parameters).
pub(crate) fn assessment_compiled() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        Schema::compile(assessment_schema()).expect("the assessment schema is valid")
    })
}

/// Which way a check went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Route {
    /// One assessment was enough.
    #[serde(rename = "single call")]
    SingleCall,
    /// The first assessment was `insufficient`; research found more evidence and a second
    /// assessment decided.
    #[serde(rename = "agent escalation")]
    AgentEscalation,
}

impl Route {
    /// `"single call"` or `"agent escalation"`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Route::SingleCall => "single call",
            Route::AgentEscalation => "agent escalation",
        }
    }
}

/// The one-sentence summary the summary step submits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// One sentence for a reader who has not seen the evidence.
    pub text: String,
}

/// What a check produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The claim checked.
    pub claim: String,
    /// The final assessment (its citations checked against the evidence it was given).
    pub assessment: Assessment,
    /// Which way the check went.
    pub route: Route,
    /// The summary sentence.
    pub summary: String,
    /// Requests that reached the model.
    pub requests: u32,
    /// Tokens and cost over every request.
    pub usage: Usage,
}

impl Report {
    /// The report in a finished claim job's value (what [`crate::Job`]'s `finish` returns),
    /// typed; `None` for a value that is not a report (a step's value).
    #[must_use]
    pub fn from_job_value(value: &Value) -> Option<Self> {
        serde_json::from_value(value.clone()).ok()
    }
}
