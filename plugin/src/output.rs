//! Output like kubectl's: an aligned table, or the whole result as JSON or YAML.

use anyhow::Result;
use clap::ValueEnum;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
    Yaml,
}

/// Prints `rows` under `headers` as kubectl does (columns padded by three spaces), or `value`
/// as JSON or YAML.
pub fn print(
    format: Format,
    headers: &[&str],
    rows: &[Vec<String>],
    value: &impl Serialize,
) -> Result<()> {
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(value)?),
        Format::Yaml => print!("{}", serde_norway::to_string(value)?),
        Format::Table => {
            let mut widths: Vec<usize> = headers.iter().map(|header| header.len()).collect();
            for row in rows {
                for (width, cell) in widths.iter_mut().zip(row) {
                    *width = (*width).max(cell.len());
                }
            }
            let line = |cells: Vec<&str>| {
                let padded: Vec<String> = cells
                    .iter()
                    .zip(&widths)
                    .map(|(cell, width)| format!("{cell:<width$}"))
                    .collect();
                println!("{}", padded.join("   ").trim_end());
            };
            line(headers.to_vec());
            for row in rows {
                line(row.iter().map(String::as_str).collect());
            }
        }
    }
    Ok(())
}

/// Prints what a command did: `sentence` for people, `value` as JSON or YAML for programs.
pub fn say(format: Format, sentence: &str, value: &impl Serialize) -> Result<()> {
    match format {
        Format::Table => {
            println!("{sentence}");
            Ok(())
        }
        Format::Json | Format::Yaml => print(format, &[], &[], value),
    }
}
