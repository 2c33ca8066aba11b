//! Which namespaces a command looks at, as kubectl says it: `-n NS` or `-A`.

/// Which namespaces: `-n NS` (default: the context's), or `-A` for all.
#[derive(Debug, clap::Args)]
pub struct Scope {
    #[arg(short = 'n', long, conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
}
