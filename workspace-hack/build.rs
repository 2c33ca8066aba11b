// Cargo honours a package's build-dependencies (the features build scripts and proc-macros are
// compiled with) only when it has a build script.
fn main() {}
