//! Validation errors that name the field path, the offending value and the rule, so a denial
//! at `kubectl apply` time tells the user exactly what to change.

use std::fmt;

use serde_json::Value;

/// One invalid field: `spec.retention.ttlAfterFailed: "1d" is not a duration: use h, m, ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Where, e.g. `spec.retention.ttlAfterFailed` or `metadata.annotations[retention.dev/ttl]`.
    pub path: String,
    /// The value as the user wrote it, rendered as JSON (`"1d"`, `101`).
    pub value: String,
    /// What is wrong and what is allowed, with an example.
    pub rule: String,
}

impl FieldError {
    pub fn new(path: impl Into<String>, value: &Value, rule: impl fmt::Display) -> Self {
        Self {
            path: path.into(),
            value: render(value),
            rule: rule.to_string(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} {}", self.path, self.value, self.rule)
    }
}

/// All errors of one object, reported together.
pub fn summary(errors: &[FieldError]) -> String {
    listed(errors, "retention settings are invalid")
}

/// One error as it is, several under "N {heading}:", one per line.
pub fn listed(errors: &[FieldError], heading: &str) -> String {
    match errors {
        [single] => single.to_string(),
        many => {
            let lines: Vec<String> = many.iter().map(|error| format!("- {error}")).collect();
            format!("{} {heading}:\n{}", many.len(), lines.join("\n"))
        }
    }
}

/// How many characters of a value's JSON a denial shows.
pub const RENDERED_CHARS: usize = 80;

/// A value as JSON, cut short past [`RENDERED_CHARS`] characters (with `…`).
pub fn render(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= RENDERED_CHARS {
        return text;
    }
    let cut: String = text.chars().take(RENDERED_CHARS).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_path_value_rule() {
        let error = FieldError::new("spec.retention.succeededLimit", &json!(101), "is above 100");
        assert_eq!(
            error.to_string(),
            "spec.retention.succeededLimit: 101 is above 100"
        );
        let error = FieldError::new("spec.x", &json!("1d"), "is not a duration");
        assert_eq!(error.to_string(), "spec.x: \"1d\" is not a duration");
    }

    #[test]
    fn reports_several_errors_together() {
        let errors = [
            FieldError::new("a", &json!("x"), "is bad"),
            FieldError::new("b", &json!(1), "is worse"),
        ];
        assert_eq!(
            summary(&errors),
            "2 retention settings are invalid:\n- a: \"x\" is bad\n- b: 1 is worse"
        );
    }

    #[test]
    fn long_values_are_cut() {
        let error = FieldError::new("a", &json!("x".repeat(500)), "is bad");
        assert!(error.value.chars().count() <= 81, "{}", error.value);
    }
}
