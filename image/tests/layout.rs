//! The image builder without a build of the real binaries: the archive is a valid OCI layout
//! whose digests all check out, byte for byte the same when built twice.

use std::os::unix::fs::PermissionsExt;

use kube_retention_image::{Image, USER, build, inspect};

#[test]
fn the_archive_is_a_reproducible_oci_layout_with_checked_digests() -> anyhow::Result<()> {
    let folder = tempfile::tempdir()?;
    let mut binaries = Vec::new();
    for name in ["tool-b", "tool-a"] {
        let path = folder.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\necho {name}\n"))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
        binaries.push(path);
    }
    let image = Image {
        binaries,
        tag: "0.1.0".into(),
        version: "0.1.0".into(),
    };
    let (first, second) = (folder.path().join("one.tar"), folder.path().join("two.tar"));
    let digest = build(&image, &first)?;
    assert_eq!(build(&image, &second)?, digest);
    assert_eq!(
        std::fs::read(&first)?,
        std::fs::read(&second)?,
        "reproducible"
    );
    let inspected = inspect(&first)?;
    assert_eq!(inspected.index["manifests"][0]["digest"], digest);
    assert_eq!(
        inspected.index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"],
        "0.1.0"
    );
    assert_eq!(inspected.config["config"]["User"], USER);
    assert_eq!(
        (
            inspected.config["os"].as_str(),
            inspected.config["architecture"].as_str()
        ),
        (Some("linux"), Some("amd64"))
    );
    let files: Vec<(&str, u32, u64)> = inspected
        .files
        .iter()
        .map(|(path, (mode, uid, _))| (path.as_str(), *mode, *uid))
        .collect();
    assert_eq!(files, [("tool-a", 0o755, 0), ("tool-b", 0o755, 0)]);
    Ok(())
}
