//! Runs for the prune tests, written as data and turned into the objects a list would return:
//! Jobs and BuildRuns in two namespaces, running, succeeded or failed, created and finished at
//! their own times, some annotated `retention.dev/keep`, some already being deleted. Generated
//! (proptest) so that creation order, finish order, outcomes and ties all vary.

#![allow(dead_code)] // each test file uses a part

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube::api::DynamicObject;
use kube_retention_common::progress::Outcome;
use kube_retention_prune::{Decision, Plan, Settings, Strategy, plan};
use proptest::prelude::{Just, prop_oneof};
use proptest::strategy::Strategy as Generator;
use serde_json::{Value, json};

/// Seconds after which every time in these tests falls.
const EPOCH: i64 = 1_800_000_000;
/// The clock of every plan: after every creation and finish.
pub const NOW: i64 = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Job,
    BuildRun,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Running,
    /// Finished with `outcome`, `at` seconds.
    Finished {
        outcome: Outcome,
        at: i64,
    },
}

/// One object, as data.
#[derive(Debug, Clone)]
pub struct Run {
    pub kind: Kind,
    pub namespace: &'static str,
    pub name: String,
    /// Created at this second.
    pub created: i64,
    pub state: State,
    pub keep: bool,
    pub deleting: bool,
}

/// Kind, namespace and name: an object's identity in a plan.
pub type Key = (String, String, String);

pub fn at(second: i64) -> Timestamp {
    Timestamp::from_second(EPOCH + second)
        .unwrap_or_else(|error| panic!("second {second}: {error}"))
}

pub fn now() -> Timestamp {
    at(NOW)
}

impl Run {
    pub fn new(namespace: &'static str, name: &str, created: i64, state: State) -> Self {
        Self {
            kind: Kind::Job,
            namespace,
            name: name.to_owned(),
            created,
            state,
            keep: false,
            deleting: false,
        }
    }

    pub fn outcome(&self) -> Option<Outcome> {
        match self.state {
            State::Running => None,
            State::Finished { outcome, .. } => Some(outcome),
        }
    }

    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            Kind::Job => "Job",
            Kind::BuildRun => "BuildRun",
        }
    }

    pub fn key(&self) -> Key {
        (
            self.kind_name().to_owned(),
            self.namespace.to_owned(),
            self.name.clone(),
        )
    }

    /// The object as the API server would list it.
    pub fn object(&self) -> DynamicObject {
        let time = |second: i64| at(second).to_string();
        let status = match (self.kind, self.state) {
            (Kind::Job, State::Running) => json!({"active": 1}),
            (
                Kind::Job,
                State::Finished {
                    outcome: Outcome::Succeeded,
                    at,
                },
            ) => json!({
                "completionTime": time(at),
                "conditions": [{"type": "Complete", "status": "True",
                                "lastTransitionTime": time(at)}]}),
            (
                Kind::Job,
                State::Finished {
                    outcome: Outcome::Failed,
                    at,
                },
            ) => json!({
                "conditions": [{"type": "Failed", "status": "True",
                                "lastTransitionTime": time(at)}]}),
            (Kind::BuildRun, state) => {
                let (status, at) = match state {
                    State::Running => ("Unknown", self.created),
                    State::Finished {
                        outcome: Outcome::Succeeded,
                        at,
                    } => ("True", at),
                    State::Finished {
                        outcome: Outcome::Failed,
                        at,
                    } => ("False", at),
                };
                json!({"conditions": [{"type": "Succeeded", "status": status,
                                       "lastTransitionTime": time(at)}]})
            }
        };
        let api_version = match self.kind {
            Kind::Job => "batch/v1",
            Kind::BuildRun => "shipwright.io/v1beta1",
        };
        let mut metadata = json!({
            "name": self.name, "namespace": self.namespace,
            "uid": format!("{}-{}-{}", self.kind_name(), self.namespace, self.name),
            "creationTimestamp": time(self.created),
        });
        if self.keep {
            metadata["annotations"] = json!({"retention.dev/keep": "true"});
        }
        if self.deleting {
            metadata["deletionTimestamp"] = Value::String(time(NOW - 1));
            metadata["finalizers"] = json!(["example.com/hold"]);
        }
        let object = json!({"apiVersion": api_version, "kind": self.kind_name(),
                            "metadata": metadata, "status": status});
        serde_json::from_value(object).unwrap_or_else(|error| panic!("{}: {error}", self.name))
    }
}

/// Up to 24 runs of two kinds in two namespaces, named `run-00`, `run-01`... Creation times
/// collide often (ties broken by name), and finish order differs from creation order.
pub fn runs() -> impl Generator<Value = Vec<Run>> {
    let kind = prop_oneof![Just(Kind::Job), Just(Kind::BuildRun)];
    let namespace = prop_oneof![Just("ci"), Just("nightly")];
    let outcome = prop_oneof![
        1 => Just(None),
        2 => Just(Some(Outcome::Succeeded)),
        2 => Just(Some(Outcome::Failed)),
    ];
    let flag = |percent: u32| (0..100u32).prop_map(move |roll| roll < percent);
    let run = (
        kind,
        namespace,
        0..20i64,
        outcome,
        0..40i64,
        flag(10),
        flag(15),
    );
    proptest::collection::vec(run, 0..24).prop_map(|runs| {
        runs.into_iter()
            .enumerate()
            .map(
                |(index, (kind, namespace, created, outcome, took, keep, deleting))| Run {
                    kind,
                    namespace,
                    name: format!("run-{index:02}"),
                    created,
                    state: outcome.map_or(State::Running, |outcome| State::Finished {
                        outcome,
                        at: created + took,
                    }),
                    keep,
                    deleting,
                },
            )
            .collect()
    })
}

/// A limit from none to four (zero keeps none of that outcome).
pub fn limit() -> impl Generator<Value = Option<u32>> {
    proptest::option::of(0..5u32)
}

/// A count from zero to five.
pub fn count() -> impl Generator<Value = usize> {
    0..6usize
}

pub fn objects(runs: &[Run]) -> Vec<DynamicObject> {
    runs.iter().map(Run::object).collect()
}

/// The plan of `runs` by `strategy` alone.
pub fn plan_of(runs: &[Run], strategy: Strategy) -> Plan {
    let settings = Settings {
        strategies: vec![strategy],
        ..Settings::default()
    };
    plan(&objects(runs), &settings, now())
}

/// Every object's decision, by identity.
pub fn decisions(plan: &Plan) -> BTreeMap<Key, Decision> {
    plan.objects
        .iter()
        .map(|planned| {
            let key = (
                planned.kind.clone(),
                planned.namespace.clone(),
                planned.name.clone(),
            );
            (key, planned.decision.clone())
        })
        .collect()
}

/// What the plan prunes, by identity, with why.
pub fn pruned(plan: &Plan) -> BTreeMap<Key, Decision> {
    decisions(plan)
        .into_iter()
        .filter(|(_, decision)| decision.prunes())
        .collect()
}

/// The runs grouped as the plan groups them: per kind and namespace.
pub fn groups(runs: &[Run]) -> BTreeMap<(&'static str, &'static str), Vec<&Run>> {
    let mut groups: BTreeMap<_, Vec<&Run>> = BTreeMap::new();
    for run in runs {
        groups
            .entry((run.kind_name(), run.namespace))
            .or_default()
            .push(run);
    }
    groups
}
