//! The retention model's tests, in one test binary (cargo's own `tests/testsuite` layout).
//! Three stay binaries of their own: `cel_hostile` and `cel_fuzz` count every allocation with
//! a global allocator, and `cel_stack` measures the stack, one test at a time.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: fixtures unwrap

mod spellings;

mod cel;
mod cel_conversion;
mod cel_cost;
mod cel_join;
mod cel_sort;
mod cleaner;
mod cleaner_helm;
mod cleaner_judge;
mod expiry;
mod governing;
mod kind_selection;
mod kubernetes;
mod policies;
mod policy;
mod policy_candidates;
mod progress;
mod rfc3339;
mod schema_rules;
mod setting;
mod setting_agrees;
mod sink_policy;
mod sink_policy_forms;
mod sink_policy_input;
mod sink_policy_learned;
mod sink_policy_metadata;
mod tightening;
mod writer_policy;
