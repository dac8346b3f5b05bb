//! The crate's modules keep the layers the module map of `src/lib.rs`
//! states: a module imports only from its own layer or a lower one, and the
//! modules of `queue` import each other in no circle, however long; and no
//! file of `src/` is over 450 lines.
//!
//! Imports are read from the code as text: `use` declarations and paths
//! starting with `crate::`, `super::`, `self::` or a child module's name,
//! outside comments, string literals and test modules. Each names the
//! module that defines the longest prefix of its path.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The modules of `src/`, by path (`crate::queue::jobs::claim`), each with
/// its code, comments, literals and tests left out.
fn modules() -> BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect(&root, &mut files);
    let mut modules = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(&root).expect("under src");
        let mut parts: Vec<String> = relative
            .with_extension("")
            .iter()
            .map(|part| part.to_string_lossy().into_owned())
            .collect();
        if parts == ["main"] || parts.last().is_some_and(|last| last == "tests") {
            continue;
        }
        if parts
            .last()
            .is_some_and(|last| last == "mod" || last == "lib")
        {
            parts.pop();
        }
        let path = std::iter::once("crate".to_owned())
            .chain(parts)
            .collect::<Vec<_>>()
            .join("::");
        let text = std::fs::read_to_string(&file).expect("readable");
        modules.insert(path, code_of(&text));
    }
    modules
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

/// The code of a file before its test module, without comments, string
/// and character literals.
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    let chars: Vec<char> = text.chars().collect();
    let mut code = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        match rest {
            ['/', '/', ..] => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            ['/', '*', ..] => {
                i += 2;
                while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                    i += 1;
                }
                i += 2;
            }
            ['r', '#', ..] | ['r', '"', ..] if !is_word(chars.get(i.wrapping_sub(1))) => {
                let hashes = rest[1..].iter().take_while(|c| **c == '#').count();
                let close: Vec<char> = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                i += 2 + hashes;
                while i < chars.len() && !chars[i..].starts_with(&close) {
                    i += 1;
                }
                i += close.len();
                code.push_str("\"\"");
            }
            ['"', ..] => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
                code.push_str("\"\"");
            }
            ['\'', '\\', ..] => {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            }
            ['\'', _, '\'', ..] => i += 3,
            [c, ..] => {
                code.push(*c);
                i += 1;
            }
            [] => break,
        }
    }
    code
}

fn is_word(c: Option<&char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || *c == '_')
}

/// The paths a `use` tree names: `a::{b, c::{d}}` is `a::b` and `a::c::d`.
fn expand(tree: &str) -> Vec<String> {
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let Some(open) = tree.find('{') else {
        return vec![tree.split(" as ").next().unwrap_or_default().to_owned()];
    };
    let prefix = tree[..open].trim_end_matches("::");
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .flat_map(expand)
        .map(|path| format!("{prefix}::{path}"))
        .collect()
}

/// The paths `code` names: its `use` trees, and paths from `crate`,
/// `super`, `self` or a child module written in place.
fn paths(code: &str, children: &BTreeSet<String>) -> Vec<String> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let start = code.len() - rest.len() + at;
        let after = &rest[at + 4..];
        rest = after;
        if start > 0 && is_word(Some(&(bytes[start - 1] as char))) {
            continue;
        }
        if let Some(end) = after.find(';') {
            found.extend(expand(&after[..end]));
        }
    }
    let roots = ["crate", "super", "self"]
        .into_iter()
        .chain(children.iter().map(String::as_str));
    for root in roots {
        let needle = format!("{root}::");
        for (at, _) in code.match_indices(&needle) {
            if at > 0 && (is_word(Some(&(bytes[at - 1] as char))) || bytes[at - 1] == b':') {
                continue;
            }
            let path: String = code[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            found.push(path.trim_end_matches(':').to_owned());
        }
    }
    found
}

/// The module a path from module `from` names: the one that defines the
/// longest prefix of it.
fn target(
    from: &str,
    path: &str,
    children: &BTreeSet<String>,
    modules: &BTreeMap<String, String>,
) -> Option<String> {
    let mut segments = path.split("::").filter(|s| !s.is_empty()).peekable();
    let mut base: Vec<&str> = from.split("::").collect();
    match segments.peek().copied() {
        Some("crate") => {
            base = vec!["crate"];
            segments.next();
        }
        Some("super") => {
            while segments.peek() == Some(&"super") {
                base.pop();
                segments.next();
            }
        }
        Some("self") => {
            segments.next();
        }
        Some(first) if children.contains(first) => {}
        _ => return None,
    }
    let full: Vec<&str> = base
        .into_iter()
        .chain(segments.filter(|s| *s != "self"))
        .collect();
    (1..=full.len())
        .rev()
        .map(|n| full[..n].join("::"))
        .find(|module| modules.contains_key(module))
}

/// The imports between modules: from each, the modules it names.
fn imports(modules: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges = BTreeMap::new();
    for (module, code) in modules {
        let children: BTreeSet<String> = code
            .split(';')
            .filter_map(|statement| {
                let words: Vec<&str> = statement.split_whitespace().collect();
                match words.as_slice() {
                    [.., "mod", name] => Some((*name).to_owned()),
                    _ => None,
                }
            })
            .collect();
        let targets: BTreeSet<String> = paths(code, &children)
            .iter()
            .filter_map(|path| target(module, path, &children, modules))
            .filter(|target| target != module)
            .collect();
        edges.insert(module.clone(), targets);
    }
    edges
}

/// The layers the module map of `src/lib.rs` states, from the top: the
/// lines `//! N. ` and the module paths in backticks on them (a layer may
/// go on over the next lines, up to the next numbered one or a blank).
fn layers() -> Vec<Vec<String>> {
    let lib = include_str!("../../src/lib.rs");
    let mut layers: Vec<Vec<String>> = Vec::new();
    let mut open = false;
    for line in lib.lines() {
        let Some(text) = line.strip_prefix("//!") else {
            break;
        };
        let text = text.trim();
        let numbered = text
            .split_once(". ")
            .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if numbered {
            layers.push(Vec::new());
            open = true;
        } else if text.is_empty() {
            open = false;
        }
        if open && let Some(layer) = layers.last_mut() {
            layer.extend(
                text.split('`')
                    .skip(1)
                    .step_by(2)
                    .filter(|name| {
                        name.chars()
                            .all(|c| c.is_alphanumeric() || c == '_' || c == ':')
                    })
                    .map(|name| format!("crate::{name}")),
            );
        }
    }
    layers
}

/// The layer of `module`: that of the longest path of the layers that is
/// it or holds it.
fn layer_of(module: &str, layers: &[Vec<String>]) -> Option<usize> {
    layers
        .iter()
        .enumerate()
        .flat_map(|(n, layer)| layer.iter().map(move |path| (n, path)))
        .filter(|(_, path)| module == *path || module.starts_with(&format!("{path}::")))
        .max_by_key(|(_, path)| path.len())
        .map(|(n, _)| n)
}

#[test]
fn no_module_imports_from_a_layer_above_its_own() {
    let modules = modules();
    let layers = layers();
    assert!(
        layers.len() >= 5,
        "the module map states its layers: {layers:?}"
    );
    let mut failures = Vec::new();
    // The crate's root only declares the modules.
    for (module, targets) in imports(&modules).into_iter().filter(|(m, _)| m != "crate") {
        let Some(own) = layer_of(&module, &layers) else {
            failures.push(format!("{module} is in no layer of the module map"));
            continue;
        };
        for target in targets {
            match layer_of(&target, &layers) {
                Some(layer) if layer < own => failures.push(format!(
                    "{module} (layer {}) imports {target} (layer {})",
                    own + 1,
                    layer + 1
                )),
                _ => {}
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The longest a file of `src/` may be: one subject a file, read whole.
const MAX_LINES: usize = 450;

#[test]
fn no_file_of_src_is_over_the_longest_a_file_may_be() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect(&root, &mut files);
    assert!(files.len() > 20, "the files of src/: {files:?}");
    let long: Vec<String> = files
        .iter()
        .map(|file| {
            let lines = std::fs::read_to_string(file)
                .expect("readable")
                .lines()
                .count();
            (
                file.strip_prefix(&root)
                    .expect("under src")
                    .display()
                    .to_string(),
                lines,
            )
        })
        .filter(|(_, lines)| *lines > MAX_LINES)
        .map(|(file, lines)| format!("src/{file}: {lines} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_modules_of_queue_import_each_other_in_no_circle() {
    let edges = imports(&modules());
    let inside = |module: &str| module.starts_with("crate::queue");
    // Depth-first search; a module met again while still on the path
    // closes a circle.
    fn visit<'a>(
        module: &'a str,
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        inside: &dyn Fn(&str) -> bool,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| *m == module) {
            let mut circle: Vec<String> = path[at..].iter().map(|m| (*m).to_owned()).collect();
            circle.push(module.to_owned());
            return Some(circle);
        }
        if !done.insert(module) {
            return None;
        }
        path.push(module);
        for target in edges.get(module).into_iter().flatten() {
            if inside(target)
                && let Some(circle) = visit(target, edges, inside, path, done)
            {
                return Some(circle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for module in edges.keys().filter(|m| inside(m)) {
        if let Some(circle) = visit(module, &edges, &inside, &mut Vec::new(), &mut done) {
            panic!("a circle of imports: {}", circle.join(" -> "));
        }
    }
}

#[test]
fn the_reading_of_imports_finds_what_it_is_shown() {
    let code = code_of(
        "use super::a::{b, c::{self, D}};\n\
         // use crate::commented;\n\
         let s = \"crate::in_a_string\";\n\
         fn f() { crate::x::y::z(); child::g(); }\n\
         mod child;\n\
         #[cfg(test)]\nmod tests { use crate::in_tests; }",
    );
    let children = BTreeSet::from(["child".to_owned()]);
    let found: BTreeSet<String> = paths(&code, &children).into_iter().collect();
    assert_eq!(
        found.iter().map(String::as_str).collect::<Vec<_>>(),
        [
            "child::g",
            "crate::x::y::z",
            "super::a",
            "super::a::b",
            "super::a::c::D",
            "super::a::c::self",
        ]
    );
}
