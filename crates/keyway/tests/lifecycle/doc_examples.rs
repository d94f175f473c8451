//! No doc example is written twice.
//!
//! A type that mirrors another's methods (`Contexts` and the pool's untyped keyed methods, a
//! `Lane` and its context) links to the method that carries the example instead of repeating
//! it. This reads every fenced example in the doc comments (`///` and `//!`) of keyway's
//! `src/`, keeps the lines a reader sees (not the hidden `# ` lines), and fails on two
//! examples whose visible lines are the same, naming both places.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// One example: where it starts and its visible lines, each trimmed.
struct Example {
    at: String,
    lines: Vec<String>,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text of a doc-comment line, or `None` for any other line.
fn doc_text(line: &str) -> Option<&str> {
    let line = line.trim_start();
    let rest = line
        .strip_prefix("///")
        .or_else(|| line.strip_prefix("//!"))?;
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

/// A fence's info string names Rust code (rustdoc's default) rather than text or a shell.
fn is_rust_fence(info: &str) -> bool {
    info.split(',')
        .map(str::trim)
        .all(|tag| !matches!(tag, "text" | "sh" | "console" | "toml" | "json" | "txt"))
}

fn examples_in(rel: &str, text: &str) -> Vec<Example> {
    let mut out = Vec::new();
    let mut open: Option<Example> = None;
    for (n, line) in text.lines().enumerate() {
        let Some(doc) = doc_text(line) else {
            continue;
        };
        let trimmed = doc.trim();
        if let Some(info) = trimmed.strip_prefix("```") {
            match open.take() {
                Some(example) => out.push(example),
                None if is_rust_fence(info) => {
                    open = Some(Example {
                        at: format!("{rel}:{}", n + 1),
                        lines: Vec::new(),
                    })
                }
                None => {
                    open = Some(Example {
                        at: String::new(),
                        lines: Vec::new(),
                    })
                }
            }
            continue;
        }
        if let Some(example) = open.as_mut() {
            let hidden = trimmed == "#" || trimmed.starts_with("# ");
            if !hidden && !trimmed.is_empty() {
                example.lines.push(trimmed.to_owned());
            }
        }
    }
    // Text and shell blocks were opened with no place: they are not examples.
    out.retain(|e| !e.at.is_empty() && !e.lines.is_empty());
    out
}

fn keyway_examples() -> Vec<Example> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let rel = path.strip_prefix(&src).unwrap().display().to_string();
        out.extend(examples_in(&rel, &fs::read_to_string(&path).unwrap()));
    }
    out
}

/// Pairs of places whose examples read the same.
fn repeated(examples: &[Example]) -> Vec<String> {
    let mut seen: BTreeMap<&[String], &str> = BTreeMap::new();
    let mut out = Vec::new();
    for example in examples {
        match seen.get(example.lines.as_slice()) {
            Some(first) => out.push(format!("{first} and {}", example.at)),
            None => {
                seen.insert(&example.lines, &example.at);
            }
        }
    }
    out
}

#[test]
fn no_doc_example_is_repeated_verbatim() {
    let examples = keyway_examples();
    // The crate documents every public item with an example: finding few means the scan broke.
    assert!(
        examples.len() > 150,
        "only {} doc examples found in src/: the scan no longer reads them",
        examples.len()
    );
    let twins = repeated(&examples);
    assert!(
        twins.is_empty(),
        "doc examples repeated verbatim (link to one instead):\n{}",
        twins.join("\n")
    );
}

#[test]
fn the_scan_finds_a_repeated_example_and_ignores_hidden_lines_and_text_blocks() {
    let one = "/// ```\n/// # let pool = setup();\n/// pool.flush(1);\n/// ```\n";
    let same_visible =
        "//! ```\n//! # let pool = other_setup();\n//!     pool.flush(1);\n//! ```\n";
    let text = "/// ```text\n/// pool.flush(1);\n/// ```\n";
    let mut examples = examples_in("a.rs", one);
    examples.extend(examples_in("b.rs", same_visible));
    examples.extend(examples_in("c.rs", text));
    assert_eq!(examples.len(), 2, "the text block is not an example");
    assert_eq!(repeated(&examples), vec!["a.rs:1 and b.rs:1".to_owned()]);
}
