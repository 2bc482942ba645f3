//! The HTTP calls to a server: blocking requests, the admin API (SQL queries, registering a
//! deployment) and the ingress (submitting a workflow, its output, its shared handlers).

use std::time::Duration;

use serde_json::{Value, json};

/// A blocking GET: status and body.
///
/// # Errors
/// No response.
pub fn blocking_get(url: &str) -> Result<(u16, String), String> {
    blocking(reqwest::Method::GET, url, None)
}

/// A blocking request with an optional JSON body: status and body. Runs on its own small
/// runtime, so it works from sync code and from inside an async test alike.
///
/// # Errors
/// No response.
pub fn blocking(
    method: reqwest::Method,
    url: &str,
    body: Option<&Value>,
) -> Result<(u16, String), String> {
    blocking_within(method, url, body, Duration::from_secs(120))
}

/// As [`blocking`], giving up after `limit`.
///
/// # Errors
/// No response within `limit`.
pub fn blocking_within(
    method: reqwest::Method,
    url: &str,
    body: Option<&Value>,
    limit: Duration,
) -> Result<(u16, String), String> {
    let url = url.to_owned();
    let body = body.map(Value::to_string);
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(async move {
            let client =
                reqwest::Client::builder().no_proxy().build().map_err(|e| e.to_string())?;
            let mut request = client.request(method, &url).timeout(limit);
            if let Some(body) = body {
                request = request.header("content-type", "application/json").body(body);
            }
            let response = request.send().await.map_err(|e| format!("{url}: {e}"))?;
            let status = response.status().as_u16();
            let text = response.text().await.map_err(|e| format!("{url}: {e}"))?;
            Ok((status, text))
        })
    })
    .join()
    .map_err(|_| "the HTTP thread panicked".to_owned())?
}

/// Runs a SQL query on the server's introspection tables (`POST /query` on the admin API,
/// e.g. `sys_invocation`); the rows as JSON.
///
/// # Errors
/// No answer, an error status, or not JSON rows.
pub fn admin_query(admin: &str, sql: &str) -> Result<Vec<Value>, String> {
    let url = format!("{admin}/query");
    let body = json!({"query": sql}).to_string();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(async move {
            let client =
                reqwest::Client::builder().no_proxy().build().map_err(|e| e.to_string())?;
            let response = client
                .post(&url)
                .header("content-type", "application/json")
                .header("accept", "application/json")
                .timeout(Duration::from_secs(30))
                .body(body)
                .send()
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            let status = response.status().as_u16();
            let text = response.text().await.map_err(|e| format!("{url}: {e}"))?;
            if status != 200 {
                return Err(format!("{url}: {status} {text}"));
            }
            let value: Value = serde_json::from_str(&text).map_err(|e| format!("{url}: {e}"))?;
            value["rows"].as_array().cloned().ok_or_else(|| format!("{url}: no rows in {text}"))
        })
    })
    .join()
    .map_err(|_| "the HTTP thread panicked".to_owned())?
}

/// Registers the deployment at `url` with the server whose admin API is at `admin`
/// (`POST /deployments`, forced so a re-registration replaces it).
///
/// # Errors
/// What the admin API answered.
pub fn register(admin: &str, url: &str) -> Result<(), String> {
    let (status, body) = blocking(
        reqwest::Method::POST,
        &format!("{admin}/deployments"),
        Some(&json!({"uri": url, "force": true})),
    )?;
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(format!("registering {url} failed ({status}): {body}"))
    }
}

/// Starts workflow `service` with `key` and `input` (`POST /{service}/{key}/run/send`).
///
/// # Errors
/// What the ingress answered.
pub fn submit(ingress: &str, service: &str, key: &str, input: &Value) -> Result<(), String> {
    submit_or_attach(ingress, service, key, input).map(drop)
}

/// Starts workflow `service` with `key` and `input`, or finds it already started (a workflow
/// runs once per key): `true` when it was there before.
///
/// # Errors
/// What the ingress answered.
pub fn submit_or_attach(
    ingress: &str,
    service: &str,
    key: &str,
    input: &Value,
) -> Result<bool, String> {
    let url = format!("{ingress}/{service}/{key}/run/send");
    let (status, body) = blocking(reqwest::Method::POST, &url, Some(input))?;
    if status == 409 || body.contains("PreviouslyAccepted") {
        Ok(true)
    } else if (200..300).contains(&status) {
        Ok(false)
    } else {
        Err(format!("submitting {service}/{key} failed ({status}): {body}"))
    }
}

/// What a workflow's output looks like when asked.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Still running (or the server is not answering).
    Pending,
    /// Finished with this JSON.
    Done(Value),
    /// Finished with a terminal error (its message).
    Failed(String),
}

/// The output of workflow `service`/`key` (`GET /restate/workflow/{service}/{key}/output`).
#[must_use]
pub fn output(ingress: &str, service: &str, key: &str) -> Outcome {
    let url = format!("{ingress}/restate/workflow/{service}/{key}/output");
    match blocking_get(&url) {
        Ok((200, body)) => match serde_json::from_str(&body) {
            Ok(value) => Outcome::Done(value),
            Err(error) => Outcome::Failed(format!("unreadable output: {error}")),
        },
        Ok((status, body)) if status >= 500 && status != 502 && status != 503 => {
            let message = serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or(body);
            Outcome::Failed(message)
        }
        _ => Outcome::Pending,
    }
}

/// Calls a shared handler (`POST /{service}/{key}/{handler}`) and returns its JSON.
///
/// # Errors
/// No answer, or not JSON.
pub fn query(ingress: &str, service: &str, key: &str, handler: &str) -> Result<Value, String> {
    query_with(ingress, service, key, handler, None)
}

/// Calls a shared handler with `input` and returns its JSON.
///
/// # Errors
/// No answer, or not JSON.
pub fn query_with(
    ingress: &str,
    service: &str,
    key: &str,
    handler: &str,
    input: Option<&Value>,
) -> Result<Value, String> {
    query_within(ingress, service, key, handler, input, Duration::from_secs(120))
}

/// As [`query_with`], giving up after `limit` (a shared handler runs on a worker: with none
/// reachable it waits).
///
/// # Errors
/// No answer within `limit`, or not JSON.
pub fn query_within(
    ingress: &str,
    service: &str,
    key: &str,
    handler: &str,
    input: Option<&Value>,
    limit: Duration,
) -> Result<Value, String> {
    let url = format!("{ingress}/{service}/{key}/{handler}");
    let (status, body) = blocking_within(reqwest::Method::POST, &url, input, limit)?;
    if status != 200 {
        return Err(format!("{url}: {status} {body}"));
    }
    serde_json::from_str(&body).map_err(|e| format!("{url}: {e}"))
}
