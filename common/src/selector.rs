//! Kubernetes label selectors (`matchLabels`, `matchExpressions`), checked as the API server
//! checks them — every invalid part reported with its field path, which kube's own conversion
//! from a `LabelSelector` does not do — and matched against an object's labels by
//! [`kube::core::Selector`], kube's matching.

use std::collections::{BTreeMap, BTreeSet};

use kube::core::{Expression, SelectorExt};
use serde_json::Value;

use crate::field_error::FieldError;

/// A checked selector; the default (empty) selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    selector: kube::core::Selector,
}

impl Selector {
    /// Reads a `LabelSelector` at `path`, reporting each invalid part.
    pub fn read(path: &str, value: &Value, errors: &mut Vec<FieldError>) -> Self {
        let mut requirements: Vec<Expression> = Vec::new();
        if let Some(labels) = value.get("matchLabels").and_then(Value::as_object) {
            for (key, wanted) in labels {
                let at = format!("{path}.matchLabels[{key}]");
                if let Err(rule) = check_label_key(key) {
                    errors.push(FieldError::new(&at, &Value::String(key.clone()), rule));
                }
                match wanted.as_str() {
                    Some(wanted) => {
                        requirements.push(Expression::Equal(key.clone(), wanted.to_owned()))
                    }
                    None => errors.push(FieldError::new(&at, wanted, "is not a string")),
                }
            }
        }
        let expressions = value.get("matchExpressions").and_then(Value::as_array);
        for (index, expression) in expressions.into_iter().flatten().enumerate() {
            let at = format!("{path}.matchExpressions[{index}]");
            let key = expression
                .get("key")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if let Err(rule) = check_label_key(&key) {
                errors.push(FieldError::new(
                    format!("{at}.key"),
                    &Value::String(key.clone()),
                    rule,
                ));
            }
            let values: BTreeSet<String> = expression
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|value| value.as_str().map(str::to_owned))
                .collect();
            let operator = expression
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let needs_values = matches!(operator, "In" | "NotIn");
            if needs_values == values.is_empty() && OPERATORS.contains(&operator) {
                let rule = if needs_values {
                    VALUES_NEEDED
                } else {
                    VALUES_UNWANTED
                };
                errors.push(FieldError::new(
                    format!("{at}.values"),
                    &Value::from(values.iter().cloned().collect::<Vec<_>>()),
                    rule,
                ));
                continue;
            }
            requirements.push(match operator {
                "In" => Expression::In(key, values),
                "NotIn" => Expression::NotIn(key, values),
                "Exists" => Expression::Exists(key),
                "DoesNotExist" => Expression::DoesNotExist(key),
                other => {
                    errors.push(FieldError::new(
                        format!("{at}.operator"),
                        &Value::String(other.to_owned()),
                        "is not In, NotIn, Exists or DoesNotExist",
                    ));
                    continue;
                }
            });
        }
        Self {
            selector: requirements.into_iter().collect(),
        }
    }

    /// Whether it selects every object (no requirement).
    pub fn selects_all(&self) -> bool {
        self.selector.selects_all()
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector.matches(labels)
    }
}

/// A selector's operators.
pub const OPERATORS: [&str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];
/// `values` of an `In` or `NotIn` requirement.
pub const VALUES_NEEDED: &str = "must not be empty for In and NotIn";
/// `values` of an `Exists` or `DoesNotExist` requirement.
pub const VALUES_UNWANTED: &str = "must be empty for Exists and DoesNotExist";

/// The rule a label key breaks, as a denial says it.
pub const LABEL_KEY_RULE: &str = "is not a label key: [a DNS subdomain/]a name of up to 63 letters, \
                                  digits, '-', '_' or '.', e.g. tekton.dev/pipeline";

/// A label key as Kubernetes allows it: `[prefix/]name`, the name at most 63 characters of
/// alphanumerics, `-`, `_` and `.` (alphanumeric at both ends), the prefix a DNS subdomain.
pub fn check_label_key(key: &str) -> Result<(), &'static str> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let alphanumeric_ends = |text: &str| {
        text.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
            && text
                .chars()
                .last()
                .is_some_and(|c| c.is_ascii_alphanumeric())
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && alphanumeric_ends(name)
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix.is_none_or(|prefix| {
        !prefix.is_empty()
            && prefix.len() <= 253
            && prefix.split('.').all(|part| {
                !part.is_empty()
                    && alphanumeric_ends(part)
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    if name_ok && prefix_ok {
        Ok(())
    } else {
        Err(LABEL_KEY_RULE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn matches_labels_and_expressions() {
        let mut errors = Vec::new();
        let selector = Selector::read(
            "spec.selector",
            &json!({"matchLabels": {"team": "a"},
                    "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["prod"]},
                                         {"key": "ci", "operator": "Exists"}]}),
            &mut errors,
        );
        assert_eq!(errors, []);
        assert!(selector.matches(&labels(&[("team", "a"), ("ci", "1")])));
        assert!(!selector.matches(&labels(&[("team", "a"), ("ci", "1"), ("tier", "prod")])));
        assert!(!selector.matches(&labels(&[("team", "b"), ("ci", "1")])));
        assert!(!selector.matches(&labels(&[("team", "a")])));
        assert!(Selector::default().matches(&labels(&[])));
    }

    #[test]
    fn reports_every_invalid_part_with_its_path() {
        let mut errors = Vec::new();
        Selector::read(
            "spec.selector",
            &json!({"matchLabels": {"-bad": "a"},
                    "matchExpressions": [{"key": "x", "operator": "Near", "values": ["1"]},
                                         {"key": "y", "operator": "In"}]}),
            &mut errors,
        );
        let paths: Vec<&str> = errors.iter().map(|error| error.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.selector.matchLabels[-bad]",
                "spec.selector.matchExpressions[0].operator",
                "spec.selector.matchExpressions[1].values"
            ]
        );
    }

    #[test]
    fn checks_label_keys() {
        for good in ["app", "tekton.dev/pipeline", "a-b_c.d", "x.y.z/N1"] {
            assert_eq!(check_label_key(good), Ok(()), "{good}");
        }
        for bad in ["", "/a", "a/", "-a", "Upper.Case/x", &"n".repeat(64)] {
            assert!(check_label_key(bad).is_err(), "{bad}");
        }
    }
}
