//! The tool schema builder: [`Tool`]'s builder methods and [`Prop`], the options of one
//! argument.
//!
//! ```
//! use mcp_service::{Tool, default, description, min, required};
//! use serde_json::json;
//!
//! let tool = Tool::new("search_users")
//!     .description("Search users with filters")
//!     .string("query", description("Search query").required())
//!     .number("limit", default(10).max(100))
//!     .integer("offset", default(0).min(0))
//!     .enumeration("sort", ["name", "age"], default("name"));
//! assert_eq!(
//!     serde_json::to_value(&tool.input_schema).unwrap(),
//!     json!({
//!         "type": "object",
//!         "properties": {
//!             "query": {"type": "string", "description": "Search query"},
//!             "limit": {"type": "number", "default": 10, "maximum": 100},
//!             "offset": {"type": "integer", "default": 0, "minimum": 0},
//!             "sort": {"type": "string", "enum": ["name", "age"], "default": "name"}
//!         },
//!         "required": ["query"]
//!     })
//! );
//! # let _ = (min(0), required());
//! ```
//!
//! # Decisions
//!
//! - **The builder writes JSON Schema directly** into [`Tool::input_schema`] (a
//!   `serde_json::Map` in insertion order): what you build is exactly what `tools/list`
//!   shows, and the same map drives argument validation. There is no second schema type.
//! - **A raw schema is kept exactly as given** ([`Tool::with_schema`],
//!   [`Tool::input_schema`]): `$schema`, `$defs`, `$ref`, `additionalProperties`, key order.
//! - **Options compose by chaining** from a free function: `default(10).max(100)`. `min`/`max`
//!   write `minimum`/`maximum`; strings and arrays have their own length options.
//! - **Non-finite numbers** (`NaN`, infinities) cannot be written in JSON: an option given one
//!   is left out.

use serde_json::{Number, Value};

use crate::schema::{JsonObject, Tool, ToolAnnotations};

/// A number an option accepts: any Rust integer or float.
pub trait IntoNumber {
    /// The JSON number, `None` for a non-finite float.
    fn into_number(self) -> Option<Number>;
}

macro_rules! into_number {
    ($($t:ty),*) => {$(
        impl IntoNumber for $t {
            fn into_number(self) -> Option<Number> {
                Some(Number::from(self))
            }
        }
    )*};
}
into_number!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

impl IntoNumber for f64 {
    fn into_number(self) -> Option<Number> {
        Number::from_f64(self)
    }
}

impl IntoNumber for f32 {
    fn into_number(self) -> Option<Number> {
        Number::from_f64(f64::from(self))
    }
}

/// The options of one tool argument: whether it is required, and JSON Schema keywords
/// (description, bounds, default, …) in the order given.
///
/// Start from a free function ([`required`], [`description`], [`min`], [`max`],
/// [`default`], [`prop`], …) and chain the rest.
#[derive(Debug, Clone, Default, PartialEq)]
#[must_use]
pub struct Prop {
    required: bool,
    keywords: JsonObject,
}

impl Prop {
    /// No options: an optional argument with only its type.
    pub fn new() -> Self {
        <Self as Default>::default()
    }

    /// The argument must be given (it joins the schema's `required` list).
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// Sets any JSON Schema keyword (the escape hatch for what has no method).
    pub fn keyword(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.keywords.insert(name.to_owned(), value.into());
        self
    }

    fn number_keyword(self, name: &str, n: impl IntoNumber) -> Self {
        match n.into_number() {
            Some(n) => self.keyword(name, n),
            None => self,
        }
    }

    /// `description`: what the argument is, for the model.
    pub fn description(self, text: impl Into<String>) -> Self {
        self.keyword("description", text.into())
    }

    /// `title`: a human-readable name.
    pub fn title(self, text: impl Into<String>) -> Self {
        self.keyword("title", text.into())
    }

    /// `minimum`: the least allowed value (inclusive).
    pub fn min(self, n: impl IntoNumber) -> Self {
        self.number_keyword("minimum", n)
    }

    /// `maximum`: the greatest allowed value (inclusive).
    pub fn max(self, n: impl IntoNumber) -> Self {
        self.number_keyword("maximum", n)
    }

    /// `exclusiveMinimum`: values must be greater.
    pub fn exclusive_min(self, n: impl IntoNumber) -> Self {
        self.number_keyword("exclusiveMinimum", n)
    }

    /// `exclusiveMaximum`: values must be smaller.
    pub fn exclusive_max(self, n: impl IntoNumber) -> Self {
        self.number_keyword("exclusiveMaximum", n)
    }

    /// `default`: the value used when the argument is left out. The server fills it in
    /// before calling the handler.
    pub fn default(self, value: impl Into<Value>) -> Self {
        self.keyword("default", value)
    }

    /// `minLength` of a string, in characters.
    pub fn min_length(self, n: u64) -> Self {
        self.keyword("minLength", n)
    }

    /// `maxLength` of a string, in characters.
    pub fn max_length(self, n: u64) -> Self {
        self.keyword("maxLength", n)
    }

    /// `pattern`: a regular expression the string must match (shown to the client; the
    /// server's own validation does not evaluate patterns).
    pub fn pattern(self, regex: impl Into<String>) -> Self {
        self.keyword("pattern", regex.into())
    }

    /// `format` (`"email"`, `"uri"`, `"date-time"`, …), a hint to the client.
    pub fn format(self, format: impl Into<String>) -> Self {
        self.keyword("format", format.into())
    }

    /// `enum`: the allowed values.
    pub fn enum_values<V: Into<Value>>(self, values: impl IntoIterator<Item = V>) -> Self {
        let values: Vec<Value> = values.into_iter().map(Into::into).collect();
        self.keyword("enum", values)
    }

    /// `items`: the schema of an array's elements, e.g. `json!({"type": "string"})`.
    pub fn items(self, schema: Value) -> Self {
        self.keyword("items", schema)
    }

    /// `minItems` of an array.
    pub fn min_items(self, n: u64) -> Self {
        self.keyword("minItems", n)
    }

    /// `maxItems` of an array.
    pub fn max_items(self, n: u64) -> Self {
        self.keyword("maxItems", n)
    }

    /// `properties` of an object argument, e.g. `json!({"street": {"type": "string"}})`.
    pub fn properties(self, properties: Value) -> Self {
        self.keyword("properties", properties)
    }

    /// Whether the argument is required.
    pub fn is_required(&self) -> bool {
        self.required
    }
}

/// [`Prop::new`]: no options.
pub fn prop() -> Prop {
    Prop::new()
}

/// [`Prop::required`]: the argument must be given.
pub fn required() -> Prop {
    Prop::new().required()
}

/// [`Prop::description`].
pub fn description(text: impl Into<String>) -> Prop {
    Prop::new().description(text)
}

/// [`Prop::title`].
pub fn title(text: impl Into<String>) -> Prop {
    Prop::new().title(text)
}

/// [`Prop::min`]: `minimum`.
pub fn min(n: impl IntoNumber) -> Prop {
    Prop::new().min(n)
}

/// [`Prop::max`]: `maximum`.
pub fn max(n: impl IntoNumber) -> Prop {
    Prop::new().max(n)
}

/// [`Prop::default`]: the value used when the argument is left out.
pub fn default(value: impl Into<Value>) -> Prop {
    Prop::new().default(value)
}

/// [`Prop::items`]: an array's element schema.
pub fn items(schema: Value) -> Prop {
    Prop::new().items(schema)
}

/// Builder methods for [`Tool`], the `tools/list` entry (mcp-go's `NewTool(name,
/// WithDescription(..), WithString(..))`).
impl Tool {
    /// A tool whose input schema is `schema`, kept exactly as given (a JSON Schema 2020-12
    /// document with `$defs`, `additionalProperties`, …).
    pub fn with_schema(name: impl Into<String>, schema: JsonObject) -> Self {
        Tool {
            input_schema: schema,
            ..Tool::new(name)
        }
    }

    /// Says whether the tool may run as a task (`execution.taskSupport`, the Tasks
    /// extension). [`Server::task_tool`](crate::Server::task_tool) sets `optional` itself;
    /// `required` makes the server refuse the tool (-32021) to a client without the
    /// extension.
    pub fn task_support(mut self, support: crate::schema::TaskSupport) -> Self {
        self.execution
            .get_or_insert_with(Default::default)
            .task_support = Some(support);
        self
    }

    /// Sets `description`: what the tool does, for the model.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// Sets `title`: a human-readable name.
    pub fn title(mut self, text: impl Into<String>) -> Self {
        self.title = Some(text.into());
        self
    }

    /// Replaces the input schema with `schema`, kept exactly as given.
    pub fn input_schema(mut self, schema: JsonObject) -> Self {
        self.input_schema = schema;
        self
    }

    /// Sets the output schema (the shape of `structuredContent`), kept exactly as given.
    pub fn output_schema(mut self, schema: JsonObject) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// Sets the behaviour hints.
    pub fn annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.annotations = Some(annotations);
        self
    }

    /// Adds an argument with a raw JSON Schema (`{"type": …}` and whatever else), then the
    /// options of `prop`.
    pub fn property(mut self, name: &str, schema: JsonObject, prop: Prop) -> Self {
        let mut schema = schema;
        schema.extend(prop.keywords);
        let root = &mut self.input_schema;
        if !matches!(root.get("properties"), Some(Value::Object(_))) {
            root.insert("properties".into(), Value::Object(JsonObject::new()));
        }
        if let Some(Value::Object(properties)) = root.get_mut("properties") {
            properties.insert(name.to_owned(), Value::Object(schema));
        }
        if prop.required {
            if !matches!(root.get("required"), Some(Value::Array(_))) {
                root.insert("required".into(), Value::Array(Vec::new()));
            }
            if let Some(Value::Array(list)) = root.get_mut("required")
                && !list.iter().any(|v| v.as_str() == Some(name))
            {
                list.push(Value::String(name.to_owned()));
            }
        }
        self
    }

    fn typed(self, name: &str, ty: &str, prop: Prop) -> Self {
        let mut schema = JsonObject::new();
        schema.insert("type".into(), ty.into());
        self.property(name, schema, prop)
    }

    /// Adds a string argument (mcp-go's `WithString`).
    pub fn string(self, name: &str, prop: Prop) -> Self {
        self.typed(name, "string", prop)
    }

    /// Adds a number argument (mcp-go's `WithNumber`).
    pub fn number(self, name: &str, prop: Prop) -> Self {
        self.typed(name, "number", prop)
    }

    /// Adds an integer argument.
    pub fn integer(self, name: &str, prop: Prop) -> Self {
        self.typed(name, "integer", prop)
    }

    /// Adds a boolean argument (mcp-go's `WithBoolean`).
    pub fn boolean(self, name: &str, prop: Prop) -> Self {
        self.typed(name, "boolean", prop)
    }

    /// Adds an array argument; give its element schema with [`Prop::items`].
    pub fn array(self, name: &str, prop: Prop) -> Self {
        self.typed(name, "array", prop)
    }

    /// Adds an object argument; give its members with [`Prop::properties`].
    pub fn object(self, name: &str, prop: Prop) -> Self {
        self.typed(name, "object", prop)
    }

    /// Adds a string argument that must be one of `values`.
    pub fn enumeration<V: Into<String>>(
        self,
        name: &str,
        values: impl IntoIterator<Item = V>,
        prop: Prop,
    ) -> Self {
        let values: Vec<Value> = values
            .into_iter()
            .map(|v| Value::String(v.into()))
            .collect();
        let mut schema = JsonObject::new();
        schema.insert("type".into(), "string".into());
        schema.insert("enum".into(), Value::Array(values));
        self.property(name, schema, prop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn seed_tools_build_the_expected_schemas() {
        let t = Tool::new("create_user")
            .description("Create a new user")
            .string("name", required())
            .string("email", required().format("email"))
            .number("age", min(0));
        assert_eq!(t.description.as_deref(), Some("Create a new user"));
        assert_eq!(
            Value::Object(t.input_schema),
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "email": {"type": "string", "format": "email"},
                    "age": {"type": "number", "minimum": 0}
                },
                "required": ["name", "email"]
            })
        );
    }

    #[test]
    fn every_kind_and_option() {
        let t = Tool::new("all")
            .boolean("b", default(true))
            .array(
                "a",
                items(json!({"type": "string"})).min_items(1).max_items(3),
            )
            .object("o", prop().properties(json!({"x": {"type": "integer"}})))
            .string("s", title("S").min_length(1).max_length(5).pattern("^a"))
            .number(
                "n",
                min(0.5).max(f64::NAN).exclusive_min(0).exclusive_max(9u8),
            )
            .integer("i", required().keyword("multipleOf", 2))
            .integer("i", required());
        let props = &t.input_schema["properties"];
        assert_eq!(props["b"], json!({"type": "boolean", "default": true}));
        assert_eq!(
            props["a"],
            json!({"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3})
        );
        assert_eq!(props["o"]["properties"]["x"]["type"], "integer");
        assert_eq!(props["s"]["maxLength"], 5);
        assert_eq!(
            props["n"],
            json!({"type": "number", "minimum": 0.5, "exclusiveMinimum": 0, "exclusiveMaximum": 9}),
            "NaN is left out"
        );
        assert_eq!(t.input_schema["required"], json!(["i"]), "no duplicates");
    }

    #[test]
    fn raw_schemas_are_kept_exactly() {
        let text = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"}},"additionalProperties":false}"##;
        let schema: JsonObject = serde_json::from_str(text).unwrap();
        let t = Tool::with_schema("json_schema_2020_12_tool", schema);
        let listed = serde_json::to_string(&t.input_schema).unwrap();
        assert_eq!(listed, text);
    }
}
