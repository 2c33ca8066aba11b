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
    let image = Image::kube_retention(binaries, "0.1.0".into());
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

#[test]
fn another_image_has_its_own_title_entrypoint_and_user() -> anyhow::Result<()> {
    let folder = tempfile::tempdir()?;
    let pause = folder.path().join("pause");
    std::fs::write(&pause, "#!/bin/sh\nsleep infinity\n")?;
    let image = Image {
        title: "pause".into(),
        entrypoint: vec!["/pause".into()],
        user: "65535:65535".into(),
        ..Image::kube_retention(vec![pause], "3.10.1".into())
    };
    let archive = folder.path().join("pause.tar");
    build(&image, &archive)?;
    let config = inspect(&archive)?.config;
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/pause"])
    );
    assert_eq!(config["config"]["User"], "65535:65535");
    assert_eq!(
        config["config"]["Labels"]["org.opencontainers.image.title"],
        "pause"
    );
    // kube-retention's own image names no entrypoint: the chart names each command.
    let own = folder.path().join("own.tar");
    build(
        &Image::kube_retention(vec![folder.path().join("pause")], "0.1.0".into()),
        &own,
    )?;
    assert!(inspect(&own)?.config["config"].get("Entrypoint").is_none());
    Ok(())
}
