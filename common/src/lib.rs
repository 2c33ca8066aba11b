//! The kube-retention model as pure functions, shared by the webhook and the controller so the
//! two can never disagree: the duration grammar, annotation and field parsing, "is it finished and
//! when", and expiry computation. Nothing here talks to a cluster.

pub mod access;
pub mod annotations;
pub mod api;
pub mod breaker;
pub mod cel;
pub mod cleaner;
pub mod duration;
pub mod expiry;
pub mod field_error;
pub mod governing;
pub mod json;
pub mod kinds;
pub mod kubernetes;
pub mod ledger;
pub mod limits;
pub mod model;
pub mod own_settings;
pub mod policies;
pub mod progress;
pub mod rfc3339;
pub mod schema_bounds;
pub mod schema_rules;
pub mod selector;
pub mod setting;
pub mod sink_policy;
pub mod tightening;
pub mod writer_policy;

pub use expiry::{Expiry, StampChange};
pub use field_error::FieldError;
pub use kinds::{Entry, KindId, Registry};
pub use own_settings::{OwnSettings, RunPolicy, Ttls};
pub use progress::{FinishRule, Finished, Outcome, Progress};
