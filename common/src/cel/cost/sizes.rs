//! What the walk knows of sizes: literals', Kubernetes' bounds on metadata, a call's result
//! from its arguments', and the assumed bounds for the rest.

use kube_cel::cel::common::ast::LiteralValue;

use super::walk::{CONSTANT, is_operator};
use super::{ASSUMED_ITEMS, Known, Size};

/// Functions whose result has at most the size of their receiver.
const SHRINKING: [&str; 5] = ["lowerAscii", "upperAscii", "trim", "substring", "charAt"];

pub(super) fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

pub(super) fn literal_size(literal: &LiteralValue) -> Size {
    match literal {
        LiteralValue::String(text) => Size::text(count(text.inner().len())),
        LiteralValue::Bytes(bytes) => Size::text(count(bytes.inner().len())),
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
    // 256 KiB in all.
    let map = |key: u64, value: u64| {
        Some(Size {
            bytes: 0,
            items: ASSUMED_ITEMS,
            item: Some(Box::new(Size::text(key.max(value)))),
        })
    };
    match path.as_slice() {
        ["object", "kind"] => text(63),
        ["object", "apiVersion"] => text(317),
        ["object", "metadata", "name" | "generateName"] => text(253),
        ["object", "metadata", "namespace"] => text(63),
        ["object", "metadata", "uid"] => text(36),
        ["object", "metadata", "labels"] => map(317, 63),
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
    key: Option<&str>,
    target: Option<&Known>,
    args: &[Known],
) -> Known {
    let receiver = target.or(args.first()).map(|known| &known.size);
    match name {
        "_[_]" | "_[?_]" => match (args.first(), key) {
            (Some(container), Some(key)) if container.path.is_some() => below(container, key),
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
            let each = list.item().bytes.saturating_add(separator);
            Known::sized(Size::text(list.items.saturating_mul(each)))
        }
        "split" => {
            let bytes = receiver.map_or(0, |size| size.bytes);
            Known::sized(Size {
                bytes: 0,
                items: bytes.saturating_add(1),
                item: Some(Box::new(Size::text(bytes))),
            })
        }
        _ if is_operator(name) || CONSTANT.contains(&name) => Known::sized(Size::SCALAR),
        _ => Known::sized(Size::unknown()),
    }
}
