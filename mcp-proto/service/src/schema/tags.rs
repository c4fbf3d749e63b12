//! Constant string markers (`"type": "text"`, `"jsonrpc": "2.0"`, `"mode": "url"` …) and the
//! small serde helpers the schema types share.
//!
//! A tag is a zero-sized type that serializes as its one string and refuses any other value
//! when deserialized. Structs carry their discriminator as a tag field (named `kind`, `mode`,
//! …) so that a value serialized on its own, say a [`TextContent`](super::TextContent), is
//! complete JSON with its `type`; the enums over them ([`ContentBlock`](super::ContentBlock)
//! and friends) dispatch on the discriminator and serialize the variant as is. Every tag is
//! `Default`, so `..Default::default()` fills it in.

use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use std::fmt;

use super::JsonObject;

macro_rules! tag {
    ($(#[$doc:meta])* $name:ident = $value:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name;

        impl $name {
            /// The one string this tag stands for.
            pub const VALUE: &'static str = $value;
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str($value)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_str(TagVisitor($value)).map(|()| $name)
            }
        }
    };
}

struct TagVisitor(&'static str);

impl Visitor<'_> for TagVisitor {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the string {:?}", self.0)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        if v == self.0 {
            Ok(())
        } else {
            Err(E::invalid_value(de::Unexpected::Str(v), &self))
        }
    }
}

tag!(
    /// `"jsonrpc": "2.0"`.
    JsonRpcVersion = "2.0"
);
tag!(
    /// `"type": "text"` of [`TextContent`](super::TextContent).
    TextTag = "text"
);
tag!(
    /// `"type": "image"` of [`ImageContent`](super::ImageContent).
    ImageTag = "image"
);
tag!(
    /// `"type": "audio"` of [`AudioContent`](super::AudioContent).
    AudioTag = "audio"
);
tag!(
    /// `"type": "resource_link"` of [`ResourceLink`](super::ResourceLink).
    ResourceLinkTag = "resource_link"
);
tag!(
    /// `"type": "resource"` of [`EmbeddedResource`](super::EmbeddedResource).
    ResourceTag = "resource"
);
tag!(
    /// `"type": "tool_use"` of [`ToolUseContent`](super::ToolUseContent).
    ToolUseTag = "tool_use"
);
tag!(
    /// `"type": "tool_result"` of [`ToolResultContent`](super::ToolResultContent).
    ToolResultTag = "tool_result"
);
tag!(
    /// `"type": "ref/prompt"` of [`PromptReference`](super::PromptReference).
    PromptRefTag = "ref/prompt"
);
tag!(
    /// `"type": "ref/resource"` of
    /// [`ResourceTemplateReference`](super::ResourceTemplateReference).
    ResourceRefTag = "ref/resource"
);
tag!(
    /// `"type": "object"` of a tool's input schema or an elicitation's requested schema.
    ObjectTag = "object"
);
tag!(
    /// `"type": "string"` of the string-valued primitive schemas of elicitation.
    StringTag = "string"
);
tag!(
    /// `"type": "boolean"` of [`BooleanSchema`](super::BooleanSchema).
    BooleanTag = "boolean"
);
tag!(
    /// `"type": "array"` of the multi-select enum schemas of elicitation.
    ArrayTag = "array"
);
tag!(
    /// `"resources": "dynamic"` of a [`SkillEntry`](super::SkillEntry) whose content is
    /// generated on demand (no file manifest).
    DynamicTag = "dynamic"
);
tag!(
    /// `"mode": "form"` of [`ElicitRequestFormParams`](super::ElicitRequestFormParams).
    FormModeTag = "form"
);
tag!(
    /// `"mode": "url"` of [`ElicitRequestUrlParams`](super::ElicitRequestUrlParams).
    UrlModeTag = "url"
);

/// Generates an enum over a closed set of spec strings plus `Other(String)` for values this
/// crate does not know, so that a newer peer's value round-trips instead of failing.
macro_rules! open_enum {
    (
        $(#[$doc:meta])*
        $name:ident {
            $( $(#[$vdoc:meta])* $variant:ident = $value:literal, )+
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vdoc])* $variant, )+
            /// A value this crate does not know, kept verbatim.
            Other(String),
        }

        impl $name {
            /// The wire string.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $value, )+
                    Self::Other(s) => s,
                }
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                match s {
                    $( $value => Self::$variant, )+
                    other => Self::Other(other.to_owned()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let s = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
                Ok(Self::from(&*s))
            }
        }
    };
}
pub(crate) use open_enum;

/// Generates a JSON-RPC style identifier: a string or an integer.
macro_rules! string_or_int {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            /// An integer identifier.
            Number(i64),
            /// A string identifier.
            String(String),
        }

        impl From<i64> for $name {
            fn from(n: i64) -> Self {
                Self::Number(n)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self::String(s.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self::String(s)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self {
                    Self::Number(n) => write!(f, "{n}"),
                    Self::String(s) => write!(f, "{s:?}"),
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                match self {
                    Self::Number(n) => serializer.serialize_i64(*n),
                    Self::String(s) => serializer.serialize_str(s),
                }
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a string or an integer")
                    }
                    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<$name, E> {
                        Ok($name::Number(v))
                    }
                    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<$name, E> {
                        i64::try_from(v)
                            .map($name::Number)
                            .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$name, E> {
                        Ok($name::String(v.to_owned()))
                    }
                    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<$name, E> {
                        Ok($name::String(v))
                    }
                }
                deserializer.deserialize_any(V)
            }
        }
    };
}
pub(crate) use string_or_int;

/// Reads any JSON object, for the enums that pick their variant from its keys.
pub(crate) fn object<'de, D: Deserializer<'de>>(deserializer: D) -> Result<JsonObject, D::Error> {
    JsonObject::deserialize(deserializer)
}

/// Finishes such a pick: decodes the object as `T`, with `T`'s own error message.
pub(crate) fn decode<T: DeserializeOwned, E: de::Error>(map: JsonObject) -> Result<T, E> {
    serde_json::from_value(serde_json::Value::Object(map)).map_err(E::custom)
}

/// The string at `key` of `map`, if there is one.
pub(crate) fn str_at<'a>(map: &'a JsonObject, key: &str) -> Option<&'a str> {
    map.get(key).and_then(serde_json::Value::as_str)
}

/// `#[serde(with = "ordered_map")]` for `Vec<(String, V)>`: a JSON object whose key order is
/// kept, where it matters to people (the fields of an elicitation form).
pub(crate) mod ordered_map {
    use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
    use serde::ser::{Serialize, SerializeMap, Serializer};
    use std::collections::HashMap;
    use std::fmt;
    use std::marker::PhantomData;

    pub(crate) fn serialize<S: Serializer, V: Serialize>(
        entries: &[(String, V)],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(entries.len()))?;
        for (k, v) in entries {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>, V: Deserialize<'de>>(
        deserializer: D,
    ) -> Result<Vec<(String, V)>, D::Error> {
        struct Entries<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for Entries<V> {
            type Value = Vec<(String, V)>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut out: Vec<(String, V)> = Vec::new();
                let mut index: HashMap<String, usize> = HashMap::new();
                while let Some((k, v)) = access.next_entry::<String, V>()? {
                    // A repeated key replaces the earlier value, as in a map.
                    match index.get(&k) {
                        Some(&i) => out[i].1 = v,
                        None => {
                            index.insert(k.clone(), out.len());
                            out.push((k, v));
                        }
                    }
                }
                Ok(out)
            }
        }
        deserializer.deserialize_map(Entries(PhantomData))
    }
}
