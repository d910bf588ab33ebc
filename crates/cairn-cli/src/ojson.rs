//! JSON that keeps the key order of the file it came from, so an installer that adds one entry
//! to a user's settings file does not reorder everything else in it. (`serde_json::Value`
//! sorts keys in this workspace, which the receipts rely on.)

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub fn object() -> Json {
        Json::Object(Vec::new())
    }

    pub fn str(value: &str) -> Json {
        Json::String(value.to_string())
    }

    pub fn int(value: i64) -> Json {
        Json::Number(value.into())
    }

    pub fn parse(text: &str) -> Result<Json, serde_json::Error> {
        serde_json::from_str(text)
    }

    pub fn to_pretty(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("JSON always serializes");
        text.push('\n');
        text
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array_mut(&mut self) -> Option<&mut Vec<Json>> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn is_empty_container(&self) -> bool {
        match self {
            Json::Object(entries) => entries.is_empty(),
            Json::Array(items) => items.is_empty(),
            _ => false,
        }
    }

    /// The value under `key`, inserted (at the end) as `default` when missing. `None` when
    /// `self` is not an object.
    pub fn entry(&mut self, key: &str, default: Json) -> Option<&mut Json> {
        let Json::Object(entries) = self else {
            return None;
        };
        let index = match entries.iter().position(|(k, _)| k == key) {
            Some(index) => index,
            None => {
                entries.push((key.to_string(), default));
                entries.len() - 1
            }
        };
        Some(&mut entries[index].1)
    }

    /// Sets `key` to `value`, in place when present, else at the end.
    pub fn set(&mut self, key: &str, value: Json) {
        if let Some(slot) = self.entry(key, Json::Null) {
            *slot = value;
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<Json> {
        let Json::Object(entries) = self else {
            return None;
        };
        let index = entries.iter().position(|(k, _)| k == key)?;
        Some(entries.remove(index).1)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Json> {
        match self {
            Json::Object(entries) => entries.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => serializer.serialize_unit(),
            Json::Bool(b) => serializer.serialize_bool(*b),
            Json::Number(n) => n.serialize(serializer),
            Json::String(s) => serializer.serialize_str(s),
            Json::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
        }
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_none<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(v)
            .map(Json::Number)
            .ok_or_else(|| E::custom("a number JSON cannot hold"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut entries: Vec<(String, Json)> = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, Json>()? {
            match entries.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = value,
                None => entries.push((key, value)),
            }
        }
        Ok(Json::Object(entries))
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_survives_a_round_trip() {
        let text = "{\n  \"zeta\": 1,\n  \"alpha\": [\n    true,\n    null,\n    2.5,\n    \"x\"\n  ],\n  \"mid\": {\n    \"b\": 1,\n    \"a\": 2\n  }\n}\n";
        let json = Json::parse(text).unwrap();
        assert_eq!(json.to_pretty(), text);
        let mut json = json;
        json.set("new", Json::int(3));
        json.set("zeta", Json::int(9));
        let out = json.to_pretty();
        assert!(out.find("zeta").unwrap() < out.find("alpha").unwrap());
        assert!(out.trim_end().ends_with("\"new\": 3\n}"), "{out}");
    }
}
