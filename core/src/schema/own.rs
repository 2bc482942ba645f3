//! The small validator of a build without `jsonschema` (the app's engine): the keywords the
//! core's own schemas use (an assessment, a summary, a split, a lookup's arguments, and what
//! schemars derives for such types), checked as JSON Schema 2020-12 checks them. A schema with
//! any other keyword is refused when it is compiled, naming the keyword, never half-checked.
//! A test holds it to `jsonschema`'s verdict on every core schema over generated instances.

// With `jsonschema` in the build, this runs only in that test.
#![cfg_attr(feature = "full-json-schema", allow(dead_code))]

use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::{SchemaError, Violation};

/// Keywords that only annotate: accepted and not checked (as 2020-12 treats `format` too).
const ANNOTATIONS: [&str; 9] = [
    "$schema",
    "$id",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "format",
    "deprecated",
];

/// A compiled schema: the document, checked to hold only keywords this validator knows.
#[derive(Debug, Clone)]
pub(crate) struct Validator {
    root: Value,
}

impl Validator {
    /// Compiles `document`, refusing a keyword it does not check.
    pub(crate) fn new(document: &Value) -> Result<Self, SchemaError> {
        if let Some(uri) = document.get("$schema").and_then(Value::as_str)
            && !uri.contains("2020-12")
        {
            return Err(refused(&format!("$schema {uri}")));
        }
        known(document, "")?;
        Ok(Self { root: document.clone() })
    }

    /// Whether `instance` is valid.
    pub(crate) fn is_valid(&self, instance: &Value) -> bool {
        let mut none = Vec::new();
        check(&self.root, instance, "", &mut none, 0);
        none.is_empty()
    }

    /// At most `limit` violations of `instance`.
    pub(crate) fn violations(&self, instance: &Value, limit: usize) -> Vec<Violation> {
        let mut found = Vec::new();
        check(&self.root, instance, "", &mut found, limit);
        found
    }
}

fn refused(what: &str) -> SchemaError {
    SchemaError(format!(
        "{what} is not checked by this engine build, which validates the engine's own schemas; \
         the full engine (verity.js's, the native hosts', the component) validates any"
    ))
}

/// Every keyword of `schema` (and of its subschemas) is one this validator knows.
fn known(schema: &Value, at: &str) -> Result<(), SchemaError> {
    let fields = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(fields) => fields,
        _ => return Err(SchemaError(format!("{}: a schema is an object or a boolean", place(at)))),
    };
    for (keyword, value) in fields {
        let here = format!("{at}/{keyword}");
        match keyword.as_str() {
            "properties" => {
                let Value::Object(properties) = value else {
                    return Err(SchemaError(format!("{here}: must be an object")));
                };
                for (name, sub) in properties {
                    known(sub, &format!("{here}/{name}"))?;
                }
            }
            "items" | "additionalProperties" => known(value, &here)?,
            "anyOf" | "allOf" | "oneOf" => {
                let Some(subs) = value.as_array().filter(|subs| !subs.is_empty()) else {
                    return Err(SchemaError(format!("{here}: must be a non-empty array")));
                };
                for (i, sub) in subs.iter().enumerate() {
                    known(sub, &format!("{here}/{i}"))?;
                }
            }
            "type" => {
                let names: Vec<&Value> = match value {
                    Value::Array(names) => names.iter().collect(),
                    one => vec![one],
                };
                if !names.iter().all(|name| name.as_str().is_some_and(is_type_name)) {
                    return Err(SchemaError(format!("{here}: not a type name: {value}")));
                }
            }
            "required" => {
                if !value.as_array().is_some_and(|names| names.iter().all(Value::is_string)) {
                    return Err(SchemaError(format!("{here}: must be an array of strings")));
                }
            }
            "enum" => {
                if !value.is_array() {
                    return Err(SchemaError(format!("{here}: must be an array")));
                }
            }
            "minLength" | "maxLength" | "minItems" | "maxItems" => {
                if value.as_u64().is_none() {
                    return Err(SchemaError(format!("{here}: must be a non-negative integer")));
                }
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                if !value.is_number() {
                    return Err(SchemaError(format!("{here}: must be a number")));
                }
            }
            "const" => {}
            other if ANNOTATIONS.contains(&other) => {}
            other => return Err(refused(&format!("the keyword \"{other}\" (at {})", place(at)))),
        }
    }
    Ok(())
}

fn is_type_name(name: &str) -> bool {
    matches!(name, "object" | "array" | "string" | "number" | "integer" | "boolean" | "null")
}

fn place(at: &str) -> &str {
    if at.is_empty() { "the root" } else { at }
}

/// Whether `value` is of JSON Schema type `name` (an integer is a number whose fraction is
/// zero, `1.0` too).
fn is_type(value: &Value, name: &str) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|n| n.fract() == 0.0)
        }
        _ => false,
    }
}

/// JSON equality as JSON Schema has it: numbers by value (`1` equals `1.0`).
fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| equal(a, b)))
        }
        _ => a == b,
    }
}

/// Whether another violation may still be recorded (`limit` 0: only whether there is one).
fn full(found: &[Violation], limit: usize) -> bool {
    if limit == 0 { !found.is_empty() } else { found.len() >= limit }
}

fn push(found: &mut Vec<Violation>, limit: usize, path: &str, message: String) {
    if !full(found, limit) {
        found.push(Violation { path: path.trim_start_matches('/').to_owned(), message });
    }
}

/// Checks `instance` (at `path`) against `schema`, recording violations in `found`.
fn check(schema: &Value, instance: &Value, path: &str, found: &mut Vec<Violation>, limit: usize) {
    let fields = match schema {
        Value::Bool(true) => return,
        Value::Bool(false) => {
            return push(found, limit, path, "false schema does not allow this value".into());
        }
        Value::Object(fields) => fields,
        _ => return,
    };
    if let Some(types) = fields.get("type") {
        let names: Vec<&str> = match types {
            Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
            one => one.as_str().into_iter().collect(),
        };
        if !names.iter().any(|name| is_type(instance, name)) {
            let wanted =
                if names.len() == 1 { format!("\"{}\"", names[0]) } else { format!("{types}") };
            push(found, limit, path, format!("{instance} is not of type {wanted}"));
            // The other keywords of a wrong type say nothing more a model can act on.
            return;
        }
    }
    if let Some(wanted) = fields.get("const")
        && !equal(wanted, instance)
    {
        push(found, limit, path, format!("{wanted} was expected"));
    }
    if let Some(Value::Array(options)) = fields.get("enum")
        && !options.iter().any(|option| equal(option, instance))
    {
        push(
            found,
            limit,
            path,
            format!("{instance} is not one of {}", Value::Array(options.clone())),
        );
    }
    combinators(fields, instance, path, found, limit);
    match instance {
        Value::Object(object) => check_object(fields, object, path, found, limit),
        Value::Array(items) => check_array(fields, items, path, found, limit),
        Value::String(text) => check_string(fields, text, path, found, limit),
        Value::Number(_) => check_number(fields, instance, path, found, limit),
        _ => {}
    }
}

fn combinators(
    fields: &Map<String, Value>,
    instance: &Value,
    path: &str,
    found: &mut Vec<Violation>,
    limit: usize,
) {
    let passes = |sub: &Value| {
        let mut none = Vec::new();
        check(sub, instance, path, &mut none, 0);
        none.is_empty()
    };
    if let Some(Value::Array(subs)) = fields.get("anyOf")
        && !subs.iter().any(passes)
    {
        push(
            found,
            limit,
            path,
            format!(
                "{instance} is not valid under any of the schemas listed in the 'anyOf' keyword"
            ),
        );
    }
    if let Some(Value::Array(subs)) = fields.get("oneOf") {
        let passing = subs.iter().filter(|sub| passes(sub)).count();
        if passing != 1 {
            let why =
                if passing == 0 { "not valid under any" } else { "valid under more than one" };
            push(
                found,
                limit,
                path,
                format!("{instance} is {why} of the schemas listed in the 'oneOf' keyword"),
            );
        }
    }
    if let Some(Value::Array(subs)) = fields.get("allOf") {
        for sub in subs {
            check(sub, instance, path, found, limit);
        }
    }
}

fn check_object(
    fields: &Map<String, Value>,
    object: &Map<String, Value>,
    path: &str,
    found: &mut Vec<Violation>,
    limit: usize,
) {
    for name in fields.get("required").and_then(Value::as_array).into_iter().flatten() {
        if let Some(name) = name.as_str()
            && !object.contains_key(name)
        {
            push(found, limit, path, format!("\"{name}\" is a required property"));
        }
    }
    let properties = fields.get("properties").and_then(Value::as_object);
    let mut unexpected = Vec::new();
    for (name, value) in object {
        let here = format!("{path}/{}", escape(name));
        match properties.and_then(|properties| properties.get(name)) {
            Some(sub) => check(sub, value, &here, found, limit),
            None => match fields.get("additionalProperties") {
                Some(Value::Bool(false)) => unexpected.push(name.as_str()),
                Some(sub) => check(sub, value, &here, found, limit),
                None => {}
            },
        }
    }
    if !unexpected.is_empty() {
        let mut names = String::new();
        for (i, name) in unexpected.iter().enumerate() {
            let _ = write!(names, "{}'{name}'", if i == 0 { "" } else { ", " });
        }
        let verb = if unexpected.len() == 1 { "was" } else { "were" };
        push(
            found,
            limit,
            path,
            format!("Additional properties are not allowed ({names} {verb} unexpected)"),
        );
    }
}

/// A property name as a JSON pointer's token.
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

fn check_array(
    fields: &Map<String, Value>,
    items: &[Value],
    path: &str,
    found: &mut Vec<Violation>,
    limit: usize,
) {
    let count = items.len() as u64;
    if let Some(least) = broken_count(fields, "minItems", count) {
        let shown = Value::Array(items.to_vec());
        push(found, limit, path, format!("{shown} has less than {least} item{}", plural(least)));
    }
    if let Some(most) = broken_count(fields, "maxItems", count) {
        let shown = Value::Array(items.to_vec());
        push(found, limit, path, format!("{shown} has more than {most} item{}", plural(most)));
    }
    if let Some(sub) = fields.get("items") {
        for (i, item) in items.iter().enumerate() {
            if full(found, limit) {
                return;
            }
            check(sub, item, &format!("{path}/{i}"), found, limit);
        }
    }
}

fn check_string(
    fields: &Map<String, Value>,
    text: &str,
    path: &str,
    found: &mut Vec<Violation>,
    limit: usize,
) {
    // Characters as JSON Schema counts them: Unicode code points.
    let length = text.chars().count() as u64;
    if let Some(least) = broken_count(fields, "minLength", length) {
        let message = format!("\"{text}\" is shorter than {least} character{}", plural(least));
        push(found, limit, path, message);
    }
    if let Some(most) = broken_count(fields, "maxLength", length) {
        let message = format!("\"{text}\" is longer than {most} character{}", plural(most));
        push(found, limit, path, message);
    }
}

/// The bound `keyword` of `fields` (`minItems`, `maxLength`...) when `count` breaks it: is
/// under a `min…` or over a `max…`.
fn broken_count(fields: &Map<String, Value>, keyword: &str, count: u64) -> Option<u64> {
    let bound = fields.get(keyword)?.as_u64()?;
    let broken = if keyword.starts_with("min") { count < bound } else { count > bound };
    broken.then_some(bound)
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The numeric bounds, each with the words of its violation.
const NUMERIC_BOUNDS: [(&str, &str); 4] = [
    ("minimum", "is less than the minimum of"),
    ("maximum", "is greater than the maximum of"),
    ("exclusiveMinimum", "is less than or equal to the minimum of"),
    ("exclusiveMaximum", "is greater than or equal to the maximum of"),
];

fn check_number(
    fields: &Map<String, Value>,
    number: &Value,
    path: &str,
    found: &mut Vec<Violation>,
    limit: usize,
) {
    let Some(x) = number.as_f64() else { return };
    for (keyword, words) in NUMERIC_BOUNDS {
        let Some(bound) = fields.get(keyword) else { continue };
        let Some(at) = bound.as_f64() else { continue };
        let broken = match keyword {
            "minimum" => x < at,
            "maximum" => x > at,
            "exclusiveMinimum" => x <= at,
            _ => x >= at,
        };
        if broken {
            push(found, limit, path, format!("{number} {words} {bound}"));
        }
    }
}
