//! The supervisor: a task or thread that returns, fails or panics is reported by name; a group's
//! member is reported only when it fails, not when its owner stops it; and the main future's end
//! (a clean shutdown) is answered as it is, never as a task's end.

use std::time::Duration;

use kube_retention_runtime::supervise::{self, Ended, Supervisor, TaskEnd};
use tokio::sync::oneshot;

fn ended(task: &str, outcome: TaskEnd) -> Ended {
    Ended {
        task: task.to_owned(),
        outcome,
    }
}

/// Panics with a formatted message (a `String` payload).
fn broken(code: u32) {
    panic!("broke on {code}");
}

/// Whatever the supervisor reports within an hour of (paused) time.
async fn reported(supervisor: &mut Supervisor) -> Option<Ended> {
    tokio::time::timeout(Duration::from_secs(3600), supervisor.ended())
        .await
        .ok()
}

#[tokio::test(start_paused = true)]
async fn a_task_that_returns_is_reported_by_name() {
    let mut supervisor = Supervisor::default();
    supervisor.add(supervise::spawn("forever", std::future::pending::<()>()));
    supervisor.add(supervise::spawn("digest", async {
        tokio::time::sleep(Duration::from_secs(5)).await;
    }));
    assert_eq!(
        reported(&mut supervisor).await,
        Some(ended("digest", TaskEnd::Returned))
    );
    assert_eq!(supervisor.names().collect::<Vec<_>>(), ["forever"]);
    assert_eq!(reported(&mut supervisor).await, None);
}

#[tokio::test(start_paused = true)]
async fn a_task_that_fails_is_reported_with_its_error() {
    let mut supervisor = Supervisor::default();
    supervisor.add(supervise::spawn("metrics-server", async {
        Err::<(), _>("address in use")
    }));
    assert_eq!(
        reported(&mut supervisor).await,
        Some(ended(
            "metrics-server",
            TaskEnd::Failed("address in use".into())
        ))
    );
}

#[tokio::test(start_paused = true)]
async fn a_task_that_panics_is_reported_with_its_message() {
    let mut supervisor = Supervisor::default();
    supervisor.add(supervise::spawn("forever", std::future::pending::<()>()));
    supervisor.add(supervise::spawn("dispatch", async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        broken(42);
    }));
    assert_eq!(
        reported(&mut supervisor).await,
        Some(ended("dispatch", TaskEnd::Panicked("broke on 42".into())))
    );
}

#[tokio::test]
async fn a_thread_that_ends_or_panics_is_reported() {
    let mut supervisor = Supervisor::default();
    let (release, released) = std::sync::mpsc::channel::<()>();
    supervisor.add(
        supervise::thread("cel-evaluator", move || {
            released.recv().ok();
            panic!("evaluation broke");
        })
        .unwrap(),
    );
    release.send(()).unwrap();
    assert_eq!(
        supervisor.ended().await,
        ended(
            "cel-evaluator",
            TaskEnd::Panicked("evaluation broke".into())
        )
    );
    supervisor.add(supervise::thread("quiet", || {}).unwrap());
    assert_eq!(supervisor.ended().await, ended("quiet", TaskEnd::Returned));
}

#[tokio::test(start_paused = true)]
async fn a_clean_shutdown_is_not_reported() {
    let mut supervisor = Supervisor::default();
    let (closing, closed) = oneshot::channel::<()>();
    // A task that ends because the shutdown closed its channel, as the controller's do.
    supervisor.add(supervise::spawn("leader-election", async {
        closed.await.ok();
    }));
    let main = async move {
        tokio::time::sleep(Duration::from_secs(10)).await;
        drop(closing);
        "stopped"
    };
    assert_eq!(supervisor.watch(main).await, Ok("stopped"));
    // Still held, for the binary to await (the lease's release) rather than report.
    let lease = supervisor.remove("leader-election").unwrap();
    assert_eq!(lease.await, ended("leader-election", TaskEnd::Returned));
}

#[tokio::test(start_paused = true)]
async fn a_task_ending_before_shutdown_stops_the_main_future() {
    let mut supervisor = Supervisor::default();
    supervisor.add(supervise::spawn("scans", async {
        tokio::time::sleep(Duration::from_secs(3)).await;
    }));
    let main = async {
        tokio::time::sleep(Duration::from_secs(10)).await;
        "stopped"
    };
    assert_eq!(
        supervisor.watch(main).await,
        Err(ended("scans", TaskEnd::Returned))
    );
}

#[tokio::test(start_paused = true)]
async fn a_group_reports_failed_members_not_stopped_ones() {
    let mut supervisor = Supervisor::default();
    let (watches, watching) = supervise::group("watches");
    supervisor.add(watching);
    let aborted = watches.spawn("Job.batch", async {
        std::future::pending::<Result<(), String>>().await
    });
    watches.spawn("ConfigMap", async { Ok::<(), String>(()) });
    aborted.abort();
    assert_eq!(reported(&mut supervisor).await, None);

    watches.spawn("Pod", async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        Err::<(), _>("the watch ended")
    });
    assert_eq!(
        reported(&mut supervisor).await,
        Some(ended(
            "watches/Pod",
            TaskEnd::Failed("the watch ended".into())
        ))
    );

    let (watches, watching) = supervise::group("watches");
    supervisor.add(watching);
    watches.spawn("Secret", async {
        broken(7);
        Ok::<(), String>(())
    });
    assert_eq!(
        reported(&mut supervisor).await,
        Some(ended(
            "watches/Secret",
            TaskEnd::Panicked("broke on 7".into())
        ))
    );
}

#[tokio::test(start_paused = true)]
async fn a_group_whose_owner_is_gone_reports_nothing() {
    let mut supervisor = Supervisor::default();
    let (watches, watching) = supervise::group("watches");
    supervisor.add(watching);
    drop(watches);
    assert_eq!(reported(&mut supervisor).await, None);
}
