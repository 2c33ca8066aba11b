//! The measurement that decides whether the `memcpy/` crate stays: the shipped static webhook
//! against the same webhook built without it (musl's own memcpy), under the side-by-side load
//! (`make bench-memcpy`). The shipped build is measured twice, before and after the other, so
//! the section shows how far two runs of one binary differ on this machine: a difference
//! between the builds within that is no reason to keep the crate.

use std::path::Path;

use anyhow::Result;

use crate::report;
use crate::side_by_side::{self, Contender, Load, Measured};

/// The names the three runs are reported under.
pub const WITH: &str = "with memcpy/";
pub const WITHOUT: &str = "musl's memcpy";
pub const WITH_AGAIN: &str = "with memcpy/ (again)";

/// Measures `shipped` against `without` and writes the section `webhook-memcpy` of `report`.
pub async fn measure(
    shipped: Contender<'_>,
    without: &Path,
    load: &Load<'_>,
    report: &Path,
) -> Result<()> {
    let measured = side_by_side::measure(&contenders(shipped, without), load).await?;
    let section = section(&measured, load.seconds, load.connections);
    report::write_section(report, "webhook-memcpy", &section)?;
    println!("written to {}", report.display());
    Ok(())
}

/// The three contenders: `shipped`, then `shipped` built without the crate, then `shipped` again.
pub fn contenders<'a>(shipped: Contender<'a>, without: &'a Path) -> [Contender<'a>; 3] {
    [
        Contender {
            name: WITH,
            ..shipped
        },
        Contender {
            name: WITHOUT,
            binary: without,
            ..shipped
        },
        Contender {
            name: WITH_AGAIN,
            ..shipped
        },
    ]
}

/// The report's section: how it was measured, the table, and saturation side by side.
pub fn section(measured: &[Measured], seconds: u64, connections: usize) -> String {
    let saturation = |name: &str| {
        measured
            .iter()
            .find(|run| run.name == name)
            .and_then(Measured::saturation)
            .map(|outcome| outcome.throughput())
    };
    let summary = match (
        saturation(WITH),
        saturation(WITHOUT),
        saturation(WITH_AGAIN),
    ) {
        (Some(with), Some(without), Some(again)) => {
            let mean = (with + again) / 2.0;
            format!(
                "Saturation: {with:.0} and {again:.0} req/s with the crate (the two runs {spread:.1}% \
                 apart), {without:.0} req/s with musl's memcpy: the crate gives {gain:+.1}%.",
                spread = (with - again).abs() / mean * 100.0,
                gain = (mean / without - 1.0) * 100.0,
            )
        }
        _ => "Saturation: not measured.".to_owned(),
    };
    format!(
        "### What the memcpy/ crate is worth\n\n\
         Measured with `make bench-memcpy` (`bench/src/memcpy.rs`): the image's static webhook\n\
         ({build}) against the same build without the `memcpy` feature (musl's own memcpy),\n\
         the shipped one run before and after it. The side-by-side load above, {connections}\n\
         connections, {seconds} s per step; the fixed rates alternate between the three in {slice} s\n\
         slices, saturation loads each in turn.\n\n{table}\n\n{summary}\n",
        build = crate::measured_build(),
        slice = side_by_side::SLICE_SECONDS,
        table = side_by_side::table(measured),
    )
}
