//! The crates' modules import one way.
//!
//! keyway's top-level modules sit in layers, written once at the top of `src/lib.rs` (the
//! comment "Layers, top to bottom"); the bench's in `keyway-bench/src/main.rs`. A module may
//! import its own layer and those below it, never one above. And no import cycle spans two
//! folders of either crate: a loop, where one is needed, stays inside one folder.
//!
//! The imports are read as text: every `crate::…`, `super::…` and `self::…` path outside
//! comments (in `use` lines and inline), grouped paths (`crate::{a, b::c}`) included, each
//! resolved to the deepest module file that exists. References to the crate root's own items
//! (`crate::Pool`, a re-export) name no module and are left out, as is the root file itself (the
//! table of contents, which re-exports every layer).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One source file: its module path (`["engine", "worker"]`), its folder, and the module paths
/// it names.
struct File {
    rel: PathBuf,
    module: Vec<String>,
    folder: String,
    refs: Vec<Vec<String>>,
}

/// Every `.rs` file under `src`, but the crate root `root` (`lib.rs` or `main.rs`).
fn read_crate(src: &Path, root: &str) -> Vec<File> {
    let mut out = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).unwrap().to_path_buf();
                if rel == Path::new(root) {
                    continue;
                }
                let module = module_of(&rel);
                let text = strip_comments(&fs::read_to_string(&path).unwrap());
                let refs = paths_in(&text)
                    .into_iter()
                    .filter_map(|p| absolute(&module, p))
                    .collect();
                let folder = folder_of(src, &rel);
                out.push(File {
                    rel,
                    module,
                    folder,
                    refs,
                });
            }
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    out
}

/// `engine/worker.rs` is `engine::worker`; `engine/mod.rs` is `engine`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The folder a file belongs to: its directory, where a module `x` is the folder `x/` together
/// with its file `x.rs` beside it; a top-level file with no folder of its own is a unit of its
/// own (so `keys.rs` and `work.rs` are two units, not one folder `src`).
fn folder_of(src: &Path, rel: &Path) -> String {
    let dir = rel.parent().unwrap_or(Path::new(""));
    let stem = rel.file_stem().unwrap().to_string_lossy();
    let unit = if stem == "mod" {
        dir.to_path_buf()
    } else if src.join(dir).join(&*stem).is_dir() || dir.as_os_str().is_empty() {
        dir.join(&*stem)
    } else {
        dir.to_path_buf()
    };
    unit.display().to_string()
}

/// The text with `//` comments (and so doc comments and their examples) removed.
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path starting with `crate::`, `super::` or `self::`, groups expanded one level deep:
/// `crate::{a, b::{c, d}}` gives `crate::a` and `crate::b`.
fn paths_in(text: &str) -> Vec<Vec<String>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let head = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|h| bytes[i..].starts_with(h.as_bytes()));
        let (Some(head), true) = (head, starts_word) else {
            i += 1;
            continue;
        };
        let mut prefix = vec![head.trim_end_matches("::").to_owned()];
        let mut j = i + head.len();
        // `super::super::x`
        while bytes[j..].starts_with(b"super::") {
            prefix.push("super".to_owned());
            j += "super::".len();
        }
        let (segments, end) = segments_at(text, j);
        if bytes.get(end) == Some(&b'{') {
            let close = matching_brace(text, end);
            for item in split_top_level(&text[end + 1..close]) {
                let (inner, _) = segments_at(item.trim(), 0);
                let mut p = prefix.clone();
                p.extend(segments.iter().cloned());
                p.extend(inner.into_iter().take(1));
                out.push(p);
            }
            i = close;
        } else {
            let mut p = prefix;
            p.extend(segments);
            out.push(p);
            i = end;
        }
    }
    out
}

/// Identifiers separated by `::` from `at`; returns them and where they end (at a `{` for a
/// group).
fn segments_at(text: &str, mut at: usize) -> (Vec<String>, usize) {
    let bytes = text.as_bytes();
    let mut segments = Vec::new();
    loop {
        let start = at;
        while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_') {
            at += 1;
        }
        if at == start {
            break;
        }
        segments.push(text[start..at].to_owned());
        if bytes[at..].starts_with(b"::") {
            at += 2;
        } else {
            break;
        }
    }
    (segments, at)
}

fn matching_brace(text: &str, open: usize) -> usize {
    let mut depth = 0;
    for (k, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return open + k;
                }
            }
            _ => {}
        }
    }
    text.len()
}

fn split_top_level(group: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (k, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&group[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    out.push(&group[start..]);
    out.into_iter().filter(|s| !s.trim().is_empty()).collect()
}

/// The path from the crate root that `path`, written in module `module`, names.
fn absolute(module: &[String], path: Vec<String>) -> Option<Vec<String>> {
    let mut it = path.into_iter().peekable();
    let mut base: Vec<String> = match it.next()?.as_str() {
        "crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => {
            // A file's `super` is its parent module; inline test modules are not told apart.
            let mut b = module.to_vec();
            b.pop();
            b
        }
        _ => return None,
    };
    while it.peek().is_some_and(|s| s == "super") {
        it.next();
        base.pop();
    }
    base.extend(it);
    Some(base)
}

/// The deepest existing module file that `path` names (`None`: the crate root).
fn resolve<'a>(modules: &'a BTreeMap<Vec<String>, PathBuf>, path: &[String]) -> Option<&'a Path> {
    (1..=path.len())
        .rev()
        .find_map(|n| modules.get(&path[..n]))
        .map(PathBuf::as_path)
}

/// The layers written in the crate root, top first: `// 1. schedule strategy sequencer`.
fn layers(root: &Path) -> Vec<Vec<String>> {
    let text = fs::read_to_string(root).unwrap();
    let mut lines = text
        .lines()
        .skip_while(|l| !l.contains("Layers, top to bottom"));
    lines.next();
    lines
        .map(str::trim)
        .map_while(|l| l.strip_prefix("// "))
        .filter_map(|l| {
            let (n, names) = l.split_once(". ")?;
            n.parse::<u32>().ok()?;
            Some(names.split_whitespace().map(str::to_owned).collect())
        })
        .collect()
}

/// Imports of a layer above the importer's: `"a.rs imports b (layer 1) from layer 3"`.
fn upward_imports(files: &[File], layers: &[Vec<String>]) -> Vec<String> {
    let layer_of: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(n, names)| names.iter().map(move |m| (m.as_str(), n)))
        .collect();
    let mut out = Vec::new();
    for f in files {
        let own = &f.module[0];
        let Some(&mine) = layer_of.get(own.as_str()) else {
            out.push(format!(
                "{} is in module `{own}`, which no layer lists",
                f.rel.display()
            ));
            continue;
        };
        for r in &f.refs {
            let Some(top) = r.first() else { continue };
            if let Some(&theirs) = layer_of.get(top.as_str()) {
                if theirs < mine {
                    out.push(format!(
                        "{} (layer {}) imports `{}` (layer {})",
                        f.rel.display(),
                        mine + 1,
                        r.join("::"),
                        theirs + 1
                    ));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Every top-level module of the crate is in exactly one layer.
fn unlisted_modules(files: &[File], layers: &[Vec<String>]) -> Vec<String> {
    let tops: BTreeSet<&str> = files.iter().map(|f| f.module[0].as_str()).collect();
    let mut listed = BTreeMap::<&str, usize>::new();
    for name in layers.iter().flatten() {
        *listed.entry(name.as_str()).or_default() += 1;
    }
    let mut out: Vec<String> = tops
        .iter()
        .filter(|t| listed.get(*t) != Some(&1))
        .map(|t| {
            format!(
                "module `{t}` is listed {} times",
                listed.get(t).unwrap_or(&0)
            )
        })
        .collect();
    out.extend(
        listed
            .keys()
            .filter(|l| !tops.contains(*l) && !["lib", "main"].contains(*l))
            .map(|l| format!("layer lists `{l}`, which is no module")),
    );
    out
}

/// The import cycles that span two folders (each named by its folder, from `src`).
fn folder_cycles(files: &[File]) -> Vec<Vec<String>> {
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .map(|f| (f.module.clone(), f.rel.clone()))
        .collect();
    let folders: BTreeMap<&Path, &str> = files
        .iter()
        .map(|f| (f.rel.as_path(), f.folder.as_str()))
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let from = f.folder.clone();
        edges.entry(from.clone()).or_default();
        for r in &f.refs {
            if let Some(target) = resolve(&modules, r) {
                let to = folders[target].to_owned();
                if to != from {
                    edges.entry(from.clone()).or_default().insert(to);
                }
            }
        }
    }
    strongly_connected(&edges)
        .into_iter()
        .filter(|c| c.len() > 1)
        .collect()
}

/// Tarjan's strongly connected components.
fn strongly_connected(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct St<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(st: &mut St<'a>, v: &'a str) {
        let n = st.index.len();
        st.index.insert(v, n);
        st.low.insert(v, n);
        st.stack.push(v);
        st.on.insert(v);
        static EMPTY: BTreeSet<String> = BTreeSet::new();
        let next = st.edges.get(v).unwrap_or(&EMPTY);
        for w in next.iter().map(String::as_str) {
            if !st.index.contains_key(w) {
                visit(st, w);
                let lw = st.low[w];
                let lv = st.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if st.on.contains(w) {
                let iw = st.index[w];
                let lv = st.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if st.low[v] == st.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = st.stack.pop().unwrap();
                st.on.remove(w);
                comp.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            comp.sort();
            st.out.push(comp);
        }
    }
    let mut st = St {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    let nodes: Vec<&str> = edges
        .iter()
        .flat_map(|(k, vs)| std::iter::once(k.as_str()).chain(vs.iter().map(String::as_str)))
        .collect();
    for v in nodes {
        if !st.index.contains_key(v) {
            visit(&mut st, v);
        }
    }
    st.out
}

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src")
}

/// Checks a crate: its layers (if its root lists them) and its folder cycles.
fn check(name: &str, root: &str, must_list_layers: bool) -> Vec<String> {
    let src = crate_src(name);
    let files = read_crate(&src, root);
    assert!(files.len() > 5, "{name}: read only {} files", files.len());
    let layers = layers(&src.join(root));
    let mut problems = Vec::new();
    if layers.is_empty() {
        if must_list_layers {
            problems.push(format!("{name}/src/{root} lists no layers"));
        }
    } else {
        problems.extend(unlisted_modules(&files, &layers));
        problems.extend(upward_imports(&files, &layers));
    }
    for cycle in folder_cycles(&files) {
        problems.push(format!(
            "{name}: an import cycle spans the folders {cycle:?}"
        ));
    }
    problems
}

#[test]
fn keyway_modules_import_only_their_layer_and_below_and_no_cycle_spans_two_folders() {
    let problems = check("keyway", "lib.rs", true);
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn keyway_bench_has_no_import_cycle_across_folders_or_layers() {
    let problems = check("keyway-bench", "main.rs", false);
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// The checker itself catches what it must: an upward import, an unlisted module, a cycle
/// across folders (a tree written to a temporary folder).
#[test]
fn the_checker_catches_an_upward_import_and_a_cycle_across_folders() {
    let dir = std::env::temp_dir().join(format!("keyway-layers-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let write = |rel: &str, text: &str| {
        let p = dir.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    };
    write(
        "lib.rs",
        "// Layers, top to bottom:\n// 1. face\n// 2. lane\n// 3. engine\nmod face;\n",
    );
    write("face/mod.rs", "use crate::lane::Table;\n");
    // Upward: the lane layer names the face (in a group, after a comment that must not count).
    write(
        "lane/mod.rs",
        "// crate::engine is fine\nuse crate::{engine::Registry, face::Pool};\n",
    );
    write("engine/mod.rs", "pub struct Registry;\n");
    write("engine/deep/x.rs", "use crate::stray::Y;\n");
    write("stray.rs", "use crate::engine::deep::x::Z;\n");
    let files = read_crate(&dir, "lib.rs");
    let layers = layers(&dir.join("lib.rs"));
    assert_eq!(layers.len(), 3);
    let up = upward_imports(&files, &layers);
    assert_eq!(
        up,
        [
            "lane/mod.rs (layer 2) imports `face` (layer 1)".to_owned(),
            "stray.rs is in module `stray`, which no layer lists".to_owned()
        ]
    );
    assert_eq!(
        unlisted_modules(&files, &layers),
        ["module `stray` is listed 0 times"]
    );
    // face -> lane -> face, and stray -> engine/deep -> stray.
    let cycles = folder_cycles(&files);
    assert_eq!(
        cycles,
        [
            vec!["engine/deep".to_owned(), "stray".to_owned()],
            vec!["face".to_owned(), "lane".to_owned()]
        ]
    );
    let _ = fs::remove_dir_all(&dir);
}
