//! No module imports one that imports it. Each crate's modules form a hierarchy of concepts: a
//! module may use its siblings, its cousins and its own children, but when two modules use each
//! other (or a ring of them does) neither can be read, tested or moved without the other, and
//! the line between their concepts is in the wrong place.
//!
//! A module is a file under a crate's `src/` (`a/mod.rs` and `a.rs` are `a`); a reference is a
//! path in its code (comments and `#[cfg(test)]` items left out) that starts with `crate::`,
//! `super::` or `self::`, use groups expanded, and names the deepest module it reaches. A
//! module's own ancestors and descendants are not counted: a parent declares its children and
//! re-exports their items, and a child names its parent's types, as Rust's module system means
//! them to. Every other reference is an edge; a strongly connected set of more than one module
//! is a cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates held to it: every library of the workspace with modules of its own.
const CRATES: [&str; 13] = [
    "common",
    "state",
    "evaluator",
    "io",
    "sinks",
    "helm",
    "cleaners",
    "controller",
    "runtime",
    "plugin",
    "webhook",
    "prune",
    "certs",
];

type Module = Vec<String>;

fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every module of the crate whose sources are in `src`, with its file; binaries under `bin/`
/// are crates of their own and left out.
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    fn walk(src: &Path, folder: &Path, found: &mut BTreeMap<Module, PathBuf>) {
        let entries =
            std::fs::read_dir(folder).unwrap_or_else(|error| panic!("{folder:?}: {error}"));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                if path != src.join("bin") {
                    walk(src, &path, found);
                }
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                let relative = path
                    .strip_prefix(src)
                    .expect("under src")
                    .with_extension("");
                let mut module: Module = relative
                    .iter()
                    .map(|part| part.to_string_lossy().into_owned())
                    .collect();
                if module
                    .last()
                    .is_some_and(|last| ["mod", "lib", "main"].contains(&last.as_str()))
                {
                    module.pop();
                }
                found.insert(module, path);
            }
        }
    }
    let mut found = BTreeMap::new();
    walk(src, src, &mut found);
    found
}

/// The code of a source file: line comments dropped, and everything from the first
/// `#[cfg(test)]` on (the tests at a file's end).
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths `text` names from `crate`, `super` or `self`, each as its segments, use groups
/// (`crate::a::{b, c::d}`) expanded into one path each.
fn paths(text: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let starts = ["crate::", "super::", "self::"]
            .iter()
            .any(|root| chars[at..].starts_with(&root.chars().collect::<Vec<_>>()))
            && (at == 0 || !is_ident(chars[at - 1]));
        if starts {
            at = path_at(&chars, at, Vec::new(), &mut found);
        } else {
            at += 1;
        }
    }
    found
}

/// Reads the path starting at `at` below `prefix` into `found`; returns where it ends.
fn path_at(
    chars: &[char],
    mut at: usize,
    prefix: Vec<String>,
    found: &mut Vec<Vec<String>>,
) -> usize {
    let mut segments = prefix;
    loop {
        while at < chars.len() && chars[at].is_whitespace() {
            at += 1;
        }
        if at < chars.len() && chars[at] == '{' {
            at += 1;
            loop {
                while at < chars.len() && (chars[at].is_whitespace() || chars[at] == ',') {
                    at += 1;
                }
                if at >= chars.len() || chars[at] == '}' {
                    break;
                }
                at = path_at(chars, at, segments.clone(), found);
            }
            return at + 1;
        }
        let start = at;
        while at < chars.len() && is_ident(chars[at]) {
            at += 1;
        }
        if start == at {
            found.push(segments);
            return at;
        }
        segments.push(chars[start..at].iter().collect());
        if chars[at..].starts_with(&[':', ':']) {
            at += 2;
        } else {
            found.push(segments);
            return past_alias(chars, at);
        }
    }
}

/// Where a path ending at `at` ends with its ` as alias`, if it has one.
fn past_alias(chars: &[char], at: usize) -> usize {
    let mut next = at;
    while next < chars.len() && chars[next].is_whitespace() {
        next += 1;
    }
    if !chars[next..].starts_with(&['a', 's']) || chars.get(next + 2).is_some_and(|c| is_ident(*c))
    {
        return at;
    }
    next += 2;
    while next < chars.len() && chars[next].is_whitespace() {
        next += 1;
    }
    while next < chars.len() && is_ident(chars[next]) {
        next += 1;
    }
    next
}

/// The deepest module `path`, named in `from`, reaches; `None` for a path that leaves the crate.
fn target(from: &Module, path: &[String], modules: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    let mut base: Module = Vec::new();
    let mut rest = path.iter().peekable();
    match rest.next().map(String::as_str) {
        Some("crate") => {}
        Some("self") => base = from.clone(),
        Some("super") => {
            base = from.clone();
            base.pop()?;
            while rest.peek().is_some_and(|segment| *segment == "super") {
                rest.next();
                base.pop()?;
            }
        }
        _ => return None,
    }
    for segment in rest {
        if segment == "self" {
            continue;
        }
        base.push(segment.clone());
        if !modules.contains_key(&base) {
            base.pop();
            break;
        }
    }
    Some(base)
}

type Edges = BTreeMap<Module, BTreeSet<Module>>;

/// The edges between modules neither of which contains the other.
fn edges(modules: &BTreeMap<Module, PathBuf>) -> Edges {
    let mut edges = Edges::new();
    for (module, file) in modules {
        let text =
            std::fs::read_to_string(file).unwrap_or_else(|error| panic!("{file:?}: {error}"));
        add_edges(module, &code(&text), modules, &mut edges);
    }
    edges
}

/// The edges from `module`, whose code is `code`, added to `edges`.
fn add_edges(module: &Module, code: &str, modules: &BTreeMap<Module, PathBuf>, edges: &mut Edges) {
    for path in paths(code) {
        let Some(to) = target(module, &path, modules) else {
            continue;
        };
        if to.starts_with(module) || module.starts_with(&to) {
            continue;
        }
        edges.entry(module.clone()).or_default().insert(to);
    }
}

/// The strongly connected sets of more than one module (Tarjan's algorithm).
fn cycles(modules: &BTreeMap<Module, PathBuf>, edges: &Edges) -> Vec<Vec<Module>> {
    struct Search<'a> {
        edges: &'a Edges,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        found: Vec<Vec<Module>>,
    }
    impl Search<'_> {
        fn visit(&mut self, module: &Module) {
            let index = self.index.len();
            self.index.insert(module.clone(), index);
            self.low.insert(module.clone(), index);
            self.stack.push(module.clone());
            for next in self.edges.get(module).into_iter().flatten() {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[module].min(self.low[next]);
                    self.low.insert(module.clone(), low);
                } else if self.stack.contains(next) {
                    let low = self.low[module].min(self.index[next]);
                    self.low.insert(module.clone(), low);
                }
            }
            if self.low[module] == self.index[module] {
                let mut set = Vec::new();
                while let Some(member) = self.stack.pop() {
                    let done = member == *module;
                    set.push(member);
                    if done {
                        break;
                    }
                }
                if set.len() > 1 {
                    set.sort();
                    self.found.push(set);
                }
            }
        }
    }
    let mut search = Search {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for module in modules.keys() {
        if !search.index.contains_key(module) {
            search.visit(module);
        }
    }
    search.found
}

fn name(crate_name: &str, module: &Module) -> String {
    std::iter::once(crate_name.to_owned())
        .chain(module.iter().cloned())
        .collect::<Vec<_>>()
        .join("::")
}

#[test]
fn no_module_imports_one_that_imports_it() {
    let mut found = Vec::new();
    for crate_name in CRATES {
        let modules = modules(&checkout().join(crate_name).join("src"));
        assert!(
            modules.len() > 1,
            "{crate_name}: found {} modules",
            modules.len()
        );
        for cycle in cycles(&modules, &edges(&modules)) {
            let names: Vec<String> = cycle
                .iter()
                .map(|module| name(crate_name, module))
                .collect();
            found.push(names.join(" ↔ "));
        }
    }
    assert!(
        found.is_empty(),
        "modules that import each other:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_ring_of_modules_is_a_cycle_and_a_child_naming_its_parent_is_not() {
    let module = |path: &str| -> Module {
        path.split("::")
            .filter(|part| !part.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let modules: BTreeMap<Module, PathBuf> = ["", "a", "b", "a::c"]
        .into_iter()
        .map(|path| (module(path), PathBuf::new()))
        .collect();
    let mut edges = Edges::new();
    add_edges(&module("a"), "use crate::b::Thing;", &modules, &mut edges);
    add_edges(
        &module("a::c"),
        "use super::super::b::{self, other};\nsuper::Parent",
        &modules,
        &mut edges,
    );
    assert_eq!(
        edges[&module("a::c")],
        BTreeSet::from([module("b")]),
        "its parent is not an edge"
    );
    assert!(
        cycles(&modules, &edges).is_empty(),
        "a → b and a::c → b are no cycle"
    );

    add_edges(
        &module("b"),
        &code("use crate::{a::c::Inner, b as other}; // crate::a"),
        &modules,
        &mut edges,
    );
    assert_eq!(
        edges[&module("b")],
        BTreeSet::from([module("a::c")]),
        "itself and an alias are not"
    );
    assert_eq!(
        cycles(&modules, &edges),
        vec![vec![module("a::c"), module("b")]]
    );
}
