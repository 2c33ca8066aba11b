//! Kinds added on the controller's command line:
//! `--kind GROUP/VERSION/KIND[/PLURAL][:LABEL=SUCCEEDED,FAILED]`, e.g.
//! `tekton.dev/v1/PipelineRun:tekton.dev/pipeline=5,3` (core kinds: `/v1/ConfigMap`).

use std::str::FromStr;

use super::{Entry, LabelLimits, Resource, Role, Watch};
use crate::limits::LIMIT_RANGE;
use crate::progress::FinishRule;

const USAGE: &str = "expected GROUP/VERSION/KIND[/PLURAL][:LABEL=SUCCEEDED,FAILED], \
                     e.g. tekton.dev/v1/TaskRun:tekton.dev/task=5,3";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtraKindError {
    #[error("--kind {spec:?}: {USAGE}")]
    Syntax { spec: String },
    #[error(
        "--kind {spec:?}: limit {limit:?} must be a whole number from {} to {}",
        LIMIT_RANGE.0,
        LIMIT_RANGE.1
    )]
    Limit { spec: String, limit: String },
}

impl FromStr for Entry {
    type Err = ExtraKindError;

    /// A run of the named kind: finished by a Knative-style `Succeeded` condition, governed by
    /// annotations, with optional limits per value of a label.
    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let syntax = || ExtraKindError::Syntax {
            spec: spec.to_owned(),
        };
        let (gvk, limits) = match spec.split_once(':') {
            Some((gvk, limits)) => (gvk, Some(limits)),
            None => (spec, None),
        };
        let parts: Vec<&str> = gvk.split('/').collect();
        let (group, version, kind, plural) = match parts.as_slice() {
            [group, version, kind] => (
                *group,
                *version,
                *kind,
                format!("{}s", kind.to_ascii_lowercase()),
            ),
            [group, version, kind, plural] => (*group, *version, *kind, (*plural).to_owned()),
            _ => return Err(syntax()),
        };
        if version.is_empty() || kind.is_empty() || plural.is_empty() {
            return Err(syntax());
        }
        let limits = limits
            .map(|limits| {
                let (label, counts) = limits.split_once('=').ok_or_else(syntax)?;
                let (succeeded, failed) = counts.split_once(',').ok_or_else(syntax)?;
                if label.is_empty() {
                    return Err(syntax());
                }
                Ok(LabelLimits {
                    label: label.to_owned(),
                    succeeded: limit(spec, succeeded)?,
                    failed: limit(spec, failed)?,
                })
            })
            .transpose()?;
        let watch = match &limits {
            Some(limits) => Watch::Labelled(limits.label.clone()),
            None => Watch::Managed,
        };
        Ok(Entry {
            role: Role::Run {
                parent: None,
                limits,
            },
            finish: FinishRule::SucceededCondition { required: false },
            watch,
            ..Entry::plain(Resource::new(group, version, kind, &plural))
        })
    }
}

fn limit(spec: &str, text: &str) -> Result<Option<u32>, ExtraKindError> {
    if text.is_empty() {
        return Ok(None);
    }
    let (min, max) = LIMIT_RANGE;
    match text.parse::<u32>() {
        Ok(limit) if (min..=max).contains(&limit) => Ok(Some(limit)),
        _ => Err(ExtraKindError::Limit {
            spec: spec.to_owned(),
            limit: text.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::MANAGED_SELECTOR;

    #[test]
    fn parses_kinds_with_and_without_limits() {
        let plain: Entry = "/v1/ConfigMap"
            .parse()
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(plain.resource.api_version(), "v1");
        assert_eq!(plain.resource.plural, "configmaps");
        assert_eq!(plain.watch.selector(), Some(MANAGED_SELECTOR));
        let grouped: Entry = "tekton.dev/v1/PipelineRun:tekton.dev/pipeline=5,"
            .parse()
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(grouped.resource.api_version(), "tekton.dev/v1");
        assert_eq!(
            grouped.role,
            Role::Run {
                parent: None,
                limits: Some(LabelLimits {
                    label: "tekton.dev/pipeline".into(),
                    succeeded: Some(5),
                    failed: None
                })
            }
        );
        assert_eq!(grouped.watch.selector(), Some("tekton.dev/pipeline"));
    }

    #[test]
    fn refuses_malformed_kinds_saying_why() {
        for bad in [
            "ConfigMap",
            "a/b",
            "x/v1/K:label",
            "x/v1/K:label=a,b",
            "x/v1/K:=1,1",
        ] {
            assert!(bad.parse::<Entry>().is_err(), "{bad}");
        }
        assert_eq!(
            "x/v1/K:label=101,1".parse::<Entry>().map(|_| ()),
            Err(ExtraKindError::Limit {
                spec: "x/v1/K:label=101,1".into(),
                limit: "101".into()
            })
        );
        let message = "a/b".parse::<Entry>().map(|_| ()).unwrap_err().to_string();
        assert!(message.contains("GROUP/VERSION/KIND"), "{message}");
    }
}
