//! What `helm uninstall` does for a release, as a Cleaner may do it: Helm's own storage format
//! read ([`storage`]: the release records, Secrets `sh.helm.release.v1.NAME.vN` whose `release`
//! key is base64 of gzipped JSON, and the plan of what an uninstall deletes), and the uninstall
//! itself, owned objects only, each DELETE sent by the caller ([`uninstall`], through its
//! [`Deleter`](uninstall::Deleter)).
//!
//! Hand-written, and why: no maintained Rust library reads Helm's storage (the few programs that
//! do, kubectl-like viewers, embed their own decoder), and Helm's own uninstall
//! (`helm.sh/helm/v3/pkg/action.Uninstall`) is Go, deletes everything a record lists with the
//! power of whoever runs it, and runs the release's hooks. The records are forgeable by whoever
//! may write Secrets in the namespace, and the controller deletes with its own power, so what
//! Helm would trust (the record) is here only a list of candidates: each object goes only when
//! Helm's own annotations on it give it to the release, and a release with hooks, objects
//! outside its namespace or kinds a Cleaner does not uninstall is refused whole.

pub mod storage;
pub mod uninstall;
