//! Model providers. Each answers a [`crate::ModelRequest`] with a
//! [`crate::AssistantMessage`]; the network codecs arrive with their own issue, and the offline
//! model lives here beside them so hosts treat it like any other provider.

pub mod offline;
