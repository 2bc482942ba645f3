//! JSON Schema validation, strict: the arguments are validated exactly as the model produced
//! them, never coerced (POLICY.md D1), with error text written for the model.

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

pub(crate) mod own;

/// At most this many violations are collected and listed in one error text; an instance with
/// more (a huge array of bad items) costs no more than this many.
const MAX_LISTED_VIOLATIONS: usize = 20;

/// Compiled schemas kept by document; that map is emptied when it reaches this size.
const CACHE_CAPACITY: usize = 64;

/// The one cache of compiled schemas, shared by every thread.
#[derive(Default)]
struct Cache {
    /// By the document's text, so a schema that arrives again (a resumed machine, a tool
    /// rebuilt per claim check) is not compiled again. Bounded by [`CACHE_CAPACITY`].
    by_document: HashMap<String, Schema>,
    /// By Rust type, for [`Schema::of`]: a type's schema is derived and compiled once. Never
    /// emptied: a program has as many entries as it has typed steps.
    by_type: HashMap<TypeId, Schema>,
}

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(Cache::default()))
}

/// A compiled JSON Schema. Compiling is the expensive part, so a `Schema` is compiled once and
/// shared: cloning it is a reference-count increment.
///
/// It serializes as the schema document and deserializing compiles it again, so machine state
/// that holds a schema stays plain data.
#[derive(Clone)]
pub struct Schema(Arc<Compiled>);

struct Compiled {
    document: Value,
    validator: Validator,
}

/// What checks instances: `jsonschema` (the whole of JSON Schema) where the build has it (the
/// `full-json-schema` feature, on by default: the native hosts, the component, verity.js's
/// engine), else the small validator of the core's own schemas ([`own`]: the app's engine,
/// half the size without `jsonschema`), which refuses any other schema when it is compiled.
enum Validator {
    #[cfg(feature = "full-json-schema")]
    Full(jsonschema::Validator),
    #[cfg_attr(feature = "full-json-schema", allow(dead_code))]
    Own(own::Validator),
}

/// A schema that could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError(String);

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid JSON Schema: {}", self.0)
    }
}

impl std::error::Error for SchemaError {}

/// One way an instance breaks a schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// Where in the instance, as a JSON pointer without the leading `/` (`""` is the root).
    pub path: String,
    /// What is wrong, as the validator words it.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() { "(root)" } else { &self.path };
        write!(f, "{path}: {}", self.message)
    }
}

impl Schema {
    /// Compiles a schema document. Draft 2020-12 unless the document's `$schema` names another.
    /// Remote references are never fetched (the crate is built without its resolvers).
    ///
    /// # Errors
    /// When the document is not a valid schema or refers to something that cannot be resolved.
    pub fn compile(document: Value) -> Result<Self, SchemaError> {
        let key = document.to_string();
        if let Some(schema) =
            cache().lock().ok().and_then(|cache| cache.by_document.get(&key).cloned())
        {
            return Ok(schema);
        }
        #[cfg(feature = "full-json-schema")]
        let validator = Validator::Full(
            jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .build(&document)
                .map_err(|error| SchemaError(error.to_string()))?,
        );
        #[cfg(not(feature = "full-json-schema"))]
        let validator = Validator::Own(own::Validator::new(&document)?);
        let schema = Self(Arc::new(Compiled { document, validator }));
        if let Ok(mut cache) = cache().lock() {
            if cache.by_document.len() >= CACHE_CAPACITY {
                cache.by_document.clear();
            }
            cache.by_document.insert(key, schema.clone());
        }
        Ok(schema)
    }

    /// The schema for `T`, as schemars derives it: derived and compiled once per type, then
    /// shared.
    ///
    /// # Errors
    /// Only if schemars produced a document the validator rejects.
    pub fn of<T: schemars::JsonSchema + 'static>() -> Result<Self, SchemaError> {
        let key = TypeId::of::<T>();
        if let Some(schema) = cache().lock().ok().and_then(|cache| cache.by_type.get(&key).cloned())
        {
            return Ok(schema);
        }
        let schema = Self::compile(schemars::schema_for!(T).to_value())?;
        if let Ok(mut cache) = cache().lock() {
            cache.by_type.insert(key, schema.clone());
        }
        Ok(schema)
    }

    /// The schema document.
    #[must_use]
    pub fn document(&self) -> &Value {
        &self.0.document
    }

    /// Whether `instance` is valid.
    #[must_use]
    pub fn is_valid(&self, instance: &Value) -> bool {
        match &self.0.validator {
            #[cfg(feature = "full-json-schema")]
            Validator::Full(validator) => validator.is_valid(instance),
            Validator::Own(validator) => validator.is_valid(instance),
        }
    }

    /// The first violations of `instance` (at most 20), in the validator's order.
    #[must_use]
    pub fn violations(&self, instance: &Value) -> Vec<Violation> {
        self.first_violations(instance, MAX_LISTED_VIOLATIONS)
    }

    /// At most `limit` violations: only those are formatted (each message is a string built
    /// from the offending value), however many the instance has. (jsonschema 0.61 still
    /// gathers its error values before iterating; what is bounded here is our side.)
    fn first_violations(&self, instance: &Value, limit: usize) -> Vec<Violation> {
        match &self.0.validator {
            #[cfg(feature = "full-json-schema")]
            Validator::Full(validator) => validator
                .iter_errors(instance)
                .take(limit)
                .map(|error| Violation {
                    path: error.instance_path().as_str().trim_start_matches('/').to_owned(),
                    message: error.to_string(),
                })
                .collect(),
            Validator::Own(validator) => validator.violations(instance, limit),
        }
    }

    /// Validates the arguments of a call to `tool`: `Ok` when valid, else the error text the
    /// model receives, one line per violation with its path.
    ///
    /// # Errors
    /// The error text, when `arguments` is invalid.
    pub fn check_arguments(&self, tool: &str, arguments: &Value) -> Result<(), String> {
        if self.is_valid(arguments) {
            return Ok(());
        }
        // One more than is listed, to tell the model the list is cut.
        Err(format_violations(tool, &self.first_violations(arguments, MAX_LISTED_VIOLATIONS + 1)))
    }
}

/// The text a model receives for invalid arguments: at most 20 violations; given more, it
/// says that only the first 20 are shown.
#[must_use]
pub fn format_violations(tool: &str, violations: &[Violation]) -> String {
    let mut text = format!("Validation failed for tool \"{tool}\":");
    for violation in violations.iter().take(MAX_LISTED_VIOLATIONS) {
        text.push_str("\n  - ");
        text.push_str(&violation.to_string());
    }
    if violations.len() > MAX_LISTED_VIOLATIONS {
        text.push_str(&format!("\n  ... and more (the first {MAX_LISTED_VIOLATIONS} are shown)"));
    }
    text
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Schema").field(&self.0.document).finish()
    }
}

impl PartialEq for Schema {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.document == other.0.document
    }
}

impl Serialize for Schema {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.document.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Schema {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let document = Value::deserialize(deserializer)?;
        Schema::compile(document).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn triage() -> Schema {
        Schema::compile(json!({
            "type": "object",
            "required": ["severity", "score", "owner", "tags"],
            "properties": {
                "severity": {"anyOf": [{"const": "low"}, {"const": "medium"}, {"const": "high"}]},
                "score": {"type": "integer", "minimum": 1, "maximum": 5},
                "owner": {"type": "object", "required": ["team"],
                          "properties": {"team": {"type": "string", "minLength": 1}}},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}
            }
        }))
        .unwrap()
    }

    #[test]
    fn lists_every_violation_with_its_path() {
        let text = triage()
            .check_arguments(
                "submit",
                &json!({"severity": "urgent", "score": 6, "owner": {"team": ""}, "tags": ["a","b","c","d"]}),
            )
            .unwrap_err();
        assert!(text.starts_with("Validation failed for tool \"submit\":"), "{text}");
        for path in ["severity:", "score:", "owner/team:", "tags:"] {
            assert!(text.contains(&format!("\n  - {path}")), "missing {path} in {text}");
        }
    }

    #[test]
    fn never_coerces() {
        let schema = triage();
        let base = json!({"severity": "low", "score": 2, "owner": {"team": "db"}, "tags": []});
        assert!(schema.is_valid(&base));
        for (field, bad) in [
            ("score", json!("2")),
            ("score", json!(5.9)),
            ("tags", json!("solo")),
            ("score", json!(null)),
        ] {
            let mut instance = base.clone();
            instance[field] = bad.clone();
            assert!(!schema.is_valid(&instance), "{field} = {bad} must be invalid");
        }
        // 5.0 is an integer in JSON Schema's sense.
        let mut instance = base;
        instance["score"] = json!(5.0);
        assert!(schema.is_valid(&instance));
    }

    #[test]
    fn root_violation_is_named_root() {
        let schema = Schema::compile(json!({"type": "object"})).unwrap();
        let text = schema.check_arguments("submit", &json!(null)).unwrap_err();
        assert!(text.contains("  - (root): "), "{text}");
    }

    /// The referenced schema is served on loopback, so a fetch would succeed and be seen.
    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn remote_refs_are_not_fetched() {
        use std::io::{Read, Write};
        use std::net::TcpListener;
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::time::Duration;

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(AtomicUsize::new(0));
        let server = {
            let (stop, connections) = (Arc::clone(&stop), Arc::clone(&connections));
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((mut stream, _)) => {
                            connections.fetch_add(1, Ordering::SeqCst);
                            stream.set_nonblocking(false).unwrap();
                            let mut request = [0u8; 4096];
                            let _ = stream.read(&mut request);
                            let body = r#"{"type": "string"}"#;
                            let _ = write!(
                                stream,
                                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                                body.len()
                            );
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        let url = format!("http://{address}/schema.json");
        let result = Schema::compile(json!({"$ref": url}));
        // Give a fetch that might run in the background the time to arrive.
        std::thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::SeqCst);
        server.join().unwrap();
        assert_eq!(connections.load(Ordering::SeqCst), 0, "the referenced schema was fetched");
        assert!(result.is_err(), "an unresolved remote $ref fails to compile");
    }

    #[test]
    fn long_violation_lists_are_capped() {
        let schema =
            Schema::compile(json!({"type": "array", "items": {"type": "string"}})).unwrap();
        let instance = Value::Array((0..50).map(|n| json!(n)).collect());
        let text = schema.check_arguments("submit", &instance).unwrap_err();
        assert!(text.ends_with("... and more (the first 20 are shown)"), "{text}");
    }

    #[test]
    fn violations_are_collected_only_up_to_the_bound() {
        let schema =
            Schema::compile(json!({"type": "array", "items": {"type": "string"}})).unwrap();
        // A few MB of bad items: only as many violations as are listed are built.
        let instance = Value::Array((0..500_000).map(|n| json!(n)).collect());
        assert_eq!(schema.violations(&instance).len(), MAX_LISTED_VIOLATIONS);
        let text = schema.check_arguments("submit", &instance).unwrap_err();
        assert_eq!(text.matches("\n  - ").count(), MAX_LISTED_VIOLATIONS, "{text}");
        assert!(
            text.ends_with(&format!("(the first {MAX_LISTED_VIOLATIONS} are shown)")),
            "{text}"
        );
    }

    #[test]
    fn the_same_document_is_compiled_once() {
        let a = Schema::compile(json!({"type": "object", "title": "cache probe"})).unwrap();
        let b = Schema::compile(json!({"type": "object", "title": "cache probe"})).unwrap();
        assert!(Arc::ptr_eq(&a.0, &b.0));
    }

    #[test]
    fn a_type_is_compiled_once() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Probe {
            text: String,
        }
        let a = Schema::of::<Probe>().unwrap();
        let b = Schema::of::<Probe>().unwrap();
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert!(cache().lock().unwrap().by_type.contains_key(&TypeId::of::<Probe>()));
    }

    #[test]
    fn serializes_as_its_document_and_recompiles() {
        let schema = triage();
        let text = serde_json::to_string(&schema).unwrap();
        let back: Schema = serde_json::from_str(&text).unwrap();
        assert_eq!(back.document(), schema.document());
        assert!(!back.is_valid(&json!({})));
    }
}
