//! [`ToolArgs`] and [`PromptArgs`]: typed access to a call's arguments.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Error;
use crate::schema::JsonObject;

/// The arguments of a `tools/call`, with the schema's defaults filled in and (for the keywords
/// the server checks) already validated.
///
/// The `get_*` methods mirror mcp-go's `GetString`/`GetInt`: the value, or `default` when
/// the argument is absent or of another type. [`require`](Self::require) and
/// [`parse`](Self::parse) fail instead, with an error that becomes a tool error the model can
/// read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolArgs {
    args: JsonObject,
}

impl ToolArgs {
    /// Wraps a JSON object of arguments.
    pub fn new(args: JsonObject) -> Self {
        ToolArgs { args }
    }

    /// The raw value of `name`.
    pub fn value(&self, name: &str) -> Option<&Value> {
        self.args.get(name)
    }

    /// Whether `name` was given.
    pub fn contains(&self, name: &str) -> bool {
        self.args.contains_key(name)
    }

    /// The string `name`, if it is one.
    pub fn get_str(&self, name: &str) -> Option<&str> {
        self.args.get(name).and_then(Value::as_str)
    }

    /// The string `name`, or `default` (mcp-go's `GetString`).
    pub fn get_string(&self, name: &str, default: &str) -> String {
        self.get_str(name).unwrap_or(default).to_owned()
    }

    /// The integer `name` (a JSON number without a fraction), or `default` (mcp-go's
    /// `GetInt`).
    pub fn get_int(&self, name: &str, default: i64) -> i64 {
        match self.args.get(name) {
            Some(Value::Number(n)) => n.as_i64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                    .map(|f| f as i64)
            }),
            _ => None,
        }
        .unwrap_or(default)
    }

    /// The number `name`, or `default`.
    pub fn get_f64(&self, name: &str, default: f64) -> f64 {
        self.args
            .get(name)
            .and_then(Value::as_f64)
            .unwrap_or(default)
    }

    /// The boolean `name`, or `default`.
    pub fn get_bool(&self, name: &str, default: bool) -> bool {
        self.args
            .get(name)
            .and_then(Value::as_bool)
            .unwrap_or(default)
    }

    /// `name` deserialized as `T`: `Ok(None)` when absent, an error when of the wrong shape.
    pub fn get<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, Error> {
        match self.args.get(name) {
            None => Ok(None),
            Some(v) => T::deserialize(v)
                .map(Some)
                .map_err(|e| Error::new(format_args!("invalid argument `{name}`: {e}"))),
        }
    }

    /// `name` deserialized as `T`; an error when absent or of the wrong shape.
    pub fn require<T: DeserializeOwned>(&self, name: &str) -> Result<T, Error> {
        self.get(name)?
            .ok_or_else(|| Error::new(format_args!("missing argument `{name}`")))
    }

    /// All the arguments deserialized into `T` (your `#[derive(Deserialize)]` struct).
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, Error> {
        T::deserialize(&Value::Object(self.args.clone()))
            .map_err(|e| Error::new(format_args!("invalid arguments: {e}")))
    }

    /// The arguments as a JSON object.
    pub fn as_object(&self) -> &JsonObject {
        &self.args
    }

    /// The JSON object of arguments.
    pub fn into_object(self) -> JsonObject {
        self.args
    }
}

/// The arguments of a `prompts/get`: strings by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptArgs {
    args: BTreeMap<String, String>,
}

impl PromptArgs {
    /// Wraps the arguments.
    pub fn new(args: BTreeMap<String, String>) -> Self {
        PromptArgs { args }
    }

    /// The argument `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.args.get(name).map(String::as_str)
    }

    /// The argument `name`, or `default`.
    pub fn get_string(&self, name: &str, default: &str) -> String {
        self.get(name).unwrap_or(default).to_owned()
    }

    /// The arguments by name.
    pub fn as_map(&self) -> &BTreeMap<String, String> {
        &self.args
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn typed_access_with_defaults() {
        let Value::Object(o) = json!({"s": "x", "i": 3, "f": 2.0, "h": 2.5, "b": true, "n": null})
        else {
            unreachable!()
        };
        let a = ToolArgs::new(o);
        assert_eq!(a.get_string("s", "d"), "x");
        assert_eq!(a.get_string("i", "d"), "d");
        assert_eq!(a.get_int("i", 0), 3);
        assert_eq!(a.get_int("f", 0), 2);
        assert_eq!(a.get_int("h", 7), 7);
        assert_eq!(a.get_f64("h", 0.0), 2.5);
        assert!(a.get_bool("b", false));
        assert_eq!(a.get::<u8>("i").unwrap(), Some(3));
        assert_eq!(a.get::<u8>("zz").unwrap(), None);
        assert!(a.get::<u8>("s").unwrap_err().message().contains("`s`"));
        assert!(
            a.require::<String>("zz")
                .unwrap_err()
                .message()
                .contains("missing")
        );

        #[derive(serde::Deserialize)]
        struct Args {
            s: String,
            i: u32,
        }
        let parsed: Args = a.parse().unwrap();
        assert_eq!((parsed.s.as_str(), parsed.i), ("x", 3));
    }
}
