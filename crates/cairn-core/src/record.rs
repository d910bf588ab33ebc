//! The memory record's vocabulary: types with their decay tiers, confidence, trust, trust zones,
//! sensitivity and status (docs/design.md §3), each with the spellings users may type.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Largest body accepted by the write path, in bytes (after sanitizing).
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Largest title accepted, in characters.
pub const MAX_TITLE_CHARS: usize = 200;
/// Largest summary accepted, in characters.
pub const MAX_SUMMARY_CHARS: usize = 500;
/// Most tags on one record, and the longest tag.
pub const MAX_TAGS: usize = 32;
pub const MAX_TAG_CHARS: usize = 64;

/// An input value that is not one of the allowed spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {given:?}: expected one of {}", allowed.join(", "))]
pub struct UnknownValue {
    pub what: &'static str,
    pub given: String,
    pub allowed: Vec<&'static str>,
}

macro_rules! vocabulary {
    ($(#[$meta:meta])* $name:ident, $what:literal, [$($variant:ident => $text:literal $(| $alias:literal)*),+ $(,)?]) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }

        impl FromStr for $name {
            type Err = UnknownValue;
            fn from_str(given: &str) -> Result<Self, UnknownValue> {
                let lowered = given.trim().to_ascii_lowercase().replace('-', "_");
                match lowered.as_str() {
                    $($text $(| $alias)* => Ok($name::$variant),)+
                    _ => Err(UnknownValue {
                        what: $what,
                        given: given.to_string(),
                        allowed: vec![$($text),+],
                    }),
                }
            }
        }
    };
}

vocabulary!(
    /// What a record is; sets its decay tier, half-life and write-path defaults.
    MemoryType, "type", [
    Policy => "policy",
    Constraint => "constraint",
    Preference => "preference",
    Decision => "decision",
    Incident => "incident",
    Fact => "fact",
    Procedure => "procedure",
    Gotcha => "gotcha",
    Infra => "infra",
    Access => "access",
    Note => "note",
    Episode => "episode",
    State => "state",
]);

vocabulary!(
    /// How sure the claim is. `high`/`medium`/`low` are accepted spellings.
    Confidence, "confidence", [
    Confirmed => "confirmed" | "high",
    Reported => "reported" | "medium",
    Inferred => "inferred" | "low",
]);

vocabulary!(
    /// Where the record came from.
    Trust, "trust", [
    Stated => "stated",
    Imported => "imported",
    External => "external",
    Captured => "captured",
]);

vocabulary!(
    /// Who may see the record.
    TrustZone, "trust zone", [
    PrivateSelf => "private_self",
    TrustedCollaborator => "trusted_collaborator",
    OutsideContact => "outside_contact",
    PaidPublic => "paid_public",
]);

vocabulary!(
    /// How freely the record may travel.
    Sensitivity, "sensitivity", [
    PublicSafe => "public_safe",
    Normal => "normal",
    DoNotExport => "do_not_export",
]);

vocabulary!(
    /// Lifecycle state of a record.
    Status, "status", [
    Active => "active",
    Superseded => "superseded",
    Archived => "archived",
]);

/// Decay tier: A never decays, D decays in days.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum Tier {
    A,
    B,
    C,
    D,
}

impl Tier {
    /// Half-life of recency in days; `None` for tier A (recency is always 1.0).
    pub fn half_life_days(self) -> Option<f64> {
        match self {
            Tier::A => None,
            Tier::B => Some(180.0),
            Tier::C => Some(45.0),
            Tier::D => Some(4.0),
        }
    }

    /// The tier's weight in the stakes factor of the final score.
    pub fn weight(self) -> f64 {
        match self {
            Tier::A => 1.2,
            Tier::B => 1.0,
            Tier::C => 0.9,
            Tier::D => 0.8,
        }
    }
}

impl MemoryType {
    pub fn tier(self) -> Tier {
        use MemoryType::*;
        match self {
            Policy | Constraint | Preference | Decision | Incident => Tier::A,
            Fact | Procedure | Gotcha | Infra | Access => Tier::B,
            Note | Episode => Tier::C,
            State => Tier::D,
        }
    }

    /// Types whose claims are about a system's code and are stamped with the git revision.
    pub fn stamped_with_commit(self) -> bool {
        matches!(
            self,
            MemoryType::Gotcha | MemoryType::State | MemoryType::Incident
        )
    }

    /// Default days until the claim must be re-verified.
    pub fn default_review_days(self) -> Option<i64> {
        match self {
            MemoryType::Infra | MemoryType::Access => Some(30),
            _ => None,
        }
    }

    /// Guardrails: binding rules that appear in every brief and are never ranked out.
    pub fn is_guardrail(self) -> bool {
        matches!(self, MemoryType::Policy | MemoryType::Constraint)
    }
}

impl Confidence {
    /// Multiplier in the stakes factor.
    pub fn weight(self) -> f64 {
        match self {
            Confidence::Confirmed => 1.1,
            Confidence::Reported => 1.0,
            Confidence::Inferred => 0.85,
        }
    }
}

impl TrustZone {
    /// Whether a record of `record_zone` and `sensitivity` may be shown to a reader in `self`.
    ///
    /// `private_self` sees everything; `trusted_collaborator` all but `do_not_export`;
    /// `outside_contact` and `paid_public` only `public_safe` records not of `private_self` origin.
    pub fn may_see(self, record_zone: TrustZone, sensitivity: Sensitivity) -> bool {
        match self {
            TrustZone::PrivateSelf => true,
            TrustZone::TrustedCollaborator => sensitivity != Sensitivity::DoNotExport,
            TrustZone::OutsideContact | TrustZone::PaidPublic => {
                sensitivity == Sensitivity::PublicSafe && record_zone != TrustZone::PrivateSelf
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_parse_and_unknown_values_name_the_allowed_ones() {
        assert_eq!("high".parse::<Confidence>().unwrap(), Confidence::Confirmed);
        assert_eq!("LOW".parse::<Confidence>().unwrap(), Confidence::Inferred);
        assert_eq!(
            "do-not-export".parse::<Sensitivity>().unwrap(),
            Sensitivity::DoNotExport
        );
        let err = "lore".parse::<MemoryType>().unwrap_err();
        let message = err.to_string();
        assert!(message.contains("unknown type \"lore\""), "{message}");
        assert!(message.contains("gotcha"), "{message}");
    }

    #[test]
    fn every_type_round_trips_through_its_name() {
        for t in MemoryType::ALL {
            assert_eq!(t.as_str().parse::<MemoryType>().unwrap(), *t);
        }
    }

    #[test]
    fn tiers_follow_the_design_table() {
        assert_eq!(MemoryType::Decision.tier(), Tier::A);
        assert_eq!(MemoryType::Gotcha.tier(), Tier::B);
        assert_eq!(MemoryType::Episode.tier(), Tier::C);
        assert_eq!(MemoryType::State.tier(), Tier::D);
        assert!(MemoryType::Incident.stamped_with_commit());
        assert!(!MemoryType::Decision.stamped_with_commit());
        assert_eq!(MemoryType::Access.default_review_days(), Some(30));
    }

    #[test]
    fn zones_see_only_what_they_may() {
        use Sensitivity::*;
        use TrustZone::*;
        assert!(PrivateSelf.may_see(PrivateSelf, DoNotExport));
        assert!(!TrustedCollaborator.may_see(PrivateSelf, DoNotExport));
        assert!(TrustedCollaborator.may_see(PrivateSelf, Normal));
        assert!(!OutsideContact.may_see(PrivateSelf, PublicSafe));
        assert!(OutsideContact.may_see(TrustedCollaborator, PublicSafe));
        assert!(!PaidPublic.may_see(TrustedCollaborator, Normal));
    }
}
