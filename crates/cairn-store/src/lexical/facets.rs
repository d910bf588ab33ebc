//! What recall's filters and conversations read of each indexed record, kept beside the
//! in-memory full-text index: project, scope, type, status, creation and retirement times,
//! sensitivity and trust zone. With them a search's filters, `filter_ids` and an episode's
//! conversation neighbours are answered without reading `memories` (each such read is a B-tree
//! lookup whose pages a busy service faults in again after every commit: a quarter of the
//! server's CPU under the lexical mix, issue 14).
//!
//! Exactly the store's SQL, or no answer: strings are compared as SQLite compares them
//! (byte order), and a time is kept as the digits of its canonical form
//! (`YYYY-MM-DDTHH:MM:SSZ`, what cairn writes), whose order is the text's. A record whose time
//! is in another form, a bound in another form, or a record the index does not hold is left to
//! SQL. Kept only for a brain whose change log records these columns' changes (schema v18,
//! `MIGRATION_FILTER_CHANGES`).

use crate::search::{EpisodeNeighbours, LexicalHit, LexicalQuery};
use cairn_core::record::TrustZone;
use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;

/// The filter columns of one record as read from `memories` (`None`: not text).
#[derive(Debug, Clone, Default)]
pub(super) struct FacetText {
    pub project: Option<String>,
    pub scope: Option<String>,
    pub kind: Option<String>,
    pub status: Option<String>,
    pub created_at: Option<String>,
    pub retired_at: Option<String>,
    pub sensitivity: Option<String>,
    pub trust_zone: Option<String>,
}

/// The columns of `memories` a [`FacetText`] is read from, in its order (after the four
/// full-text columns).
pub(super) const FACET_COLUMNS: &str =
    "project, scope, type, status, created_at, retired_at, sensitivity, trust_zone";

impl FacetText {
    /// Reads the [`FACET_COLUMNS`] starting at column `from`.
    pub(super) fn read(row: &rusqlite::Row<'_>, from: usize) -> rusqlite::Result<FacetText> {
        let text = |at: usize| -> rusqlite::Result<Option<String>> {
            Ok(match row.get_ref(from + at)? {
                rusqlite::types::ValueRef::Text(bytes) => {
                    std::str::from_utf8(bytes).ok().map(str::to_string)
                }
                _ => None,
            })
        };
        Ok(FacetText {
            project: text(0)?,
            scope: text(1)?,
            kind: text(2)?,
            status: text(3)?,
            created_at: text(4)?,
            retired_at: text(5)?,
            sensitivity: text(6)?,
            trust_zone: text(7)?,
        })
    }
}

/// A string column's value, as its number among the strings seen.
type Word = u32;
/// Not held: the record is not in the index, or a column was not text.
const UNKNOWN: Word = u32::MAX;
/// A string no record holds (a filter's value never seen).
const UNSEEN: Word = u32::MAX - 1;

/// A time as the digits of `YYYY-MM-DDTHH:MM:SSZ` (order-preserving), or one of these.
type Time = u64;
const NO_TIME: Time = u64::MAX;
const OTHER_FORM: Time = u64::MAX - 1;

#[derive(Debug, Clone, Copy)]
struct Facets {
    project: Word,
    scope: Word,
    kind: Word,
    status: Word,
    sensitivity: Word,
    trust_zone: Word,
    created: Time,
    retired: Time,
}

const NOT_HELD: Facets = Facets {
    project: UNKNOWN,
    scope: UNKNOWN,
    kind: UNKNOWN,
    status: UNKNOWN,
    sensitivity: UNKNOWN,
    trust_zone: UNKNOWN,
    created: OTHER_FORM,
    retired: OTHER_FORM,
};

/// The facets of every indexed record, and the episodes of each conversation in order.
pub(super) struct Kept {
    words: HashMap<Box<str>, Word>,
    /// The word of [`EPISODE`] ([`UNSEEN`] until a record has that type).
    episode: Word,
    /// Per record id (the index's key).
    facets: Vec<Facets>,
    /// Per (project, scope): its episodes by (creation time, id).
    conversations: HashMap<(Word, Word), BTreeSet<(Time, u32)>>,
    /// Episodes whose creation time is not in the canonical form: while there are any, their
    /// conversations' order is not known here and neighbours are left to SQL.
    odd_episodes: usize,
}

/// The type whose records make conversations.
const EPISODE: &str = "episode";

impl Default for Kept {
    fn default() -> Kept {
        Kept {
            words: HashMap::new(),
            episode: UNSEEN,
            facets: Vec::new(),
            conversations: HashMap::new(),
            odd_episodes: 0,
        }
    }
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kept")
            .field("words", &self.words.len())
            .field("conversations", &self.conversations.len())
            .finish_non_exhaustive()
    }
}

/// A query's filters with their values as [`Word`]s and [`Time`]s.
pub(super) struct Compiled {
    projects: Vec<Word>,
    scopes: Option<Vec<Word>>,
    kinds: Option<Vec<Word>>,
    include_archived: bool,
    as_of: Option<Time>,
    since: Option<Time>,
    until: Option<Time>,
    visible_to: Option<TrustZone>,
    archived: Word,
    do_not_export: Word,
    public_safe: Word,
    private_self: Word,
}

impl Kept {
    fn word(&mut self, text: Option<&str>) -> Word {
        let Some(text) = text else {
            return UNKNOWN;
        };
        if let Some(&word) = self.words.get(text) {
            return word;
        }
        let word = self.words.len() as Word;
        self.words.insert(text.into(), word);
        if text == EPISODE {
            self.episode = word;
        }
        word
    }

    fn seen(&self, text: &str) -> Word {
        self.words.get(text).copied().unwrap_or(UNSEEN)
    }

    /// Keeps the facets of record `key` (not kept yet).
    pub(super) fn add(&mut self, key: u32, text: &FacetText) {
        let facets = Facets {
            project: self.word(text.project.as_deref()),
            scope: self.word(text.scope.as_deref()),
            kind: self.word(text.kind.as_deref()),
            status: self.word(text.status.as_deref()),
            sensitivity: self.word(text.sensitivity.as_deref()),
            trust_zone: self.word(text.trust_zone.as_deref()),
            created: time(text.created_at.as_deref()),
            retired: time(text.retired_at.as_deref()),
        };
        let at = key as usize;
        if self.facets.len() <= at {
            self.facets.resize(at + 1, NOT_HELD);
        }
        self.facets[at] = facets;
        self.file_episode(key, &facets, true);
    }

    /// Forgets the facets of record `key` (nothing when none are kept).
    pub(super) fn remove(&mut self, key: u32) {
        let Some(facets) = self.facets.get(key as usize).copied() else {
            return;
        };
        if facets.project == UNKNOWN {
            return;
        }
        self.file_episode(key, &facets, false);
        self.facets[key as usize] = NOT_HELD;
    }

    /// Files an episode in its conversation, or takes it out.
    fn file_episode(&mut self, key: u32, facets: &Facets, add: bool) {
        if facets.kind != self.episode {
            return;
        }
        if facets.created >= OTHER_FORM || facets.project == UNKNOWN || facets.scope == UNKNOWN {
            if add {
                self.odd_episodes += 1;
            } else {
                self.odd_episodes -= 1;
            }
            return;
        }
        let conversation = (facets.project, facets.scope);
        if add {
            self.conversations
                .entry(conversation)
                .or_default()
                .insert((facets.created, key));
        } else if let Some(episodes) = self.conversations.get_mut(&conversation) {
            episodes.remove(&(facets.created, key));
            if episodes.is_empty() {
                self.conversations.remove(&conversation);
            }
        }
    }

    /// Gives back spare capacity after a build.
    pub(super) fn shrink(&mut self) {
        self.facets.shrink_to_fit();
        self.words.shrink_to_fit();
    }

    /// `query`'s filters in the kept form; `None` when a time bound is not in the canonical
    /// form (SQL answers then).
    pub(super) fn compile(&self, query: &LexicalQuery<'_>) -> Option<Compiled> {
        let bound = |at: Option<&str>| -> Option<Option<Time>> {
            match at {
                None => Some(None),
                Some(at) => match time(Some(at)) {
                    OTHER_FORM => None,
                    kept => Some(Some(kept)),
                },
            }
        };
        Some(Compiled {
            projects: query
                .projects
                .iter()
                .map(|p| self.seen(p.as_deref().unwrap_or("")))
                .collect(),
            scopes: query
                .scopes
                .map(|scopes| scopes.iter().map(|s| self.seen(s)).collect()),
            kinds: query
                .types
                .map(|types| types.iter().map(|t| self.seen(t.as_str())).collect()),
            include_archived: query.include_archived,
            as_of: bound(query.as_of)?,
            since: bound(query.since)?,
            until: bound(query.until)?,
            visible_to: query.visible_to,
            archived: self.seen("archived"),
            do_not_export: self.seen("do_not_export"),
            public_safe: self.seen("public_safe"),
            private_self: self.seen("private_self"),
        })
    }

    /// Whether record `key` passes `filter` (`search::push_filters`, clause by clause);
    /// `None` when it cannot be told here.
    pub(super) fn passes(&self, key: u32, filter: &Compiled) -> Option<bool> {
        let f = self.facets.get(key as usize)?;
        if [
            f.project,
            f.scope,
            f.kind,
            f.status,
            f.sensitivity,
            f.trust_zone,
        ]
        .contains(&UNKNOWN)
        {
            return None;
        }
        if !filter.projects.contains(&f.project) {
            return Some(false);
        }
        if let Some(scopes) = &filter.scopes
            && !scopes.contains(&f.scope)
        {
            return Some(false);
        }
        if let Some(kinds) = &filter.kinds
            && !kinds.contains(&f.kind)
        {
            return Some(false);
        }
        match (filter.as_of, filter.include_archived) {
            (_, true) => {}
            (Some(at), false) => {
                if f.status == filter.archived {
                    match f.retired {
                        NO_TIME => return Some(false),
                        OTHER_FORM => return None,
                        retired if retired <= at => return Some(false),
                        _ => {}
                    }
                }
            }
            (None, false) => {
                if f.status == filter.archived {
                    return Some(false);
                }
            }
        }
        if filter.as_of.is_some() || filter.since.is_some() || filter.until.is_some() {
            if f.created >= OTHER_FORM {
                return None;
            }
            if filter.as_of.is_some_and(|at| f.created > at)
                || filter.since.is_some_and(|at| f.created < at)
                || filter.until.is_some_and(|at| f.created > at)
            {
                return Some(false);
            }
        }
        let visible = match filter.visible_to {
            None | Some(TrustZone::PrivateSelf) => true,
            Some(TrustZone::TrustedCollaborator) => f.sensitivity != filter.do_not_export,
            Some(TrustZone::OutsideContact | TrustZone::PaidPublic) => {
                f.sensitivity == filter.public_safe && f.trust_zone != filter.private_self
            }
        };
        Some(visible)
    }

    /// The first `limit` records of `ranked` (in ranking order) that pass `filter`, taken as
    /// `lexical::filter_ranked` takes them from SQL: the best `window` sorted first, the rest
    /// only when too few passed. `None` when a record met on the way cannot be told here
    /// (`ranked` is then in another order, the same records).
    pub(super) fn filter_ranked(
        &self,
        ranked: &mut [(f64, u32)],
        filter: &Compiled,
        limit: usize,
        window: usize,
        stronger: fn(&(f64, u32), &(f64, u32)) -> std::cmp::Ordering,
    ) -> Option<Vec<LexicalHit>> {
        let mut hits = Vec::with_capacity(limit);
        let keep = |chunk: &[(f64, u32)], hits: &mut Vec<LexicalHit>| -> Option<()> {
            for (strength, id) in chunk {
                if hits.len() >= limit {
                    break;
                }
                if self.passes(*id, filter)? {
                    hits.push(LexicalHit {
                        id: i64::from(*id),
                        strength: *strength,
                    });
                }
            }
            Some(())
        };
        let best_len = ranked.len().min(window);
        if ranked.len() > window {
            ranked.select_nth_unstable_by(window - 1, stronger);
        }
        let (best, rest) = ranked.split_at_mut(best_len);
        best.sort_unstable_by(stronger);
        keep(best, &mut hits)?;
        if hits.len() < limit && !rest.is_empty() {
            rest.sort_unstable_by(stronger);
            keep(rest, &mut hits)?;
        }
        Some(hits)
    }

    /// `Reader::episode_neighbours` for one record: `Some(None)` when it is not an episode,
    /// `None` when it cannot be told here (not held, a time in another form, an episode of
    /// another form anywhere).
    pub(super) fn neighbours(
        &self,
        key: u32,
        window_secs: i64,
    ) -> Option<Option<EpisodeNeighbours>> {
        if self.odd_episodes > 0 {
            return None;
        }
        let f = self.facets.get(key as usize)?;
        if f.kind == UNKNOWN {
            return None;
        }
        if f.kind != self.episode {
            return Some(None);
        }
        let (low, high) = shifted(f.created, window_secs.max(0))?;
        let episodes = self.conversations.get(&(f.project, f.scope))?;
        let here = (f.created, key);
        let previous = episodes
            .range((Bound::Included((low, 0)), Bound::Excluded(here)))
            .next_back()
            .map(|(_, id)| i64::from(*id));
        let next = episodes
            .range((Bound::Excluded(here), Bound::Included((high, u32::MAX))))
            .next()
            .map(|(_, id)| i64::from(*id));
        Some(Some((i64::from(key), previous, next)))
    }
}

/// `at` as the digits of its canonical form, [`NO_TIME`] for none, [`OTHER_FORM`] for any
/// other form.
fn time(at: Option<&str>) -> Time {
    let Some(at) = at else {
        return NO_TIME;
    };
    let bytes = at.as_bytes();
    // YYYY-MM-DDTHH:MM:SSZ
    const SHAPE: &[u8; 20] = b"0000-00-00T00:00:00Z";
    if bytes.len() != SHAPE.len() {
        return OTHER_FORM;
    }
    let mut digits: u64 = 0;
    for (&byte, &shape) in bytes.iter().zip(SHAPE) {
        if shape == b'0' {
            if !byte.is_ascii_digit() {
                return OTHER_FORM;
            }
            digits = digits * 10 + u64::from(byte - b'0');
        } else if byte != shape {
            return OTHER_FORM;
        }
    }
    digits
}

/// The bounds of the conversation window around `created` as SQLite's
/// `strftime('%Y-%m-%dT%H:%M:%SZ', created, '∓N seconds')` gives them, kept as times; `None`
/// when the time is not a valid date here or a bound leaves the years 0000–9999.
fn shifted(created: Time, window_secs: i64) -> Option<(Time, Time)> {
    use chrono::{Datelike, Timelike};
    if created >= OTHER_FORM {
        return None;
    }
    let part = |from: u32, digits: u32| (created / 10u64.pow(from) % 10u64.pow(digits)) as u32;
    let at = chrono::NaiveDate::from_ymd_opt(part(10, 4) as i32, part(8, 2), part(6, 2))?
        .and_hms_opt(part(4, 2), part(2, 2), part(0, 2))?;
    let window = chrono::TimeDelta::try_seconds(window_secs)?;
    let kept = |at: chrono::NaiveDateTime| -> Option<Time> {
        let year = u64::try_from(at.year()).ok().filter(|year| *year <= 9999)?;
        Some(
            [at.month(), at.day(), at.hour(), at.minute(), at.second()]
                .into_iter()
                .fold(year, |digits, field| digits * 100 + u64::from(field)),
        )
    };
    Some((
        kept(at.checked_sub_signed(window)?)?,
        kept(at.checked_add_signed(window)?)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_keep_the_order_of_their_text_and_other_forms_are_told_apart() {
        let texts = [
            "0999-12-31T23:59:59Z",
            "2024-02-29T00:00:00Z",
            "2024-02-29T00:00:01Z",
            "2026-12-07T22:51:19Z",
        ];
        for pair in texts.windows(2) {
            assert!(time(Some(pair[0])) < time(Some(pair[1])), "{pair:?}");
        }
        assert_eq!(time(None), NO_TIME);
        for other in [
            "2026-12-07T22:51:19.5Z",
            "2026-12-07 22:51:19",
            "2026-12-07T22:51:19+00:00",
            "2026-12-07",
            "",
            "２026-12-07T22:51:19Z",
        ] {
            assert_eq!(time(Some(other)), OTHER_FORM, "{other}");
        }
    }

    #[test]
    fn the_window_is_strftimes() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for (at, secs) in [
            ("2026-12-07T22:51:19Z", 300),
            ("2024-02-29T00:02:00Z", 86_400 * 365),
            ("2026-01-01T00:00:00Z", 1),
            ("2026-01-01T00:00:00Z", 0),
        ] {
            let (low, high): (String, String) = conn
                .query_row(
                    "SELECT strftime('%Y-%m-%dT%H:%M:%SZ', ?1, ?2), strftime('%Y-%m-%dT%H:%M:%SZ', ?1, ?3)",
                    rusqlite::params![at, format!("-{secs} seconds"), format!("+{secs} seconds")],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .unwrap();
            assert_eq!(
                shifted(time(Some(at)), secs),
                Some((time(Some(&low)), time(Some(&high)))),
                "{at} {secs}"
            );
        }
        // Not a date (SQLite would roll it over; left to SQL here).
        assert_eq!(shifted(time(Some("2026-02-30T00:00:00Z")), 5), None);
    }
}
