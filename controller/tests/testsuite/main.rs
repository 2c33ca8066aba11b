//! The controller's tests, in one test binary. Each module here was a binary of its own, and
//! each linked the whole controller again: about 50 MB apiece in a debug build, 2 GB for all of
//! them, and a link step each. One binary links it once (cargo's own `tests/testsuite` layout).
//! The `*_support` modules are the scenarios' shared parts.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: fixtures unwrap

mod backlog_support;
mod book_support;
mod clean_support;
mod insides_support;
mod lease_support;
mod list_support;
mod loop_support;
mod sink_support;
mod support;
mod work_support;

mod admission_policy;
mod breaker;
mod breaker_store;
mod budget;
mod cleaner_actions;
mod cleaner_bounds;
mod cleaner_compile;
mod cleaner_helm;
mod cleaner_judging;
mod cleaner_parts;
mod cleaner_scopes;
mod cleaner_sink;
mod cleaner_sink_policy;
mod cleaner_watches;
mod cleaners;
mod config;
mod controller_built;
mod crds;
mod deployed_args;
mod digest;
mod evaluation;
mod evaluator_backlog;
mod evaluator_floods;
mod executor_backlog;
mod executor_requests;
mod fair_queue;
mod guard;
mod guard_changing;
mod guard_namespaced;
mod helm_kinds_rbac;
mod hold;
mod initial_list;
mod initial_list_cuts;
mod intent;
mod leader_election;
mod lean_decoding;
mod ledger;
mod ledger_lanes;
mod lifecycle;
mod loop_namespace_list;
mod loop_paused;
mod loop_room;
mod loop_shed;
mod notice;
mod one_clock;
mod overdue;
mod policies;
mod policy_compile;
mod relist_throttle;
mod sink_insides;
mod sink_insides_objects;
mod startup_checks;
mod state;
mod tracked_room;
