//! Timestamps: one canonical text form (RFC 3339, UTC, whole seconds, `Z`), which sorts
//! lexicographically in time order so the store can compare them as text.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, SecondsFormat, Utc};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot read {given:?} as a time: use RFC 3339 (2026-11-30T14:05:00Z), a date (2026-11-30) or a relative age (7d, 12h)"
)]
pub struct InvalidTime {
    pub given: String,
}

/// The canonical text form of a time.
pub fn format_ts(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Reads RFC 3339, a bare date (midnight UTC), `YYYY-MM-DD HH:MM[:SS]` (UTC), or a relative age
/// before `now` such as `30d`, `12h`, `45m`, `2w`. Times outside the years 0000–9999 are refused:
/// their text would not sort in time order, and a day added to one could overflow.
pub fn parse_time(given: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, InvalidTime> {
    let invalid = || InvalidTime {
        given: given.to_string(),
    };
    parse_any_time(given.trim(), now)
        .filter(|at| (0..=9999).contains(&at.year()))
        .ok_or_else(invalid)
}

fn parse_any_time(text: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Some(at.with_timezone(&Utc));
    }
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Some(date.and_hms_opt(0, 0, 0)?.and_utc());
    }
    for format in ["%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S"] {
        if let Ok(at) = NaiveDateTime::parse_from_str(text, format) {
            return Some(at.and_utc());
        }
    }
    let unit = text.chars().last()?;
    let amount = text[..text.len() - unit.len_utf8()].parse::<i64>().ok()?;
    let seconds = match unit {
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        'w' => 7 * 86_400,
        _ => return None,
    };
    // An age too large for a time span, or reaching before the first representable time, is
    // not a time (`99999999999d` used to panic: fuzz/regressions/jsonl_line/).
    let age = chrono::Duration::try_seconds(amount.checked_mul(seconds)?)?;
    now.checked_sub_signed(age)
}

/// Like `parse_time`, but a relative age counts forward from `now` (`--expires 14d` means in
/// two weeks, not two weeks ago).
pub fn parse_time_ahead(given: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, InvalidTime> {
    let at = parse_time(given, now)?;
    let text = given.trim();
    let relative = text
        .chars()
        .last()
        .is_some_and(|c| matches!(c, 'm' | 'h' | 'd' | 'w'))
        && text[..text.len() - 1].parse::<i64>().is_ok();
    if !relative {
        return Ok(at);
    }
    // Forward by the same age; `at` is no earlier than the year 0, so this stays in range, and
    // past 9999 it is refused like any other time.
    now.checked_add_signed(now - at)
        .filter(|ahead| ahead.year() <= 9999)
        .ok_or_else(|| InvalidTime {
            given: given.to_string(),
        })
}

/// Days from `then` to `now` (negative when `then` is later).
pub fn age_days(then: DateTime<Utc>, now: DateTime<Utc>) -> f64 {
    (now - then).num_seconds() as f64 / 86_400.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        parse_time("2026-11-30T12:00:00Z", Utc::now()).unwrap()
    }

    #[test]
    fn accepted_forms() {
        let check = |given: &str, expect: &str| {
            assert_eq!(
                format_ts(parse_time(given, now()).unwrap()),
                expect,
                "{given}"
            );
        };
        check("2026-11-30T14:05:00Z", "2026-11-30T14:05:00Z");
        check("2026-11-30T14:05:00+02:00", "2026-11-30T12:05:00Z");
        check("2026-11-30T14:05:00.123Z", "2026-11-30T14:05:00Z");
        check("2026-01-05", "2026-01-05T00:00:00Z");
        check("2026-01-05 08:30", "2026-01-05T08:30:00Z");
        check("7d", "2026-11-23T12:00:00Z");
        check("12h", "2026-11-30T00:00:00Z");
        check("2w", "2026-11-16T12:00:00Z");
    }

    #[test]
    fn ahead_counts_relative_ages_forward() {
        assert_eq!(
            format_ts(parse_time_ahead("7d", now()).unwrap()),
            "2026-12-07T12:00:00Z"
        );
        assert_eq!(
            format_ts(parse_time_ahead("2026-01-05", now()).unwrap()),
            "2026-01-05T00:00:00Z"
        );
    }

    #[test]
    fn refused_forms_say_what_is_accepted() {
        for bad in ["", "yesterday", "7x", "2026-13-01", "99999999999999999d"] {
            let err = parse_time(bad, now()).unwrap_err();
            assert!(err.to_string().contains("RFC 3339"), "{bad}");
        }
    }

    #[test]
    fn canonical_form_sorts_as_time() {
        let a = format_ts(parse_time("2026-01-05T09:00:00Z", now()).unwrap());
        let b = format_ts(parse_time("2026-01-05T10:00:00Z", now()).unwrap());
        assert!(a < b);
        assert!(
            (age_days(parse_time("2026-11-29T12:00:00Z", now()).unwrap(), now()) - 1.0).abs()
                < 1e-9
        );
    }

    #[test]
    fn an_age_or_a_year_out_of_range_is_refused_not_a_panic() {
        // The JSONL import fuzz target found these panicking inside chrono.
        for bad in [
            "99999999999d",
            "1000000000w",
            "9223372036854775807m",
            "+262143-12-31",
            "-0001-01-01",
            "10000-01-01T00:00:00Z",
        ] {
            assert!(parse_time(bad, now()).is_err(), "{bad}");
        }
        for bad in ["13700000w", "500000w", "99999999999d"] {
            assert!(parse_time_ahead(bad, now()).is_err(), "{bad}");
        }
        assert_eq!(
            format_ts(parse_time("0000-01-01", now()).unwrap()),
            "0000-01-01T00:00:00Z"
        );
        assert_eq!(
            format_ts(parse_time_ahead("52w", now()).unwrap()),
            "2027-11-29T12:00:00Z"
        );
    }
}
