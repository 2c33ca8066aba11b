//! The rule the API server checks of a target's name without the webhook: the same identifiers
//! and reserved names as [`super::reserved_names`], in CEL, with [`super::TARGET_NAME_RULE`]'s
//! words. Here, beside the names, so the schema's rules (`crate::schema_rules`) need nothing of
//! the Cleaner.

use schemars::Schema;

use crate::schema_rules::{IDENTIFIER_PATTERN, edit, matches, validate};

/// A Cleaner target's name: a CEL identifier, neither reserved nor `time`.
pub fn target_name(schema: &mut Schema) {
    edit(schema, |schema| {
        let reserved = super::reserved_names()
            .map(|name| format!("'{name}'"))
            .collect::<Vec<_>>()
            .join(", ");
        let rule = format!(
            "{} && !(self in [{reserved}])",
            matches("self", IDENTIFIER_PATTERN)
        );
        validate(schema, &rule, super::TARGET_NAME_RULE, None);
    });
}
