//! The flags' kinds as one table: `--kind` adds, `--disable-kind` takes out, each refusal names
//! the flag and the value; the selection survives its trip through the Lease annotation.

use kube_retention_common::kinds::{KindSelection, Lookup, SelectionError};
use serde_json::json;

fn selection(kinds: &[&str], disabled: &[&str]) -> KindSelection {
    KindSelection {
        kinds: kinds.iter().map(|&kind| kind.to_owned()).collect(),
        disabled_kinds: disabled.iter().map(|&name| name.to_owned()).collect(),
    }
}

fn refusal(selection: &KindSelection) -> String {
    match selection.registry() {
        Ok(_) => panic!("accepted {selection:?}"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn flags_add_and_remove_kinds() -> Result<(), SelectionError> {
    let registry = selection(&["tekton.dev/v1/PipelineRun"], &["pod"]).registry()?;
    assert!(registry.find("v1", "Pod").is_none());
    assert!(registry.find("batch/v1", "Job").is_some());
    assert!(registry.find("tekton.dev/v1", "PipelineRun").is_some());
    assert_eq!(
        refusal(&selection(&["batch/v1/Job"], &[])),
        "--kind \"batch/v1/Job\": Job.batch is already known to kube-retention"
    );
    assert_eq!(
        refusal(&selection(&[], &["Gadget.example.com"])),
        "--disable-kind: Gadget.example.com is not a kind kube-retention knows"
    );
    assert!(
        refusal(&selection(&["tekton.dev"], &[])).starts_with("--kind \"tekton.dev\": expected")
    );
    Ok(())
}

/// The three answers a table gives of an object's kind, which the webhook, the controller and
/// the plugin act on alike: its entry, a kind no table knows (judged as plain), or a built-in
/// kind switched off (left alone).
#[test]
fn a_table_tells_listed_unlisted_and_switched_off_kinds_apart() -> Result<(), SelectionError> {
    let registry = selection(&["tekton.dev/v1/PipelineRun"], &["pod"]).registry()?;
    let object = |api_version: &str, kind: &str| json!({"apiVersion": api_version, "kind": kind});
    let job = registry.lookup(&object("batch/v1", "Job"));
    assert!(matches!(job, Lookup::Listed(entry) if entry.resource.kind == "Job"));
    let run = registry.lookup(&object("tekton.dev/v1", "PipelineRun"));
    assert!(matches!(run, Lookup::Listed(entry) if entry.resource.kind == "PipelineRun"));
    let gadget = object("example.com/v1", "Gadget");
    assert_eq!(registry.lookup(&gadget), Lookup::Unlisted);
    assert!(
        registry.entry_for(&gadget).is_some(),
        "judged as a plain kind"
    );
    let pod = object("v1", "Pod");
    assert_eq!(registry.lookup(&pod), Lookup::SwitchedOff);
    assert_eq!(registry.entry_for(&pod), None, "left alone");
    Ok(())
}

#[test]
fn a_selection_reads_back_from_its_annotation() -> Result<(), serde_json::Error> {
    let published = selection(
        &["tekton.dev/v1/TaskRun:tekton.dev/task=5,3"],
        &["Pod", "Job.batch"],
    );
    let text = published.to_annotation();
    assert_eq!(
        text,
        r#"{"kinds":["tekton.dev/v1/TaskRun:tekton.dev/task=5,3"],"disabledKinds":["Pod","Job.batch"]}"#
    );
    assert_eq!(KindSelection::from_annotation(&text)?, published);
    assert_eq!(
        KindSelection::from_annotation("{}")?,
        KindSelection::default()
    );
    Ok(())
}
