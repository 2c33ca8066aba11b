//! A faster `memcpy` for the image's static musl binaries, linked in place of musl's.
//!
//! musl's x86_64 `memcpy` copies every size with `rep movsq` (and byte loops for the ends),
//! whose start-up costs tens of cycles; Rust copies small values all the time. Under a
//! saturating AdmissionReview load it was a quarter of the webhook's CPU time. c/memcpy.c
//! copies up to 512 bytes with overlapping unaligned loads and stores and leaves longer copies
//! to `rep movsb`. It also answers musl's internal `__memcpy_fwd`, which musl's `memmove` calls
//! for forward copies, so it is correct for a destination below an overlapping source too.
//!
//! A binary links it with `use kube_retention_memcpy as _;`. On other targets this crate is
//! empty.
//!
//! **Scope.** x86_64 and the `x86_64-unknown-linux-musl` target only: the static binaries of
//! `make image`. Everywhere else (development builds, glibc, other architectures) the system's
//! memcpy is used and this crate compiles to nothing.
//!
//! **Why static musl, not a glibc base image.** The image is written without a container engine
//! from the binaries alone (`image/`): one layer, no base image to pull, patch or scan, nothing
//! in it but the four binaries. A glibc build would need a base layer with the C library (a
//! distroless `cc` image) from a registry this project does not depend on; glibc itself is not
//! meant to be linked statically. Static musl costs two things a glibc build would not, both
//! measured and both repaid: musl's allocator (replaced by mimalloc) and musl's memcpy (this
//! crate).
//!
//! **The measurement** (`make bench-memcpy`, written to docs/benchmarks/webhook.md, "What the memcpy/
//! crate is worth"): the shipped static webhook against the same build without this crate
//! (the webhook's `memcpy` feature off), the shipped one run before and after the other. On
//! 2026-11-25 two runs gave +17.2% and +10.3% saturation throughput with the crate (33,467 and
//! 37,956 against 30,460 req/s; 34,430 and 35,903 against 31,878), each beyond the spread of the
//! shipped build's two runs; below saturation no difference. When it was added, `perf record
//! --call-graph dwarf -e cpu-clock` under saturation put 24.5% of the static webhook's CPU in
//! musl's memcpy. The controller links it too; its share there is not measured on its own. The
//! day `make bench-memcpy` puts musl's memcpy within that spread (a newer
//! musl), this crate goes.

/// The symbol c/memcpy.c defines, with `memcpy` and musl's `__memcpy_fwd` as its aliases: a
/// binary whose `memcpy` is at its address copies with it.
pub const SYMBOL: &str = "kube_retention_memcpy";

/// Whether the ELF image `binary` copies with this crate's memcpy: its symbol table has
/// `memcpy` at [`SYMBOL`]'s address. Both must be there (a stripped symbol table says nothing).
pub fn linked_in(binary: &[u8]) -> Result<bool, object::Error> {
    use object::{Object, ObjectSymbol};
    let file = object::File::parse(binary)?;
    let address = |name: &str| {
        file.symbols()
            .find(|symbol| symbol.name() == Ok(name))
            .map(|symbol| symbol.address())
    };
    Ok(matches!((address("memcpy"), address(SYMBOL)), (Some(a), Some(b)) if a == b))
}
