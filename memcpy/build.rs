//! Compiles c/memcpy.c into the static musl builds (x86_64) only; elsewhere the C library's
//! memcpy stays.

fn main() {
    println!("cargo::rerun-if-changed=c/memcpy.c");
    let musl = std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|env| env == "musl");
    let x86_64 = std::env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|arch| arch == "x86_64");
    if musl && x86_64 {
        cc::Build::new()
            .file("c/memcpy.c")
            .opt_level(2)
            .link_lib_modifier("+whole-archive")
            .compile("kube_retention_memcpy");
    }
}
