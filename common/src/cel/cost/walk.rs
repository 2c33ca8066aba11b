//! The walk itself: node by node, what it costs, what size it has, and the copy with charges.

use kube_cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapExpr,
    SelectExpr,
};

use super::rules::{self, Rule};
use super::sizes::{below, count, literal_size, result_size};
use super::{
    CONDITIONAL, Known, SELECT, Site, Size, Unit, Walk, charge, internal, is_operator, operand,
};

impl Walk {
    /// `expr` with charges written in; adds its nodes and charges to `unit`.
    pub(super) fn node(&mut self, expr: &IdedExpr, unit: &mut Unit) -> (IdedExpr, Known) {
        unit.nodes = unit.nodes.saturating_add(1);
        let (metered, known) = match &expr.expr {
            Expr::Literal(literal) => (expr.expr.clone(), Known::sized(literal_size(literal))),
            Expr::Ident(name) => self.ident(name),
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
                    items: count(elements.len()),
                    item: item.map(Box::new),
                    ..Size::SCALAR
                };
                let list = ListExpr::new_with_optionals(elements, list.optional_indices.clone());
                (Expr::List(list), Known::sized(size))
            }
            Expr::Map(map) => {
                let (entries, item) = self.entries(&map.entries, unit);
                let size = Size {
                    items: count(entries.len()),
                    item: item.map(Box::new),
                    ..Size::SCALAR
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

    /// A variable read whole. One the expression was given (`object`, a Cleaner's targets) is
    /// copied whole where it is read — in a list or map literal, once per mention: issue 57's
    /// `[object, object, …] != []` — so it is guarded as a select chain is, its copy measured
    /// and charged before it is made ([`SELECT`]). A loop's variables are the loop's items,
    /// charged with the loop, and its accumulator is charged by the rules of `map` and `filter`.
    fn ident(&self, name: &str) -> (Expr, Known) {
        let known = self.variable(name);
        let native = IdedExpr {
            id: 0,
            expr: Expr::Ident(name.to_owned()),
        };
        if self.bound.iter().any(|(bound, _)| bound == name) {
            return (native.expr, known);
        }
        (guarded(native), known)
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
        if let Some((root, fields)) = chain(select) {
            return self.select_chain(select, root, &fields, unit);
        }
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

    /// A chain of selects from a variable (`object.spec.s`, `c.image`, `has(object.a.b)`): the
    /// interpreter copies the value each select of it gives (`object.spec` whole, then `s`),
    /// and charges none of that, so the chain is guarded by [`SELECT`]:
    /// `SELECT(chain) ? chain : null`. The guard measures those copies where the variable
    /// holds them and charges the ones beyond [`super::FREE_COPY`] before the chain runs; every guard
    /// is a charge, so the clock is read at least once every few selects. Within the bounds'
    /// sizes no select copies more than that, so the estimate adds nothing for them.
    fn select_chain(
        &mut self,
        select: &SelectExpr,
        root: &str,
        fields: &[(&str, bool)],
        unit: &mut Unit,
    ) -> (Expr, Known) {
        let mut known = self.variable(root);
        unit.nodes = unit.nodes.saturating_add(1);
        for &(field, test) in fields {
            unit.nodes = unit.nodes.saturating_add(1);
            if test {
                known = Known::sized(Size::SCALAR);
                break;
            }
            known = below(&known, field);
        }
        let native = IdedExpr {
            id: 0,
            expr: Expr::Select(select.clone()),
        };
        (guarded(native), known)
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
        let mut operands = Vec::new();
        let mut knowns = Vec::new();
        for operand in call.target.iter().map(|target| &**target).chain(&call.args) {
            let (metered, known) = self.node(operand, unit);
            operands.push(metered);
            knowns.push(known);
        }
        // A function without a rule does not compile: `Expression::compile` refused it already.
        let rule = super::offered::rule_of(name).unwrap_or(Rule::Fixed);
        // A library function is given copies of its operands, and a costed operator's are
        // measured: both are charged by their operands' sizes. Other operators run on their
        // values in place.
        if (rule != Rule::Fixed || !is_operator(name)) && !operands.is_empty() {
            let extents: Vec<_> = knowns.iter().map(|known| known.size.extent()).collect();
            unit.cost = unit.cost.saturating_add(rules::call_units(rule, &extents));
            let site = self.sites.len();
            self.sites.push(Site {
                rule,
                arity: operands.len(),
            });
            operands = operands
                .into_iter()
                .enumerate()
                .map(|(index, value)| operand(value, site, index))
                .collect();
        }
        let key = match call.args.get(1).map(|index| &index.expr) {
            Some(Expr::Literal(LiteralValue::String(key))) => Some(key.inner()),
            _ => None,
        };
        let (target_known, arg_knowns) = match call.target {
            Some(_) => (knowns.first(), knowns.get(1..).unwrap_or_default()),
            None => (None, knowns.as_slice()),
        };
        let size = result_size(name, rule, key, target_known, arg_knowns);
        let target = call.target.as_ref().map(|_| Box::new(operands.remove(0)));
        let metered = Expr::Call(CallExpr {
            func_name: call.func_name.clone(),
            target,
            args: operands,
        });
        (metered, size)
    }

    fn comprehension(&mut self, loop_: &ComprehensionExpr, unit: &mut Unit) -> (Expr, Known) {
        let (iter_range, range) = self.node(&loop_.iter_range, unit);
        let (accu_init, _) = self.node(&loop_.accu_init, unit);
        let items = range.size.items;
        let item = Known::sized(range.size.item());
        // The accumulator of `map` and `filter` grows to a list of at most one item per item,
        // of what the step appends: not known until the step is walked, so of any size.
        let accumulator = Known::sized(Size {
            items,
            item: None,
            ..Size::SCALAR
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
            loop_cond: charge(loop_cond, body.nodes),
            loop_step,
            result,
        };
        (Expr::Comprehension(Box::new(metered)), known)
    }
}

/// The select chain `select` ends, from a variable: the variable, and each field with whether
/// it is a presence test, from the variable out. `None` for a select of anything else.
pub(in crate::cel) fn chain(select: &SelectExpr) -> Option<(&str, Vec<(&str, bool)>)> {
    let mut fields = vec![(select.field.as_str(), select.test)];
    let mut operand = &select.operand.expr;
    loop {
        match operand {
            Expr::Select(inner) if !inner.test => {
                fields.push((inner.field.as_str(), false));
                operand = &inner.operand.expr;
            }
            Expr::Ident(root) => {
                fields.reverse();
                return Some((root.as_str(), fields));
            }
            _ => return None,
        }
    }
}

/// `native` (a select chain or a variable) behind [`SELECT`]: `SELECT(native) ? native : null`,
/// its copy charged before it is made.
fn guarded(native: IdedExpr) -> Expr {
    let guard = internal(SELECT, vec![native.clone()]);
    let null = IdedExpr {
        id: 0,
        expr: Expr::Literal(LiteralValue::Null),
    };
    Expr::Call(CallExpr {
        func_name: CONDITIONAL.to_owned(),
        target: None,
        args: vec![guard, native, null],
    })
}
