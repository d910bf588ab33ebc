//! The secret guard (docs/design.md §4.1): text that matches a known secret format is redacted to
//! `[REDACTED:kind]` before it is stored, indexed or embedded, and the caller is told which
//! kinds were found.
//!
//! Precision matters more than recall here: a false positive permanently damages stored
//! knowledge (neurostack#113). So every rule is anchored on something a secret has and prose
//! does not (a vendor prefix, a PEM header, a `user:password@` URL, a labelled assignment), and
//! matches that look like placeholders (`ghp_xxxx…`, `<your-token>`, `${API_KEY}`, AWS's
//! documentation keys containing `EXAMPLE`) are left alone.
//!
//! Only the secret is replaced: a labelled assignment keeps its label (`password =
//! [REDACTED:generic-secret]`), a URL keeps its user and host. Redaction is deterministic and
//! idempotent, and redacted output matches no rule again: existing placeholders are never
//! touched, and [`redact`] repeats until a pass finds nothing new.

use regex::Regex;
use std::ops::Range;
use std::sync::LazyLock;

/// Text with its secrets replaced by `[REDACTED:kind]`, and the kinds that were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted {
    pub text: String,
    /// Kinds of the secrets redacted by this call, sorted and deduplicated (empty when the text
    /// was clean).
    pub kinds: Vec<&'static str>,
}

/// Every kind [`redact`] can report.
pub const KINDS: &[&str] = &[
    "anthropic-key",
    "aws-access-key",
    "aws-secret-key",
    "bearer-token",
    "generic-secret",
    "github-token",
    "gitlab-token",
    "google-api-key",
    "huggingface-token",
    "jwt",
    "npm-token",
    "openai-key",
    "private-key",
    "pypi-token",
    "slack-token",
    "slack-webhook",
    "stripe-key",
    "url-password",
];

/// Replaces every secret in `text` with `[REDACTED:kind]`.
pub fn redact(text: &str) -> Redacted {
    let mut current = text.to_string();
    let mut kinds: Vec<&'static str> = Vec::new();
    // One pass almost always finds everything; the loop makes "the output matches no rule"
    // hold by construction. Every pass turns secret text into placeholders, which later passes
    // never touch, so it terminates.
    loop {
        let found = find_secrets(&current);
        if found.is_empty() {
            break;
        }
        let mut output = String::with_capacity(current.len());
        let mut copied_up_to = 0;
        for secret in &found {
            output.push_str(&current[copied_up_to..secret.range.start]);
            output.push_str("[REDACTED:");
            output.push_str(secret.kind);
            output.push(']');
            copied_up_to = secret.range.end;
            kinds.push(secret.kind);
        }
        output.push_str(&current[copied_up_to..]);
        current = output;
    }
    kinds.sort_unstable();
    kinds.dedup();
    Redacted {
        text: current,
        kinds,
    }
}

/// One secret found in a text: the byte range to replace and its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Found {
    range: Range<usize>,
    kind: &'static str,
}

struct Rule {
    kind: &'static str,
    /// The match, or its `secret` (or `double_quoted` / `single_quoted`) group when one
    /// matched, is what gets replaced.
    regex: Regex,
    /// Extra test on the replaced text, for what a regex cannot say (placeholders, entropy).
    accept: fn(&str) -> bool,
}

fn rule(kind: &'static str, pattern: &str, accept: fn(&str) -> bool) -> Rule {
    let regex = Regex::new(pattern).unwrap_or_else(|error| panic!("secret rule {kind}: {error}"));
    Rule {
        kind,
        regex,
        accept,
    }
}

/// The rules in priority order: where two rules match overlapping text, the earlier one wins
/// (a PEM block over the JWT-looking text inside it, `sk-ant-` over `sk-`, a vendor token over
/// the generic assignment around it).
static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    vec![
        rule(
            "private-key",
            // A whole PEM block; a block cut off before its END line loses its base64 lines.
            r"(?s)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?:.*?-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|(?:\s*[A-Za-z0-9+/=]{16,})*)",
            |_| true,
        ),
        rule(
            "url-password",
            r"(?i)\b[a-z][a-z0-9+.-]*://[^\s:/?#@\[\]]*:(?P<secret>[^\s/?@\[\]]+)@[a-z0-9\[]",
            |password| !is_placeholder(password) && !is_example_word(password),
        ),
        rule(
            "slack-webhook",
            r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}",
            |url| looks_random(url.rsplit('/').next().unwrap_or(url)),
        ),
        rule(
            "jwt",
            r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*",
            |_| true,
        ),
        rule("anthropic-key", r"\bsk-ant-[A-Za-z0-9_-]{20,}", |key| {
            looks_random(&key[7..])
        }),
        rule("openai-key", r"\bsk-[A-Za-z0-9_-]{20,}", |key| {
            looks_random(&key[3..])
        }),
        rule(
            "stripe-key",
            r"\b[sr]k_(?:live|test|prod)_[A-Za-z0-9]{10,}",
            |key| looks_random(key.splitn(3, '_').nth(2).unwrap_or(key)),
        ),
        rule(
            "github-token",
            r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
            |token| looks_random(token.split_once('_').map_or(token, |(_, body)| body)),
        ),
        rule("gitlab-token", r"\bglpat-[A-Za-z0-9_-]{20,}", |token| {
            looks_random(&token[6..])
        }),
        rule(
            "slack-token",
            r"\bxox[abeoprs]-[A-Za-z0-9-]{10,}",
            |token| looks_random(&token[5..]),
        ),
        rule(
            "aws-access-key",
            r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
            |key| !key.contains("EXAMPLE") && distinct_chars(&key[4..]) >= 6,
        ),
        rule(
            "aws-secret-key",
            r#"(?i:\b(?:aws_?)?secret_?access_?key)["']?\s*(?:=|:|=>)\s*["']?(?P<secret>[A-Za-z0-9/+=]{40})(?:$|[^A-Za-z0-9/+=])"#,
            |key| !key.contains("EXAMPLE") && distinct_chars(key) >= 10,
        ),
        rule("google-api-key", r"\bAIza[A-Za-z0-9_-]{35}", |key| {
            looks_random(&key[4..])
        }),
        rule("npm-token", r"\bnpm_[A-Za-z0-9]{36,}\b", |token| {
            looks_random(&token[4..])
        }),
        rule("huggingface-token", r"\bhf_[A-Za-z0-9]{34,}\b", |token| {
            looks_random(&token[3..])
        }),
        rule(
            "pypi-token",
            r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
            |_| true,
        ),
        rule(
            "bearer-token",
            r"(?i:\bbearer)\s+(?P<secret>[A-Za-z0-9._~+/-]{20,}=*)",
            looks_random,
        ),
        rule(
            "generic-secret",
            // label ending in a secret word, an assignment, an optionally quoted value that
            // ends at a delimiter (so `token = get_token()` is code, not a secret).
            r#"(?i:\b[a-z0-9_.-]*?(?:password|passwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|auth[_-]?key|signing[_-]?key|credentials?))["']?\s*(?:=|:=|=>|:)\s*(?:"(?P<double_quoted>[^"\s]{8,})"|'(?P<single_quoted>[^'\s]{8,})'|`?(?P<secret>[^\s"'`,;()\[\]{}<>&]{8,})(?:$|[\s"'`,;)\]}&]))"#,
            is_generic_secret_value,
        ),
    ]
});

/// Placeholders already in the text: never re-redacted, never part of a new match.
static PLACEHOLDER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[REDACTED:[a-z0-9-]+\]").expect("placeholder regex"));

/// Every secret in `text`, non-overlapping, sorted by position.
fn find_secrets(text: &str) -> Vec<Found> {
    let mut claimed: Vec<Range<usize>> = PLACEHOLDER.find_iter(text).map(|m| m.range()).collect();
    let mut found = Vec::new();
    for rule in RULES.iter() {
        let mut position = 0;
        while position <= text.len()
            && let Some(captures) = rule.regex.captures_at(text, position)
        {
            let whole = captures.get(0).expect("group 0 always matches");
            let secret = ["secret", "double_quoted", "single_quoted"]
                .into_iter()
                .find_map(|group| captures.name(group))
                .unwrap_or(whole);
            let range = secret.range();
            let overlaps = claimed
                .iter()
                .any(|taken| taken.start < range.end && range.start < taken.end);
            if !overlaps && (rule.accept)(secret.as_str()) {
                claimed.push(range.clone());
                found.push(Found {
                    range,
                    kind: rule.kind,
                });
            }
            position = next_position(text, whole.start(), whole.end());
        }
    }
    found.sort_by_key(|secret| secret.range.start);
    found
}

fn next_position(text: &str, start: usize, end: usize) -> usize {
    if end > start {
        return end;
    }
    text[start..]
        .chars()
        .next()
        .map_or(text.len() + 1, |c| start + c.len_utf8())
}

fn distinct_chars(text: &str) -> usize {
    let mut seen: Vec<char> = text.chars().collect();
    seen.sort_unstable();
    seen.dedup();
    seen.len()
}

/// A generated token mixes character classes and repeats little; `ghp_xxxx…` and
/// `sk-learn-compatible-wrappers` do not.
fn looks_random(body: &str) -> bool {
    let has_lower = body.bytes().any(|b| b.is_ascii_lowercase());
    let has_upper = body.bytes().any(|b| b.is_ascii_uppercase());
    let has_digit = body.bytes().any(|b| b.is_ascii_digit());
    let classes = usize::from(has_lower) + usize::from(has_upper) + usize::from(has_digit);
    classes >= 2 && distinct_chars(body) >= 6
}

/// Template references, masks and paths: text that stands for a secret without being one.
fn is_placeholder(value: &str) -> bool {
    let lowered = value.to_ascii_lowercase();
    value.starts_with(['$', '%', '<', '{', '~', '/'])
        || value.starts_with("./")
        || value.starts_with("../")
        || value.contains("://")
        || lowered.starts_with("process.env")
        || lowered.starts_with("os.environ")
        || lowered.starts_with("env.")
        || distinct_chars(value.trim_matches(['*', 'x', 'X', '.', '-', '_'])) == 0
        || lowered.contains("redacted")
        // Documentation keys (AWS's `AKIAIOSFODNN7EXAMPLE`) and `<EXAMPLE>`-style fillers.
        || value.contains("EXAMPLE")
}

/// The words documentation puts where a password goes (`postgres://user:password@host`).
fn is_example_word(value: &str) -> bool {
    matches!(
        value.to_ascii_lowercase().as_str(),
        "password" | "passwd" | "pass" | "pwd" | "pw" | "secret" | "changeme" | "yourpassword"
    )
}

/// The value of a labelled assignment counts as a secret only when it looks like one: it mixes
/// letters and digits or has a symbol, and is not a placeholder, a plain number (`max_tokens:
/// 40960000`), a dotted version or address, or a word or identifier (`password: required`,
/// `token = config.api_token`). Letters-only passphrases are missed on purpose.
fn is_generic_secret_value(value: &str) -> bool {
    if is_placeholder(value) {
        return false;
    }
    let has_letter = value.chars().any(char::is_alphabetic);
    let has_digit = value.chars().any(|c| c.is_ascii_digit());
    let has_symbol = value
        .chars()
        .any(|c| !c.is_alphanumeric() && !matches!(c, '_' | '-' | '.' | '/'));
    (has_letter && has_digit) || (has_symbol && (has_letter || has_digit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Test secrets are assembled with `concat!` so this file never holds a contiguous string
    // that a repository secret scanner would flag. None of them is real.
    const AWS_KEY_ID: &str = concat!("AKIA", "Z3KQ7TYW2HNPX4LB");
    const AWS_SECRET: &str = concat!("kQ8v/2LmZp", "T4xR9wBn7Y", "cJ3uH6sD1f", "Ae5GqW0tVy");
    const GITHUB_PAT: &str = concat!("ghp_", "R8kLm2NqP4sT6vX9zB1cD3fG5hJ7wY0aE2iU");
    const GITHUB_FINE: &str = concat!(
        "github_",
        "pat_11ABCDEFG0abcdEFGH1234_xYz9876543210QwErTyUiOpAsDfGhJkLzXcVbNm"
    );
    const GITLAB: &str = concat!("glpat-", "x7Yz9Qk2Lm4Np6Rs8Tv0");
    const SLACK_BOT: &str = concat!(
        "xoxb-",
        "2048611234567-4098765432101-Zq8Lk3Xv7Nm2Rp5Tw9Yb4Cd"
    );
    const SLACK_HOOK: &str = concat!(
        "https://hooks.slack.com/",
        "services/T0ABC1234/B0DEF5678/Xy9Kq2Lm7Np4Rs6Tv8Wz1Ab3"
    );
    const OPENAI: &str = concat!(
        "sk-",
        "proj-Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr9St1Uv3Wx5Yz7_a9B-c1D3"
    );
    const OPENAI_LEGACY: &str = concat!("sk-", "Xk2Lm9Qp4Rs7Tv1Wz3Yb5Cd8Ef0Gh6Ij2Kl4Mn7Op9Qr1St");
    const ANTHROPIC: &str = concat!(
        "sk-",
        "ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8Ba7_z6y5X4w3V2u1-T0s9AA"
    );
    const STRIPE: &str = concat!("sk_", "live_51HqLm2Np4Rs6Tv8Wx0Yz2Ab4Cd6Ef");
    const STRIPE_RESTRICTED: &str = concat!("rk_", "live_9Xq2Lm4Np6Rs8Tv0Wx2Yz4A");
    const GOOGLE: &str = concat!("AIza", "SyB3xK9mQ2pL7vR4tN8wZ1cD5fH6jG0sE2u");
    const JWT: &str = concat!(
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
        ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ",
        ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
    );
    const NPM: &str = concat!("npm_", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
    const HUGGINGFACE: &str = concat!("hf_", "QzXkLmNpRsTvWyBcDfGhJkLmNpQrStVwXyZa");
    const PEM_RSA: &str = concat!(
        "-----BEGIN RSA PRIVATE ",
        "KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi\nZ1BjP5CE/Wm/Rr500PRK+Lh9x5eJPo5CAi\n-----END RSA PRIVATE KEY-----"
    );
    const PEM_OPENSSH: &str = concat!(
        "-----BEGIN OPENSSH PRIVATE ",
        "KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACDx\n-----END OPENSSH PRIVATE KEY-----"
    );
    const PEM_EC: &str = concat!(
        "-----BEGIN EC PRIVATE ",
        "KEY-----\r\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5ZhzRwUBDJ7oXoAoGCCqGSM49\r\n-----END EC PRIVATE KEY-----"
    );
    const PEM_PKCS8: &str = concat!(
        "-----BEGIN PRIVATE ",
        "KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----"
    );

    fn check(input: &str, expect: &str, kinds: &[&str]) {
        let redacted = redact(input);
        assert_eq!(redacted.text, expect, "input: {input:?}");
        assert_eq!(redacted.kinds, kinds, "kinds for input: {input:?}");
    }

    /// `text` comes back unchanged.
    fn clean(text: &str) {
        check(text, text, &[]);
    }

    #[test]
    fn vendor_tokens_are_redacted() {
        check(
            &format!("export AWS_ACCESS_KEY_ID={AWS_KEY_ID}"),
            "export AWS_ACCESS_KEY_ID=[REDACTED:aws-access-key]",
            &["aws-access-key"],
        );
        check(
            &format!("git remote set-url origin https://{GITHUB_PAT}@github.com/acme/api"),
            "git remote set-url origin https://[REDACTED:github-token]@github.com/acme/api",
            &["github-token"],
        );
        check(
            &format!("GH token: {GITHUB_FINE}"),
            "GH token: [REDACTED:github-token]",
            &["github-token"],
        );
        check(
            &format!("CI uses {GITLAB} for the registry"),
            "CI uses [REDACTED:gitlab-token] for the registry",
            &["gitlab-token"],
        );
        check(
            &format!("bot token is {SLACK_BOT}."),
            "bot token is [REDACTED:slack-token].",
            &["slack-token"],
        );
        check(
            &format!("alerts go to {SLACK_HOOK}"),
            "alerts go to [REDACTED:slack-webhook]",
            &["slack-webhook"],
        );
        check(
            &format!("OPENAI_API_KEY={OPENAI}"),
            "OPENAI_API_KEY=[REDACTED:openai-key]",
            &["openai-key"],
        );
        check(
            &format!("old key {OPENAI_LEGACY}"),
            "old key [REDACTED:openai-key]",
            &["openai-key"],
        );
        check(
            &format!("{{\"key\": \"{ANTHROPIC}\"}}"),
            "{\"key\": \"[REDACTED:anthropic-key]\"}",
            &["anthropic-key"],
        );
        check(
            &format!("stripe {STRIPE} and {STRIPE_RESTRICTED}"),
            "stripe [REDACTED:stripe-key] and [REDACTED:stripe-key]",
            &["stripe-key"],
        );
        check(
            &format!("maps key={GOOGLE}&v=3"),
            "maps key=[REDACTED:google-api-key]&v=3",
            &["google-api-key"],
        );
        check(
            &format!("//registry.npmjs.org/:_authToken={NPM}"),
            "//registry.npmjs.org/:_authToken=[REDACTED:npm-token]",
            &["npm-token"],
        );
        check(
            &format!("HF_TOKEN={HUGGINGFACE}"),
            "HF_TOKEN=[REDACTED:huggingface-token]",
            &["huggingface-token"],
        );
    }

    #[test]
    fn anthropic_wins_over_openai() {
        check(ANTHROPIC, "[REDACTED:anthropic-key]", &["anthropic-key"]);
        check(
            &format!("{ANTHROPIC} {OPENAI}"),
            "[REDACTED:anthropic-key] [REDACTED:openai-key]",
            &["anthropic-key", "openai-key"],
        );
    }

    #[test]
    fn aws_secret_needs_its_label() {
        check(
            &format!("aws_secret_access_key = {AWS_SECRET}"),
            "aws_secret_access_key = [REDACTED:aws-secret-key]",
            &["aws-secret-key"],
        );
        check(
            &format!("AWS_SECRET_ACCESS_KEY=\"{AWS_SECRET}\"\n"),
            "AWS_SECRET_ACCESS_KEY=\"[REDACTED:aws-secret-key]\"\n",
            &["aws-secret-key"],
        );
        check(
            &format!("\"SecretAccessKey\": \"{AWS_SECRET}\","),
            "\"SecretAccessKey\": \"[REDACTED:aws-secret-key]\",",
            &["aws-secret-key"],
        );
        // The same 40 characters with no label: could be anything (a hash, base64 data).
        clean(&format!("blob {AWS_SECRET} end"));
    }

    #[test]
    fn jwt_and_bearer_tokens() {
        check(
            &format!("Authorization: Bearer {JWT}"),
            "Authorization: Bearer [REDACTED:jwt]",
            &["jwt"],
        );
        check(
            &format!("session cookie {JWT}; Path=/"),
            "session cookie [REDACTED:jwt]; Path=/",
            &["jwt"],
        );
        check(
            "curl -H 'Authorization: Bearer 7f3kQ9zLm2Xp4Rt8Wv1Yb6Nc0Dh5Js'",
            "curl -H 'Authorization: Bearer [REDACTED:bearer-token]'",
            &["bearer-token"],
        );
        clean("the bearer authentication scheme is described in RFC 6750");
    }

    #[test]
    fn private_keys_are_redacted_whole() {
        for pem in [PEM_RSA, PEM_OPENSSH, PEM_EC, PEM_PKCS8] {
            check(
                &format!("key:\n{pem}\nthanks"),
                "key:\n[REDACTED:private-key]\nthanks",
                &["private-key"],
            );
        }
        let truncated = PEM_RSA.split("-----END").next().unwrap();
        check(
            &format!("{truncated}(output cut)"),
            "[REDACTED:private-key]\n(output cut)",
            &["private-key"],
        );
        clean(
            "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----",
        );
        clean(
            "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUF\n-----END CERTIFICATE-----",
        );
    }

    #[test]
    fn url_passwords_keep_user_and_host() {
        check(
            "DATABASE_URL=postgres://app:Xk9#mQ2v@db.internal:5432/prod",
            "DATABASE_URL=postgres://app:[REDACTED:url-password]@db.internal:5432/prod",
            &["url-password"],
        );
        check(
            "redis://:s3cr3tpass@cache:6379/0",
            "redis://:[REDACTED:url-password]@cache:6379/0",
            &["url-password"],
        );
        check(
            "mongodb+srv://admin:hunter2@cluster0.abcde.mongodb.net/test",
            "mongodb+srv://admin:[REDACTED:url-password]@cluster0.abcde.mongodb.net/test",
            &["url-password"],
        );
        check(
            "amqp://guest:guestpass123@[::1]:5672",
            "amqp://guest:[REDACTED:url-password]@[::1]:5672",
            &["url-password"],
        );
        clean("postgres://user:password@localhost:5432/mydb");
        clean("postgres://${DB_USER}:${DB_PASSWORD}@db:5432/app");
        clean("https://example.com:8443/path?q=a@b");
        clean("git@github.com:acme/api.git and ssh://git@github.com:22/acme/api.git");
    }

    #[test]
    fn generic_assignments_redact_the_value_only() {
        check(
            "password = \"Tr0ub4dor&3\"",
            "password = \"[REDACTED:generic-secret]\"",
            &["generic-secret"],
        );
        check(
            "export DB_PASSWORD=s3cr3t-Value",
            "export DB_PASSWORD=[REDACTED:generic-secret]",
            &["generic-secret"],
        );
        check(
            "api_key: 9f8e7d6c5b4a",
            "api_key: [REDACTED:generic-secret]",
            &["generic-secret"],
        );
        check(
            "client_secret=Ab12Cd34Ef56\nclient_id=frontend",
            "client_secret=[REDACTED:generic-secret]\nclient_id=frontend",
            &["generic-secret"],
        );
        check(
            "{\"access_token\": \"ya29.a0AfH6SMBx3kq\", \"token_type\": \"bearer\"}",
            "{\"access_token\": \"[REDACTED:generic-secret]\", \"token_type\": \"bearer\"}",
            &["generic-secret"],
        );
        check(
            "X-API-Key: 4f7a9c2e81b3",
            "X-API-Key: [REDACTED:generic-secret]",
            &["generic-secret"],
        );
        check(
            "secret=a1b2c3d4 token=z9y8x7w6",
            "secret=[REDACTED:generic-secret] token=[REDACTED:generic-secret]",
            &["generic-secret"],
        );
        check(
            "PGPASSWORD=p4ss!word psql -h db",
            "PGPASSWORD=[REDACTED:generic-secret] psql -h db",
            &["generic-secret"],
        );
        check(
            &format!("token = {GITHUB_PAT}"),
            "token = [REDACTED:github-token]",
            &["github-token"],
        );
    }

    #[test]
    fn prose_and_identifiers_are_left_alone() {
        clean("the password policy requires 12 characters");
        clean("Password: required, at least 12 characters");
        clean("Rotate the API key every 90 days; the token endpoint is /oauth/token.");
        clean("commit 3f2a9c1b7e4d5a6f8b9c0d1e2f3a4b5c6d7e8f90 fixed the token refresh");
        clean("request id 123e4567-e89b-12d3-a456-426614174000 failed");
        clean("sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        clean("token = get_token(); password = self.password;");
        clean("password: ${{ secrets.DB_PASSWORD }}");
        clean("password: <your-password-here>");
        clean("token: YOUR_TOKEN_HERE");
        clean("password: ********");
        clean("max_tokens: 40960000, total_tokens=12345678");
        clean("api_key: configured_in_vault");
        clean("token: https://auth.example.com/oauth/token");
        clean("secret_name: db-credentials");
        clean("we use sk-learn-compatible-estimator-wrappers here");
        clean("task-runner-for-the-monorepo-build-system and risk-adjusted-performance");
        clean(concat!(
            "placeholder ghp_",
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        ));
        clean(concat!("docs key AKIA", "IOSFODNN7EXAMPLE"));
        clean(concat!(
            "aws_secret_access_key = wJalrXUtnFEMI",
            "/K7MDENG/bPxRfiCYEXAMPLEKEY"
        ));
        clean("AKIA is the prefix of long-term access key ids");
        clean("");
    }

    #[test]
    fn placeholders_survive_and_are_not_reported() {
        clean("password = [REDACTED:generic-secret]");
        clean("postgres://app:[REDACTED:url-password]@db/prod");
        check(
            &format!("[REDACTED:jwt] and {NPM}"),
            "[REDACTED:jwt] and [REDACTED:npm-token]",
            &["npm-token"],
        );
    }

    #[test]
    fn several_kinds_are_sorted_and_deduplicated() {
        let text = format!("{GITHUB_PAT} {AWS_KEY_ID} {GITHUB_PAT} password=hunter2!!");
        check(
            &text,
            "[REDACTED:github-token] [REDACTED:aws-access-key] [REDACTED:github-token] password=[REDACTED:generic-secret]",
            &["aws-access-key", "generic-secret", "github-token"],
        );
    }

    #[test]
    fn every_rule_kind_is_listed() {
        let mut rule_kinds: Vec<&str> = RULES.iter().map(|rule| rule.kind).collect();
        rule_kinds.sort_unstable();
        rule_kinds.dedup();
        assert_eq!(rule_kinds, KINDS);
    }

    fn fragment() -> impl Strategy<Value = String> {
        let pieces: Vec<&'static str> = vec![
            AWS_KEY_ID,
            AWS_SECRET,
            GITHUB_PAT,
            GITHUB_FINE,
            GITLAB,
            SLACK_BOT,
            SLACK_HOOK,
            OPENAI,
            ANTHROPIC,
            STRIPE,
            GOOGLE,
            JWT,
            NPM,
            HUGGINGFACE,
            PEM_RSA,
            PEM_OPENSSH,
            "-----BEGIN EC PRIVATE KEY-----\n",
            "-----END RSA PRIVATE KEY-----",
            "password=",
            "token: ",
            "api_key = \"",
            "aws_secret_access_key=",
            "Authorization: Bearer ",
            "postgres://app:",
            "@db:5432/x",
            "redis://:",
            "[REDACTED:jwt]",
            "[REDACTED:",
            "]",
            "[",
            "\"",
            "'",
            " ",
            "\n",
            "=",
            ":",
            "@",
            "/",
            "-",
            "_",
            "sk-",
            "sk-ant-",
            "ghp_",
            "eyJ",
            ".",
            "hunter2!!",
            "a1b2c3d4e5",
            "AIza",
            "xoxb-",
            "AKIA",
            "EXAMPLE",
        ];
        prop_oneof![
            3 => proptest::sample::select(pieces).prop_map(str::to_string),
            1 => "[A-Za-z0-9]{1,12}",
            1 => any::<String>(),
        ]
    }

    fn secretish_text() -> impl Strategy<Value = String> {
        proptest::collection::vec(fragment(), 0..12).prop_map(|parts| parts.concat())
    }

    proptest! {
        #[test]
        fn redact_is_idempotent(input in secretish_text()) {
            let once = redact(&input);
            let twice = redact(&once.text);
            prop_assert_eq!(&twice.text, &once.text);
            prop_assert!(twice.kinds.is_empty());
        }

        #[test]
        fn redacted_text_matches_no_rule(input in secretish_text()) {
            let redacted = redact(&input);
            prop_assert_eq!(find_secrets(&redacted.text), vec![]);
            prop_assert_eq!(redacted.kinds.is_empty(), redacted.text == input);
        }
    }
}
