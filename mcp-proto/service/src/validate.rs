//! Tool arguments against the tool's input schema: defaults filled in, then a check of the
//! JSON Schema keywords the [builder](super::tool_schema) writes.
//!
//! # What is checked
//!
//! `type` (one or a list; `integer` means a number without a fraction), `enum`, `const`,
//! `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `minLength`, `maxLength`
//! (in characters), `items`, `minItems`, `maxItems`, `properties`, `required` and
//! `additionalProperties: false`, recursively. Everything else — `$ref`, `pattern`,
//! `format`, composition keywords — is not evaluated: a raw schema that relies on them is
//! shown to clients as written, and its handler checks the rest itself. A subschema that
//! uses `$ref` is skipped entirely.
//!
//! Defaults: each top-level property with a `default` that the call leaves out is filled in,
//! so `args.get_int("limit", 0)` sees the schema's default.

use serde_json::Value;

use crate::schema::JsonObject;

/// Fills in the top-level defaults of `schema` that `args` leaves out.
pub(crate) fn apply_defaults(schema: &JsonObject, args: &mut JsonObject) {
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return;
    };
    for (name, property) in properties {
        if let Some(default) = property.get("default")
            && !args.contains_key(name)
        {
            args.insert(name.clone(), default.clone());
        }
    }
}

/// Checks `args` against `schema`; the error lists every violation, one per `; `.
pub(crate) fn validate(schema: &JsonObject, args: &JsonObject) -> Result<(), String> {
    let mut errors = Vec::new();
    check_object(schema, args, &Path::Root, &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// Where a value sits in the arguments (`` `address.zip` ``, `` `tags[0]` ``), written out
/// only when a violation names it: a valid call formats nothing.
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    Field(&'a Path<'a>, &'a str),
    Item(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn write_inside(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Field(parent, name) => {
                parent.write_inside(f)?;
                if !matches!(parent, Path::Root) {
                    f.write_str(".")?;
                }
                f.write_str(name)
            }
            Path::Item(parent, i) => {
                parent.write_inside(f)?;
                write!(f, "[{i}]")
            }
        }
    }
}

impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("`")?;
        self.write_inside(f)?;
        f.write_str("`")
    }
}

fn check_object(
    schema: &JsonObject,
    object: &JsonObject,
    path: &Path<'_>,
    errors: &mut Vec<String>,
) {
    if let Some(Value::Array(required)) = schema.get("required") {
        for name in required.iter().filter_map(Value::as_str) {
            if !object.contains_key(name) {
                errors.push(format!("{} is required", Path::Field(path, name)));
            }
        }
    }
    let properties = match schema.get("properties") {
        Some(Value::Object(p)) => Some(p),
        _ => None,
    };
    for (name, value) in object {
        match properties.and_then(|p| p.get(name)) {
            Some(Value::Object(sub)) => check_value(sub, value, &Path::Field(path, name), errors),
            Some(_) => {}
            None => {
                if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                    errors.push(format!(
                        "{} is not an accepted argument",
                        Path::Field(path, name)
                    ));
                }
            }
        }
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "integer" => value.as_number().is_some_and(|n| {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }),
        "number" => value.is_number(),
        other => type_name(value) == other,
    }
}

fn check_value(schema: &JsonObject, value: &Value, path: &Path<'_>, errors: &mut Vec<String>) {
    if schema.contains_key("$ref") {
        return;
    }
    let (one, many): ([&str; 1], Vec<&str>);
    let types: &[&str] = match schema.get("type") {
        Some(Value::String(t)) => {
            one = [t.as_str()];
            &one
        }
        Some(Value::Array(list)) => {
            many = list.iter().filter_map(Value::as_str).collect();
            &many
        }
        _ => &[],
    };
    if !types.is_empty() && !types.iter().any(|t| has_type(value, t)) {
        errors.push(format!(
            "{path} must be {} {}, not {}",
            if types[0].starts_with(['a', 'i', 'o']) {
                "an"
            } else {
                "a"
            },
            types.join(" or "),
            type_name(value)
        ));
        return;
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        errors.push(format!("{path} must be one of {}", list.join(", ")));
    }
    if let Some(expected) = schema.get("const")
        && expected != value
    {
        errors.push(format!("{path} must be {expected}"));
    }
    match value {
        Value::Number(n) => {
            let Some(x) = n.as_f64() else { return };
            let bound = |k: &str| schema.get(k).and_then(Value::as_f64);
            if let Some(m) = bound("minimum").filter(|m| x < *m) {
                errors.push(format!("{path} must be at least {m}"));
            }
            if let Some(m) = bound("maximum").filter(|m| x > *m) {
                errors.push(format!("{path} must be at most {m}"));
            }
            if let Some(m) = bound("exclusiveMinimum").filter(|m| x <= *m) {
                errors.push(format!("{path} must be greater than {m}"));
            }
            if let Some(m) = bound("exclusiveMaximum").filter(|m| x >= *m) {
                errors.push(format!("{path} must be less than {m}"));
            }
        }
        Value::String(s) => {
            let len = s.chars().count() as u64;
            if let Some(m) = schema
                .get("minLength")
                .and_then(Value::as_u64)
                .filter(|m| len < *m)
            {
                errors.push(format!("{path} must be at least {m} characters long"));
            }
            if let Some(m) = schema
                .get("maxLength")
                .and_then(Value::as_u64)
                .filter(|m| len > *m)
            {
                errors.push(format!("{path} must be at most {m} characters long"));
            }
        }
        Value::Array(items) => {
            let len = items.len() as u64;
            if let Some(m) = schema
                .get("minItems")
                .and_then(Value::as_u64)
                .filter(|m| len < *m)
            {
                errors.push(format!("{path} must have at least {m} items"));
            }
            if let Some(m) = schema
                .get("maxItems")
                .and_then(Value::as_u64)
                .filter(|m| len > *m)
            {
                errors.push(format!("{path} must have at most {m} items"));
            }
            if let Some(Value::Object(item_schema)) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check_value(item_schema, item, &Path::Item(path, i), errors);
                }
            }
        }
        Value::Object(object) => check_object(schema, object, path, errors),
        Value::Null | Value::Bool(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Tool;
    use crate::tool_schema::{default, items, max, prop, required};
    use serde_json::json;

    fn args(v: Value) -> JsonObject {
        match v {
            Value::Object(o) => o,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn defaults_and_bounds() {
        let t = Tool::new("search")
            .string("query", required())
            .number("limit", default(10).max(100))
            .integer("offset", default(0).min(0));
        let mut a = args(json!({"query": "x"}));
        apply_defaults(&t.input_schema, &mut a);
        assert_eq!(
            Value::Object(a.clone()),
            json!({"query": "x", "limit": 10, "offset": 0})
        );
        assert_eq!(validate(&t.input_schema, &a), Ok(()));

        let bad = args(json!({"limit": 101, "offset": -1.5}));
        let err = validate(&t.input_schema, &bad).unwrap_err();
        assert_eq!(
            err,
            "`query` is required; `limit` must be at most 100; `offset` must be an integer, not number"
        );
        let err = validate(&t.input_schema, &args(json!({"query": 1, "offset": -1}))).unwrap_err();
        assert_eq!(
            err,
            "`query` must be a string, not number; `offset` must be at least 0"
        );
        assert_eq!(
            validate(&t.input_schema, &args(json!({"query": "", "offset": 2.0}))),
            Ok(())
        );
    }

    #[test]
    fn nested_enum_and_additional_properties() {
        let t = Tool::new("t")
            .enumeration("sort", ["a", "b"], prop())
            .array(
                "tags",
                items(json!({"type": "string", "maxLength": 2})).max_items(2),
            )
            .object(
                "address",
                prop().properties(json!({"zip": {"type": "string", "minLength": 5}})),
            );
        let err = validate(
            &t.input_schema,
            &args(json!({"sort": "c", "tags": ["abc", 1, "x"], "address": {"zip": "123"}})),
        )
        .unwrap_err();
        assert_eq!(
            err,
            "`sort` must be one of \"a\", \"b\"; `tags` must have at most 2 items; \
             `tags[0]` must be at most 2 characters long; `tags[1]` must be a string, not number; \
             `address.zip` must be at least 5 characters long"
        );
        let mut closed = t.input_schema.clone();
        closed.insert("additionalProperties".into(), false.into());
        assert_eq!(
            validate(&closed, &args(json!({"extra": 1}))).unwrap_err(),
            "`extra` is not an accepted argument"
        );
        assert_eq!(
            validate(&t.input_schema, &args(json!({"extra": 1}))),
            Ok(())
        );
    }

    #[test]
    fn refs_are_not_followed() {
        let schema = args(json!({
            "type": "object",
            "properties": {"address": {"$ref": "#/$defs/address"}},
        }));
        assert_eq!(validate(&schema, &args(json!({"address": 5}))), Ok(()));
        let _ = max(1);
    }
}
