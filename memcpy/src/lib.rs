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
