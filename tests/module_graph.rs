//! The library's top-level modules depend on one another without a circle: each can be read,
//! and moved, knowing only the modules below it.
//!
//! A top-level module is the first part of a path under `src/` (`src/invoke/future.rs` →
//! `invoke`, `src/record.rs` → `record`); `src/lib.rs` is the root, not a module (and a
//! binary's `src/bin/` or `main.rs`, were there one, a crate of its own). A module depends on
//! another when its code names it through `crate::<name>` (in a `use` line or a path,
//! `crate::{a, b::c}` included); comments and doc comments (lines that start with `//`) do not
//! count.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn no_two_top_level_modules_depend_on_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src);
    assert!(
        graph.len() > 5,
        "the modules of {} were not found: {graph:?}",
        src.display()
    );
    println!("{}", edges(&graph));
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "the top-level modules depend on each other in a circle: {}\n\nevery edge:\n{}",
            cycle.join(" -> "),
            edges(&graph)
        );
    }
}

/// The checker itself: a circle is found, and named from where it closes.
#[test]
fn a_circle_is_found_and_named() {
    let graph = graph_of(&[("a", &["b"]), ("b", &["c"]), ("c", &["a", "d"]), ("d", &[])]);
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    let graph = graph_of(&[("a", &["b", "c"]), ("b", &["c"]), ("c", &[])]);
    assert_eq!(find_cycle(&graph), None);
}

/// The reader: paths, groups over several lines, `$crate`; not comments, not other crates.
#[test]
fn references_are_read_from_code_only() {
    let modules: BTreeSet<String> = ["auth", "body", "error", "invoke", "record", "redact"]
        .map(String::from)
        .into();
    let text = "use crate::auth::Auth;\n\
                use crate::{\n    body::ReadToBytes,\n    error::{Error, ErrorKind},\n    AttemptRecord,\n};\n\
                // crate::record::Outcome in a comment\n\
                /// [`InvokeBody`](crate::redact::InvokeBody) in a doc comment\n\
                let x = other_crate::invoke::f(); let y = $crate::redact::g();\n";
    let found = references(text, &modules);
    let expected: BTreeSet<String> = ["auth", "body", "error", "redact"].map(String::from).into();
    assert_eq!(found, expected);
}

/// Every top-level module of `src` and the other top-level modules its code names.
fn module_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let top_level = |file: &Path| -> Option<String> {
        let relative = file.strip_prefix(src).ok()?;
        let first = relative.components().next()?.as_os_str().to_str()?;
        match first {
            "lib.rs" | "bin" | "main.rs" => None,
            _ => Some(first.trim_end_matches(".rs").to_owned()),
        }
    };
    let modules: BTreeSet<String> = files.iter().filter_map(|f| top_level(f)).collect();
    let mut graph: Graph = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    for file in &files {
        let Some(module) = top_level(file) else {
            continue;
        };
        let text = std::fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        let mut named = references(&text, &modules);
        named.remove(&module);
        graph.entry(module).or_default().extend(named);
    }
    graph
}

fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

/// The modules among `modules` that `text` names through `crate::`, outside comments.
fn references(text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .flat_map(|line| [line, "\n"])
        .collect();
    let mut found = BTreeSet::new();
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(at) = code[from..].find("crate::") {
        let start = from + at;
        from = start + "crate::".len();
        // `crate::` itself, not the end of another name (`other_crate::`); `$crate::` counts.
        if code[..start].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let rest = &code[from..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a::X, b, c::{..}}`: the first part of every item at the group's top level.
            let mut depth = 0usize;
            let mut item_start = true;
            let mut name = String::new();
            for c in group.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        item_start = false;
                    }
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && is_ident(c) => name.push(c),
                    _ if item_start && !name.is_empty() => {
                        found.insert(std::mem::take(&mut name));
                        item_start = false;
                    }
                    _ => {}
                }
            }
            if !name.is_empty() {
                found.insert(name);
            }
        } else {
            let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
            found.insert(name);
        }
    }
    found.retain(|name| modules.contains(name));
    found
}

/// A circle in `graph`, as the modules along it from the first to the first again, if any.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Unseen,
        OnPath,
        Done,
    }
    fn visit<'a>(
        node: &'a str,
        graph: &'a Graph,
        marks: &mut BTreeMap<&'a str, Mark>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        marks.insert(node, Mark::OnPath);
        path.push(node);
        for next in graph.get(node).into_iter().flatten() {
            match marks.get(next.as_str()).copied().unwrap_or(Mark::Unseen) {
                Mark::OnPath => {
                    let from = path.iter().position(|&n| n == next).expect("on the path");
                    let mut cycle: Vec<String> =
                        path[from..].iter().map(|&n| n.to_owned()).collect();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Mark::Unseen => {
                    if let Some(cycle) = visit(next, graph, marks, path) {
                        return Some(cycle);
                    }
                }
                Mark::Done => {}
            }
        }
        path.pop();
        marks.insert(node, Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if marks.get(node.as_str()).copied().unwrap_or(Mark::Unseen) == Mark::Unseen
            && let Some(cycle) = visit(node, graph, &mut marks, &mut Vec::new())
        {
            return Some(cycle);
        }
    }
    None
}

fn edges(graph: &Graph) -> String {
    graph
        .iter()
        .map(|(from, to)| {
            let to: Vec<&str> = to.iter().map(String::as_str).collect();
            format!("  {from} -> {}", to.join(", "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn graph_of(edges: &[(&str, &[&str])]) -> Graph {
    edges
        .iter()
        .map(|(from, to)| {
            (
                (*from).to_owned(),
                to.iter().map(|&t| t.to_owned()).collect(),
            )
        })
        .collect()
}
