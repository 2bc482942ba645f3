//! The tools a loop's host runs: what the model sees of each, the schema its calls are
//! checked against, and how they may be scheduled.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::ToolSpec;
use crate::schema::{Schema, SchemaError};

/// A tool the host runs: what the model sees, the compiled schema its arguments must satisfy,
/// and how it may be scheduled. It serializes as its spec; deserializing compiles the schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ToolRepr", into = "ToolRepr")]
pub struct Tool {
    spec: ToolSpec,
    schema: Schema,
    sequential: bool,
    replay_safe: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolRepr {
    #[serde(flatten)]
    spec: ToolSpec,
    #[serde(default)]
    sequential: bool,
    #[serde(default)]
    replay_safe: bool,
}

impl TryFrom<ToolRepr> for Tool {
    type Error = SchemaError;
    fn try_from(repr: ToolRepr) -> Result<Self, SchemaError> {
        let mut tool = Tool::new(repr.spec.name, repr.spec.description, repr.spec.parameters)?;
        // The narrower schema for constrained decoding survives a save and a restore.
        tool.spec.constrained = repr.spec.constrained;
        Ok(Self { sequential: repr.sequential, replay_safe: repr.replay_safe, ..tool })
    }
}

impl From<Tool> for ToolRepr {
    fn from(tool: Tool) -> Self {
        Self { spec: tool.spec, sequential: tool.sequential, replay_safe: tool.replay_safe }
    }
}

impl Tool {
    /// A tool whose arguments must satisfy `parameters`.
    ///
    /// # Errors
    /// When `parameters` is not a valid JSON Schema.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
    ) -> Result<Self, SchemaError> {
        let schema = Schema::compile(parameters.clone())?;
        Ok(Self {
            spec: ToolSpec {
                name: name.into(),
                description: description.into(),
                parameters,
                constrained: None,
            },
            schema,
            sequential: false,
            replay_safe: false,
        })
    }

    /// A narrower schema of the arguments for constrained decoding only
    /// ([`ToolSpec::constrained`]); calls are still validated against the tool's own schema.
    #[must_use]
    pub fn constrained(mut self, schema: Value) -> Self {
        self.spec.constrained = Some(schema);
        self
    }

    /// Declares that running a call of this tool twice is harmless (it only reads), so a
    /// durable host may run again a call whose result was lost in a crash.
    #[must_use]
    pub fn replay_safe(mut self) -> Self {
        self.replay_safe = true;
        self
    }

    /// Whether calls of this tool may be run again.
    #[must_use]
    pub fn is_replay_safe(&self) -> bool {
        self.replay_safe
    }

    /// Declares that calls of this tool must run one at a time, in order, with the rest of
    /// their batch.
    #[must_use]
    pub fn sequential(mut self) -> Self {
        self.sequential = true;
        self
    }

    /// Whether calls of this tool must run sequentially.
    #[must_use]
    pub fn is_sequential(&self) -> bool {
        self.sequential
    }

    /// The tool's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// What the model sees.
    #[must_use]
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The compiled schema its arguments must satisfy.
    #[must_use]
    pub fn schema(&self) -> &Schema {
        &self.schema
    }
}
