//! The chart's values without a cluster: `values.schema.json` knows exactly the values of
//! `values.yaml` (a value missing from the schema would be refused by it, a schema entry without
//! a value is stale), and the chart's README names every one of them in its table. Free-form
//! values (affinity, labels…) and Kubernetes types the schema defines once (`$ref`: resources)
//! are one value each.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

const CHART: &str = "charts/kube-retention";

fn read(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(CHART)
        .join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn values() -> Value {
    serde_norway::from_str(&read("values.yaml")).expect("values.yaml is YAML")
}

fn schema() -> Value {
    serde_json::from_str(&read("values.schema.json")).expect("values.schema.json is JSON")
}

/// The values' paths (`controller.circuitBreaker.window`), walking `values` where `schema` has
/// properties of its own (not a `$ref`); and, apart, where one has a key the other lacks.
fn paths(
    values: &Value,
    schema: &Value,
    at: &str,
    found: &mut BTreeSet<String>,
    odd: &mut Vec<String>,
) {
    let properties = match schema.get("$ref") {
        Some(_) => None,
        None => schema.get("properties").and_then(Value::as_object),
    };
    let Some(properties) = properties else {
        found.insert(at.to_owned());
        return;
    };
    let empty = serde_json::Map::new();
    let fields = values.as_object().unwrap_or(&empty);
    let path = |key: &str| match at {
        "" => key.to_owned(),
        _ => format!("{at}.{key}"),
    };
    for key in fields.keys().filter(|key| !properties.contains_key(*key)) {
        odd.push(format!(
            "{} is in values.yaml, not in the schema",
            path(key)
        ));
    }
    for (key, property) in properties {
        match fields.get(key) {
            Some(value) => paths(value, property, &path(key), found, odd),
            None => odd.push(format!(
                "{} is in the schema, not in values.yaml",
                path(key)
            )),
        }
    }
}

/// The values the README's table names: its rows' first cells, where `a.b.c`, `.d` names
/// `a.b.c` and `a.b.d`, and `a.{b,c}` names `a.b` and `a.c`.
fn documented() -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for line in read("README.md").lines() {
        let Some(cell) = line
            .strip_prefix("| `")
            .and_then(|rest| rest.split(" | ").next())
        else {
            continue;
        };
        let mut last = String::new();
        for item in format!("`{cell}").split(", ") {
            let item = item.trim_matches('`');
            let full = match item.strip_prefix('.') {
                Some(tail) => match last.rsplit_once('.') {
                    Some((parent, _)) => format!("{parent}.{tail}"),
                    None => tail.to_owned(),
                },
                None => item.to_owned(),
            };
            match full.split_once(".{") {
                Some((parent, alternatives)) => {
                    for alternative in alternatives.trim_end_matches('}').split(',') {
                        named.insert(format!("{parent}.{alternative}"));
                    }
                }
                None => {
                    named.insert(full.clone());
                }
            }
            last = full;
        }
    }
    named
}

fn all_paths() -> BTreeSet<String> {
    let (mut found, mut odd) = (BTreeSet::new(), Vec::new());
    paths(&values(), &schema(), "", &mut found, &mut odd);
    assert!(
        odd.is_empty(),
        "values.yaml and values.schema.json differ: {odd:#?}"
    );
    found
}

#[test]
fn the_schema_knows_exactly_the_values() {
    let found = all_paths();
    assert!(
        found.contains("controller.circuitBreaker.window") && found.contains("webhook.resources"),
        "the walk reached the nested and the free-form values: {found:?}"
    );
}

#[test]
fn the_readme_names_every_value() {
    let named = documented();
    let paths = all_paths();
    let missing: Vec<&String> = paths.difference(&named).collect();
    assert!(
        missing.is_empty(),
        "values the chart's README does not name: {missing:#?}"
    );
    let unknown: Vec<&String> = named.difference(&paths).collect();
    assert!(
        unknown.is_empty(),
        "the chart's README names values that do not exist: {unknown:#?}"
    );
}
