//! Every error the API answers is an RFC 9457 problem document (`application/problem+json`):
//! `type` (`urn:cairn:problem:<label>`, the label of `cairn_service::errors`), `title`,
//! `status`, `detail` (the message the CLI prints for the same error: what happened, what was
//! kept, what to do) and, for some, members of their own (`limit`, `field`, `outcome`).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use cairn_engine::{EngineError, ErrorKind};
use cairn_service::errors;
use serde_json::{Map, Value, json};

#[derive(Debug)]
pub struct Problem {
    pub status: StatusCode,
    pub label: &'static str,
    pub detail: String,
    pub extra: Map<String, Value>,
}

impl Problem {
    pub fn new(status: StatusCode, label: &'static str, detail: impl Into<String>) -> Problem {
        Problem {
            status,
            label,
            detail: detail.into(),
            extra: Map::new(),
        }
    }

    pub fn with(mut self, key: &str, value: Value) -> Problem {
        self.extra.insert(key.to_string(), value);
        self
    }

    /// 401: the same answer for a missing, wrong, revoked or expired token.
    pub fn unauthorized() -> Problem {
        Problem::from_kind(
            ErrorKind::Unauthorized,
            EngineError::Unauthorized.to_string(),
        )
    }

    /// 400 for a request the engine never saw (a header, the path, the query).
    pub fn bad_request(detail: impl Into<String>) -> Problem {
        Problem::from_kind(ErrorKind::Invalid, detail)
    }

    /// 404, worded the same for a missing record and one the token may not see.
    pub fn record_not_found(id: i64) -> Problem {
        Problem::from_engine(&EngineError::NotFound { id })
    }

    pub fn from_kind(kind: ErrorKind, detail: impl Into<String>) -> Problem {
        let status = StatusCode::from_u16(errors::http_status(kind))
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Problem::new(status, errors::label(kind), detail)
    }

    pub fn from_engine(error: &EngineError) -> Problem {
        let mut problem = Problem::from_kind(error.kind(), error.to_string());
        if let EngineError::Refused {
            existing, ways_out, ..
        } = error
        {
            problem = problem
                .with("existing", json!(existing))
                .with("ways_out", json!(ways_out));
        }
        problem
    }
}

impl From<EngineError> for Problem {
    fn from(error: EngineError) -> Problem {
        Problem::from_engine(&error)
    }
}

fn title(status: StatusCode) -> &'static str {
    status.canonical_reason().unwrap_or("Error")
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut body = Map::new();
        body.insert(
            "type".into(),
            json!(format!("urn:cairn:problem:{}", self.label)),
        );
        body.insert("title".into(), json!(title(self.status)));
        body.insert("status".into(), json!(self.status.as_u16()));
        body.insert("detail".into(), json!(self.detail));
        for (key, value) in self.extra {
            body.entry(key).or_insert(value);
        }
        let mut response = (self.status, Value::Object(body).to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"cairn\""),
            );
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}
