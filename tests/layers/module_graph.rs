//! No circle of imports, at two grains: the library's top-level modules, and the files of every
//! crate of the repository (the library, the emulator, the proxy, the interop member, and compat,
//! a workspace of its own). Each module, and each file, can be read and moved knowing only what
//! is below it.
//!
//! A top-level module is the first part of a path under `src/` (`src/invoke/future.rs` →
//! `invoke`, `src/record.rs` → `record`); `src/lib.rs` is the root, not a module (and a
//! binary's `src/bin/` or `main.rs`, were there one, a crate of its own). A module depends on
//! another when its code names it through `crate::<name>` (in a `use` line or a path,
//! `crate::{a, b::c}` included); comments and doc comments (lines that start with `//`) do not
//! count.
//!
//! At the grain of files, a file depends on another when its code names an item of the other's
//! module — through `crate::`, `super::`, `self::` or a module it declares — and the two are not
//! one inside the other: a module's own file (`mod.rs`, `lib.rs`, `main.rs`) is the front door
//! of the files below it, and what passes between them is not an arrow between rooms.

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

/// The crates of the workspace, by the folder of their sources.
const CRATES: [&str; 5] = [
    "src",
    "emulator/src",
    "proxy/src",
    "interop/src",
    "compat/src",
];

#[test]
fn no_two_files_of_any_crate_depend_on_each_other_in_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for dir in CRATES {
        let graph = file_graph(&root.join(dir));
        assert!(!graph.is_empty(), "no files under {dir}");
        if let Some(cycle) = find_cycle(&graph) {
            panic!(
                "files of {dir} depend on each other in a circle: {}\n\nevery edge:\n{}",
                cycle.join(" -> "),
                edges(&graph)
            );
        }
    }
    // The library's files are read, with their arrows.
    let graph = file_graph(&root.join("src"));
    assert!(
        graph["mcp_session/serve.rs"].contains("mcp_session/renew.rs"),
        "{}",
        edges(&graph)
    );
}

/// A crate written to disk with a circle between two files, and arrows that are not circles:
/// the check finds the one and not the others.
#[test]
fn a_circle_between_two_files_fails_the_check() {
    let dir = std::env::temp_dir().join(format!("module-graph-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let write = |path: &str, text: &str| {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "mod a;\nmod b;\nmod c;\npub struct Root;\n");
    write(
        "a.rs",
        "use crate::b::B;\n// crate::c::D in a comment\npub struct A;\n",
    );
    write(
        "b.rs",
        "use crate::{Root, c::{d::D}};\npub struct B;\nfn f() { let _ = super::a::A; }\n",
    );
    write(
        "c/mod.rs",
        "mod d;\npub use d::D;\npub const LIMIT: u8 = 1;\n",
    );
    write("c/d.rs", "use super::LIMIT;\npub struct D;\n");
    let graph = file_graph(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    let expected = graph_of(&[
        ("lib.rs", &[]),
        ("a.rs", &["b.rs"]),
        ("b.rs", &["a.rs", "c/d.rs"]),
        ("c/mod.rs", &[]),
        ("c/d.rs", &[]),
    ]);
    assert_eq!(graph, expected, "{}", edges(&graph));
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["a.rs".into(), "b.rs".into(), "a.rs".into()])
    );
}

/// A binary's root (`main.rs`) is the top floor: it starts the process and names what runs. A
/// file below it that names an item defined there (a transport reaching up for the shutdown's
/// signals or timeouts) makes the floors point back up, so no file of the proxy may.
#[test]
fn no_file_of_the_proxy_names_an_item_of_its_binarys_root() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("proxy/src");
    let offences = names_of_the_root(&src, "main.rs");
    assert!(
        offences.is_empty(),
        "items of proxy/src/main.rs named below it: {offences:?}"
    );
}

/// The checker of the binary's root: it finds a file naming a function and a constant of the
/// root, and passes one that names only modules.
#[test]
fn a_file_naming_an_item_of_the_binarys_root_is_found() {
    let dir = std::env::temp_dir().join(format!("root-items-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let write = |path: &str, text: &str| {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "main.rs",
        "mod a;\nmod b;\nconst STOP: u8 = 1;\nasync fn drain() {}\nstruct Signals;\nfn main() {}\n",
    );
    write(
        "a.rs",
        "use crate::{b::Ok, STOP};\nfn f() { crate::drain(); }\n",
    );
    write("b.rs", "pub struct Ok;\n// crate::Signals in a comment\n");
    let offences = names_of_the_root(&dir, "main.rs");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        offences,
        [
            ("a.rs".to_owned(), "STOP".to_owned()),
            ("a.rs".to_owned(), "drain".to_owned())
        ]
    );
}

/// The files under `src` (but `root`) that name an item `root` defines, with the item.
fn names_of_the_root(src: &Path, root: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(src.join(root)).expect("the binary's root");
    let items: BTreeSet<String> = text
        .lines()
        .filter_map(|line| {
            let line = line
                .trim_start()
                .strip_prefix("pub ")
                .unwrap_or(line.trim_start());
            let line = line.strip_prefix("pub(crate) ").unwrap_or(line);
            let line = line.strip_prefix("async ").unwrap_or(line);
            let rest = [
                "fn ", "struct ", "enum ", "const ", "static ", "type ", "trait ",
            ]
            .iter()
            .find_map(|kind| line.strip_prefix(kind))?;
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty() && name != "main").then_some(name)
        })
        .collect();
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut offences = BTreeSet::new();
    for file in files {
        let name = file
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if name == root {
            continue;
        }
        let here: Vec<String> = name
            .trim_end_matches(".rs")
            .split('/')
            .filter(|part| *part != "mod")
            .map(str::to_owned)
            .collect();
        let text = std::fs::read_to_string(&file).unwrap();
        for path in paths(&text, &here) {
            if path.len() == 1 && items.contains(&path[0]) {
                offences.insert((name.clone(), path[0].clone()));
            }
        }
    }
    offences.into_iter().collect()
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

/// Every file of the crate whose sources are in `src` (named by its path under `src`) and the
/// files its code names items of.
fn file_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let module_of = |file: &Path| -> (String, Vec<String>) {
        let relative = file.strip_prefix(src).expect("under src");
        let name = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        let mut path: Vec<String> = relative
            .components()
            .map(|c| {
                c.as_os_str()
                    .to_string_lossy()
                    .trim_end_matches(".rs")
                    .to_owned()
            })
            .collect();
        let last = path.last().cloned().unwrap_or_default();
        if last == "mod" || (path.len() == 1 && (last == "lib" || last == "main")) {
            path.pop();
        }
        (name, path)
    };
    let modules: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|f| {
            let (name, path) = module_of(f);
            (path, name)
        })
        .collect();
    let mut graph = Graph::new();
    for file in &files {
        let (name, here) = module_of(file);
        let text = std::fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        let named = graph.entry(name.clone()).or_default();
        for path in paths(&text, &here) {
            // The longest part of the path that is a module with a file of its own.
            let Some(module) = (0..=path.len())
                .rev()
                .map(|n| &path[..n])
                .find(|prefix| modules.contains_key(*prefix))
            else {
                continue;
            };
            let one_inside_the_other = module.starts_with(&here) || here.starts_with(module);
            if !one_inside_the_other {
                named.insert(modules[module].clone());
            }
        }
    }
    graph
}

/// The paths `text` names items by, outside comments, made absolute from the module `here`:
/// through `crate::`, `super::`, `self::` and the modules the file declares.
fn paths(text: &str, here: &[String]) -> Vec<Vec<String>> {
    let code: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .flat_map(|line| [line, "\n"])
        .collect();
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    // The modules the file declares (`mod name;`), whose paths start with their bare name.
    let declared: BTreeSet<String> = code
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line.split("mod ").nth(1)?;
            let before = &line[..line.len() - rest.len() - 4];
            let visibility = before.trim();
            let is_declaration = visibility.is_empty() || visibility.starts_with("pub");
            let name = rest.strip_suffix(';')?.trim();
            (is_declaration && name.chars().all(is_ident)).then(|| name.to_owned())
        })
        .collect();
    let bytes: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let starts_word = at == 0 || !(is_ident(bytes[at - 1]) || bytes[at - 1] == ':');
        if !(starts_word && is_ident(bytes[at])) {
            at += 1;
            continue;
        }
        let word: String = bytes[at..].iter().take_while(|&&c| is_ident(c)).collect();
        let after = at + word.chars().count();
        let continues = bytes.get(after) == Some(&':') && bytes.get(after + 1) == Some(&':');
        let base: Option<Vec<String>> = match word.as_str() {
            "crate" => Some(Vec::new()),
            "self" => Some(here.to_vec()),
            "super" => Some(here[..here.len().saturating_sub(1)].to_vec()),
            name if declared.contains(name) => Some([here, &[name.to_owned()]].concat()),
            _ => None,
        };
        match base {
            Some(base) if continues => {
                let (tree, end) = path_tree(&bytes, after + 2);
                for mut rest in tree {
                    // `super::super::…`: each further `super` climbs one more.
                    let mut base = base.clone();
                    while rest.first().is_some_and(|s| s == "super") {
                        rest.remove(0);
                        base.pop();
                    }
                    rest.retain(|s| s != "self");
                    found.push([base, rest].concat());
                }
                at = end;
            }
            _ => at = after,
        }
    }
    found
}

/// The paths of a use tree starting at `at` (after a `::`): `a::b`, `{a, b::{c, d}}`, `*`;
/// and where it ends.
fn path_tree(code: &[char], mut at: usize) -> (Vec<Vec<String>>, usize) {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    while code.get(at).is_some_and(|c| c.is_whitespace()) {
        at += 1;
    }
    if code.get(at) == Some(&'{') {
        at += 1;
        let mut all = Vec::new();
        loop {
            while code.get(at).is_some_and(|c| c.is_whitespace() || *c == ',') {
                at += 1;
            }
            match code.get(at) {
                None => return (all, at),
                Some('}') => return (all, at + 1),
                Some(_) => {
                    let (tree, end) = path_tree(code, at);
                    // Skip what follows an item (` as Name`) up to its end.
                    let mut next = end;
                    while code.get(next).is_some_and(|c| !matches!(c, ',' | '}')) {
                        next += 1;
                    }
                    all.extend(tree);
                    at = next.max(at + 1);
                }
            }
        }
    }
    let word: String = code[at.min(code.len())..]
        .iter()
        .take_while(|&&c| is_ident(c))
        .collect();
    if word.is_empty() {
        return (vec![Vec::new()], at);
    }
    let after = at + word.chars().count();
    if code.get(after) == Some(&':') && code.get(after + 1) == Some(&':') {
        let (tree, end) = path_tree(code, after + 2);
        let tree = tree
            .into_iter()
            .map(|rest| [vec![word.clone()], rest].concat())
            .collect();
        return (tree, end);
    }
    (vec![vec![word]], after)
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
