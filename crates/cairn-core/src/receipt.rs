//! Operation receipts: a SHA-256 over an operation's canonical JSON (DESIGN §4 step 9).
//!
//! Canonical means object keys sorted (serde_json's default map is ordered) and no whitespace,
//! so the same operation always produces the same receipt.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Canonical JSON text of a value: sorted keys, compact.
pub fn canonical_json(value: &Value) -> String {
    // `serde_json::Value` stores objects in a BTreeMap unless `preserve_order` is enabled,
    // which this workspace never enables, so serialization is already key-sorted.
    serde_json::to_string(value).expect("a serde_json::Value always serializes")
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
}
