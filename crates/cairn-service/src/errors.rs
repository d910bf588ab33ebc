//! One table from an error's [`ErrorKind`] to what each adapter says: the CLI's exit code, the
//! MCP tool error's label, the HTTP status. Adapters match the kind, never the message.

use cairn_engine::ErrorKind;

/// Exit code 3: the write needs a decision.
pub const EXIT_REFUSED: u8 = 3;

/// The CLI's exit code (1 error, 3 refused; 2, a usage error, comes from clap before any call).
pub fn exit_code(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Refused => EXIT_REFUSED,
        _ => 1,
    }
}

/// The HTTP status of an error.
pub fn http_status(kind: ErrorKind) -> u16 {
    match kind {
        ErrorKind::Invalid => 400,
        ErrorKind::Unauthorized => 401,
        ErrorKind::Forbidden => 403,
        ErrorKind::NotFound => 404,
        // The write needs a decision (a near duplicate, a contradiction), or the brain refuses
        // writes: the request conflicts with the state of the server.
        ErrorKind::Refused | ErrorKind::ReadOnly => 409,
        // Worth retrying later: another writer held the lock past the busy timeout, or the
        // brain is missing, or its schema needs another binary.
        ErrorKind::Locked | ErrorKind::Missing | ErrorKind::Schema => 503,
        ErrorKind::DiskFull => 507,
        ErrorKind::Damaged | ErrorKind::Other => 500,
    }
}

/// A short stable label: the `error` field of an MCP tool error's structured content and the
/// last segment of a problem document's `type`.
pub fn label(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Damaged => "damaged",
        ErrorKind::Missing => "missing",
        ErrorKind::Locked => "locked",
        ErrorKind::ReadOnly => "read-only",
        ErrorKind::Schema => "schema",
        ErrorKind::DiskFull => "disk-full",
        ErrorKind::NotFound => "not-found",
        ErrorKind::Refused => "refused",
        ErrorKind::Invalid => "invalid",
        ErrorKind::Unauthorized => "unauthorized",
        ErrorKind::Forbidden => "forbidden",
        ErrorKind::Other => "internal",
    }
}

/// Every kind, in the order of [`ErrorKind`].
pub const KINDS: [ErrorKind; 12] = [
    ErrorKind::Damaged,
    ErrorKind::Missing,
    ErrorKind::Locked,
    ErrorKind::ReadOnly,
    ErrorKind::Schema,
    ErrorKind::DiskFull,
    ErrorKind::NotFound,
    ErrorKind::Refused,
    ErrorKind::Invalid,
    ErrorKind::Unauthorized,
    ErrorKind::Forbidden,
    ErrorKind::Other,
];

/// The kind a label names (the inverse of [`label`]): how a client reads a problem document's
/// `type`. `None` for a label of the HTTP layer alone (`too-large`, `timeout`, `no-route`, …).
pub fn kind_of_label(text: &str) -> Option<ErrorKind> {
    KINDS.into_iter().find(|kind| label(*kind) == text)
}

/// The kind an error status stands for when the answer names none (a reverse proxy's page, or
/// a label of the HTTP layer): a refused request is invalid, a busy server is locked.
pub fn kind_of_status(status: u16) -> ErrorKind {
    match status {
        401 => ErrorKind::Unauthorized,
        403 => ErrorKind::Forbidden,
        404 => ErrorKind::NotFound,
        409 => ErrorKind::Refused,
        503 => ErrorKind::Locked,
        507 => ErrorKind::DiskFull,
        400..=499 => ErrorKind::Invalid,
        _ => ErrorKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [ErrorKind; 12] = KINDS;

    #[test]
    fn every_kind_has_an_error_status_and_a_distinct_label() {
        let mut labels: Vec<&str> = ALL.iter().map(|k| label(*k)).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), ALL.len());
        for kind in ALL {
            assert!((400..600).contains(&http_status(kind)), "{kind:?}");
            assert!(exit_code(kind) != 0, "{kind:?}");
        }
        assert_eq!(exit_code(ErrorKind::Refused), 3);
    }

    #[test]
    fn a_label_reads_back_as_its_kind_and_a_status_as_the_kind_that_answers_it() {
        for kind in ALL {
            assert_eq!(kind_of_label(label(kind)), Some(kind), "{kind:?}");
            // Where one kind alone answers a status, the status reads back as that kind.
            let same_status: Vec<ErrorKind> = ALL
                .into_iter()
                .filter(|k| http_status(*k) == http_status(kind))
                .collect();
            if same_status.len() == 1 {
                assert_eq!(kind_of_status(http_status(kind)), kind, "{kind:?}");
            }
        }
        assert_eq!(kind_of_label("too-large"), None);
        assert_eq!(kind_of_status(413), ErrorKind::Invalid);
        assert_eq!(kind_of_status(502), ErrorKind::Other);
    }
}
