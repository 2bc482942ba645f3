//! JSON values to and from JavaScript values, without JSON text.
//!
//! The page talks to the worker with plain JavaScript objects (`postMessage`), keeps its
//! settings in `localStorage` and exports results as JSON. Going through JSON text would link
//! serde_json's parser and writer into the page's wasm; these two small walkers over
//! `serde_json::Value` do the same job with the browser's own objects (and `JSON.parse` /
//! `JSON.stringify` where text is needed), about 5 KB gzip less (measured; docs/BENCHMARKS.md, how the UI came under 150 KB).

use js_sys::{Array, Object, Reflect};
use serde_json::{Map, Number, Value};
use wasm_bindgen::{JsCast, JsValue};

/// A JSON value as a plain JavaScript value (objects, arrays, strings, numbers, booleans, null).
pub fn to_js(value: &Value) -> JsValue {
    match value {
        Value::Null => JsValue::NULL,
        Value::Bool(flag) => JsValue::from_bool(*flag),
        Value::Number(number) => JsValue::from_f64(number.as_f64().unwrap_or(f64::NAN)),
        Value::String(text) => JsValue::from_str(text),
        Value::Array(items) => items.iter().map(to_js).collect::<Array>().into(),
        Value::Object(map) => {
            let object = Object::new();
            for (key, item) in map {
                // Setting a property of a fresh plain object cannot fail.
                let _ = Reflect::set(&object, &JsValue::from_str(key), &to_js(item));
            }
            object.into()
        }
    }
}

/// A plain JavaScript value as JSON, read as `JSON.stringify` would write it: `undefined`
/// properties are left out, non-finite numbers are `null`, and integral numbers are integers.
/// A function or symbol is an error.
pub fn from_js(value: &JsValue) -> Result<Value, String> {
    if value.is_null() || value.is_undefined() {
        return Ok(Value::Null);
    }
    if let Some(flag) = value.as_bool() {
        return Ok(Value::Bool(flag));
    }
    if let Some(number) = value.as_f64() {
        return Ok(json_number(number));
    }
    if let Some(text) = value.as_string() {
        return Ok(Value::String(text));
    }
    if Array::is_array(value) {
        let items: &Array = value.unchecked_ref();
        return items.iter().map(|item| from_js(&item)).collect::<Result<_, _>>().map(Value::Array);
    }
    if value.is_object() && !value.is_function() {
        let mut map = Map::new();
        for entry in Object::entries(value.unchecked_ref()).iter() {
            let entry: Array = entry.unchecked_into();
            let item = entry.get(1);
            if item.is_undefined() {
                continue;
            }
            let key = entry.get(0).as_string().unwrap_or_default();
            map.insert(key, from_js(&item)?);
        }
        return Ok(Value::Object(map));
    }
    Err(format!("not JSON data: {}", describe(value)))
}

/// A JavaScript number as JSON: an integer when it is one (as `JSON.stringify` writes it and
/// serde_json reads it back), `null` when it is not finite.
pub fn json_number(number: f64) -> Value {
    const U64_END: f64 = 18_446_744_073_709_551_616.0;
    const I64_START: f64 = -9_223_372_036_854_775_808.0;
    if number.fract() == 0.0 && (0.0..U64_END).contains(&number) {
        Value::Number((number as u64).into())
    } else if number.fract() == 0.0 && (I64_START..0.0).contains(&number) {
        Value::Number((number as i64).into())
    } else {
        Number::from_f64(number).map_or(Value::Null, Value::Number)
    }
}

/// JSON text, indented by two spaces (`JSON.stringify(value, null, 2)`).
pub fn pretty(value: &Value) -> Result<String, String> {
    js_sys::JSON::stringify_with_replacer_and_space(&to_js(value), &JsValue::NULL, &2.into())
        .map(String::from)
        .map_err(|error| describe(&error))
}

/// JSON text parsed by the browser (`JSON.parse`).
pub fn parse(text: &str) -> Result<Value, String> {
    let value = js_sys::JSON::parse(text).map_err(|error| describe(&error))?;
    from_js(&value)
}

/// JSON text written by the browser (`JSON.stringify`).
pub fn stringify(value: &Value) -> Result<String, String> {
    js_sys::JSON::stringify(&to_js(value)).map(String::from).map_err(|error| describe(&error))
}

/// A JavaScript error in words.
pub fn describe(error: &JsValue) -> String {
    error
        .dyn_ref::<js_sys::Error>()
        .map(|error| String::from(error.message()))
        .or_else(|| error.as_string())
        .or_else(|| js_sys::JSON::stringify(error).ok().map(String::from))
        .unwrap_or_else(|| "an error the browser did not describe".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_come_back_as_json_stringify_writes_them() {
        assert_eq!(json_number(5.0), serde_json::json!(5));
        assert!(json_number(5.0).is_u64());
        assert!(json_number(-3.0).is_i64());
        assert_eq!(json_number(0.25), serde_json::json!(0.25));
        assert_eq!(json_number(f64::NAN), Value::Null);
        assert_eq!(json_number(f64::INFINITY), Value::Null);
        assert!(json_number(1e20).is_f64(), "beyond u64 stays a float");
    }
}
