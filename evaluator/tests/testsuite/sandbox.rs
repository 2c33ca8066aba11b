//! The sandbox against its real evaluator process (this crate's `kube-retention-evaluator`
//! binary, which the controller's hidden `evaluate` subcommand is): answers equal to the
//! model's in-process ones; the reproduced list and map literals ended by the memory
//! bound, attributed to their expression, stopped, while the next tenant's expression is
//! answered; the bounds as the operating system holds them; a silent process not held against
//! anyone.

use std::time::Duration;

use jiff::Timestamp;
use kube_retention_common::cel::{
    Answer, Converted, Exceeded, Expect, Expression, InProcess, Interpreter, Overrun, Variables,
};
use kube_retention_evaluator::sandbox::limits::{LIFETIME_CPU_SECONDS, OPEN_FILES};
use kube_retention_evaluator::{Limits, Program, Sandbox, SandboxMetrics};
use serde_json::{Value, json};

fn program() -> Program {
    Program {
        path: env!("CARGO_BIN_EXE_kube-retention-evaluator").into(),
        args: Vec::new(),
    }
}

fn sandbox(limits: Limits) -> (Sandbox, SandboxMetrics) {
    let metrics = SandboxMetrics::default();
    (Sandbox::new(program(), limits, metrics.clone()), metrics)
}

fn condition(source: &str) -> Expression {
    Expression::compile(source, Expect::Condition).expect("compiles")
}

fn job(annotations: usize) -> Value {
    let annotations: serde_json::Map<String, Value> = (0..annotations)
        .map(|index| (format!("example.com/a{index}"), json!("v".repeat(1000))))
        .collect();
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "a", "labels": {"team": "a"},
                     "annotations": annotations},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
        "status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True",
                   "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    })
}

fn text(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).expect("serializes")
}

#[test]
fn answers_equal_the_models_in_process() {
    let (mut sandbox, _) = sandbox(Limits::default());
    let object = job(3);
    let converted = Converted::new(&object).expect("converts");
    let bound = sandbox.object(text(&object));
    let conditions = [
        "object.metadata.labels.team == 'a'",
        "object.metadata.labels.team == 'b'",
        "object.status.succeeded == 1",
        "object.status.conditions.exists(c, c.type == 'Complete' && c.status == 'True')",
        "object.spec.template.spec.containers.all(c, c.image.startsWith('busy'))",
        "size(object.metadata.annotations) > 2",
        "object.status.failed > 0",
        "object.metadata.name.matches('^j$')",
    ];
    for source in conditions {
        let expression = condition(source);
        let here = InProcess.answer(&expression, converted.variables(), None);
        let there = sandbox.answer(&expression, &bound, None);
        assert_eq!(there, here, "{source}");
    }
    let at = Expression::compile(
        "timestamp(object.status.conditions[0].lastTransitionTime)",
        Expect::Time,
    )
    .expect("compiles");
    assert_eq!(
        sandbox.answer(&at, &bound, None),
        Ok(Answer::Time("2026-01-01T00:00:00Z".parse().unwrap()))
    );
    assert!(
        sandbox.take_cpu() > Duration::ZERO,
        "its CPU time is charged"
    );
}

#[test]
fn a_cleaners_conditions_see_their_targets_and_the_time() {
    let (mut sandbox, _) = sandbox(Limits::default());
    let pods = json!({"items": [{"metadata": {"name": "p"}, "status": {"phase": "Succeeded"}}]});
    let expression = Expression::compile_over(
        "pods.items.all(p, p.status.phase == 'Succeeded') && time > timestamp('2026-01-01T00:00:00Z')",
        Expect::Condition,
        &["pods", "time"],
    )
    .expect("compiles");
    let bound = sandbox.variables(vec![("pods".into(), text(&pods))]);
    let variables = Variables::new([("pods", &pods)]).expect("converts");
    for at in ["2025-06-01T00:00:00Z", "2026-06-01T00:00:00Z"] {
        let at: Timestamp = at.parse().unwrap();
        let here = InProcess.condition(&expression, &variables, Some(("time", at)));
        let there = sandbox.condition(&expression, &bound, Some(("time", at)));
        assert_eq!(there, here, "{at}");
    }
}

/// Copies the meter lets through, as issue 57's first reproduction was let through: a list or
/// map literal of a select of a 1.5 MB string, which the interpreter copies at each mention
/// while the meter finds each copy cheap (a copy of text runs at memory speed, and this one is
/// within what a select may copy free). With the process's bound 24 MiB above what it needs to
/// start, twenty of them are past it: the process ends, is tried once more alone, ends again,
/// and the expression is stopped; the next expression is answered. (How much the caller holds
/// meanwhile is the campaign's to measure, `tests/cel_campaign.rs`, in a process of its own:
/// these tests share theirs.)
#[test]
fn copies_past_the_memory_bound_end_the_process_not_the_caller_and_are_stopped() {
    let limits = Limits {
        memory: started_address_space() + 24 * 1024 * 1024,
        ..Limits::default()
    };
    let (mut sandbox, metrics) = sandbox(limits);
    let big = json!({"metadata": {"name": "j", "labels": {"team": "a"}},
                     "s": "x".repeat(1_500_000)});
    let bound = sandbox.object(text(&big));
    for source in [
        format!("[{}] != []", vec!["object.s"; 20].join(", ")),
        format!(
            "{{{}}} != {{}}",
            (0..20)
                .map(|index| format!("{index}: object.s"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ] {
        let expression = condition(&source);
        let before = ended(&metrics, "memory");
        let error = sandbox
            .answer(&expression, &bound, None)
            .expect_err("ended by the bound");
        assert_eq!(
            error.exceeded(),
            Some(Exceeded::Process(Overrun::Memory {
                limit: limits.memory
            })),
            "{error}"
        );
        assert!(error.to_string().contains("not evaluated again"), "{error}");
        // Tried once more in a fresh process before it was blamed.
        assert_eq!(ended(&metrics, "memory") - before, 2);
        assert_eq!(
            sandbox.stopped(&expression),
            Some(Overrun::Memory {
                limit: limits.memory
            })
        );
        // Stopped: answered at once, no process started for it.
        let started = metrics.started.get();
        assert_eq!(sandbox.answer(&expression, &bound, None), Err(error));
        assert_eq!(metrics.started.get(), started);
        // Everyone else goes on: the next expression on the same object is answered.
        let everyday = condition("object.metadata.labels.team == 'a'");
        assert_eq!(sandbox.condition(&everyday, &bound, None), Ok(true));
    }
    // The copies were the process's: it was ended for them, by its memory bound.
    assert_eq!(metrics.stopped.get(), 2);
}

/// Issue 57's first reproduction as reported: a list or map literal of the object on a
/// tenant's own ~800 KB Job (fifteen copies were enough for the chart's 256 MiB; two hundred
/// took 3 GiB). Each mention of `object` is now charged as a copy, so the meter stops it in the
/// process, or the process's bound ends it: either way it never answers true of 200 copies,
/// and the next expression is answered.
#[test]
fn literals_of_the_object_as_reported_never_answer_and_never_reach_the_caller() {
    let (mut sandbox, _) = sandbox(Limits::default());
    let bound = sandbox.object(text(&job(800)));
    for count in [15, 200] {
        for source in [
            format!("[{}] != []", vec!["object"; count].join(", ")),
            format!(
                "{{{}}} != {{}}",
                (0..count)
                    .map(|index| format!("{index}: object"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ] {
            let expression = condition(&source);
            match sandbox.answer(&expression, &bound, None) {
                // Fifteen copies may fit every limit.
                Ok(answer) => assert_eq!((count, answer), (15, Answer::Condition(true))),
                Err(error) => assert!(
                    matches!(
                        error.exceeded(),
                        Some(Exceeded::Process(_) | Exceeded::Cost { .. } | Exceeded::Time { .. })
                    ),
                    "{error}"
                ),
            }
            let everyday = condition("object.metadata.labels.team == 'a'");
            assert_eq!(sandbox.condition(&everyday, &bound, None), Ok(true));
        }
    }
}

#[test]
fn the_operating_system_holds_the_process_to_its_bounds() {
    let limits = Limits {
        memory: 160 * 1024 * 1024,
        ..Limits::default()
    };
    let (mut sandbox, _) = sandbox(limits);
    let bound = sandbox.object(text(&job(1)));
    assert_eq!(
        sandbox.condition(&condition("object.kind == 'Job'"), &bound, None),
        Ok(true)
    );
    let pid = sandbox.pid().expect("running");
    let table = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    let limit = |name: &str| {
        let line = table
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {table}"));
        let fields: Vec<&str> = line[name.len()..].split_whitespace().collect();
        (fields[0].to_owned(), fields[1].to_owned())
    };
    assert_eq!(limit("Max address space").1, limits.memory.to_string());
    assert_eq!(limit("Max address space").0, limits.memory.to_string());
    assert_eq!(limit("Max cpu time").1, LIFETIME_CPU_SECONDS.to_string());
    // The soft bound follows the steps: a second or two beyond what it used.
    let soft: u64 = limit("Max cpu time").0.parse().expect("seconds");
    assert!((2..=3).contains(&soft), "soft CPU bound {soft}");
    assert_eq!(limit("Max open files").1, OPEN_FILES.to_string());
    assert_eq!(limit("Max file size").1, "0");
    assert_eq!(limit("Max core file size").1, "0");
    // The evaluating thread at the lowest priority.
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks");
    let nices: Vec<i64> = threads
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok())
        .filter(|stat| stat.contains("(evaluate)"))
        .map(|stat| {
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            after.split_whitespace().nth(16).unwrap().parse().unwrap()
        })
        .collect();
    assert_eq!(nices, [19]);
}

/// A process that says it is ready and then never answers: the deadline ends it, and since it
/// used no CPU the expression is not blamed (the node may have been busy).
#[test]
fn a_silent_process_is_ended_at_the_deadline_and_blames_nobody() {
    let ready = ready_frame(192 * 1024 * 1024);
    let script = format!(
        "printf '{}'; exec sleep 60",
        ready
            .iter()
            .map(|byte| format!("\\{byte:03o}"))
            .collect::<String>()
    );
    let limits = Limits {
        wall: Duration::from_millis(300),
        ..Limits::default()
    };
    let metrics = SandboxMetrics::default();
    let mut sandbox = Sandbox::new(
        Program {
            path: "/bin/sh".into(),
            args: vec!["-c".into(), script.into(), "sh".into()],
        },
        limits,
        metrics.clone(),
    );
    let bound = sandbox.object(b"{}".to_vec());
    let expression = condition("true");
    let error = sandbox
        .answer(&expression, &bound, None)
        .expect_err("no answer");
    assert_eq!(error.exceeded(), None, "{error}");
    assert!(error.to_string().contains("stopped answering"), "{error}");
    assert_eq!(sandbox.stopped(&expression), None);
    assert_eq!(metrics.started.get(), 2);
}

/// The first frame the evaluator writes, as `memory` bytes bound it.
fn ready_frame(memory: u64) -> Vec<u8> {
    let mut frame = Vec::new();
    kube_retention_evaluator::sandbox::protocol::write_frame(
        &mut frame,
        &kube_retention_evaluator::sandbox::protocol::Reply::Ready { memory },
        &[],
    )
    .expect("written");
    frame
}

/// Objects at etcd's limit (1.5 MiB) of the shapes that cost the most to convert — many small
/// numbers, many short strings, many small maps — are bound and judged within the default
/// bound, one after another.
#[test]
fn the_largest_objects_etcd_stores_fit_the_default_bound() {
    let (mut sandbox, metrics) = sandbox(Limits {
        memory: 2 << 30,
        ..Limits::default()
    });
    let limit = 1_572_864;
    let fill = |item: Value| {
        let each = serde_json::to_vec(&item).unwrap().len() + 1;
        json!({"kind": "Job", "metadata": {"name": "j", "labels": {"team": "a"}},
               "spec": {"items": vec![item; limit / each - 1000]}})
    };
    for (shape, object) in [
        ("numbers", fill(json!(0))),
        ("strings", fill(json!("a"))),
        ("maps", fill(json!({"a": 0}))),
        ("lists", fill(json!([0]))),
    ] {
        let text = text(&object);
        assert!(text.len() <= limit, "{shape}: {}", text.len());
        let bound = sandbox.object(text);
        let everyday = condition("object.metadata.labels.team == 'a'");
        assert_eq!(
            sandbox.condition(&everyday, &bound, None),
            Ok(true),
            "{shape}"
        );
        let pid = sandbox.pid().unwrap();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let pick: Vec<&str> = status
            .lines()
            .filter(|l| {
                l.starts_with("VmHWM")
                    || l.starts_with("VmPeak")
                    || l.starts_with("VmRSS")
                    || l.starts_with("VmSize")
            })
            .collect();
        eprintln!("PROBE {shape}: {pick:?}");
        drop(bound);
    }
    assert_eq!(metrics.started.get(), 1, "no process ended");
}

/// More bound than the process holds at once: the least recently used are let go of there and
/// bound again when needed, and every answer stays right.
#[test]
fn bindings_past_the_budget_are_let_go_of_and_bound_again() {
    let (mut sandbox, metrics) = sandbox(Limits::default());
    let objects: Vec<(String, _)> = (0..6)
        .map(|index| {
            let name = format!("o{index}");
            let object = json!({"metadata": {"name": name}, "spec": {"pad": "x".repeat(3 << 20)}});
            (name, sandbox.object(text(&object)))
        })
        .collect();
    for _ in 0..3 {
        for (name, bound) in &objects {
            let expression = condition(&format!("object.metadata.name == '{name}'"));
            assert_eq!(sandbox.condition(&expression, bound, None), Ok(true));
        }
    }
    drop(objects);
    let after = sandbox.object(text(&json!({"a": 1})));
    assert_eq!(
        sandbox.condition(&condition("object.a == 1"), &after, None),
        Ok(true)
    );
    assert_eq!(metrics.started.get(), 1);
}

/// The address space a process needs once started and bound to a small object: what the
/// binary, its stacks and its allocator take before any evaluation.
fn started_address_space() -> u64 {
    let (mut sandbox, _) = sandbox(Limits::default());
    let bound = sandbox.object(text(&job(1)));
    let everyday = condition("object.metadata.labels.team == 'a'");
    assert_eq!(sandbox.condition(&everyday, &bound, None), Ok(true));
    sandbox.peak_address_space().expect("running")
}

fn ended(metrics: &SandboxMetrics, reason: &'static str) -> u64 {
    use kube_retention_evaluator::sandbox::metrics::EndLabels;
    metrics.ended.get_or_create(&EndLabels { reason }).get()
}
