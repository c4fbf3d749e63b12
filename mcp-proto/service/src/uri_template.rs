//! [`UriTemplate`]: RFC 6570 URI templates at level 1 (`{var}`) plus reserved expansion
//! (`{+var}`, level 2), expanded and — the part a server needs — matched against URIs.
//!
//! # Decisions
//!
//! - **Operators.** `{var}` (simple string expansion) and `{+var}` (reserved expansion) are
//!   supported; the other level 2–4 operators (`#`, `.`, `/`, `;`, `?`, `&`), variable lists
//!   and modifiers are refused when the template is parsed, so a template never silently
//!   matches differently from what its author meant.
//! - **Matching.** A `{var}` matches one or more characters other than `/`, `?` and `#`
//!   (a simple expansion percent-encodes those, so they cannot come from a value); a `{+var}`
//!   matches one or more of any character. Empty values never match, so `users://` is not the
//!   user with the empty id. When several splits are possible (two variables side by side, or
//!   a literal that also occurs inside a value) the leftmost variable takes the shortest value
//!   that lets the rest match.
//! - **Values** are percent-decoded after matching; a value that does not decode to UTF-8
//!   does not match.

use std::collections::BTreeMap;
use std::fmt;

/// A parsed URI template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriTemplate {
    source: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Var { name: String, reserved: bool },
}

/// Why a string is not a URI template this module supports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid URI template {template:?}: {reason}")]
pub struct TemplateError {
    template: String,
    reason: &'static str,
}

impl UriTemplate {
    /// Parses `template`.
    pub fn parse(template: &str) -> Result<UriTemplate, TemplateError> {
        let fail = |reason| TemplateError {
            template: template.to_owned(),
            reason,
        };
        let mut parts = Vec::new();
        let mut rest = template;
        while !rest.is_empty() {
            match rest.find(['{', '}']) {
                None => {
                    parts.push(Part::Literal(rest.to_owned()));
                    rest = "";
                }
                Some(i) if rest.as_bytes()[i] == b'}' => return Err(fail("`}` without `{`")),
                Some(i) => {
                    if i > 0 {
                        parts.push(Part::Literal(rest[..i].to_owned()));
                    }
                    let close = rest[i..].find('}').ok_or_else(|| fail("unclosed `{`"))? + i;
                    let mut expr = &rest[i + 1..close];
                    if expr.contains('{') {
                        return Err(fail("nested `{`"));
                    }
                    let reserved = expr.starts_with('+');
                    if reserved {
                        expr = &expr[1..];
                    }
                    if expr.is_empty() {
                        return Err(fail("empty expression"));
                    }
                    if expr.starts_with(['#', '.', '/', ';', '?', '&', '=', ',', '!', '@', '|']) {
                        return Err(fail("only `{var}` and `{+var}` are supported"));
                    }
                    if expr.contains([',', ':', '*']) {
                        return Err(fail("variable lists and modifiers are not supported"));
                    }
                    if !expr
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '%')
                    {
                        return Err(fail("invalid variable name"));
                    }
                    if matches!(parts.last(), Some(Part::Var { .. })) {
                        // Allowed by RFC 6570, but matching it is guesswork: refuse it.
                        return Err(fail("two variables side by side cannot be matched"));
                    }
                    parts.push(Part::Var {
                        name: expr.to_owned(),
                        reserved,
                    });
                    rest = &rest[close + 1..];
                }
            }
        }
        Ok(UriTemplate {
            source: template.to_owned(),
            parts,
        })
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The names of the variables, in order.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Var { name, .. } => Some(name.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// Whether the template has no variables (it names one URI).
    pub fn is_literal(&self) -> bool {
        self.variables().next().is_none()
    }

    /// Expands the template with `value(name)` for each variable (an undefined one expands to
    /// nothing), percent-encoding as RFC 6570 says: everything but unreserved characters for
    /// `{var}`, everything but unreserved and reserved characters (and existing `%XX`
    /// triplets) for `{+var}`.
    pub fn expand<'a>(&self, value: impl Fn(&str) -> Option<&'a str>) -> String {
        let mut out = String::with_capacity(self.source.len());
        for part in &self.parts {
            match part {
                Part::Literal(text) => out.push_str(text),
                Part::Var { name, reserved } => {
                    if let Some(v) = value(name) {
                        encode(&mut out, v, *reserved);
                    }
                }
            }
        }
        out
    }

    /// Matches `uri` against the template: the variables' decoded values, or `None`.
    pub fn matches(&self, uri: &str) -> Option<BTreeMap<String, String>> {
        let mut raw = Vec::new();
        if !match_from(&self.parts, uri, &mut raw) {
            return None;
        }
        raw.into_iter()
            .map(|(name, value)| Some((name.to_owned(), decode(value)?)))
            .collect()
    }
}

impl fmt::Display for UriTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl std::str::FromStr for UriTemplate {
    type Err = TemplateError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        UriTemplate::parse(s)
    }
}

/// Matches `parts` against the whole of `uri`, pushing variable values onto `out`.
/// Recursion depth is bounded by the number of parts of the template.
fn match_from<'t, 'u>(parts: &'t [Part], uri: &'u str, out: &mut Vec<(&'t str, &'u str)>) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return uri.is_empty();
    };
    match first {
        Part::Literal(text) => uri
            .strip_prefix(text.as_str())
            .is_some_and(|tail| match_from(rest, tail, out)),
        Part::Var { name, reserved } => {
            // The longest value this variable may take.
            let limit = if *reserved {
                uri.len()
            } else {
                uri.find(['/', '?', '#']).unwrap_or(uri.len())
            };
            if rest.is_empty() {
                if limit == uri.len() && !uri.is_empty() {
                    out.push((name, uri));
                    return true;
                }
                return false;
            }
            // The next part is a literal (two variables in a row are refused by `parse`).
            for (end, _) in uri.char_indices().skip(1).chain([(uri.len(), ' ')]) {
                if end > limit {
                    break;
                }
                if end == 0 {
                    continue;
                }
                out.push((name, &uri[..end]));
                if match_from(rest, &uri[end..], out) {
                    return true;
                }
                out.pop();
            }
            false
        }
    }
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn is_reserved(b: u8) -> bool {
    matches!(
        b,
        b':' | b'/'
            | b'?'
            | b'#'
            | b'['
            | b']'
            | b'@'
            | b'!'
            | b'$'
            | b'&'
            | b'\''
            | b'('
            | b')'
            | b'*'
            | b'+'
            | b','
            | b';'
            | b'='
    )
}

fn encode(out: &mut String, value: &str, reserved: bool) {
    let bytes = value.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let triplet = reserved
            && b == b'%'
            && bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
            && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit);
        if is_unreserved(b) || (reserved && (is_reserved(b) || triplet)) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
        i += 1;
    }
}

fn decode(value: &str) -> Option<String> {
    if !value.contains('%') {
        return Some(value.to_owned());
    }
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = value.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn matches_level_1_templates() {
        let t = UriTemplate::parse("users://{user_id}").unwrap();
        assert_eq!(t.matches("users://42"), vars(&[("user_id", "42")]));
        assert_eq!(
            t.matches("users://john%20doe"),
            vars(&[("user_id", "john doe")])
        );
        assert_eq!(t.matches("users://"), None, "empty values never match");
        assert_eq!(
            t.matches("users://a/b"),
            None,
            "a simple value has no slash"
        );
        assert_eq!(t.matches("user://42"), None);
        assert_eq!(t.matches("users://%ff"), None, "not UTF-8");

        let t = UriTemplate::parse("test://template/{id}/data").unwrap();
        assert_eq!(
            t.matches("test://template/123/data"),
            vars(&[("id", "123")])
        );
        assert_eq!(t.matches("test://template/123/data/x"), None);
        assert_eq!(t.matches("test://template//data"), None);

        let t = UriTemplate::parse("db://{table}.{column}").unwrap();
        assert_eq!(
            t.matches("db://a.b.c"),
            vars(&[("table", "a"), ("column", "b.c")]),
            "leftmost shortest"
        );
    }

    #[test]
    fn reserved_expansion_spans_slashes() {
        let t = UriTemplate::parse("file:///{+path}").unwrap();
        assert_eq!(
            t.matches("file:///etc/hosts"),
            vars(&[("path", "etc/hosts")])
        );
        assert_eq!(t.expand(|_| Some("a b/c")), "file:///a%20b/c");
    }

    #[test]
    fn expands_with_percent_encoding() {
        let t = UriTemplate::parse("users://{user_id}?x=1").unwrap();
        assert_eq!(
            t.expand(|n| (n == "user_id").then_some("a/b c")),
            "users://a%2Fb%20c?x=1"
        );
        assert_eq!(t.expand(|_| None), "users://?x=1");
        assert_eq!(t.variables().collect::<Vec<_>>(), ["user_id"]);
        assert!(UriTemplate::parse("test://static").unwrap().is_literal());
        // Round trip: what expands matches back to the same value.
        let value = "ünï/cøde";
        let uri = t.expand(|_| Some(value));
        assert_eq!(t.matches(&uri), vars(&[("user_id", value)]));
    }

    #[test]
    fn refuses_what_it_does_not_support() {
        for bad in [
            "a{", "a}", "{}", "{+}", "{#x}", "{?x}", "{x,y}", "{x:3}", "{x*}", "{a}{b}", "{a b}",
            "{{a}}",
        ] {
            assert!(UriTemplate::parse(bad).is_err(), "{bad}");
        }
        let err = UriTemplate::parse("{#x}").unwrap_err().to_string();
        assert!(err.contains("{#x}"), "{err}");
    }
}
