//! Access tokens of the service (`cairn token`, `cairn serve`).
//!
//! A token is `cairn_` followed by 64 hex digits: 256 random bits from the operating system.
//! Only its SHA-256 is stored; the secret is shown once, when it is made. Authenticating hashes
//! what the client sent, looks the hash up and compares it again in constant time. A token that
//! is missing, wrong, revoked or expired is the same error ([`EngineError::Unauthorized`]),
//! which says nothing about which. A token is read at every request, so a revocation is
//! effective at once on a running server.

use crate::{Engine, EngineError, Result};
use cairn_core::time::{format_ts, parse_time_ahead};
use cairn_store::TokenRow;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a token may do.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Recall, show, list, brief, stats, export.
    Read,
    /// Read, plus every change to records (remember, update, forget, restore, verify, import).
    Write,
    /// Write, plus maintenance (doctor with repair).
    Admin,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Read, Role::Write, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == text)
    }

    /// Whether this role allows what `needed` allows.
    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }
}

/// The prefix every token starts with (so a leaked one is recognisable in a scan).
pub const TOKEN_PREFIX: &str = "cairn_";

/// A token to make.
#[derive(Debug, Clone)]
pub struct NewToken {
    pub name: String,
    /// `None`: every project.
    pub project: Option<String>,
    pub role: Role,
    /// When it stops working: RFC 3339, a date, or an age ahead (`30d`); `None` never.
    pub expires: Option<String>,
}

/// A token as listed: everything but its secret (which is not kept).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TokenInfo {
    pub name: String,
    /// `null`: every project.
    pub project: Option<String>,
    pub role: Role,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub revoked_at: Option<String>,
    /// `active`, `expired` or `revoked`.
    pub state: String,
}

/// A token just made: the only time its secret exists outside the client.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CreatedToken {
    pub token: String,
    #[serde(flatten)]
    pub info: TokenInfo,
}

/// What an authenticated request may see and do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The token's name: the actor of everything the request writes.
    pub name: String,
    /// `None`: every project.
    pub project: Option<String>,
    pub role: Role,
}

fn hash(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Equality whose time does not depend on where two equal-length byte strings differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

fn info(row: &TokenRow, now: DateTime<Utc>) -> Result<TokenInfo> {
    let role = Role::parse(&row.role).ok_or_else(|| {
        EngineError::Internal(format!(
            "token {:?} has an unknown role {:?} in the brain; revoke it and make another",
            row.name, row.role
        ))
    })?;
    let now_text = format_ts(now);
    let state = if row.revoked_at.is_some() {
        "revoked"
    } else if row
        .expires_at
        .as_deref()
        .is_some_and(|at| at <= now_text.as_str())
    {
        "expired"
    } else {
        "active"
    };
    Ok(TokenInfo {
        name: row.name.clone(),
        project: row.project.clone(),
        role,
        created_at: row.created_at.clone(),
        expires_at: row.expires_at.clone(),
        revoked_at: row.revoked_at.clone(),
        state: state.to_string(),
    })
}

fn check_name(name: &str) -> Result<&str> {
    let name = name.trim();
    if name.is_empty() {
        return Err(EngineError::Empty {
            what: "the token name",
        });
    }
    if name.chars().count() > 100 || name.chars().any(char::is_control) {
        return Err(EngineError::Invalid(format!(
            "token name {name:?} is refused: at most 100 characters, no control characters; no token was made"
        )));
    }
    Ok(name)
}

impl Engine {
    /// Makes a token. Its secret is in the answer and nowhere else.
    pub fn token_create(&mut self, request: &NewToken) -> Result<CreatedToken> {
        self.ensure_writable("token create")?;
        let name = check_name(&request.name)?.to_string();
        let project = match request.project.as_deref().map(str::trim) {
            Some("") => {
                return Err(EngineError::Empty {
                    what: "the token's project",
                });
            }
            other => other.map(str::to_string),
        };
        let now = self.now();
        let expires_at = request
            .expires
            .as_deref()
            .map(|text| parse_time_ahead(text, now))
            .transpose()?;
        if let Some(at) = expires_at
            && at <= now
        {
            return Err(EngineError::Invalid(format!(
                "--expires {} is not in the future; no token was made — give an age ahead such as 30d",
                format_ts(at)
            )));
        }
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|error| {
            EngineError::Internal(format!(
                "the operating system gave no random bytes ({error}); no token was made"
            ))
        })?;
        let secret = format!("{TOKEN_PREFIX}{}", hex::encode(bytes));
        let secret_hash = hash(&secret);
        let created_at = format_ts(now);
        let expires_text = expires_at.map(format_ts);
        let inserted = self.store.write(|tx| {
            tx.insert_token(
                &name,
                &secret_hash,
                project.as_deref(),
                request.role.as_str(),
                &created_at,
                expires_text.as_deref(),
            )
        })?;
        if inserted.is_none() {
            return Err(EngineError::Invalid(format!(
                "a token named {name:?} already exists; no token was made — pick another name, or `cairn token revoke {name}` first"
            )));
        }
        Ok(CreatedToken {
            token: secret,
            info: TokenInfo {
                name,
                project,
                role: request.role,
                created_at,
                expires_at: expires_text,
                revoked_at: None,
                state: "active".to_string(),
            },
        })
    }

    /// Every token (revoked and expired ones too), oldest first, without secrets.
    pub fn token_list(&self) -> Result<Vec<TokenInfo>> {
        let now = self.now();
        self.store
            .reader()?
            .tokens()?
            .iter()
            .map(|row| info(row, now))
            .collect()
    }

    /// Revokes the live token called `name`, at once for every server on this brain.
    pub fn token_revoke(&mut self, name: &str) -> Result<TokenInfo> {
        self.ensure_writable("token revoke")?;
        let now = self.now();
        let at = format_ts(now);
        let name = name.trim();
        match self.store.write(|tx| tx.revoke_token(name, &at))? {
            Some(row) => info(&row, now),
            None => Err(EngineError::Invalid(format!(
                "no active token named {name:?}; nothing was revoked — `cairn token list` shows the names"
            ))),
        }
    }

    /// Who `secret` is, or [`EngineError::Unauthorized`] (missing, wrong, revoked and expired
    /// tokens alike).
    pub fn authenticate(&self, secret: &str) -> Result<Grant> {
        let secret = secret.trim();
        if !secret.starts_with(TOKEN_PREFIX) || secret.len() != TOKEN_PREFIX.len() + 64 {
            return Err(EngineError::Unauthorized);
        }
        let secret_hash = hash(secret);
        let Some(row) = self.store.reader()?.token_by_hash(&secret_hash)? else {
            return Err(EngineError::Unauthorized);
        };
        if !constant_time_eq(&row.secret_hash, &secret_hash) {
            return Err(EngineError::Unauthorized);
        }
        let info = info(&row, self.now())?;
        if info.state != "active" {
            return Err(EngineError::Unauthorized);
        }
        Ok(Grant {
            name: info.name,
            project: info.project,
            role: info.role,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_compares_whole_strings() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }

    #[test]
    fn roles_are_ordered_by_what_they_allow() {
        assert!(Role::Admin.allows(Role::Write));
        assert!(Role::Write.allows(Role::Read));
        assert!(!Role::Read.allows(Role::Write));
        assert!(!Role::Write.allows(Role::Admin));
    }
}
