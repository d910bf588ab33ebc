//! History versions as reverse deltas (schema v8).
//!
//! A version used to be the whole record as JSON before the change, body included, even when
//! a merge or an archive only changed the status. Since v8 a change stores only the previous
//! values of the fields it changed (a *reverse delta* against the record as written by that
//! change); reading the history walks back from the current record, newest version first, and
//! hands every reader the same full snapshots as before.
//!
//! Why this is exact: between two versioned changes the only writes to a record's JSON fields
//! are accesses (`touch`: `use_count`, `last_accessed_at`), and every delta carries those two
//! fields whether they changed or not. A record deleted for good (`forget --hard`) has no
//! current row to walk back from, so its last version is a full snapshot; rows written before
//! v8 (and rows restored by a lossless import) are full snapshots too, and a full snapshot
//! resets the walk.

use serde_json::{Map, Value};

/// Fields written outside versioned changes (by `touch`), carried in every delta.
const ACCESS_FIELDS: [&str; 2] = ["use_count", "last_accessed_at"];

/// The reverse delta that turns `after` (the record as the change wrote it) back into
/// `previous`: `{"changed": {field: previous value}, "absent": [fields previous did not have]}`.
pub fn reverse_delta(previous: &Value, after: &Value) -> Value {
    let empty = Map::new();
    let previous = previous.as_object().unwrap_or(&empty);
    let after = after.as_object().unwrap_or(&empty);
    let mut changed = Map::new();
    for (field, value) in previous {
        if after.get(field) != Some(value) || ACCESS_FIELDS.contains(&field.as_str()) {
            changed.insert(field.clone(), value.clone());
        }
    }
    let absent: Vec<Value> = after
        .keys()
        .filter(|field| !previous.contains_key(*field))
        .map(|field| Value::String(field.clone()))
        .collect();
    let mut delta = Map::new();
    delta.insert("changed".into(), Value::Object(changed));
    if !absent.is_empty() {
        delta.insert("absent".into(), Value::Array(absent));
    }
    Value::Object(delta)
}

/// Applies a reverse delta to `state` (the record after the change), giving the record before.
pub fn apply_reverse_delta(state: &mut Value, delta: &Value) {
    let Some(fields) = state.as_object_mut() else {
        return;
    };
    if let Some(changed) = delta.get("changed").and_then(Value::as_object) {
        for (field, value) in changed {
            fields.insert(field.clone(), value.clone());
        }
    }
    if let Some(absent) = delta.get("absent").and_then(Value::as_array) {
        for field in absent.iter().filter_map(Value::as_str) {
            fields.remove(field);
        }
    }
}

/// One stored version, as read: a full snapshot or a reverse delta.
pub(crate) struct StoredVersion {
    pub snapshot: Value,
    pub is_delta: bool,
}

/// The full snapshot of every version, oldest first, from the stored rows (oldest first) and
/// the current record (`None` when it was deleted). A delta with nothing to walk back from
/// (only after tampering) is handed out as it is stored.
pub(crate) fn snapshots(stored: Vec<StoredVersion>, current: Option<Value>) -> Vec<Value> {
    let mut state = current;
    let mut full: Vec<Value> = stored
        .into_iter()
        .rev()
        .map(|version| {
            if !version.is_delta {
                state = Some(version.snapshot.clone());
                return version.snapshot;
            }
            match state.as_mut() {
                Some(record) => {
                    apply_reverse_delta(record, &version.snapshot);
                    record.clone()
                }
                None => version.snapshot,
            }
        })
        .collect();
    full.reverse();
    full
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(versions: &[Value], touches_between: bool) {
        // Write the versions as the store would: each change stores a delta against the record
        // it wrote; accesses in between change the access fields only.
        let mut stored = Vec::new();
        let mut expected = Vec::new();
        let mut current = versions[0].clone();
        for next in &versions[1..] {
            let mut written = next.clone();
            expected.push(current.clone());
            stored.push(StoredVersion {
                snapshot: reverse_delta(&current, &written),
                is_delta: true,
            });
            if touches_between {
                written["use_count"] = json!(written["use_count"].as_i64().unwrap() + 5);
                written["last_accessed_at"] = json!("2026-02-02T00:00:00Z");
            }
            current = written;
        }
        assert_eq!(snapshots(stored, Some(current)), expected);
    }

    #[test]
    fn deltas_give_back_every_full_snapshot() {
        let v1 = json!({"id": 1, "body": "long body", "status": "active", "title": null, "use_count": 0, "last_accessed_at": null, "updated_at": "a"});
        let mut v2 = v1.clone();
        v2["status"] = json!("archived");
        v2["retired_at"] = json!("b");
        v2["updated_at"] = json!("b");
        let mut v3 = v2.clone();
        v3["status"] = json!("active");
        v3.as_object_mut().unwrap().remove("retired_at");
        v3["title"] = json!("now titled");
        let mut v4 = v3.clone();
        v4["body"] = json!("another body");
        for touches in [false, true] {
            check(&[v1.clone(), v2.clone(), v3.clone(), v4.clone()], touches);
        }
    }

    #[test]
    fn a_merge_delta_holds_no_body() {
        let before = json!({"id": 1, "body": "x".repeat(300), "status": "active", "use_count": 2, "last_accessed_at": "t"});
        let mut after = before.clone();
        after["status"] = json!("archived");
        let delta = reverse_delta(&before, &after);
        assert_eq!(
            delta,
            json!({"changed": {"status": "active", "use_count": 2, "last_accessed_at": "t"}})
        );
    }

    #[test]
    fn a_full_snapshot_resets_the_walk() {
        let legacy = json!({"id": 1, "status": "active", "use_count": 0});
        let deleted = json!({"id": 1, "status": "archived", "use_count": 3});
        let mut before_delete = deleted.clone();
        before_delete["status"] = json!("active");
        let stored = vec![
            StoredVersion {
                snapshot: legacy.clone(),
                is_delta: false,
            },
            StoredVersion {
                snapshot: reverse_delta(&before_delete, &deleted),
                is_delta: true,
            },
            StoredVersion {
                snapshot: deleted.clone(),
                is_delta: false,
            },
        ];
        // The record is gone (hard delete): its last version is the full anchor.
        assert_eq!(
            snapshots(stored, None),
            vec![legacy, before_delete, deleted]
        );
    }
}
