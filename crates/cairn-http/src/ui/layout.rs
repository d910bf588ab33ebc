//! The page shell every page shares, the security headers of every UI answer, the vendored
//! assets, and the small pieces of markup the pages reuse.
//!
//! Every text goes through maud's escaping; a link taken from stored text is kept only when its
//! scheme is http or https, or it is relative ([`safe_href`]). Scripts and styles are files
//! this server serves (the CSP allows nothing inline).

use super::session::Signed;
use crate::problem::Problem;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use std::sync::LazyLock;

/// The Content-Security-Policy of every UI answer: no inline script or style, nothing from
/// another origin, no framing.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// One vendored or own asset, served from memory with a long cache and a versioned URL.
pub struct Asset {
    pub name: &'static str,
    pub media: &'static str,
    pub bytes: &'static [u8],
}

pub const ASSETS: [Asset; 4] = [
    Asset {
        name: "htmx-2.0.11.min.js",
        media: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../assets/htmx-2.0.11.min.js"),
    },
    Asset {
        name: "htmx-LICENSE.txt",
        media: "text/plain; charset=utf-8",
        bytes: include_bytes!("../../assets/htmx-LICENSE.txt"),
    },
    Asset {
        name: "ui.css",
        media: "text/css; charset=utf-8",
        bytes: include_bytes!("../../assets/ui.css"),
    },
    Asset {
        name: "ui.js",
        media: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../assets/ui.js"),
    },
];

/// A short content hash per asset, for its URL (`?v=`), so a long cache never serves a stale
/// file after an upgrade.
static VERSIONS: LazyLock<Vec<String>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|asset| {
            // FNV-1a, 64 bits: enough to tell versions apart.
            let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
            for byte in asset.bytes {
                hash ^= u64::from(*byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
            format!("{:012x}", hash >> 16)
        })
        .collect()
});

/// The versioned URL of asset `name`.
pub fn asset_url(name: &str) -> String {
    let index = ASSETS
        .iter()
        .position(|asset| asset.name == name)
        .expect("a known asset");
    format!("/ui/assets/{name}?v={}", VERSIONS[index])
}

/// Adds the headers every UI answer carries.
pub fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// An HTML answer.
pub fn html_response(status: StatusCode, markup: Markup) -> Response {
    let mut response = (status, markup.into_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

/// A 303 to `to` (after a form, or to the sign-in page).
pub fn see_other(to: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(to) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// The pages of the navigation bar: (path, label).
const NAV: [(&str, &str); 6] = [
    ("/", "Search"),
    ("/ui/tending", "Tending"),
    ("/ui/graph", "Graph"),
    ("/ui/tasks", "Tasks"),
    ("/ui/timeline", "Timeline"),
    ("/ui/health", "Health"),
];

/// A whole page: `title`, the signed-in user (`None` on the sign-in page), and the content.
pub fn page(title: &str, signed: Option<&Signed>, current: &str, content: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                // htmx: no inline indicator style (the CSP forbids it), no eval, and no copy of
                // the pages in localStorage (back reloads from the server).
                meta name="htmx-config" content=r#"{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false,"historyCacheSize":0,"refreshOnHistoryMiss":true}"#;
                @if let Some(signed) = signed {
                    meta name="csrf-token" content=(signed.csrf);
                }
                title { (title) " · cairn" }
                // No icon file: the browser asks for none (and logs no 404).
                link rel="icon" href="data:,";
                link rel="stylesheet" href=(asset_url("ui.css"));
                script src=(asset_url("htmx-2.0.11.min.js")) defer {}
                script src=(asset_url("ui.js")) defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    a.brand href="/" { "cairn" }
                    @if let Some(signed) = signed {
                        nav aria-label="Pages" {
                            ul {
                                @for (path, label) in NAV {
                                    li {
                                        @if path == current {
                                            a href=(path) aria-current="page" { (label) }
                                        } @else {
                                            a href=(path) { (label) }
                                        }
                                    }
                                }
                            }
                        }
                        div.who {
                            span {
                                (signed.caller.grant.name) " · " (signed.caller.request.project)
                                " · " (signed.caller.grant.role.as_str())
                            }
                            form method="post" action="/ui/logout" {
                                (csrf_field(signed))
                                button type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                main #main tabindex="-1" {
                    (content)
                }
            }
        }
    }
}

/// The hidden CSRF field of a state-changing form.
pub fn csrf_field(signed: &Signed) -> Markup {
    html! { input type="hidden" name=(super::session::CSRF_FIELD) value=(signed.csrf); }
}

/// A problem as an HTML page with its status.
pub fn problem_page(problem: &Problem, signed: Option<&Signed>) -> Response {
    let title = problem
        .status
        .canonical_reason()
        .unwrap_or("Error")
        .to_string();
    let content = html! {
        h1 { (title) }
        p.problem role="alert" { (problem.detail) }
        p { a href="/" { "Back to search" } }
    };
    html_response(problem.status, page(&title, signed, "", content))
}

/// `href` when it is safe to link to (http, https, or relative without a scheme); `None` for
/// `javascript:`, `data:` and every other scheme.
pub fn safe_href(href: &str) -> Option<&str> {
    let trimmed = href.trim();
    let lower = trimmed.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Some(trimmed);
    }
    // Relative: no scheme before the first `/`, `?` or `#` (and no control characters,
    // which browsers strip before reading a scheme).
    if trimmed.chars().any(char::is_control) || trimmed.starts_with("//") {
        return None;
    }
    let head = trimmed.split(['/', '?', '#']).next().unwrap_or("");
    if head.contains(':') {
        return None;
    }
    Some(trimmed)
}

/// A source (URL, file:line, words): a link when it is a safe web address, text otherwise.
pub fn source_markup(source: &str) -> Markup {
    let lower = source.trim().to_ascii_lowercase();
    let web = lower.starts_with("http://") || lower.starts_with("https://");
    match safe_href(source) {
        Some(href) if web => {
            html! { a href=(href) rel="noopener noreferrer nofollow" { (source) } }
        }
        _ => html! { (source) },
    }
}

/// Plain text with line breaks kept (the CSS keeps white space); escaped like everything.
pub fn text_block(text: &str) -> Markup {
    html! { div.text { (text) } }
}

/// Nothing: for an empty fragment.
pub fn nothing() -> Markup {
    PreEscaped(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_web_and_relative_links_are_kept() {
        assert_eq!(
            safe_href("https://x.example/a"),
            Some("https://x.example/a")
        );
        assert_eq!(safe_href("HTTP://x"), Some("HTTP://x"));
        assert_eq!(safe_href("/ui/records/3"), Some("/ui/records/3"));
        assert_eq!(safe_href("notes/a.md"), Some("notes/a.md"));
        assert_eq!(safe_href("javascript:alert(1)"), None);
        assert_eq!(safe_href(" JavaScript:alert(1)"), None);
        assert_eq!(safe_href("java\tscript:alert(1)"), None);
        assert_eq!(safe_href("data:text/html,x"), None);
        assert_eq!(safe_href("//evil.example"), None);
    }

    #[test]
    fn stored_text_is_escaped() {
        let markup = text_block("<script>alert(1)</script>\"><img onerror=x>").into_string();
        assert!(!markup.contains("<script>"));
        assert!(!markup.contains("<img"));
        assert!(markup.contains("&lt;script&gt;"));
        let source = source_markup("javascript:alert(1)").into_string();
        assert!(!source.contains("href"));
    }

    #[test]
    fn every_asset_has_a_versioned_url() {
        for asset in &ASSETS {
            assert!(asset_url(asset.name).contains("?v="));
            assert!(!asset.bytes.is_empty());
        }
    }
}
