//! The walk itself: node by node, what it costs, what size it has, and the copy with charges.

use kube_cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapExpr,
    SelectExpr,
};

use super::sizes::{below, count, literal_size, result_size};
use super::{How, Known, Size, Unit, Walk, charge};

/// Functions over text: their receiver and arguments are charged as text.
const TEXT_FUNCTIONS: [&str; 17] = [
    "startsWith",
    "endsWith",
    "matches",
    "lowerAscii",
    "upperAscii",
    "trim",
    "replace",
    "split",
    "substring",
    "charAt",
    "indexOf",
    "lastIndexOf",
    "timestamp",
    "duration",
    "quantity",
    "url",
    "format",
];

/// Functions that take no time with the size of their arguments.
pub(super) const CONSTANT: [&str; 3] = ["size", "type", "has"];

impl Walk {
    /// `expr` with charges written in; adds its nodes and charges to `unit`.
    pub(super) fn node(&mut self, expr: &IdedExpr, unit: &mut Unit) -> (IdedExpr, Known) {
        unit.nodes = unit.nodes.saturating_add(1);
        let (metered, known) = match &expr.expr {
            Expr::Literal(literal) => (expr.expr.clone(), Known::sized(literal_size(literal))),
            Expr::Ident(name) => (expr.expr.clone(), self.variable(name)),
            Expr::Select(select) => self.select(select, unit),
            Expr::Call(call) => self.call(call, unit),
            Expr::Comprehension(loop_) => self.comprehension(loop_, unit),
            Expr::List(list) => {
                let mut elements = Vec::new();
                let mut item: Option<Size> = None;
                for element in &list.elements {
                    let (metered, known) = self.node(element, unit);
                    elements.push(metered);
                    item = Some(item.map_or(known.size.clone(), |item| item.max(known.size)));
                }
                let size = Size {
                    bytes: 0,
                    items: count(elements.len()),
                    item: item.map(Box::new),
                };
                let list = ListExpr::new_with_optionals(elements, list.optional_indices.clone());
                (Expr::List(list), Known::sized(size))
            }
            Expr::Map(map) => {
                let (entries, item) = self.entries(&map.entries, unit);
                let size = Size {
                    bytes: 0,
                    items: count(entries.len()),
                    item: item.map(Box::new),
                };
                (Expr::Map(MapExpr { entries }), Known::sized(size))
            }
            Expr::Struct(fields) => {
                let mut fields = fields.clone();
                let (entries, _) = self.entries(&fields.entries, unit);
                fields.entries = entries;
                (Expr::Struct(fields), Known::sized(Size::unknown()))
            }
            Expr::Unspecified => (Expr::Unspecified, Known::sized(Size::SCALAR)),
        };
        let metered = IdedExpr {
            id: expr.id,
            expr: metered,
        };
        (metered, known)
    }

    fn variable(&self, name: &str) -> Known {
        match self.bound.iter().rev().find(|(bound, _)| bound == name) {
            Some((_, known)) => known.clone(),
            None => Known {
                size: Size::unknown(),
                path: Some(vec![name.to_owned()]),
            },
        }
    }

    fn select(&mut self, select: &SelectExpr, unit: &mut Unit) -> (Expr, Known) {
        let (operand, known) = self.node(&select.operand, unit);
        let metered = Expr::Select(SelectExpr {
            operand: Box::new(operand),
            field: select.field.clone(),
            test: select.test,
        });
        if select.test {
            return (metered, Known::sized(Size::SCALAR));
        }
        (metered, below(&known, &select.field))
    }

    fn entries(
        &mut self,
        entries: &[kube_cel::cel::common::ast::IdedEntryExpr],
        unit: &mut Unit,
    ) -> (Vec<kube_cel::cel::common::ast::IdedEntryExpr>, Option<Size>) {
        let mut metered = Vec::new();
        let mut item: Option<Size> = None;
        for entry in entries {
            let mut entry = entry.clone();
            match &mut entry.expr {
                EntryExpr::MapEntry(map_entry) => {
                    let (key, key_known) = self.node(&map_entry.key, unit);
                    let (value, value_known) = self.node(&map_entry.value, unit);
                    map_entry.key = key;
                    map_entry.value = value;
                    let both = key_known.size.max(value_known.size);
                    item = Some(item.map_or(both.clone(), |item| item.max(both)));
                }
                EntryExpr::StructField(field) => {
                    let (value, _) = self.node(&field.value, unit);
                    field.value = value;
                }
            }
            metered.push(entry);
        }
        (metered, item)
    }

    fn call(&mut self, call: &CallExpr, unit: &mut Unit) -> (Expr, Known) {
        let name = call.func_name.as_str();
        let mut target = None;
        let mut target_known = None;
        if let Some(receiver) = &call.target {
            let (metered, known) = self.node(receiver, unit);
            target = Some(metered);
            target_known = Some(known);
        }
        let mut args = Vec::new();
        let mut knowns = Vec::new();
        for argument in &call.args {
            let (metered, known) = self.node(argument, unit);
            args.push(metered);
            knowns.push(known);
        }
        // What is charged by size, and how: each operand of a concatenation (copied), the
        // collection searched by `in`, everything a library function is given.
        let how: Option<(Vec<usize>, How)> = match name {
            "_+_" => Some((vec![0, 1], How::Copy)),
            "@in" => Some((vec![1], How::Any)),
            _ if is_operator(name) || CONSTANT.contains(&name) => None,
            _ if TEXT_FUNCTIONS.contains(&name) => Some(((0..args.len()).collect(), How::Text)),
            _ => Some(((0..args.len()).collect(), How::Any)),
        };
        let mut charged = |value: IdedExpr, known: &Known, how: How| {
            unit.cost = unit
                .cost
                .saturating_add(how.units(known.size.bytes, known.size.items));
            charge(value, 0, how)
        };
        if let Some((indices, how)) = how {
            let is_function = !is_operator(name);
            if is_function && let (Some(value), Some(known)) = (target.take(), &target_known) {
                target = Some(charged(value, known, how));
            }
            for index in indices {
                let value = std::mem::take(&mut args[index]);
                args[index] = charged(value, &knowns[index], how);
            }
        }
        let key = match call.args.get(1).map(|index| &index.expr) {
            Some(Expr::Literal(LiteralValue::String(key))) => Some(key.inner()),
            _ => None,
        };
        let size = result_size(name, key, target_known.as_ref(), &knowns);
        let metered = Expr::Call(CallExpr {
            func_name: call.func_name.clone(),
            target: target.map(Box::new),
            args,
        });
        (metered, size)
    }

    fn comprehension(&mut self, loop_: &ComprehensionExpr, unit: &mut Unit) -> (Expr, Known) {
        let (iter_range, range) = self.node(&loop_.iter_range, unit);
        let (accu_init, _) = self.node(&loop_.accu_init, unit);
        let items = range.size.items;
        let item = Known::sized(range.size.item());
        // The accumulator of `map` and `filter` grows to a list of at most one item per item.
        let accumulator = Known::sized(Size {
            bytes: 0,
            items,
            item: range.size.item.clone(),
        });
        let outer = self.bound.len();
        self.bound.push((loop_.iter_var.clone(), item.clone()));
        if let Some(second) = &loop_.iter_var2 {
            self.bound.push((second.clone(), item));
        }
        self.bound
            .push((loop_.accu_var.clone(), accumulator.clone()));
        let mut body = Unit::default();
        let (loop_cond, _) = self.node(&loop_.loop_cond, &mut body);
        let (loop_step, stepped) = self.node(&loop_.loop_step, &mut body);
        let each = body.nodes.saturating_add(body.cost);
        unit.cost = unit.cost.saturating_add(items.saturating_mul(each));
        let (result, mut known) = self.node(&loop_.result, unit);
        // The result of `map` and `filter` is the accumulator: a list of what the step appends.
        if matches!(&loop_.result.expr, Expr::Ident(name) if *name == loop_.accu_var) {
            known = Known::sized(accumulator.size.max(stepped.size));
        }
        self.bound.truncate(outer);
        let metered = ComprehensionExpr {
            iter_range,
            iter_var: loop_.iter_var.clone(),
            iter_var2: loop_.iter_var2.clone(),
            accu_var: loop_.accu_var.clone(),
            accu_init,
            loop_cond: charge(loop_cond, body.nodes, How::Fixed),
            loop_step,
            result,
        };
        (Expr::Comprehension(Box::new(metered)), known)
    }
}

/// Operators (`_==_`, `!_`) and the parser's own (`@in`, `@not_strictly_false`).
pub(super) fn is_operator(name: &str) -> bool {
    name.starts_with('_') || name.ends_with('_') || name.starts_with('@')
}
