//! The image builder without a build of the real binaries: the archive is a valid OCI layout
//! whose digests all check out, byte for byte the same when built twice.

use std::os::unix::fs::PermissionsExt;

use kube_retention_image::{Arch, Binaries, Image, USER, build, inspect};

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
    let image = Image::kube_retention(vec![Binaries::amd64(binaries)], "0.2.0".into());
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
        "0.2.0"
    );
    assert!(inspected.platform_index.is_none(), "one platform, no index");
    let amd64 = inspected.image("amd64")?;
    assert_eq!(amd64.config["config"]["User"], USER);
    assert_eq!(amd64.config["os"], "linux");
    let files: Vec<(&str, u32, u64)> = amd64
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
        ..Image::kube_retention(vec![Binaries::amd64(vec![pause])], "3.10.1".into())
    };
    let archive = folder.path().join("pause.tar");
    build(&image, &archive)?;
    let config = inspect(&archive)?.image("amd64")?.config.clone();
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
        &Image::kube_retention(
            vec![Binaries::amd64(vec![folder.path().join("pause")])],
            "0.2.0".into(),
        ),
        &own,
    )?;
    let own = inspect(&own)?;
    assert!(
        own.image("amd64")?.config["config"]
            .get("Entrypoint")
            .is_none()
    );
    Ok(())
}

#[test]
fn two_platforms_are_one_index_the_tag_names_with_a_manifest_each() -> anyhow::Result<()> {
    let folder = tempfile::tempdir()?;
    let platform = |architecture: Arch, name: &str| -> anyhow::Result<Binaries> {
        let path = folder.path().join(name);
        std::fs::create_dir_all(&path)?;
        let binary = path.join("tool");
        std::fs::write(&binary, format!("#!/bin/sh\necho {name}\n"))?;
        Ok(Binaries {
            architecture,
            paths: vec![binary],
        })
    };
    let image = Image {
        revision: Some("0123abc".into()),
        ..Image::kube_retention(
            vec![
                platform(Arch::Amd64, "amd64")?,
                platform(Arch::ARM64, "arm64")?,
            ],
            "0.2.0".into(),
        )
    };
    let archive = folder.path().join("index.tar");
    let digest = build(&image, &archive)?;
    let inspected = inspect(&archive)?;
    let tagged = &inspected.index["manifests"][0];
    assert_eq!(tagged["digest"], digest);
    assert_eq!(
        tagged["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    assert_eq!(
        tagged["annotations"]["org.opencontainers.image.ref.name"],
        "0.2.0"
    );
    let platforms = inspected.platform_index.as_ref().expect("an image index");
    assert_eq!(
        platforms["annotations"]["org.opencontainers.image.revision"],
        "0123abc"
    );
    let listed: Vec<(&str, &str)> = platforms["manifests"]
        .as_array()
        .expect("manifests")
        .iter()
        .map(|manifest| {
            (
                manifest["platform"]["os"].as_str().unwrap_or_default(),
                manifest["platform"]["architecture"]
                    .as_str()
                    .unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(listed, [("linux", "amd64"), ("linux", "arm64")]);
    for architecture in ["amd64", "arm64"] {
        let own = inspected.image(architecture)?;
        let labels = &own.config["config"]["Labels"];
        assert_eq!(labels["org.opencontainers.image.revision"], "0123abc");
        assert_eq!(labels["org.opencontainers.image.version"], image.version);
        assert!(
            labels["org.opencontainers.image.description"]
                .as_str()
                .is_some_and(|description| !description.is_empty())
        );
        let (_, _, bytes) = &own.files["tool"];
        assert_eq!(
            String::from_utf8_lossy(bytes),
            format!("#!/bin/sh\necho {architecture}\n")
        );
    }
    Ok(())
}
