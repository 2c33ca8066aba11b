//! The flags' kinds as one table: `--kind` adds, `--disable-kind` takes out, each refusal names
//! the flag and the value; the selection survives its trip through the Lease annotation.

use kube_retention_common::kinds::{KindSelection, SelectionError};

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
