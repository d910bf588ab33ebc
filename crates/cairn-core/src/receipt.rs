//! Operation receipts: a SHA-256 over an operation's canonical JSON (docs/design.md §4 step 9).
//!
//! Canonical means object keys sorted by their UTF-8 bytes and no whitespace, so the same
//! operation always produces the same receipt. The keys are sorted here, by our own writer,
//! not by relying on `serde_json`'s map type: its `preserve_order` feature (which any crate in
//! the build may switch on through feature unification) would keep insertion order instead.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Canonical JSON text of a value: keys sorted by their UTF-8 bytes, compact.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => write_object(map.iter(), out),
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        leaf => write_leaf(leaf, out),
    }
}

/// An object's entries, in whatever order the map hands them out, written sorted by the keys'
/// UTF-8 bytes.
fn write_object<'a>(entries: impl Iterator<Item = (&'a String, &'a Value)>, out: &mut String) {
    let mut entries: Vec<(&String, &Value)> = entries.collect();
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.push('{');
    for (index, (key, item)) in entries.into_iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        write_leaf(&Value::String(key.clone()), out);
        out.push(':');
        write_canonical(item, out);
    }
    out.push('}');
}

/// A string, number, boolean or null as serde_json writes it (escapes, number forms).
fn write_leaf(leaf: &Value, out: &mut String) {
    out.push_str(&serde_json::to_string(leaf).expect("a serde_json::Value always serializes"));
}

/// Lowercase hex SHA-256 of the canonical JSON of `value`.
pub fn receipt(value: &Value) -> String {
    hex::encode(Sha256::digest(canonical_json(value).as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn receipts_ignore_key_order_and_change_with_content() {
        let a = json!({"op": "remember", "id": 1, "body": "x"});
        let b = json!({"body": "x", "id": 1, "op": "remember"});
        assert_eq!(receipt(&a), receipt(&b));
        assert_ne!(
            receipt(&a),
            receipt(&json!({"op": "remember", "id": 2, "body": "x"}))
        );
        assert_eq!(canonical_json(&a), r#"{"body":"x","id":1,"op":"remember"}"#);
        assert_eq!(receipt(&a).len(), 64);
    }

    #[test]
    fn a_map_built_in_unsorted_order_is_written_sorted_at_every_depth() {
        // Inserted in reverse order, nested in an array and an object: whatever order the map
        // keeps (sorted by default, insertion order under `preserve_order`), the text is sorted.
        let mut inner = serde_json::Map::new();
        for key in ["zeta", "Alpha", "é", "b", "a"] {
            inner.insert(key.to_owned(), json!(key.len()));
        }
        let mut outer = serde_json::Map::new();
        outer.insert("z".into(), json!([Value::Object(inner.clone()), "s\"q"]));
        outer.insert("m".into(), Value::Object(inner));
        outer.insert("a".into(), json!(null));
        let text = canonical_json(&Value::Object(outer));
        let inner_sorted = r#"{"Alpha":5,"a":1,"b":1,"zeta":4,"é":2}"#;
        assert_eq!(
            text,
            format!(r#"{{"a":null,"m":{inner_sorted},"z":[{inner_sorted},"s\"q"]}}"#)
        );
        // The same bytes serde_json writes for its default (sorted) map: stored receipts hold.
        let reparsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(canonical_json(&reparsed), text);
    }

    #[test]
    fn object_entries_handed_out_of_order_are_written_sorted() {
        // serde_json's default map already iterates sorted, so a test through `Value` alone
        // passes without the sort; this one hands the writer its entries in insertion order,
        // as a `preserve_order` map would, and fails if the sort is removed.
        let entries: Vec<(String, Value)> = ["zeta", "Alpha", "é", "b", "a"]
            .into_iter()
            .map(|key| (key.to_owned(), json!(key.len())))
            .collect();
        let mut out = String::new();
        write_object(entries.iter().map(|(key, value)| (key, value)), &mut out);
        assert_eq!(out, r#"{"Alpha":5,"a":1,"b":1,"zeta":4,"é":2}"#);
        let mut reversed = String::new();
        write_object(
            entries.iter().rev().map(|(key, value)| (key, value)),
            &mut reversed,
        );
        assert_eq!(reversed, out);
    }
}
