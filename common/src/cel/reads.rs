//! What of the object an expression reads: the paths its select chains from `object` follow
//! (`object.metadata.labels["tier"]` reads `metadata.labels`; `has(object.spec.x)` reads
//! `spec.x`), or the whole object where it reads `object` any other way (bare, indexed, as a
//! macro's range, or where a loop rebinds the name). An object cut down to the paths every
//! expression judging it reads ([`Reads::project`]) answers every one of them as the whole
//! object does: a select chain sees the same fields, present or absent, along its path, and
//! nothing off its path. The controller sends its evaluator process only that: the whole of a
//! 1.5 MiB object for an expression that reads `object`, a few labels for one that reads a
//! label.

use std::collections::BTreeMap;

use kube_cel::cel::common::ast::{EntryExpr, Expr, SelectExpr};
use serde_json::Value;

use super::VARIABLE;

/// The parts of `object` read: by default, none.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reads {
    /// `None`: the whole object.
    paths: Option<Trie>,
}

/// Paths as a tree of field names: a node without children is read whole.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
struct Trie(BTreeMap<String, Trie>);

impl Trie {
    fn insert(&mut self, path: &[&str]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        let child = self.0.entry((*first).to_owned());
        match child {
            // A prefix read whole already covers the longer path.
            std::collections::btree_map::Entry::Occupied(node) if node.get().0.is_empty() => {}
            std::collections::btree_map::Entry::Occupied(mut node) => {
                if rest.is_empty() {
                    // The shorter path reads the whole node.
                    node.get_mut().0.clear();
                } else {
                    node.get_mut().insert(rest);
                }
            }
            std::collections::btree_map::Entry::Vacant(node) => {
                node.insert(Trie::default()).insert(rest);
            }
        }
    }

    fn merge(&mut self, other: &Trie) {
        for (field, below) in &other.0 {
            match self.0.get_mut(field) {
                None => {
                    self.0.insert(field.clone(), below.clone());
                }
                Some(mine) if mine.0.is_empty() => {}
                Some(mine) if below.0.is_empty() => mine.0.clear(),
                Some(mine) => mine.merge(below),
            }
        }
    }

    /// `value` cut down to the paths; a value on a path that is not a map is kept whole.
    fn project(&self, value: &Value) -> Value {
        let Value::Object(fields) = value else {
            return value.clone();
        };
        let kept = self
            .0
            .iter()
            .filter_map(|(field, below)| {
                let found = fields.get(field)?;
                let kept = match below.0.is_empty() {
                    true => found.clone(),
                    false => below.project(found),
                };
                Some((field.clone(), kept))
            })
            .collect();
        Value::Object(kept)
    }
}

impl Default for Reads {
    fn default() -> Self {
        Self {
            paths: Some(Trie::default()),
        }
    }
}

impl Reads {
    /// What `expr` (an expression over `object`) reads of it.
    pub(super) fn of(expr: &Expr) -> Self {
        let mut trie = Trie::default();
        let whole = !walk(expr, &mut Vec::new(), &mut trie);
        Self {
            paths: (!whole).then_some(trie),
        }
    }

    /// The whole object.
    pub fn whole() -> Self {
        Self { paths: None }
    }

    /// Whether it reads the whole object.
    pub fn is_whole(&self) -> bool {
        self.paths.is_none()
    }

    /// What `self` and `other` read together.
    pub fn union(&mut self, other: &Reads) {
        match (&mut self.paths, &other.paths) {
            (None, _) => {}
            (Some(_), None) => self.paths = None,
            (Some(mine), Some(theirs)) => mine.merge(theirs),
        }
    }

    /// `object` cut down to what is read.
    pub fn project(&self, object: &Value) -> Value {
        match &self.paths {
            None => object.clone(),
            Some(trie) => trie.project(object),
        }
    }
}

/// Records in `trie` the paths `expr` reads of `object`; false where it reads `object` whole.
/// `bound` holds the names loops bind around `expr` (one of them may shadow `object`).
fn walk<'a>(expr: &'a Expr, bound: &mut Vec<&'a str>, trie: &mut Trie) -> bool {
    let object_bound = |bound: &Vec<&str>| bound.contains(&VARIABLE);
    match expr {
        Expr::Ident(name) => name != VARIABLE || object_bound(bound),
        Expr::Select(select) => match chain(select) {
            Some(fields) if !object_bound(bound) => {
                trie.insert(&fields);
                true
            }
            _ => walk(&select.operand.expr, bound, trie),
        },
        Expr::Call(call) => call
            .target
            .iter()
            .map(|target| &**target)
            .chain(&call.args)
            .all(|argument| walk(&argument.expr, bound, trie)),
        Expr::List(list) => list
            .elements
            .iter()
            .all(|element| walk(&element.expr, bound, trie)),
        Expr::Map(map) => map
            .entries
            .iter()
            .all(|entry| walk_entry(&entry.expr, bound, trie)),
        Expr::Struct(fields) => fields
            .entries
            .iter()
            .all(|entry| walk_entry(&entry.expr, bound, trie)),
        Expr::Comprehension(loop_) => {
            let outside = walk(&loop_.iter_range.expr, bound, trie)
                && walk(&loop_.accu_init.expr, bound, trie);
            let outer = bound.len();
            bound.push(&loop_.iter_var);
            bound.extend(loop_.iter_var2.as_deref());
            bound.push(&loop_.accu_var);
            let inside = [&loop_.loop_cond, &loop_.loop_step, &loop_.result]
                .into_iter()
                .all(|inside| walk(&inside.expr, bound, trie));
            bound.truncate(outer);
            outside && inside
        }
        Expr::Literal(_) | Expr::Unspecified => true,
    }
}

fn walk_entry<'a>(entry: &'a EntryExpr, bound: &mut Vec<&'a str>, trie: &mut Trie) -> bool {
    match entry {
        EntryExpr::MapEntry(entry) => {
            walk(&entry.key.expr, bound, trie) && walk(&entry.value.expr, bound, trie)
        }
        EntryExpr::StructField(field) => walk(&field.value.expr, bound, trie),
    }
}

/// The fields a select chain from `object` follows, outermost first (a presence test's field
/// included); `None` for a chain from anything else.
fn chain(select: &SelectExpr) -> Option<Vec<&str>> {
    let mut fields = vec![select.field.as_str()];
    let mut operand = &select.operand.expr;
    loop {
        match operand {
            Expr::Select(inner) if !inner.test => {
                fields.push(inner.field.as_str());
                operand = &inner.operand.expr;
            }
            Expr::Ident(root) if root == VARIABLE => {
                fields.reverse();
                return Some(fields);
            }
            _ => return None,
        }
    }
}
