//! Elicitation: the server asks the user, through the client, for information (a form) or to
//! visit a URL.

use std::collections::BTreeMap;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

use super::tags::{
    self, ArrayTag, BooleanTag, FormModeTag, ObjectTag, StringTag, UrlModeTag, open_enum,
    ordered_map,
};
use super::{JsonObject, Meta};

/// The params of `elicitation/create` (`ElicitRequestParams`): a form, or (2025-11-25 on) a
/// URL to visit, chosen by `mode` (`"form"` when absent).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ElicitRequestParams {
    /// `"mode": "form"` or no `mode`.
    Form(ElicitRequestFormParams),
    /// `"mode": "url"`.
    Url(ElicitRequestUrlParams),
}

impl<'de> Deserialize<'de> for ElicitRequestParams {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = tags::object(deserializer)?;
        match map.get("mode") {
            None => Ok(Self::Form(tags::decode(map)?)),
            Some(serde_json::Value::String(m)) if m == FormModeTag::VALUE => {
                Ok(Self::Form(tags::decode(map)?))
            }
            Some(serde_json::Value::String(m)) if m == UrlModeTag::VALUE => {
                Ok(Self::Url(tags::decode(map)?))
            }
            Some(other) => Err(de::Error::custom(format_args!(
                "unknown elicitation mode {other}, expected \"form\" or \"url\""
            ))),
        }
    }
}

impl From<ElicitRequestFormParams> for ElicitRequestParams {
    fn from(p: ElicitRequestFormParams) -> Self {
        Self::Form(p)
    }
}

impl From<ElicitRequestUrlParams> for ElicitRequestParams {
    fn from(p: ElicitRequestUrlParams) -> Self {
        Self::Url(p)
    }
}

/// A form to fill in (`ElicitRequestFormParams`).
///
/// The 2025-11-25 `task` field is not modelled; it is kept in `extra`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitRequestFormParams {
    /// `"mode": "form"`; optional on the wire (absent before 2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<FormModeTag>,
    /// What to ask the user.
    pub message: String,
    /// The form: a flat object schema of primitive fields.
    pub requested_schema: RequestedSchema,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A URL for the user to visit, for information that must not pass through the client
/// (`ElicitRequestURLParams`, 2025-11-25 on).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitRequestUrlParams {
    /// The `"mode": "url"` discriminator.
    pub mode: UrlModeTag,
    /// Why the user should visit the URL.
    pub message: String,
    /// The URL.
    pub url: String,
    /// The identifier of this elicitation (required in 2025-11-25, absent in 2026-07-28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation_id: Option<String>,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The schema of an elicitation form: `{"type": "object", "properties": {…}, "required": […]}`.
///
/// `properties` keeps the order the server gave, which is the order a client shows the fields
/// in.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RequestedSchema {
    /// The JSON Schema dialect, if stated (`$schema`, 2025-11-25 on).
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The `"type": "object"` discriminator.
    #[serde(rename = "type")]
    pub kind: ObjectTag,
    /// The fields, in order.
    #[serde(with = "ordered_map")]
    pub properties: Vec<(String, PrimitiveSchemaDefinition)>,
    /// The names of the fields that must be filled in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<String>>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl RequestedSchema {
    /// The schema of the field `name`, if there is one.
    pub fn property(&self, name: &str) -> Option<&PrimitiveSchemaDefinition> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }
}

/// The schema of one form field (`PrimitiveSchemaDefinition`): a string, a number, a boolean
/// or an enum, told apart by `type` and by the enum keywords present.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PrimitiveSchemaDefinition {
    /// `"type": "string"` without enum keywords.
    String(StringSchema),
    /// `"type": "number"` or `"integer"`.
    Number(NumberSchema),
    /// `"type": "boolean"`.
    Boolean(BooleanSchema),
    /// `"type": "string"` with `enum` (2025-11-25 on; 2025-06-18's plain enum).
    UntitledSingleSelectEnum(UntitledSingleSelectEnumSchema),
    /// `"type": "string"` with `oneOf` of `{const, title}` (2025-11-25 on).
    TitledSingleSelectEnum(TitledSingleSelectEnumSchema),
    /// `"type": "array"` whose `items` have `enum` (2025-11-25 on).
    UntitledMultiSelectEnum(UntitledMultiSelectEnumSchema),
    /// `"type": "array"` whose `items` have `anyOf` of `{const, title}` (2025-11-25 on).
    TitledMultiSelectEnum(TitledMultiSelectEnumSchema),
    /// `"type": "string"` with `enum` and `enumNames` (deprecated).
    LegacyTitledEnum(LegacyTitledEnumSchema),
    /// A field schema this crate does not know, kept verbatim.
    Other(JsonObject),
}

impl<'de> Deserialize<'de> for PrimitiveSchemaDefinition {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = tags::object(deserializer)?;
        Ok(match tags::str_at(&map, "type") {
            Some(StringTag::VALUE) if map.contains_key("oneOf") => {
                Self::TitledSingleSelectEnum(tags::decode(map)?)
            }
            Some(StringTag::VALUE) if map.contains_key("enumNames") => {
                Self::LegacyTitledEnum(tags::decode(map)?)
            }
            Some(StringTag::VALUE) if map.contains_key("enum") => {
                Self::UntitledSingleSelectEnum(tags::decode(map)?)
            }
            Some(StringTag::VALUE) => Self::String(tags::decode(map)?),
            Some("number" | "integer") => Self::Number(tags::decode(map)?),
            Some(BooleanTag::VALUE) => Self::Boolean(tags::decode(map)?),
            Some(ArrayTag::VALUE) => {
                let titled = map
                    .get("items")
                    .and_then(|items| items.get("anyOf"))
                    .is_some();
                if titled {
                    Self::TitledMultiSelectEnum(tags::decode(map)?)
                } else {
                    Self::UntitledMultiSelectEnum(tags::decode(map)?)
                }
            }
            Some(_) => Self::Other(map),
            None => return Err(de::Error::missing_field("type")),
        })
    }
}

open_enum!(
    /// The format of a string field (`StringSchema.format`).
    StringFormat {
        /// `"email"`.
        Email = "email",
        /// `"uri"`.
        Uri = "uri",
        /// `"date"`.
        Date = "date",
        /// `"date-time"`.
        DateTime = "date-time",
    }
);

/// A string field (`StringSchema`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StringSchema {
    /// The `"type": "string"` discriminator.
    #[serde(rename = "type")]
    pub kind: StringTag,
    /// The label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The shortest allowed length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u64>,
    /// The longest allowed length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    /// The format the string must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<StringFormat>,
    /// The value filled in beforehand (2025-11-25 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The kind of a number field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NumberType {
    /// `"number"`: any number.
    #[default]
    Number,
    /// `"integer"`: whole numbers only.
    Integer,
}

/// A number field (`NumberSchema`). The bounds and default are [`serde_json::Number`] so that
/// integers stay integers on a round trip.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NumberSchema {
    /// `"number"` or `"integer"`.
    #[serde(rename = "type")]
    pub kind: NumberType,
    /// The label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The least allowed value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<serde_json::Number>,
    /// The greatest allowed value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<serde_json::Number>,
    /// The value filled in beforehand (2025-11-25 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Number>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A yes/no field (`BooleanSchema`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BooleanSchema {
    /// The `"type": "boolean"` discriminator.
    #[serde(rename = "type")]
    pub kind: BooleanTag,
    /// The label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The value filled in beforehand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<bool>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A choice with a display name: `{"const": value, "title": label}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EnumOption {
    /// The value.
    #[serde(rename = "const")]
    pub value: String,
    /// The label shown for it.
    pub title: String,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A single choice among plain values (`UntitledSingleSelectEnumSchema`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UntitledSingleSelectEnumSchema {
    /// The `"type": "string"` discriminator.
    #[serde(rename = "type")]
    pub kind: StringTag,
    /// The label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The values to choose from.
    #[serde(rename = "enum")]
    pub values: Vec<String>,
    /// The value chosen beforehand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A single choice among labelled values (`TitledSingleSelectEnumSchema`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitledSingleSelectEnumSchema {
    /// The `"type": "string"` discriminator.
    #[serde(rename = "type")]
    pub kind: StringTag,
    /// The label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The options to choose from.
    pub one_of: Vec<EnumOption>,
    /// The value chosen beforehand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The `items` of an [`UntitledMultiSelectEnumSchema`]: `{"type": "string", "enum": […]}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UntitledEnumItems {
    /// The `"type": "string"` discriminator.
    #[serde(rename = "type")]
    pub kind: StringTag,
    /// The values to choose from.
    #[serde(rename = "enum")]
    pub values: Vec<String>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The `items` of a [`TitledMultiSelectEnumSchema`]: `{"anyOf": [{const, title}, …]}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitledEnumItems {
    /// The options to choose from.
    pub any_of: Vec<EnumOption>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Several choices among plain values (`UntitledMultiSelectEnumSchema`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UntitledMultiSelectEnumSchema {
    /// The `"type": "array"` discriminator.
    #[serde(rename = "type")]
    pub kind: ArrayTag,
    /// The label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The fewest values to choose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u64>,
    /// The most values to choose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
    /// The values to choose from.
    pub items: UntitledEnumItems,
    /// The values chosen beforehand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Vec<String>>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Several choices among labelled values (`TitledMultiSelectEnumSchema`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitledMultiSelectEnumSchema {
    /// The `"type": "array"` discriminator.
    #[serde(rename = "type")]
    pub kind: ArrayTag,
    /// The label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The fewest values to choose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u64>,
    /// The most values to choose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
    /// The options to choose from.
    pub items: TitledEnumItems,
    /// The values chosen beforehand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Vec<String>>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A single choice with labels in a parallel array (`LegacyTitledEnumSchema`, the 2025-06-18
/// form; deprecated).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyTitledEnumSchema {
    /// The `"type": "string"` discriminator.
    #[serde(rename = "type")]
    pub kind: StringTag,
    /// The label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The values to choose from.
    #[serde(rename = "enum")]
    pub values: Vec<String>,
    /// Their labels, in the same order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enum_names: Option<Vec<String>>,
    /// The value chosen beforehand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// What the user did with an elicitation (`ElicitResult.action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElicitAction {
    /// Submitted (with `content` in form mode).
    Accept,
    /// Explicitly declined.
    Decline,
    /// Dismissed without choosing.
    Cancel,
}

/// One submitted form value: a string, an integer, a number, a boolean or (multi-select) an
/// array of strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ElicitValue {
    /// A string (also a single-select choice).
    String(String),
    /// An integer.
    Integer(i64),
    /// A number that is not an integer.
    Number(f64),
    /// A boolean.
    Boolean(bool),
    /// The choices of a multi-select field (2025-11-25 on).
    StringArray(Vec<String>),
}

/// The answer to `elicitation/create` (`ElicitResult`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitResult {
    /// What the user did.
    pub action: ElicitAction,
    /// The submitted values, by field name (form mode, `accept` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<BTreeMap<String, ElicitValue>>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ElicitResult {
    /// A result with the given action and no content.
    pub fn new(action: ElicitAction) -> Self {
        Self {
            action,
            content: None,
            meta: None,
            extra: JsonObject::new(),
        }
    }
}

/// The params of `notifications/elicitation/complete` (2025-11-25): a URL-mode elicitation
/// finished out of band.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitationCompleteNotificationParams {
    /// The `elicitationId` of the [`ElicitRequestUrlParams`] that finished.
    pub elicitation_id: String,
    /// Notification metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}
