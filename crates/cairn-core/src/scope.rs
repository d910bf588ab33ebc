//! Scopes: paths that nest on `:` under `global`, with inward-only visibility (docs/design.md §2).
//!
//! A recall in `channel:deploy:prod` sees that scope and its ancestors up to `global`, never a
//! sibling or a child.

use std::fmt;

/// The root scope every other scope nests under.
pub const GLOBAL: &str = "global";
const MAX_SCOPE_CHARS: usize = 200;

/// A validated scope path, stored without a leading `global:`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scope(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid scope {given:?}: {reason}; a scope is `global` or segments of letters, digits, `-`, `_`, `.` joined by `:` (e.g. `channel:deploy`)"
)]
pub struct InvalidScope {
    pub given: String,
    pub reason: &'static str,
}

impl Scope {
    pub fn global() -> Scope {
        Scope(GLOBAL.to_string())
    }

    pub fn parse(given: &str) -> Result<Scope, InvalidScope> {
        let invalid = |reason| InvalidScope {
            given: given.to_string(),
            reason,
        };
        let trimmed = given.trim().to_lowercase();
        if trimmed.is_empty() {
            return Err(invalid("it is empty"));
        }
        if trimmed.chars().count() > MAX_SCOPE_CHARS {
            return Err(invalid("it is longer than 200 characters"));
        }
        let path = match trimmed.strip_prefix("global:") {
            Some(rest) => rest.to_string(),
            None => trimmed,
        };
        for segment in path.split(':') {
            if segment.is_empty() {
                return Err(invalid("it has an empty segment"));
            }
            if !segment
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
            {
                return Err(invalid("it has a character that is not allowed"));
            }
        }
        if path != GLOBAL && path.split(':').any(|segment| segment == GLOBAL) {
            return Err(invalid("`global` may only be the whole scope"));
        }
        Ok(Scope(path))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// This scope and every ancestor up to `global`, outermost first.
    pub fn chain(&self) -> Vec<String> {
        let mut chain = vec![GLOBAL.to_string()];
        if self.0 == GLOBAL {
            return chain;
        }
        let mut prefix = String::new();
        for segment in self.0.split(':') {
            if !prefix.is_empty() {
                prefix.push(':');
            }
            prefix.push_str(segment);
            chain.push(prefix.clone());
        }
        chain
    }

    /// Whether a record stored in `stored` is visible from this scope.
    pub fn sees(&self, stored: &Scope) -> bool {
        stored.0 == GLOBAL
            || stored.0 == self.0
            || self
                .0
                .strip_prefix(stored.0.as_str())
                .is_some_and(|rest| rest.starts_with(':'))
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(scope: &str) -> Vec<String> {
        Scope::parse(scope).unwrap().chain()
    }

    #[test]
    fn chains_run_from_global_inward() {
        assert_eq!(chain("global"), ["global"]);
        assert_eq!(chain("channel"), ["global", "channel"]);
        assert_eq!(
            chain("channel:deploy:prod"),
            ["global", "channel", "channel:deploy", "channel:deploy:prod"]
        );
        assert_eq!(chain("global:channel"), ["global", "channel"]);
    }

    #[test]
    fn visibility_is_inward_only() {
        let prod = Scope::parse("channel:deploy:prod").unwrap();
        let parse = |s| Scope::parse(s).unwrap();
        assert!(prod.sees(&parse("global")));
        assert!(prod.sees(&parse("channel:deploy")));
        assert!(prod.sees(&parse("channel:deploy:prod")));
        assert!(!prod.sees(&parse("channel:deploy:staging")));
        assert!(!prod.sees(&parse("channel:deploy:prod:eu")));
        assert!(!prod.sees(&parse("channel:dep")));
    }

    #[test]
    fn bad_scopes_are_refused_with_the_rule() {
        for bad in ["", "a::b", "a:", "a b", "x:global", "a;drop"] {
            let err = Scope::parse(bad).unwrap_err();
            assert!(err.to_string().contains("invalid scope"), "{bad}: {err}");
        }
        assert_eq!(
            Scope::parse(" Channel:Deploy ").unwrap().as_str(),
            "channel:deploy"
        );
    }
}
