//! Policies' expressions evaluated off the loop: which objects wait for an evaluation, how the
//! state judges with the answers, a limit gone past (never true, and said in the status), and
//! the evaluator's fair turns between namespaces.

use crate::support;

use kube_retention_common::model::object_value;

use std::sync::Arc;
use std::time::Duration;

use kube::api::DynamicObject;
use kube_retention_common::cel::EvalError;
use kube_retention_common::governing::Answers;
use kube_retention_controller::policy_status::{self, Inputs};
use kube_retention_evaluator::{
    Bounds, Evaluated, EvaluatorMetrics, Job, PolicyOutcome, PolicyWork, Progress, Submission,
    Work, serve,
};
use kube_retention_runtime::time_shares::TimeShares;
use kube_retention_state::{LoadedPolicy, ObjectKey, PolicyAnswers, PolicyKey, State};
use serde_json::{Value, json};
use support::{JOB, at, kind, leader, loaded_policy};
use tokio::sync::mpsc::UnboundedSender;

fn policy(namespace: &str, spec: Value) -> (PolicyKey, LoadedPolicy) {
    let key = PolicyKey {
        namespace: Some(namespace.into()),
        name: "jobs".into(),
    };
    (key, loaded_policy(spec))
}

/// Five loops of ten items deep: the costliest kind of expression admission lets through.
fn costly_match() -> String {
    let mut source = String::from("v0 >= 0");
    for level in (0..5).rev() {
        source = format!("[0,1,2,3,4,5,6,7,8,9].all(v{level}, {source})");
    }
    source
}

fn job(namespace: &str, name: &str) -> kube::api::DynamicObject {
    support::succeeded_job(namespace, name)
}

fn jobs_spec(matches: &str) -> Value {
    json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}],
           "ttlAfterSucceeded": "2s", "match": matches})
}

/// `key`'s answers: its `match` said `matches`.
fn matching(key: &PolicyKey, matches: Result<bool, EvalError>) -> PolicyAnswers {
    let answers = Answers {
        matches: Some(matches),
        ..Answers::default()
    };
    [(Arc::new(key.clone()), answers)].into()
}

/// Judges the Job `object` (`value` as the model reads it) with `answers`, at 00:00:01.
fn judge(state: &mut State, object: &DynamicObject, value: &Value, answers: &PolicyAnswers) {
    state.judged(
        kind(JOB),
        object,
        value,
        Some(answers),
        at("2026-01-01T00:00:01Z"),
    );
}

fn job_of(state: &State, seq: u64, object: DynamicObject) -> Job {
    let namespace = object.metadata.namespace.clone().unwrap();
    let key = ObjectKey {
        kind: kind(JOB),
        namespace: namespace.as_str().into(),
        name: object.metadata.name.as_deref().unwrap().into(),
    };
    Job {
        seq,
        key,
        resource: state.kinds()[kind(JOB)].resource.clone(),
        policies: state.unevaluated(kind(JOB), &object),
        object,
        charge: kube_retention_runtime::object_memory::Charge::none(),
    }
}

#[test]
fn only_objects_a_policy_with_expressions_selects_wait_for_an_evaluation() {
    let mut state = leader();
    let (key, loaded) = policy("a", jobs_spec("object.metadata.name.startsWith(\"ci-\")"));
    state.policy_applied(key.clone(), loaded);
    let waiting = state.unevaluated(kind(JOB), &job("a", "ci-1"));
    assert_eq!(waiting.len(), 1);
    assert_eq!(*waiting[0].0, key);
    assert!(state.unevaluated(kind(JOB), &job("b", "ci-1")).is_empty());
    let (plain, loaded) = policy(
        "c",
        json!({"resources": [{"apiVersion": "batch/v1", "kind": "Job"}], "ttl": "1h"}),
    );
    state.policy_applied(plain, loaded);
    assert!(state.unevaluated(kind(JOB), &job("c", "ci-1")).is_empty());
}

#[test]
fn the_state_judges_with_the_answers_evaluated_ahead() {
    let mut state = leader();
    let (key, loaded) = policy("a", jobs_spec("object.metadata.name.startsWith(\"ci-\")"));
    state.policy_applied(key.clone(), loaded);
    let object = job("a", "ci-1");
    let value = object_value(&state.kinds()[kind(JOB)].resource, &object).unwrap();
    // The answers decide, not a second evaluation: they say it does not match.
    let answers = matching(&key, Ok(false));
    judge(&mut state, &object, &value, &answers);
    assert_eq!(state.next_deadline(), None);
    let answers = matching(&key, Ok(true));
    judge(&mut state, &object, &value, &answers);
    assert_eq!(state.next_deadline(), Some(at("2026-01-01T00:00:03Z")));
}

#[test]
fn an_expression_past_its_limit_never_matches_and_the_policy_says_why() {
    let mut state = leader();
    let (key, loaded) = policy("a", jobs_spec(&costly_match()));
    state.policy_applied(key.clone(), loaded);
    // An object whose items are beyond the assumed sizes cannot make it cheaper; the
    // expression is the costliest admitted, and a one-unit budget stops it at once.
    let job = job_of(&state, 1, job("a", "ci-1"));
    let rules = job.policies[0].1.clone();
    let expression = rules.matches.as_ref().unwrap();
    let budget = kube_retention_common::cel::Budget {
        cost: 1,
        time: std::time::Duration::MAX,
    };
    let value = object_value(&state.kinds()[job.key.kind].resource, &job.object).unwrap();
    let (result, _) = expression.condition_costing(&value, budget);
    let answers = matching(&key, result);
    judge(&mut state, &job.object, &value, &answers);
    assert_eq!(
        state.next_deadline(),
        None,
        "not matching: never deleted for it"
    );
    let summary = state.summaries().remove(&key).unwrap();
    let report = summary.exceeded.clone().unwrap();
    assert_eq!((report.count, report.first.name.as_str()), (1, "ci-1"));
    assert!(
        !report.overran.process,
        "the meter's limit, not the process's"
    );
    let how = report.overran.how;
    assert!(how.starts_with("spec.match: "), "{how}");
    assert!(
        how.contains("exceeded the cost limit of 1 on this object"),
        "{how}"
    );
    let loaded = state.policies().get(&key).unwrap();
    let status = policy_status::compute(&Inputs {
        key: &key,
        loaded,
        scan: None,
        summary,
        deletions: 0,
        kinds: state.kinds(),
        now: jiff::Timestamp::UNIX_EPOCH,
        previous: None,
    });
    let ready = &status.conditions[0];
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "CostLimitExceeded")
    );
    assert!(
        ready.message.starts_with("on a/ci-1, spec.match: "),
        "{}",
        ready.message
    );
    assert!(
        ready
            .message
            .ends_with("such objects are treated as not matching")
    );
    // Judged again within the limit, the report goes.
    let answers = matching(&key, Ok(true));
    judge(&mut state, &job.object, &value, &answers);
    assert_eq!(state.summaries()[&key].exceeded, None);
}

/// Issue 57's first reproduction's class, through the controller's own evaluator process: a
/// policy whose `match` copies a large value of a tenant's Job at each mention (twenty copies of
/// a 1.5 MB annotation, each within what the meter lets a select copy free). With the process's
/// bound 24 MiB above what it needs to start, the process is ended by it (twice: once more
/// alone, to be sure whose it was), the expression answered as past that bound and stopped,
/// the policy `EvaluatorLimitExceeded`; the next namespace's object, evaluated after it,
/// matches.
#[test]
fn an_expression_past_the_processs_bound_is_stopped_and_the_policy_says_which() {
    let mut state = leader();
    let copies = vec!["object.metadata.annotations.big"; 20].join(", ");
    let (key, loaded) = policy("a", jobs_spec(&format!("[{copies}] != []")));
    state.policy_applied(key.clone(), loaded);
    let (other, loaded) = policy("b", jobs_spec("object.metadata.name.startsWith(\"ci-\")"));
    state.policy_applied(other.clone(), loaded);
    let mut big = job("a", "ci-1");
    big.metadata.annotations = Some([("big".to_owned(), "x".repeat(1_500_000))].into());
    let metrics = kube_retention_evaluator::SandboxMetrics::default();
    let memory = started_address_space() + 24 * 1024 * 1024;
    let mut sandbox = kube_retention_evaluator::Sandbox::new(
        support::evaluator_program(),
        kube_retention_evaluator::Limits {
            memory,
            ..Default::default()
        },
        metrics.clone(),
    );
    let mut run = |job: Job| {
        let (results, mut answered) = tokio::sync::mpsc::unbounded_channel();
        let mut work: Box<dyn Work> = Box::new(PolicyWork::new(job, results));
        while work.step(&mut sandbox) == Progress::More {}
        work.finish();
        evaluated(answered.try_recv().unwrap())
    };
    let hostile = run(job_of(&state, 1, big));
    let value = hostile.value.clone().unwrap();
    judge(&mut state, &hostile.job.object, &value, &hostile.answers);
    assert_eq!(
        state.next_deadline(),
        None,
        "not matching: never deleted for it"
    );
    let quiet = run(job_of(&state, 2, job("b", "ci-1")));
    assert_eq!(quiet.answers[&other].matches, Some(Ok(true)));
    assert_eq!(metrics.stopped.get(), 1);
    let summary = state.summaries().remove(&key).unwrap();
    let report = summary.exceeded.clone().unwrap();
    assert!(report.overran.process, "{report:?}");
    assert!(
        report.overran.how.contains(&format!(
            "went past the evaluator's memory limit of {} MiB",
            memory >> 20
        )),
        "{report:?}"
    );
    let loaded = state.policies().get(&key).unwrap();
    let status = policy_status::compute(&Inputs {
        key: &key,
        loaded,
        scan: None,
        summary,
        deletions: 0,
        kinds: state.kinds(),
        now: jiff::Timestamp::UNIX_EPOCH,
        previous: None,
    });
    let ready = &status.conditions[0];
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "EvaluatorLimitExceeded")
    );
    assert!(
        ready
            .message
            .contains("not evaluated again until its policy or Cleaner changes"),
        "{}",
        ready.message
    );
}

#[test]
fn the_evaluator_serves_namespaces_in_turn_and_only_the_latest_version() {
    let mut state = leader();
    let (costly, loaded) = policy("a", jobs_spec(&costly_match()));
    state.policy_applied(costly, loaded);
    let (cheap, loaded) = policy("b", jobs_spec("object.metadata.name.startsWith(\"ci-\")"));
    state.policy_applied(cheap, loaded);
    let (jobs, queued) = std::sync::mpsc::channel();
    let (results, mut answered) = tokio::sync::mpsc::unbounded_channel();
    let metrics = EvaluatorMetrics::default();
    let send = |job: Job| jobs.send(work(job, &results)).unwrap();
    let mut seq = 0;
    for n in 0..6 {
        seq += 1;
        send(job_of(&state, seq, job("a", &format!("a-{n}"))));
    }
    // Two versions of one object of b: only the second is evaluated.
    send(job_of(&state, seq + 1, job("b", "ci-1")));
    send(job_of(&state, seq + 2, job("b", "ci-1")));
    drop(jobs);
    serve(
        &queued,
        unlimited_time(),
        Bounds::default(),
        crate::support::sandbox(),
        &metrics,
    );
    let mut order = Vec::new();
    while let Ok(outcome) = answered.try_recv() {
        let evaluated = evaluated(outcome);
        order.push((evaluated.job.key.name.to_string(), evaluated.job.seq));
    }
    assert_eq!(
        order.len(),
        7,
        "the second version replaced the first: {order:?}"
    );
    assert_eq!(
        order[1],
        ("ci-1".to_owned(), seq + 2),
        "b's turn comes second: {order:?}"
    );
    assert_eq!(metrics.superseded.get(), 1);
}

#[test]
fn a_namespace_whose_evaluations_cost_past_its_time_share_waits_while_the_others_go() {
    let mut state = leader();
    let (costly, loaded) = policy("a", jobs_spec(&costly_match()));
    state.policy_applied(costly, loaded);
    let (cheap, loaded) = policy("b", jobs_spec("object.metadata.name.startsWith(\"ci-\")"));
    state.policy_applied(cheap, loaded);
    let (jobs, queued) = std::sync::mpsc::channel();
    let (results, mut answered) = tokio::sync::mpsc::unbounded_channel();
    let objects = [("a", "a-1"), ("a", "a-2"), ("b", "ci-1"), ("b", "ci-2")];
    for (seq, (namespace, name)) in (1..).zip(objects) {
        jobs.send(work(job_of(&state, seq, job(namespace, name)), &results))
            .unwrap();
    }
    let evaluator = std::thread::spawn(move || {
        // A fiftieth of a core each and 5 ms of credit ahead: b's prefix tests and every
        // conversion (microseconds) stay within it, a's loops (tens of milliseconds) put a in
        // debt for seconds — far longer than b's four steps take, each a round trip to the
        // evaluator process at the lowest priority on what may be a busy machine.
        let shares = TimeShares::new(0.02, Duration::from_millis(5));
        serve(
            &queued,
            shares,
            Bounds::default(),
            crate::support::sandbox(),
            &EvaluatorMetrics::default(),
        );
    });
    let first = evaluated(answered.blocking_recv().unwrap());
    assert_eq!(&*first.job.key.name, "a-1", "a's turn came first");
    // b's object sent while a is in debt goes before a's second, and so does b's backlog.
    jobs.send(work(job_of(&state, 5, job("b", "ci-3")), &results))
        .unwrap();
    drop((jobs, results));
    evaluator.join().unwrap();
    let mut order = vec![first.job.key.name.to_string()];
    while let Ok(outcome) = answered.try_recv() {
        order.push(evaluated(outcome).job.key.name.to_string());
    }
    assert_eq!(order, ["a-1", "ci-1", "ci-2", "ci-3", "a-2"]);
}

/// The address space the evaluator process needs once started and bound to a small object.
fn started_address_space() -> u64 {
    let mut sandbox = support::sandbox();
    let bound = sandbox.object(br#"{"kind": "Job"}"#.to_vec());
    let everyday = kube_retention_common::cel::Expression::compile(
        "object.kind == 'Job'",
        kube_retention_common::cel::Expect::Condition,
    )
    .unwrap();
    use kube_retention_common::cel::Interpreter;
    assert_eq!(sandbox.condition(&everyday, &bound, None), Ok(true));
    sandbox.peak_address_space().unwrap()
}

/// `job` as evaluator work, answering on `results`.
fn work(job: Job, results: &UnboundedSender<PolicyOutcome>) -> Submission {
    let work: Box<dyn Work> = Box::new(PolicyWork::new(job, results.clone()));
    work.into()
}

/// The answers in `outcome`: nothing is shed within the default bounds.
fn evaluated(outcome: PolicyOutcome) -> Evaluated {
    match outcome {
        PolicyOutcome::Evaluated(evaluated) => *evaluated,
        PolicyOutcome::Shed { key, .. } => panic!("{key:?} was shed"),
    }
}

/// Shares that never make a namespace wait.
fn unlimited_time() -> TimeShares<Arc<str>> {
    TimeShares::new(1.0, Duration::from_secs(3600))
}

#[test]
fn evaluating_converts_once_and_answers_every_policy() {
    let mut state = leader();
    let (key, loaded) = policy("a", jobs_spec("object.metadata.name.startsWith(\"ci-\")"));
    state.policy_applied(key.clone(), loaded);
    let mut cluster = policy(
        "a",
        jobs_spec("object.status.conditions.exists(c, c.type == \"Complete\")"),
    );
    cluster.0.namespace = None;
    state.policy_applied(cluster.0.clone(), cluster.1);
    let job = job_of(&state, 1, job("a", "ci-1"));
    let (results, mut answered) = tokio::sync::mpsc::unbounded_channel();
    let mut work: Box<dyn Work> = Box::new(PolicyWork::new(job, results));
    // In the controller's own evaluator process: the object converted, then one expression a
    // step, one process for all of them.
    let metrics = kube_retention_evaluator::SandboxMetrics::default();
    let mut sandbox = kube_retention_evaluator::Sandbox::new(
        support::evaluator_program(),
        kube_retention_evaluator::Limits::default(),
        metrics.clone(),
    );
    let mut steps = 1;
    while work.step(&mut sandbox) == Progress::More {
        steps += 1;
    }
    assert_eq!(steps, 3, "the conversion, then each policy's match");
    assert_eq!(metrics.started.get(), 1);
    work.finish();
    let answers = evaluated(answered.try_recv().unwrap()).answers;
    assert_eq!(answers.len(), 2);
    assert_eq!(answers[&key].matches, Some(Ok(true)));
    assert_eq!(answers[&cluster.0].matches, Some(Ok(true)));
}

/// JSON of any shape a tenant may give an object's data: strings, numbers, lists and maps
/// nested a few deep, maps of one entry (the densest) among them.
fn tenant_json() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "[a-z]{0,40}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 400, 12, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..12).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z]{1,12}", inner, 0..12)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// The model's JSON of an object holds no more than `value_bytes` says of what the object
    /// holds, whatever its labels, annotations and data: the charge a work takes for it before
    /// it is sent, so that making it never passes the budget of decoded objects.
    #[test]
    fn value_bytes_bound_what_the_models_json_holds(
        labels in proptest::collection::btree_map("[a-z0-9./-]{1,60}", "[a-z0-9]{0,60}", 0..300),
        annotations in proptest::collection::btree_map("[a-z./-]{1,40}", "[ -~]{0,200}", 0..40),
        spec in tenant_json(),
        status in tenant_json(),
        owners in 0..4usize,
    ) {
        use kube_retention_runtime::held::{held_bytes, object_held_bytes};
        let owners: Vec<Value> = (0..owners)
            .map(|n| json!({"apiVersion": "v1", "kind": "Pod", "name": format!("o{n}"),
                            "uid": format!("uid-{n}")}))
            .collect();
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "team-a", "uid": "u", "resourceVersion": "7",
                         "labels": labels, "annotations": annotations,
                         "ownerReferences": owners, "finalizers": ["a/b"]},
            "spec": spec, "status": status
        }))
        .unwrap();
        let state = leader();
        let resource = &state.kinds()[kind(JOB)].resource;
        let value = object_value(resource, &object).unwrap();
        let (object_bytes, value_held) = (object_held_bytes(&object), held_bytes(&value));
        proptest::prop_assert!(
            value_held <= kube_retention_evaluator::value_bytes(object_bytes),
            "the JSON holds {value_held}, the object {object_bytes}"
        );
    }
}
