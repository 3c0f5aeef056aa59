//! Malformed and hostile worker RPCs against a real gRPC server on 127.0.0.1: each is refused
//! with the right status code and leaves the book unchanged. Every table runs all its cases
//! and reports each failed case on its own line.

use bookfarm_coordinator::identity::IdentityConfig;
use bookfarm_coordinator::server;
use bookfarm_coordinator::service::{Coordinator, ServiceConfig};
use bookfarm_proto::auth::Bearer;
use bookfarm_proto::pb;
use bookfarm_proto::pb::worker_service_client::WorkerServiceClient;
use bookfarm_proto::status::ErrorCode;
use bookfarm_proto::{ENGINE_VERSION, PROTOCOL_VERSION};
use bookfarm_tests::*;
use tonic::Code;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

const ADMIN: &str = "adm1n";

type Worker = WorkerServiceClient<InterceptedService<Channel, Bearer>>;

fn ident() -> pb::WorkerIdentity {
    pb::WorkerIdentity {
        protocol_version: PROTOCOL_VERSION,
        engine_version: ENGINE_VERSION.into(),
        eval_hash: "e".into(),
        search_signature: signature("e"),
    }
}

fn signature(eval: &str) -> String {
    bookfarm_engine::search::SearchSignature::new(
        &bookfarm_engine::search::SearchOptions::default(),
        eval,
    )
    .to_string()
}

fn register_request(identity: Option<pb::WorkerIdentity>) -> pb::RegisterWorkerRequest {
    pb::RegisterWorkerRequest {
        identity,
        name: "h".into(),
        threads: 1,
        ..Default::default()
    }
}

fn result(job: &pb::Job, mv: u32, score: i32) -> pb::LeafResult {
    pb::LeafResult {
        job_id: job.job_id.clone(),
        r#move: mv,
        score,
        depth: 2,
        selectivity: 5,
        exact: false,
        nodes: 1,
        elapsed_us: 1,
    }
}

fn lowest_open(job: &pb::Job) -> u32 {
    let p = job.position.unwrap();
    let b = bookfarm_engine::Board::new(p.player, p.opponent).unwrap();
    (b.moves() & !job.excluded).trailing_zeros()
}

/// The failed cases of a table, each with what went wrong.
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    /// Record `case` as failed with `why` unless `ok`.
    fn check(&mut self, case: &str, ok: bool, why: impl FnOnce() -> String) {
        if !ok {
            self.0.push(format!("{case}: {}", why()));
        }
    }

    /// Fail the test if any case failed, listing every one.
    fn assert_none(self, cases: usize) {
        assert!(
            self.0.is_empty(),
            "{} of {cases} cases failed:\n  {}",
            self.0.len(),
            self.0.join("\n  ")
        );
    }
}

/// A coordinator serving gRPC on 127.0.0.1 with an admin token and one trusted worker
/// credential, a deviate program started.
struct Farm {
    c: Coordinator,
    port: u16,
    token: String,
    stop: tokio::sync::oneshot::Sender<()>,
    srv: tokio::task::JoinHandle<bookfarm_coordinator::error::Result<()>>,
    _dir: tempfile::TempDir,
}

impl Farm {
    async fn start() -> Farm {
        let dir = tempfile::tempdir().unwrap();
        new_store(dir.path(), 2, 10);
        let cfg = ServiceConfig {
            eval_hash: Some("e".into()),
            engine_version: Some(ENGINE_VERSION.into()),
            ..ServiceConfig::default()
        };
        let ids = IdentityConfig {
            admin_token: Some(ADMIN.into()),
            ..IdentityConfig::local()
        };
        let (c, ids) = server::open_with_identities(dir.path(), cfg, ids).unwrap();
        let (token, _) = ids.add("h", None, true).unwrap();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let srv = tokio::spawn(server::serve(
            bookfarm_coordinator::live::Live::fixed(c.clone(), ids),
            l,
            None,
            server::ServeOptions::default(),
            async {
                let _ = stop_rx.await;
            },
        ));
        let mut admin = admin_as(port, ADMIN).await;
        admin
            .start_expansion(pb::StartExpansionRequest {
                selector: Some(pb::start_expansion_request::Selector::Deviate(
                    pb::Deviate {
                        relative_error: 2,
                        absolute_error: 4,
                    },
                )),
                level: 0,
                ..Default::default()
            })
            .await
            .unwrap();
        Farm {
            c,
            port,
            token,
            stop,
            srv,
            _dir: dir,
        }
    }

    /// A worker client sending `token`.
    async fn worker(&self, token: &str) -> Worker {
        WorkerServiceClient::with_interceptor(channel(self.port).await, Bearer::new(token).unwrap())
            .max_encoding_message_size(64 << 20)
    }

    /// Register a worker with the honest identity; returns its id.
    async fn register(&self, w: &mut Worker) -> String {
        w.register_worker(register_request(Some(ident())))
            .await
            .unwrap()
            .into_inner()
            .worker_id
    }

    /// Stop the server and wait for it.
    async fn stop(self) {
        let _ = self.stop.send(());
        self.srv.await.unwrap().unwrap();
    }
}

async fn submit(
    c: &mut Worker,
    worker: &str,
    results: Vec<pb::LeafResult>,
) -> Result<pb::SubmitResultsResponse, tonic::Status> {
    c.submit_results(pb::SubmitResultsRequest {
        identity: Some(ident()),
        worker_id: worker.into(),
        results,
    })
    .await
    .map(|r| r.into_inner())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_calls_need_the_admin_token() {
    let f = Farm::start().await;
    let e = admin(f.port)
        .await
        .get_status(pb::GetStatusRequest::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e}");
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_registrations_are_refused() {
    let f = Farm::start().await;
    let mut w = f.worker(&f.token).await;
    // An honest worker first: it pins the book's search signature.
    f.register(&mut w).await;
    let changed = |change: fn(&mut pb::WorkerIdentity)| {
        let mut id = ident();
        change(&mut id);
        Some(id)
    };
    let cases: Vec<(&str, Option<pb::WorkerIdentity>, Code)> = vec![
        (
            "protocol version 0",
            changed(|i| i.protocol_version = 0),
            Code::FailedPrecondition,
        ),
        (
            "next protocol version",
            changed(|i| i.protocol_version = PROTOCOL_VERSION + 1),
            Code::FailedPrecondition,
        ),
        (
            "other engine",
            changed(|i| i.engine_version = "x".into()),
            Code::FailedPrecondition,
        ),
        (
            "other evaluation",
            changed(|i| i.eval_hash = "other".into()),
            Code::FailedPrecondition,
        ),
        (
            "other search signature",
            changed(|i| i.search_signature = signature("other")),
            Code::FailedPrecondition,
        ),
        (
            "no search signature",
            changed(|i| i.search_signature = String::new()),
            Code::FailedPrecondition,
        ),
        ("no identity", None, Code::InvalidArgument),
    ];
    let n = cases.len() + 1;
    let mut failures = Failures::default();
    for (what, id, code) in cases {
        match w.register_worker(register_request(id)).await {
            Ok(_) => failures.check(what, false, || "accepted".into()),
            Err(e) => failures.check(what, e.code() == code, || format!("{e} (want {code:?})")),
        }
    }
    let r = f
        .worker("bad")
        .await
        .register_worker(register_request(Some(ident())))
        .await;
    failures.check(
        "bad token",
        matches!(&r, Err(e) if e.code() == Code::Unauthenticated),
        || format!("{r:?}"),
    );
    failures.assert_none(n);
    // A refusal says why.
    let e = w
        .register_worker(register_request(changed(|i| i.protocol_version = 0)))
        .await
        .unwrap_err();
    assert!(
        e.message().contains("protocol version"),
        "explains: {}",
        e.message()
    );
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_results_are_refused_and_change_nothing() {
    let f = Farm::start().await;
    let mut w = f.worker(&f.token).await;
    let me = f.register(&mut w).await;
    let other = f.register(&mut w).await;
    // Jobs answered honestly until one is a re-search with an excluded move (the root's
    // expansion is a single search: its four symmetric moves are linked at once).
    let mut found = None;
    for _ in 0..8 {
        let jobs = w
            .lease_jobs(pb::LeaseJobsRequest {
                identity: Some(ident()),
                worker_id: me.clone(),
                free_slots: 8,
                results: vec![],
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .jobs;
        if let Some(j) = jobs.iter().find(|j| j.excluded != 0) {
            found = Some(j.clone());
            break;
        }
        let honest = jobs.iter().map(|j| result(j, lowest_open(j), 0)).collect();
        submit(&mut w, &me, honest).await.unwrap();
    }
    let job = found.expect("re-search with an excluded move");
    let good = result(&job, lowest_open(&job), 2);

    // The honest results are applied by the growth runner in the background: wait for it, so
    // that the reference state is taken after them (a race seen on a loaded machine).
    f.c.settle().unwrap();
    let mut admin = admin_as(f.port, ADMIN).await;
    let status0 = status(&mut admin).await;
    let book0 = f.c.snapshot();

    let excluded = job.excluded.trailing_zeros();
    let with = |change: fn(&mut pb::LeafResult)| {
        let mut r = good.clone();
        change(&mut r);
        vec![r]
    };
    let cases: Vec<(&str, Vec<pb::LeafResult>, &str, Code)> = vec![
        (
            "unknown job",
            vec![pb::LeafResult {
                job_id: uuid::Uuid::new_v4().to_string(),
                ..good.clone()
            }],
            &me,
            Code::NotFound,
        ),
        (
            "malformed job id",
            with(|r| r.job_id = "x".into()),
            &me,
            Code::InvalidArgument,
        ),
        (
            "wrong worker",
            vec![good.clone()],
            &other,
            Code::FailedPrecondition,
        ),
        (
            "unknown worker",
            vec![good.clone()],
            "0b7d6a3c-1c0e-4a61-9f39-000000000000",
            Code::NotFound,
        ),
        (
            "illegal move",
            vec![result(&job, 0, 2)],
            &me,
            Code::InvalidArgument,
        ),
        (
            "excluded move",
            vec![result(&job, excluded, 2)],
            &me,
            Code::InvalidArgument,
        ),
        (
            "pass not forced",
            vec![result(&job, 64, 2)],
            &me,
            Code::InvalidArgument,
        ),
        (
            "move code 70",
            vec![result(&job, 70, 2)],
            &me,
            Code::InvalidArgument,
        ),
        (
            "score 65",
            with(|r| r.score = 65),
            &me,
            Code::InvalidArgument,
        ),
        (
            "score -65",
            with(|r| r.score = -65),
            &me,
            Code::InvalidArgument,
        ),
        (
            "odd exact score",
            with(|r| {
                r.score = 3;
                r.exact = true;
            }),
            &me,
            Code::InvalidArgument,
        ),
        (
            "selectivity 9",
            with(|r| r.selectivity = 9),
            &me,
            Code::InvalidArgument,
        ),
        (
            "same job twice",
            vec![good.clone(), good.clone()],
            &me,
            Code::InvalidArgument,
        ),
        (
            "too many results",
            vec![good.clone(); bookfarm_proto::MAX_RESULTS_PER_CALL + 1],
            &me,
            Code::ResourceExhausted,
        ),
    ];
    let n = cases.len() + 1;
    let mut failures = Failures::default();
    for (what, rs, who, code) in cases {
        match submit(&mut w, who, rs).await {
            Ok(r) => failures.check(what, false, || format!("accepted: {r:?}")),
            Err(e) => {
                failures.check(what, e.code() == code, || format!("{e} (want {code:?})"));
                // Only the unknown worker carries the signal a worker re-registers on (an
                // unknown job is NOT_FOUND too).
                let unknown = ErrorCode::of(&e) == Some(ErrorCode::UnknownWorker);
                failures.check(what, unknown == (what == "unknown worker"), || {
                    format!("unknown-worker signal {unknown}: {e:?}")
                });
            }
        }
        failures.check(what, f.c.snapshot() == book0, || "the book changed".into());
    }
    // Oversize message: refused by the transport limit before any handler runs.
    let huge = pb::ReportFailureRequest {
        identity: Some(ident()),
        worker_id: me.clone(),
        job_id: job.job_id.clone(),
        reason: "x".repeat(bookfarm_proto::MAX_MESSAGE_BYTES + 1),
        retryable: true,
    };
    let r = w.report_failure(huge).await;
    failures.check(
        "oversize failure report",
        matches!(&r, Err(e) if matches!(e.code(), Code::OutOfRange | Code::ResourceExhausted)),
        || format!("{r:?}"),
    );
    failures.check("oversize failure report", f.c.snapshot() == book0, || {
        "the book changed".into()
    });
    failures.assert_none(n);
    let s = status(&mut admin).await;
    assert_eq!(
        (s.positions, s.completed),
        (status0.positions, status0.completed),
        "nothing changed"
    );

    // The honest result goes through once; a resubmission is a harmless duplicate.
    let a = submit(&mut w, &me, vec![good.clone()]).await.unwrap().acks;
    assert_eq!(a[0].status, pb::AckStatus::Accepted as i32);
    let a = submit(&mut w, &me, vec![good.clone()]).await.unwrap().acks;
    assert_eq!(a[0].status, pb::AckStatus::Duplicate as i32);
    assert_eq!(status(&mut admin).await.completed, status0.completed + 1);
    f.stop().await;
}
