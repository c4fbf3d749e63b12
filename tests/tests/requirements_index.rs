//! Every requirement id the workspace cites (`S-POST-4`, `S-SESS-6`, `G-1` …, in comments, docs,
//! error texts and test names) has exactly one line in `mcp-proto/REQUIREMENTS.md`, so that a
//! reader can follow it. Ranges and lists are expanded: `S-RPC-1..12` and `S-SEC-1/2/5` cite
//! every id they name. Test functions named after an id (`fn s_post_6_…`, `fn g_8_…`) cite it
//! too.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The directories scanned, relative to the workspace root.
const ROOTS: &[&str] = &[
    "mcp-proto",
    "mcp-tokio",
    "mcp-smol",
    "demo",
    "tests",
    "fuzz",
];
/// Directories never entered.
const SKIP_DIRS: &[&str] = &["target", "node_modules", ".venv", ".git"];
/// File extensions scanned.
const EXTENSIONS: &[&str] = &["rs", "md", "mjs", "py"];
/// Single files scanned, relative to the workspace root.
const EXTRA_FILES: &[&str] = &[".ci/run", "README.md"];
/// Names that look like ids but are not: the NIST curves (JWK `crv` values).
const NOT_IDS: &[&str] = &["P-256", "P-384", "P-521"];
/// Test functions whose name abbreviates the id they test: (name prefix, id).
const MISNAMED: &[(&str, &str)] = &[("s_lif_2_", "S-LIFE-2")];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if !SKIP_DIRS.contains(&name.as_ref()) {
                walk(&path, out);
            }
        } else if kind.is_file()
            && path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| EXTENSIONS.contains(&e))
        {
            out.push(path);
        }
    }
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Reads `[0-9]+[a-z]?` at `i` followed by a word boundary; returns the end.
fn number_at(s: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    while j < s.len() && s[j].is_ascii_digit() {
        j += 1;
    }
    if j == i {
        return None;
    }
    if j < s.len() && s[j].is_ascii_lowercase() {
        j += 1;
    }
    if j < s.len() && is_word(s[j]) {
        return None;
    }
    Some(j)
}

/// The requirement ids in `text`: roughly `\b[A-Z]{1,2}(-[A-Z\d]+)?-\d+[a-z]?\b`, with a
/// trailing `..N` (a range) or `/N/M` (a list) expanded to the ids it names.
fn ids_in(text: &str) -> Vec<String> {
    let s = text.as_bytes();
    let mut ids = Vec::new();
    let mut i = 0;
    while i < s.len() {
        if !s[i].is_ascii_uppercase() || (i > 0 && is_word(s[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        let mut j = i;
        while j < s.len() && s[j].is_ascii_uppercase() {
            j += 1;
        }
        if j - start > 2 || j >= s.len() || s[j] != b'-' {
            i = start + 1;
            continue;
        }
        // `-segment`, then maybe `-number`.
        let seg_start = j + 1;
        let mut k = seg_start;
        while k < s.len() && (s[k].is_ascii_uppercase() || s[k].is_ascii_digit()) {
            k += 1;
        }
        if k == seg_start {
            i = start + 1;
            continue;
        }
        let (prefix_end, num_start) =
            if k < s.len() && s[k] == b'-' && number_at(s, k + 1).is_some() {
                (k, k + 1)
            } else {
                (j, seg_start)
            };
        let Some(end) = number_at(s, num_start) else {
            i = start + 1;
            continue;
        };
        let prefix = &text[start..prefix_end];
        if NOT_IDS.contains(&&text[start..end]) {
            i = end;
            continue;
        }
        ids.push(format!("{prefix}-{}", &text[num_start..end]));
        // Expand `..N` and `/N`.
        let mut last: Option<u32> = text[num_start..end].parse().ok();
        let mut e = end;
        loop {
            let (sep_len, range) = if s[e..].starts_with(b"..") {
                (2, true)
            } else if s[e..].starts_with(b"/") {
                (1, false)
            } else {
                break;
            };
            let n_start = e + sep_len;
            let Some(n_end) = number_at(s, n_start) else {
                break;
            };
            let n = &text[n_start..n_end];
            if let (true, Some(from), Ok(to)) = (range, last, n.parse::<u32>()) {
                for m in from + 1..to {
                    ids.push(format!("{prefix}-{m}"));
                }
            }
            ids.push(format!("{prefix}-{n}"));
            last = n.parse().ok();
            e = n_end;
        }
        i = e;
    }
    ids
}

/// The id a function named `s_<area>_<n>_…` or `g_<n>_…` on `line` is named after, if any.
fn id_of_fn_name(line: &str) -> Option<String> {
    let (_, rest) = line.split_once("fn ")?;
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if let Some(&(_, id)) = MISNAMED.iter().find(|(prefix, _)| name.starts_with(prefix)) {
        return Some(id.to_owned());
    }
    let mut parts = name.split('_');
    let first = parts.next()?;
    let (area, number) = match first {
        "g" => (None, parts.next()?),
        "s" => (Some(parts.next()?), parts.next()?),
        _ => return None,
    };
    let digits = number.trim_end_matches(|c: char| c.is_ascii_lowercase());
    if digits.is_empty()
        || number.len() - digits.len() > 1
        || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    Some(match area {
        None => format!("G-{number}"),
        Some(area) if area.bytes().all(|b| b.is_ascii_alphanumeric()) => {
            format!("S-{}-{number}", area.to_ascii_uppercase())
        }
        Some(_) => return None,
    })
}

/// The ids of `REQUIREMENTS.md`: the first cell of each table row that is an id, with the line
/// numbers of every row naming it.
fn indexed(text: &str) -> BTreeMap<String, Vec<usize>> {
    let mut map: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let Some(rest) = line.strip_prefix('|') else {
            continue;
        };
        let cell = rest.split('|').next().unwrap_or("").trim();
        if ids_in(cell).first().map(String::as_str) == Some(cell) {
            map.entry(cell.to_owned()).or_default().push(n + 1);
        }
    }
    map
}

#[test]
fn id_extraction() {
    assert_eq!(
        ids_in("S-POST-4, (S-SESS-6; G-11)"),
        ["S-POST-4", "S-SESS-6", "G-11"]
    );
    assert_eq!(ids_in("S-SEC-1/2/5"), ["S-SEC-1", "S-SEC-2", "S-SEC-5"]);
    assert_eq!(ids_in("S-RES-2..4."), ["S-RES-2", "S-RES-3", "S-RES-4"]);
    assert!(ids_in("UTF-8, SEP-1699, MCP-Protocol-Version, x-S-POST-1a2, RFC 9728").is_empty());
    assert!(ids_in(r#""crv": "P-256", P-384"#).is_empty());
    assert_eq!(
        id_of_fn_name("fn s_post_6_batch_refused() {").as_deref(),
        Some("S-POST-6")
    );
    assert_eq!(
        id_of_fn_name("    fn g_11_probe() {").as_deref(),
        Some("G-11")
    );
    assert_eq!(
        id_of_fn_name("fn s_s2c_3_reply() {").as_deref(),
        Some("S-S2C-3")
    );
    assert_eq!(id_of_fn_name("fn session_id_is_kept() {"), None);
    assert_eq!(id_of_fn_name("fn s_tag_x() {"), None);
}

#[test]
fn every_cited_requirement_id_is_indexed_once() {
    let root = workspace_root();
    let index_path = root.join("mcp-proto/REQUIREMENTS.md");
    let index_text = fs::read_to_string(&index_path).expect("mcp-proto/REQUIREMENTS.md");
    let index = indexed(&index_text);
    assert!(
        index.len() > 100,
        "only {} ids in REQUIREMENTS.md",
        index.len()
    );

    let duplicates: Vec<String> = index
        .iter()
        .filter(|(_, lines)| lines.len() > 1)
        .map(|(id, lines)| format!("{id} (lines {lines:?})"))
        .collect();
    assert!(
        duplicates.is_empty(),
        "ids with more than one line in REQUIREMENTS.md: {duplicates:#?}"
    );

    let mut files = Vec::new();
    for dir in ROOTS {
        walk(&root.join(dir), &mut files);
    }
    files.extend(
        EXTRA_FILES
            .iter()
            .map(|f| root.join(f))
            .filter(|p| p.is_file()),
    );
    assert!(
        files.len() > 50,
        "only {} files found under {}",
        files.len(),
        root.display()
    );

    // id → the first few places citing it.
    let mut missing: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut cited = BTreeSet::new();
    for file in &files {
        let Ok(text) = fs::read_to_string(file) else {
            continue;
        };
        let shown = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        let is_rust = file.extension().is_some_and(|e| e == "rs");
        // The index's own cross-references are checked, but do not count as citations.
        let is_index = file.ends_with("mcp-proto/REQUIREMENTS.md");
        for (n, line) in text.lines().enumerate() {
            let from_fn = if is_rust { id_of_fn_name(line) } else { None };
            for id in ids_in(line).into_iter().chain(from_fn) {
                if !index.contains_key(&id) {
                    missing
                        .entry(id.clone())
                        .or_default()
                        .insert(format!("{shown}:{}", n + 1));
                }
                if !is_index {
                    cited.insert(id);
                }
            }
        }
    }
    assert!(cited.len() > 100, "only {} distinct ids cited", cited.len());
    assert!(
        missing.is_empty(),
        "requirement ids cited without a line in mcp-proto/REQUIREMENTS.md: {missing:#?}"
    );
}

/// What users read carries no requirement id: the library crates' doc comments (`///`,
/// `//!`) and code lines (error texts, `Display` impls, HTTP bodies) outside their test
/// modules. Plain `//` comments may cite ids; tests may too.
#[test]
fn no_requirement_id_reaches_users() {
    let root = workspace_root();
    let mut files = Vec::new();
    for dir in [
        "mcp-proto/src",
        "mcp-tokio/src",
        "mcp-smol/src",
        "demo/src",
        "mcp-tokio/examples",
        "mcp-smol/examples",
        "demo/examples",
    ] {
        walk(&root.join(dir), &mut files);
    }
    files.retain(|f| f.extension().is_some_and(|e| e == "rs"));
    files.push(root.join("README.md"));
    assert!(files.len() > 50, "only {} files", files.len());
    let mut found = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).unwrap_or_default();
        let shown = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        for (n, line) in text.lines().enumerate() {
            let t = line.trim_start();
            if t.starts_with("#[cfg(test)]") {
                break;
            }
            let public = if t.starts_with("///") || t.starts_with("//!") {
                t
            } else if t.starts_with("//") {
                continue;
            } else {
                line.split(" // ").next().unwrap_or(line)
            };
            if !ids_in(public).is_empty() {
                found.push(format!("{shown}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "requirement ids in user-facing text: {found:#?}"
    );
}
