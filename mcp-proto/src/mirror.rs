// S-NEW-7, S-NEW-8.
//! Header mirroring of revision 2026-07-28 (SEP-2243): the rules both sides
//! share for copying JSON-RPC body fields into HTTP headers and for checking them.
//!
//! A modern client copies `method` into `Mcp-Method` (every request), `params.name` /
//! `params.uri` into `Mcp-Name` (`tools/call`, `prompts/get` / `resources/read`), and every tool
//! argument whose property schema carries an `x-mcp-header: "{Name}"` annotation into
//! `Mcp-Param-{Name}`. A value that is not safe header text travels in the Base64 sentinel form
//! `=?base64?{standard padded Base64 of the UTF-8}?=`. A modern server checks every mirrored
//! header against the body it executes, after decoding, and rejects any difference (or a
//! missing required header, or one with invalid characters) with `400` and `HeaderMismatch`
//! (`-32020`).
//!
//! ## API in one glance
//!
//! | need | call |
//! | --- | --- |
//! | one value → header value | [`encode_value`] |
//! | header value → value | [`decode_value`] |
//! | `Mcp-Method` + `Mcp-Name` of a request | [`mirror_headers`] |
//! | the `x-mcp-header` declarations of a tool | [`ParamHeader::from_input_schema`] |
//! | `Mcp-Param-*` of a `tools/call` | [`param_headers`] |
//! | the server's check | [`check_headers`] |
//!
//! Everything here is pure: no I/O, no allocation beyond the values built.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use serde_json::value::RawValue;

pub use crate::http::header::{MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION};

/// The prefix of a tool parameter header: `Mcp-Param-{Name}` (lower-case, as `http` stores
/// names; header names compare case-insensitively).
pub const MCP_PARAM_PREFIX: &str = "mcp-param-";

/// The JSON Schema extension keyword that declares a parameter header.
pub const X_MCP_HEADER: &str = "x-mcp-header";

/// The opening of the Base64 sentinel form (case-sensitive).
pub const SENTINEL_PREFIX: &str = "=?base64?";

/// The closing of the Base64 sentinel form (case-sensitive).
pub const SENTINEL_SUFFIX: &str = "?=";

// S-NEW-7.
/// The `_meta` key whose value `MCP-Protocol-Version` must equal.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// The largest integer magnitude an `x-mcp-header` integer may have (2^53 − 1).
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

// S-NEW-8.
/// Which body field a method mirrors into `Mcp-Name`, if any: `name` for `tools/call` and
/// `prompts/get`, `uri` for `resources/read`, and `taskId` for the Tasks extension's
/// `tasks/get`, `tasks/update` and `tasks/cancel` (SEP-2663, "Routing Headers": so that a
/// load balancer can route a task's requests to the instance holding it).
pub fn name_source(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}

/// Whether `s` can travel as a plain header value: only visible ASCII, space and tab
/// (RFC 9110 field-value), no leading or trailing whitespace, and not itself of the sentinel
/// shape (which would be ambiguous).
pub fn is_plain_safe(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter().all(|&c| c == b'\t' || (0x20..=0x7e).contains(&c))
        && !b.first().is_some_and(|c| *c == b' ' || *c == b'\t')
        && !b.last().is_some_and(|c| *c == b' ' || *c == b'\t')
        && !looks_like_sentinel(s)
}

fn looks_like_sentinel(s: &str) -> bool {
    s.len() >= SENTINEL_PREFIX.len() + SENTINEL_SUFFIX.len()
        && s.starts_with(SENTINEL_PREFIX)
        && s.ends_with(SENTINEL_SUFFIX)
}

/// Encodes one value for a mirrored header: as is when [`is_plain_safe`], else as
/// `=?base64?{Base64 of the UTF-8}?=` (standard alphabet, padded).
pub fn encode_value(s: &str) -> HeaderValue {
    if is_plain_safe(s)
        && let Ok(v) = HeaderValue::from_str(s)
    {
        return v;
    }
    let text = format!("{SENTINEL_PREFIX}{}{SENTINEL_SUFFIX}", BASE64.encode(s));
    HeaderValue::from_str(&text).expect("Base64 text is a valid header value")
}

/// Why a mirrored header value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MirrorError {
    /// The value holds bytes outside visible ASCII, space and tab.
    #[error("header value contains invalid characters")]
    InvalidCharacters,
    /// The sentinel's payload is not valid Base64.
    #[error("header value has an invalid Base64 payload")]
    InvalidBase64,
    /// The sentinel's payload does not decode to UTF-8.
    #[error("header value's Base64 payload is not UTF-8")]
    NotUtf8,
}

/// Decodes a mirrored header value: the sentinel form is Base64-decoded to UTF-8; any other
/// value must be plain header text (visible ASCII, space, tab) and is returned as is.
pub fn decode_value(v: &HeaderValue) -> Result<String, MirrorError> {
    let b = v.as_bytes();
    if !b.iter().all(|&c| c == b'\t' || (0x20..=0x7e).contains(&c)) {
        return Err(MirrorError::InvalidCharacters);
    }
    // All ASCII, so this cannot fail.
    let s = std::str::from_utf8(b).map_err(|_| MirrorError::InvalidCharacters)?;
    if looks_like_sentinel(s) {
        let payload = &s[SENTINEL_PREFIX.len()..s.len() - SENTINEL_SUFFIX.len()];
        let bytes = BASE64
            .decode(payload)
            .map_err(|_| MirrorError::InvalidBase64)?;
        return String::from_utf8(bytes).map_err(|_| MirrorError::NotUtf8);
    }
    Ok(s.to_owned())
}

/// Reads `params` as a JSON object; `None` for absent, malformed or non-object params.
fn params_object(params: Option<&RawValue>) -> Option<serde_json::Map<String, Value>> {
    serde_json::from_str(params?.get()).ok()
}

// S-NEW-8.
/// The standard mirrored headers of a request: `Mcp-Method` always, and `Mcp-Name` when the
/// method has a [`name_source`] and `params` holds that field as a string. Values
/// are encoded with [`encode_value`]. (A method name that is not valid header text gets the
/// sentinel form too.)
pub fn mirror_headers(method: &str, params: Option<&RawValue>) -> Vec<(HeaderName, HeaderValue)> {
    let mut out = vec![(HeaderName::from_static(MCP_METHOD), encode_value(method))];
    if let Some(field) = name_source(method)
        && let Some(obj) = params_object(params)
        && let Some(Value::String(name)) = obj.get(field)
    {
        out.push((HeaderName::from_static(MCP_NAME), encode_value(name)));
    }
    out
}

/// One `x-mcp-header` declaration of a tool: the header `Mcp-Param-{name}` mirrors the argument
/// at `path` (a chain of `properties` keys from the root of `inputSchema`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    /// The `{Name}` part, as declared (an RFC 9110 token).
    pub name: String,
    /// The property path inside the call's `arguments`.
    pub path: Vec<String>,
}

// S-NEW-8.
/// The `x-mcp-header` declarations of a server's tools, by tool name: what a modern router
/// checks a `tools/call`'s `Mcp-Param-*` headers against. Plain data: whoever knows the tools
/// (the service binding, each time they change) hands a new table to the router
/// (`Router::set_param_headers`); the router never calls out for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParamHeaderTable {
    tools: std::collections::HashMap<Box<str>, Vec<ParamHeader>>,
}

impl ParamHeaderTable {
    /// An empty table: no tool declares a parameter header.
    pub fn new() -> Self {
        Self::default()
    }

    /// The table of tools given as `(name, inputSchema)`: each tool's declarations as
    /// [`ParamHeader::from_input_schema`] reads them. A tool whose declarations are invalid
    /// gets none (a server should not publish it; a client drops it from `tools/list`).
    pub fn from_input_schemas<'a>(tools: impl IntoIterator<Item = (&'a str, &'a Value)>) -> Self {
        let mut table = Self::new();
        for (name, schema) in tools {
            if let Ok(decls) = ParamHeader::from_input_schema(schema) {
                table.insert(name, decls);
            }
        }
        table
    }

    /// Sets the declarations of `tool` (none: it is forgotten). Declarations whose name
    /// cannot make a header name are dropped.
    pub fn insert(&mut self, tool: impl Into<Box<str>>, decls: Vec<ParamHeader>) {
        let tool = tool.into();
        let decls: Vec<_> = decls
            .into_iter()
            .filter(|d| {
                let name = format!("{MCP_PARAM_PREFIX}{}", d.name);
                !d.name.is_empty() && HeaderName::from_bytes(name.as_bytes()).is_ok()
            })
            .collect();
        if decls.is_empty() {
            self.tools.remove(&tool);
        } else {
            self.tools.insert(tool, decls);
        }
    }

    /// The declarations of `tool` (empty for an unknown tool or one without any).
    pub fn get(&self, tool: &str) -> &[ParamHeader] {
        self.tools.get(tool).map_or(&[], Vec::as_slice)
    }

    /// How many tools declare parameter headers.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool declares any.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// Why a tool's `x-mcp-header` declarations are invalid (the client must then drop the tool
/// from `tools/list`; a server should not publish it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidParamHeader {
    /// The value is not a non-empty RFC 9110 token.
    #[error("x-mcp-header {0:?} is not a non-empty HTTP token")]
    NotAToken(String),
    /// Two declarations differ only in case.
    #[error("x-mcp-header {0:?} is declared twice (case-insensitively)")]
    Duplicate(String),
    /// The annotated property is not of type string, integer or boolean.
    #[error("x-mcp-header {0:?} is on a property whose type is not string, integer or boolean")]
    NotPrimitive(String),
    /// An annotation outside a chain of `properties` keys from the root (under `items`,
    /// `oneOf`, `$ref`, …).
    #[error("x-mcp-header is not statically reachable through `properties` from the root")]
    Unreachable,
}

fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

fn is_primitive_type(schema: &serde_json::Map<String, Value>) -> bool {
    const OK: [&str; 3] = ["string", "integer", "boolean"];
    match schema.get("type") {
        Some(Value::String(t)) => OK.contains(&t.as_str()),
        Some(Value::Array(ts)) => {
            let mut non_null = ts.iter().filter(|t| t.as_str() != Some("null"));
            let first = non_null.next();
            first.is_some_and(|t| t.as_str().is_some_and(|t| OK.contains(&t)))
                && non_null.next().is_none()
        }
        _ => false,
    }
}

/// Counts every `x-mcp-header` key anywhere in a JSON value.
fn count_annotations(v: &Value) -> usize {
    match v {
        Value::Object(m) => {
            usize::from(m.contains_key(X_MCP_HEADER))
                + m.values().map(count_annotations).sum::<usize>()
        }
        Value::Array(a) => a.iter().map(count_annotations).sum(),
        _ => 0,
    }
}

impl ParamHeader {
    /// Reads and validates the `x-mcp-header` declarations of a tool's `inputSchema`, in schema
    /// order. Follows only `properties` chains from the root (the spec's "statically
    /// reachable"); an annotation anywhere else, a non-token or duplicate name, or a
    /// non-primitive (or `number`) property makes the whole set invalid.
    pub fn from_input_schema(input_schema: &Value) -> Result<Vec<ParamHeader>, InvalidParamHeader> {
        let mut out = Vec::new();
        let mut path = Vec::new();
        collect(input_schema, &mut path, &mut out)?;
        if count_annotations(input_schema) != out.len() {
            return Err(InvalidParamHeader::Unreachable);
        }
        for (i, a) in out.iter().enumerate() {
            if out[..i]
                .iter()
                .any(|b| b.name.eq_ignore_ascii_case(&a.name))
            {
                return Err(InvalidParamHeader::Duplicate(a.name.clone()));
            }
        }
        Ok(out)
    }

    /// The header name, `mcp-param-{name}` lower-cased.
    pub fn header_name(&self) -> HeaderName {
        HeaderName::from_bytes(
            format!("{MCP_PARAM_PREFIX}{}", self.name)
                .to_ascii_lowercase()
                .as_bytes(),
        )
        .expect("a validated token makes a valid header name")
    }

    /// The argument at [`path`](Self::path) rendered as the spec's string form, or `None` when
    /// absent, `null`, or not a string / integer / boolean.
    pub fn value_in(&self, arguments: Option<&Value>) -> Option<String> {
        let mut v = arguments?;
        for key in &self.path {
            v = v.as_object()?.get(key)?;
        }
        primitive_string(v)
    }
}

fn collect(
    schema: &Value,
    path: &mut Vec<String>,
    out: &mut Vec<ParamHeader>,
) -> Result<(), InvalidParamHeader> {
    let Some(Value::Object(props)) = schema.get("properties") else {
        return Ok(());
    };
    for (key, sub) in props {
        path.push(key.clone());
        if let Some(Value::Object(sub_obj)) = Some(sub) {
            if let Some(decl) = sub_obj.get(X_MCP_HEADER) {
                let name = match decl {
                    Value::String(s) if !s.is_empty() && s.bytes().all(is_tchar) => s.clone(),
                    other => return Err(InvalidParamHeader::NotAToken(other.to_string())),
                };
                if !is_primitive_type(sub_obj) {
                    return Err(InvalidParamHeader::NotPrimitive(name));
                }
                out.push(ParamHeader {
                    name,
                    path: path.clone(),
                });
            }
            collect(sub, path, out)?;
        }
        path.pop();
    }
    Ok(())
}

/// The spec's string form of a mirrored argument: a string as is, an integer in decimal, a
/// boolean as `true`/`false`; `None` for anything else (including `null` and non-integral
/// numbers).
fn primitive_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(i.to_string())
            } else if let Some(u) = n.as_u64() {
                Some(u.to_string())
            } else {
                let f = n.as_f64()?;
                (f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER as f64)
                    .then(|| (f as i64).to_string())
            }
        }
        _ => None,
    }
}

// S-NEW-8.
/// The `Mcp-Param-{Name}` headers of a `tools/call` whose tool declares `decls`, for these
/// `arguments`: one per declaration whose argument is present and not `null`.
pub fn param_headers(
    decls: &[ParamHeader],
    arguments: Option<&Value>,
) -> Vec<(HeaderName, HeaderValue)> {
    decls
        .iter()
        .filter_map(|d| Some((d.header_name(), encode_value(&d.value_in(arguments)?))))
        .collect()
}

/// Which mirrored header a check failed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirroredHeader {
    /// `MCP-Protocol-Version` vs `_meta` `io.modelcontextprotocol/protocolVersion`.
    ProtocolVersion,
    /// `Mcp-Method` vs `method`.
    Method,
    /// `Mcp-Name` vs `params.name` / `params.uri`.
    Name,
    /// `Mcp-Param-{0}` vs the declared argument.
    Param(String),
}

impl std::fmt::Display for MirroredHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MirroredHeader::ProtocolVersion => f.write_str("MCP-Protocol-Version"),
            MirroredHeader::Method => f.write_str("Mcp-Method"),
            MirroredHeader::Name => f.write_str("Mcp-Name"),
            MirroredHeader::Param(n) => write!(f, "Mcp-Param-{n}"),
        }
    }
}

// S-NEW-8.
/// Why a modern request's headers do not mirror its body. Every variant is answered
/// with `400 Bad Request` and JSON-RPC `-32020` (`HeaderMismatch`); its `Display` is the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MirrorMismatch {
    /// A required header is absent (or sent more than once).
    #[error("Header mismatch: required header {0} is missing or repeated")]
    Missing(MirroredHeader),
    /// A header's value cannot be read.
    #[error("Header mismatch: {0} header value is malformed: {1}")]
    Malformed(MirroredHeader, MirrorError),
    /// A header's decoded value differs from the body.
    #[error(
        "Header mismatch: {header} header value {header_value:?} does not match body value {body_value:?}"
    )]
    Differs {
        /// The header.
        header: MirroredHeader,
        /// Its decoded value.
        header_value: String,
        /// The body's value (`""` when the body has none).
        body_value: String,
    },
}

/// The single value of a header, or `Missing` when absent or repeated.
fn single<'a>(
    headers: &'a HeaderMap,
    name: &str,
    which: MirroredHeader,
) -> Result<Option<&'a HeaderValue>, MirrorMismatch> {
    let mut it = headers.get_all(name).iter();
    match (it.next(), it.next()) {
        (None, _) => Ok(None),
        (Some(v), None) => Ok(Some(v)),
        (Some(_), Some(_)) => Err(MirrorMismatch::Missing(which)),
    }
}

fn decoded(v: &HeaderValue, which: &MirroredHeader) -> Result<String, MirrorMismatch> {
    decode_value(v).map_err(|e| MirrorMismatch::Malformed(which.clone(), e))
}

/// Whether a decoded header value equals the body's string form; integers compare numerically
/// (`42.0` equals `42`), as the spec recommends.
fn same_value(header: &str, body: &Value, body_str: &str) -> bool {
    if header == body_str {
        return true;
    }
    if let Value::Number(n) = body
        && let (Ok(h), Some(b)) = (header.trim().parse::<f64>(), n.as_f64())
    {
        return h == b;
    }
    false
}

// S-NEW-7/S-NEW-8.
/// The server's check of a modern request's headers against its body.
///
/// Checks, in order:
/// 1. `MCP-Protocol-Version` is present once and equals `params._meta`'s
///    `io.modelcontextprotocol/protocolVersion` (when the body has one; a body without it is a
///    `-32602` matter the caller reports itself);
/// 2. `Mcp-Method` is present once and equals `method`;
/// 3. for `tools/call`, `resources/read`, `prompts/get`: `Mcp-Name` is present once and, decoded,
///    equals `params.name` / `params.uri` (when the body lacks that field, the header must be
///    absent too and the caller's params validation speaks);
/// 4. for every declaration in `param_decls` (the called tool's [`ParamHeader`]s; pass `&[]`
///    for other methods or an unknown tool): when the argument is present and not `null`, the
///    header is present once and, decoded, equals it; when it is absent, so is the header.
///
/// Every header value must be plain header text or a valid sentinel. `Mcp-Param-*` headers that
/// no declaration names are ignored (an intermediary's business).
pub fn check_headers(
    headers: &HeaderMap,
    method: &str,
    params: Option<&RawValue>,
    param_decls: &[ParamHeader],
) -> Result<(), MirrorMismatch> {
    let obj = params_object(params);

    // 1. MCP-Protocol-Version (plain text; the sentinel is not defined for it).
    let which = MirroredHeader::ProtocolVersion;
    let version = single(headers, MCP_PROTOCOL_VERSION, which.clone())?
        .ok_or(MirrorMismatch::Missing(which.clone()))?;
    let version = version
        .to_str()
        .map_err(|_| MirrorMismatch::Malformed(which.clone(), MirrorError::InvalidCharacters))?
        .trim();
    if let Some(Value::String(body)) = obj
        .as_ref()
        .and_then(|o| o.get("_meta"))
        .and_then(|m| m.get(META_PROTOCOL_VERSION))
        && body != version
    {
        return Err(MirrorMismatch::Differs {
            header: which,
            header_value: version.to_owned(),
            body_value: body.clone(),
        });
    }

    // 2. Mcp-Method.
    let which = MirroredHeader::Method;
    let m = single(headers, MCP_METHOD, which.clone())?
        .ok_or(MirrorMismatch::Missing(which.clone()))?;
    let m = decoded(m, &which)?;
    if m != method {
        return Err(MirrorMismatch::Differs {
            header: which,
            header_value: m,
            body_value: method.to_owned(),
        });
    }

    // 3. Mcp-Name.
    if let Some(field) = name_source(method) {
        let which = MirroredHeader::Name;
        let header = single(headers, MCP_NAME, which.clone())?;
        let body = obj.as_ref().and_then(|o| o.get(field));
        match (header, body) {
            (None, None) => {}
            (None, Some(_)) => return Err(MirrorMismatch::Missing(which)),
            (Some(h), body) => {
                let h = decoded(h, &which)?;
                let body_str = body.and_then(Value::as_str).unwrap_or_default();
                if body.and_then(Value::as_str) != Some(h.as_str()) {
                    return Err(MirrorMismatch::Differs {
                        header: which,
                        header_value: h,
                        body_value: body_str.to_owned(),
                    });
                }
            }
        }
    }

    // 4. Mcp-Param-*.
    let arguments = obj.as_ref().and_then(|o| o.get("arguments"));
    for decl in param_decls {
        let which = MirroredHeader::Param(decl.name.clone());
        let name = decl.header_name();
        let header = single(headers, name.as_str(), which.clone())?;
        let body = {
            let mut v = arguments;
            for key in &decl.path {
                v = v.and_then(|v| v.as_object()).and_then(|o| o.get(key));
            }
            v.filter(|v| !v.is_null())
        };
        match (header, body) {
            (None, None) => {}
            (None, Some(_)) => return Err(MirrorMismatch::Missing(which)),
            (Some(h), body) => {
                let h = decoded(h, &which)?;
                let body_str = body.and_then(primitive_string);
                let ok = match (body, &body_str) {
                    (Some(b), Some(s)) => same_value(&h, b, s),
                    _ => false,
                };
                if !ok {
                    return Err(MirrorMismatch::Differs {
                        header: which,
                        header_value: h,
                        body_value: body.map(|b| b.to_string()).unwrap_or_default(),
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn raw(v: Value) -> Box<RawValue> {
        RawValue::from_string(v.to_string()).unwrap()
    }

    #[test]
    fn s_new_8_spec_encoding_examples() {
        let cases = [
            ("us-west1", "us-west1"),
            ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            (" padded ", "=?base64?IHBhZGRlZCA=?="),
            ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
            ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        ];
        for (value, wire) in cases {
            assert_eq!(encode_value(value).to_str().unwrap(), wire, "{value:?}");
            assert_eq!(
                decode_value(&HeaderValue::from_static(wire)).unwrap(),
                value
            );
        }
    }

    #[test]
    fn s_new_8_decode_rejects_bad_values() {
        assert_eq!(
            decode_value(&HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap()),
            Err(MirrorError::InvalidCharacters)
        );
        assert_eq!(
            decode_value(&HeaderValue::from_static("=?base64?!!!?=")),
            Err(MirrorError::InvalidBase64)
        );
        // 0xff is not UTF-8.
        assert_eq!(
            decode_value(&HeaderValue::from_static("=?base64?/w==?=")),
            Err(MirrorError::NotUtf8)
        );
        // Prefix without suffix is plain text; markers are case-sensitive.
        assert_eq!(
            decode_value(&HeaderValue::from_static("=?BASE64?aGk=?=")).unwrap(),
            "=?BASE64?aGk=?="
        );
    }

    #[test]
    fn s_new_8_standard_headers_from_spec_examples() {
        let p = raw(json!({"name": "get_weather", "arguments": {"location": "Seattle, WA"}}));
        let h = mirror_headers("tools/call", Some(&p));
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].0, MCP_METHOD);
        assert_eq!(h[0].1, "tools/call");
        assert_eq!(h[1].0, MCP_NAME);
        assert_eq!(h[1].1, "get_weather");
        let p = raw(json!({"uri": "file:///projects/myapp/config.json"}));
        let h = mirror_headers("resources/read", Some(&p));
        assert_eq!(h[1].1, "file:///projects/myapp/config.json");
        let h = mirror_headers("tools/list", None);
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn s_new_8_spec_x_mcp_header_example() {
        let schema = json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "query": {"type": "string"}
            },
            "required": ["region", "query"]
        });
        let decls = ParamHeader::from_input_schema(&schema).unwrap();
        assert_eq!(
            decls,
            [ParamHeader {
                name: "Region".into(),
                path: vec!["region".into()]
            }]
        );
        let args = json!({"region": "us-west1", "query": "SELECT * FROM users"});
        let h = param_headers(&decls, Some(&args));
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].0, "mcp-param-region");
        assert_eq!(h[0].1, "us-west1");
        // Absent or null: no header.
        assert!(param_headers(&decls, Some(&json!({"query": "x"}))).is_empty());
        assert!(param_headers(&decls, Some(&json!({"region": null}))).is_empty());
    }

    #[test]
    fn x_mcp_header_constraints() {
        let bad = |schema: Value| ParamHeader::from_input_schema(&schema).unwrap_err();
        assert_eq!(
            bad(json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}})),
            InvalidParamHeader::NotAToken("\"\"".into())
        );
        assert!(matches!(
            bad(json!({"properties": {"a": {"type": "string", "x-mcp-header": "A B"}}})),
            InvalidParamHeader::NotAToken(_)
        ));
        assert!(matches!(
            bad(json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}})),
            InvalidParamHeader::NotPrimitive(_)
        ));
        assert!(matches!(
            bad(json!({"properties": {
                "a": {"type": "string", "x-mcp-header": "Dup"},
                "b": {"type": "string", "x-mcp-header": "dUP"}}})),
            InvalidParamHeader::Duplicate(_)
        ));
        assert_eq!(
            bad(json!({"properties": {"a": {"type": "array",
                "items": {"type": "string", "x-mcp-header": "A"}}}})),
            InvalidParamHeader::Unreachable
        );
        assert_eq!(
            bad(json!({"oneOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]})),
            InvalidParamHeader::Unreachable
        );
        // Nested properties are fine.
        let ok = ParamHeader::from_input_schema(&json!({"properties": {"outer": {"type": "object",
            "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}}}}))
        .unwrap();
        assert_eq!(ok[0].path, ["outer", "n"]);
        assert_eq!(
            ok[0]
                .value_in(Some(&json!({"outer": {"n": 42}})))
                .as_deref(),
            Some("42")
        );
    }

    fn modern_headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn call_params(name: &str, args: Value) -> Box<RawValue> {
        raw(json!({"name": name, "arguments": args,
            "_meta": {META_PROTOCOL_VERSION: "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}))
    }

    #[test]
    fn s_new_8_check_accepts_mirrored_request() {
        let decls = vec![ParamHeader {
            name: "Region".into(),
            path: vec!["region".into()],
        }];
        let p = call_params("execute_sql", json!({"region": "us-west1", "query": "q"}));
        let h = modern_headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "execute_sql"),
            ("Mcp-Param-Region", "us-west1"),
        ]);
        assert_eq!(check_headers(&h, "tools/call", Some(&p), &decls), Ok(()));
    }

    #[test]
    fn s_new_8_check_rejects_each_mismatch() {
        let decls = vec![ParamHeader {
            name: "N".into(),
            path: vec!["n".into()],
        }];
        let p = call_params("bar", json!({"n": 42}));
        let base = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "bar"),
            ("mcp-param-n", "42.0"),
        ];
        let check = |drop: usize, replace: Option<(&'static str, &'static str)>| {
            let mut pairs: Vec<_> = base.to_vec();
            pairs.remove(drop);
            if let Some(r) = replace {
                pairs.push(r);
            }
            check_headers(&modern_headers(&pairs), "tools/call", Some(&p), &decls)
        };
        // Numeric comparison: 42.0 == 42.
        assert_eq!(check(0, Some(base[0])), Ok(()));
        for i in 0..4 {
            assert!(
                matches!(check(i, None), Err(MirrorMismatch::Missing(_))),
                "{i}"
            );
        }
        let e = check(2, Some(("mcp-name", "foo"))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Header mismatch: Mcp-Name header value \"foo\" does not match body value \"bar\""
        );
        assert!(matches!(
            check(0, Some(("mcp-protocol-version", "2025-11-25"))),
            Err(MirrorMismatch::Differs {
                header: MirroredHeader::ProtocolVersion,
                ..
            })
        ));
        assert!(matches!(
            check(1, Some(("mcp-method", "tools/list"))),
            Err(MirrorMismatch::Differs {
                header: MirroredHeader::Method,
                ..
            })
        ));
        assert!(matches!(
            check(3, Some(("mcp-param-n", "43"))),
            Err(MirrorMismatch::Differs {
                header: MirroredHeader::Param(_),
                ..
            })
        ));
        assert!(matches!(
            check(3, Some(("mcp-param-n", "=?base64?***?="))),
            Err(MirrorMismatch::Malformed(..))
        ));
        // A repeated header is refused.
        let mut h = modern_headers(&base);
        h.append("mcp-name", HeaderValue::from_static("bar"));
        assert!(check_headers(&h, "tools/call", Some(&p), &decls).is_err());
        // A param header without a body value is a mismatch.
        let p2 = call_params("bar", json!({}));
        assert!(check_headers(&modern_headers(&base), "tools/call", Some(&p2), &decls).is_err());
    }

    #[test]
    fn sentinel_name_is_decoded_before_comparison() {
        let p = call_params("wetter_für_köln", json!({}));
        let mut h = modern_headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
        ]);
        for (k, v) in mirror_headers("tools/call", Some(&p)) {
            h.insert(k, v);
        }
        assert!(h["mcp-name"].to_str().unwrap().starts_with(SENTINEL_PREFIX));
        assert_eq!(check_headers(&h, "tools/call", Some(&p), &[]), Ok(()));
    }

    proptest! {
        #[test]
        fn encode_decode_round_trips(s in any::<String>()) {
            let v = encode_value(&s);
            prop_assert_eq!(decode_value(&v).unwrap(), s.clone());
            // Plain exactly when safe.
            prop_assert_eq!(v.as_bytes() == s.as_bytes(), is_plain_safe(&s));
        }

        #[test]
        fn ascii_round_trips(s in "[ -~\t\n]{0,40}") {
            prop_assert_eq!(decode_value(&encode_value(&s)).unwrap(), s);
        }

        #[test]
        fn mirrored_headers_always_pass_the_check(
            name in any::<String>(),
            region in proptest::option::of(any::<String>()),
            n in proptest::option::of(-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER),
        ) {
            let schema = json!({"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "n": {"type": "integer", "x-mcp-header": "N"}}});
            let decls = ParamHeader::from_input_schema(&schema).unwrap();
            let mut args = serde_json::Map::new();
            if let Some(r) = &region { args.insert("region".into(), json!(r)); }
            if let Some(n) = n { args.insert("n".into(), json!(n)); }
            let args = Value::Object(args);
            let p = call_params(&name, args.clone());
            let mut h = modern_headers(&[("mcp-protocol-version", "2026-07-28")]);
            for (k, v) in mirror_headers("tools/call", Some(&p))
                .into_iter()
                .chain(param_headers(&decls, Some(&args)))
            {
                h.insert(k, v);
            }
            prop_assert_eq!(check_headers(&h, "tools/call", Some(&p), &decls), Ok(()));
        }
    }
}
