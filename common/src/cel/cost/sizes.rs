//! What the walk knows of sizes: literals', Kubernetes' bounds on metadata, a call's result
//! from its arguments', and the assumed bounds for the rest.

use kube_cel::cel::common::ast::LiteralValue;

use super::rules::{RENDERED_PER_UNIT, RENDERED_SCALAR, Rule};
use super::{ASSUMED_ITEMS, CONSTANT, Known, Size, is_operator};

/// Functions whose result has at most the size of their receiver.
const SHRINKING: [&str; 5] = ["lowerAscii", "upperAscii", "trim", "substring", "charAt"];

pub(super) fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

pub(super) fn literal_size(literal: &LiteralValue) -> Size {
    match literal {
        LiteralValue::String(text) => Size::text(count(text.inner().len())),
        LiteralValue::Bytes(bytes) => Size::text(count(bytes.inner().len())),
        LiteralValue::Int(number) => Size {
            number: u64::try_from(*number.inner()).unwrap_or(0),
            ..Size::SCALAR
        },
        LiteralValue::UInt(number) => Size {
            number: *number.inner(),
            ..Size::SCALAR
        },
        _ => Size::SCALAR,
    }
}

/// The field or key `field` of `known`: a bound of Kubernetes' metadata where one is known, the
/// item bound of a literal, or the assumed bounds.
pub(super) fn below(known: &Known, field: &str) -> Known {
    let Some(mut path) = known.path.clone() else {
        return Known::sized(
            known
                .size
                .item
                .as_deref()
                .cloned()
                .unwrap_or_else(Size::unknown),
        );
    };
    path.push(field.to_owned());
    let size = metadata_size(&path).unwrap_or_else(Size::unknown);
    Known {
        size,
        path: Some(path),
    }
}

/// Bounds Kubernetes itself enforces on an object's metadata.
fn metadata_size(path: &[String]) -> Option<Size> {
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    let text = |bytes| Some(Size::text(bytes));
    // Label keys: a 253-byte prefix, a slash and a 63-byte name; values 63 bytes. Annotations:
    // 256 KiB in all. A loop over a map goes over its keys, so a map's item is its key; a
    // value is reached by its path (`annotations[k]`, any `k`).
    // The map's own text bound is its values' in all, for what copying it costs.
    let map = |key: u64, values: u64| {
        Some(Size {
            bytes: values,
            items: ASSUMED_ITEMS,
            item: Some(Box::new(Size::text(key))),
            ..Size::SCALAR
        })
    };
    match path.as_slice() {
        ["object", "kind"] => text(63),
        ["object", "apiVersion"] => text(317),
        ["object", "metadata", "name" | "generateName"] => text(253),
        ["object", "metadata", "namespace"] => text(63),
        ["object", "metadata", "uid"] => text(36),
        ["object", "metadata", "labels"] => map(317, 63 * ASSUMED_ITEMS),
        ["object", "metadata", "labels", _] => text(63),
        ["object", "metadata", "annotations"] => map(317, 262_144),
        ["object", "metadata", "annotations", _] => text(262_144),
        _ => None,
    }
}

/// An upper bound on a call's result.
/// `key` is the string literal an index names (`labels["team"]`), where it is one.
pub(super) fn result_size(
    name: &str,
    rule: Rule,
    key: Option<&str>,
    target: Option<&Known>,
    args: &[Known],
) -> Known {
    let receiver = target.or(args.first()).map(|known| &known.size);
    match name {
        "_[_]" | "_[?_]" => match (args.first(), key) {
            // Any key of a map whose values' bound is known by path (`annotations[k]`).
            (Some(container), key) if container.path.is_some() => {
                below(container, key.unwrap_or("*"))
            }
            (Some(container), _) => Known::sized(container.size.item()),
            (None, _) => Known::sized(Size::unknown()),
        },
        "_+_" => {
            let (a, b) = (&args[0].size, &args[1].size);
            let item = match (&a.item, &b.item, a.items, b.items) {
                (Some(x), Some(y), _, _) => Some(Box::new((**x).clone().max((**y).clone()))),
                (Some(x), None, _, 0) | (None, Some(x), 0, _) => Some(x.clone()),
                _ => None,
            };
            Known::sized(Size {
                bytes: a.bytes.saturating_add(b.bytes),
                items: a.items.saturating_add(b.items),
                item,
                ..Size::SCALAR
            })
        }
        "_?_:_" => Known::sized(args[1].size.clone().max(args[2].size.clone())),
        _ if SHRINKING.contains(&name) => {
            Known::sized(Size::text(receiver.map_or(0, |size| size.bytes)))
        }
        "join" => {
            let list = receiver.cloned().unwrap_or_else(Size::unknown);
            let separator = args
                .get(usize::from(target.is_none()))
                .map_or(0, |known| known.size.bytes);
            // A string as it is; anything else as kube-cel renders it (`Debug`): a scalar in a
            // few bytes, a value holding others by what copying it costs.
            let item = list.item();
            let rendered = match item.items == 0 && item.item.is_none() {
                true => item.bytes.max(RENDERED_SCALAR),
                false => item.deep().saturating_mul(RENDERED_PER_UNIT),
            };
            let each = rendered.saturating_add(separator);
            Known::sized(Size::text(list.items.saturating_mul(each)))
        }
        "split" | "findAll" => {
            let bytes = receiver.map_or(0, |size| size.bytes);
            Known::sized(Size {
                items: bytes.saturating_add(2),
                item: Some(Box::new(Size::text(bytes))),
                ..Size::SCALAR
            })
        }
        "find" => Known::sized(Size::text(receiver.map_or(0, |size| size.bytes))),
        "replace" => {
            // As its rule counts it: every position replaced with the longest replacement.
            let bytes = receiver.map_or(0, |size| size.bytes);
            let with = args
                .get(usize::from(target.is_none()) + 1)
                .map_or(0, |known| known.size.bytes);
            let made = bytes.saturating_add(bytes.saturating_add(1).saturating_mul(with));
            Known::sized(Size::text(made))
        }
        "lists.range" => Known::sized(Size {
            items: receiver.map_or(0, |size| size.number),
            item: Some(Box::new(Size::SCALAR)),
            ..Size::SCALAR
        }),
        "reverse" | "slice" | "sort" | "distinct" => {
            Known::sized(receiver.cloned().unwrap_or_else(Size::unknown))
        }
        _ if is_operator(name) || CONSTANT.contains(&name) => Known::sized(Size::SCALAR),
        _ => match rule {
            // A function that makes up to `grows` times what it reads.
            Rule::Linear { grows } if grows > 0 => {
                let all = target.into_iter().chain(args);
                let (bytes, items) = all.fold((32u64, 0u64), |(bytes, items), known| {
                    (
                        bytes.saturating_add(known.size.bytes),
                        items.saturating_add(known.size.items),
                    )
                });
                Known::sized(Size {
                    bytes: bytes.saturating_mul(grows),
                    items: items.saturating_mul(grows),
                    ..Size::SCALAR
                })
            }
            _ => Known::sized(Size::unknown()),
        },
    }
}
