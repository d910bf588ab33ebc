//! Reading a request: the body (bounded in size and in time), JSON with the failing field
//! named, and the query string. Every refusal is a problem document; nothing is done.

use crate::App;
use crate::problem::Problem;
use axum::body::Body;
use axum::http::StatusCode;
use axum::http::header::CONTENT_LENGTH;
use http_body_util::BodyExt as _;
use serde::de::DeserializeOwned;

fn too_large(limit: usize) -> Problem {
    Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too-large",
        format!(
            "the request body is over the limit of {limit} bytes; nothing was done — send less (split an import), or start the server with a larger --max-body"
        ),
    )
    .with("limit", serde_json::json!(limit))
}

/// The whole body, at most `app.limits.body` bytes, within `app.limits.body_timeout`. A body
/// over the limit is read on and dropped (up to 16 times the limit) before the 413, so the
/// client, still sending, reads the answer instead of a reset connection.
pub async fn bytes(
    app: &App,
    headers: &axum::http::HeaderMap,
    mut body: Body,
) -> Result<Vec<u8>, Problem> {
    let limit = app.limits.body;
    let drain = (limit as u64).saturating_mul(16);
    if headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|length| length > drain)
    {
        return Err(too_large(limit));
    }
    let deadline = tokio::time::Instant::now() + app.limits.body_timeout;
    let mut out = Vec::new();
    let mut seen: u64 = 0;
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => {
                return Err(Problem::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "timeout",
                    format!(
                        "the request body did not arrive within {} s; nothing was done",
                        app.limits.body_timeout.as_secs()
                    ),
                ));
            }
            Ok(None) => break,
            Ok(Some(Err(error))) => {
                return Err(Problem::bad_request(format!(
                    "the request body could not be read ({error}); nothing was done"
                )));
            }
            Ok(Some(Ok(frame))) => frame,
        };
        if let Ok(data) = frame.into_data() {
            seen = seen.saturating_add(data.len() as u64);
            if seen > limit as u64 {
                out = Vec::new();
                if seen > drain {
                    break;
                }
            } else {
                out.extend_from_slice(&data);
            }
        }
    }
    if seen > limit as u64 {
        return Err(too_large(limit));
    }
    Ok(out)
}

/// Parses `bytes` as a `T`, naming the field that is wrong. An empty body is `{}`.
pub fn json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    let text = if bytes.iter().all(u8::is_ascii_whitespace) {
        &b"{}"[..]
    } else {
        bytes
    };
    let not_json = |error: &serde_json::Error| {
        Problem::bad_request(format!(
            "the request body is not valid JSON ({error}); nothing was done"
        ))
    };
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    let value: T = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            not_json(&inner)
        } else if path == "." || path.is_empty() {
            Problem::bad_request(format!(
                "the request body is refused: {inner}; nothing was done"
            ))
        } else {
            Problem::bad_request(format!(
                "field `{path}` is refused: {inner}; nothing was done"
            ))
            .with("field", serde_json::json!(path))
        }
    })?;
    deserializer.end().map_err(|e| not_json(&e))?;
    Ok(value)
}

/// Parses the query string as a `T`, naming the parameter that is wrong.
pub fn query<T: DeserializeOwned>(raw: Option<&str>) -> Result<T, Problem> {
    let raw = raw.unwrap_or("");
    let deserializer = serde_urlencoded::Deserializer::new(form_urlencoded_parse(raw.as_bytes()));
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let path = error.path().to_string();
        Problem::bad_request(format!(
            "query parameter `{path}` is refused: {}; nothing was done",
            error.into_inner()
        ))
        .with("field", serde_json::json!(path))
    })
}

fn form_urlencoded_parse(input: &[u8]) -> form_urlencoded::Parse<'_> {
    form_urlencoded::parse(input)
}
