//! `docs/configuration.md` lists every `NEMESIS_*` variable that any crate's non-test source names,
//! and every `nemesis-run` option.
//!
//! Non-test source: the `.rs` files under a `src/` folder of the workspace, less `tests.rs` files
//! and `#[cfg(test)] mod NAME { ... }` blocks. A name ending in `_` is a prefix, not a variable.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `NEMESIS_*` names in `text` (prefixes, which end in `_`, left out).
fn names(text: &str) -> BTreeSet<String> {
    let b = text.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while let Some(at) = text[i..].find("NEMESIS_") {
        let start = i + at;
        let before = start.checked_sub(1).map(|k| b[k]);
        let mut end = start + "NEMESIS_".len();
        while end < b.len() && (b[end].is_ascii_uppercase() || b[end].is_ascii_digit() || b[end] == b'_') {
            end += 1;
        }
        let word = before.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == b'_'));
        if word && !text[start..end].ends_with('_') {
            out.insert(text[start..end].to_owned());
        }
        i = end;
    }
    out
}

/// `text` without its `#[cfg(test)] mod NAME { ... }` blocks (rustfmt's layout: the block ends
/// at the first line that is its opening line's indentation and `}`).
fn without_test_modules(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == "#[cfg(test)]" {
            let mut j = i + 1;
            while j < lines.len() && lines[j].trim_start().starts_with("#[") {
                j += 1;
            }
            if let Some(line) = lines.get(j) {
                let indent = &line[..line.len() - line.trim_start().len()];
                let rest = line.trim_start().trim_start_matches("pub ").trim_start_matches("pub(crate) ");
                if rest.starts_with("mod ") && rest.ends_with('{') {
                    let close = format!("{indent}}}");
                    let end = (j + 1..lines.len()).find(|&k| lines[k] == close).unwrap_or(lines.len());
                    i = end + 1;
                    continue;
                }
            }
        }
        out.push_str(lines[i]);
        out.push('\n');
        i += 1;
    }
    out
}

/// The non-test `.rs` files under `dir`.
fn sources(dir: &Path, in_src: bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if !matches!(name.as_str(), "target" | "tests" | ".git" | "corpus" | "artifacts") && !name.starts_with('.')
            {
                sources(&p, in_src || name == "src", out);
            }
        } else if in_src && name.ends_with(".rs") && name != "tests.rs" {
            out.push(p);
        }
    }
}

/// Every `NEMESIS_*` name in the workspace's non-test sources, with a file that names it.
fn names_in_sources() -> BTreeMap<String, PathBuf> {
    let mut files = Vec::new();
    sources(&root(), false, &mut files);
    assert!(files.len() > 50, "the workspace's sources were not found under {}", root().display());
    let mut out = BTreeMap::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for n in names(&without_test_modules(&text)) {
            out.entry(n).or_insert_with(|| f.strip_prefix(root()).unwrap().to_owned());
        }
    }
    out
}

fn page() -> String {
    std::fs::read_to_string(root().join("docs/configuration.md")).unwrap()
}

/// The names in `code` that `page` does not list.
fn unlisted(code: &BTreeMap<String, PathBuf>, page: &str) -> Vec<String> {
    let listed = names(page);
    code.iter().filter(|(n, _)| !listed.contains(*n)).map(|(n, f)| format!("{n} ({})", f.display())).collect()
}

#[test]
fn every_variable_the_code_reads_is_on_the_page() {
    let code = names_in_sources();
    for known in ["NEMESIS_WAIT", "NEMESIS_CELL_SIZE", "NEMESIS_TCP_ADDR", "NEMESIS_COLL_ALG", "NEMESIS_FT_RESTART"] {
        assert!(code.contains_key(known), "the scan misses {known}: it reads too little");
    }
    let missing = unlisted(&code, &page());
    assert!(missing.is_empty(), "docs/configuration.md does not list: {}", missing.join(", "));
}

#[test]
fn a_variable_left_off_the_page_is_found() {
    let code = names_in_sources();
    let page = page().replace("NEMESIS_SPIN_POLLS", "(removed)");
    let missing = unlisted(&code, &page);
    assert!(missing.iter().any(|m| m.starts_with("NEMESIS_SPIN_POLLS ")), "{missing:?}");
}

#[test]
fn test_modules_and_prefixes_are_not_counted() {
    let text = "const A: &str = \"NEMESIS_REAL\";\n#[cfg(test)]\nmod tests {\n    const B: &str = \"NEMESIS_IN_TEST\";\n}\nconst P: &str = \"NEMESIS_PREFIX_\";\n";
    let found = names(&without_test_modules(text));
    assert_eq!(found.into_iter().collect::<Vec<_>>(), ["NEMESIS_REAL"]);
}

#[test]
fn every_launcher_option_is_on_the_page() {
    let bin = std::fs::read_to_string(root().join("src/bin/nemesis-run.rs")).unwrap();
    let start = bin.find("const OPTIONS").unwrap();
    let end = start + bin[start..].find("Set NEMESIS_LOG").unwrap();
    // An option's line starts with it (`  -n, --np <N>`, `      --nodes <K>`).
    let options: BTreeSet<String> = bin[start..end]
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .flat_map(|l| {
            l.split_whitespace().take_while(|w| w.starts_with('-')).map(|w| w.trim_end_matches(',').to_owned())
        })
        .filter(|w| w.starts_with("--"))
        .collect();
    assert!(options.contains("--ft-max-restarts") && options.len() > 15, "{options:?}");
    let page = page();
    let missing: Vec<_> = options.iter().filter(|o| !page.contains(&format!("`{o}"))).collect();
    assert!(missing.is_empty(), "docs/configuration.md does not list nemesis-run's {missing:?}");
}
