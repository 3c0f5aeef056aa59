//! Malformed and hostile worker RPCs against a real gRPC server on 127.0.0.1: each is refused
//! with the right status code and leaves the book unchanged.

use bookfarm_coordinator::identity::IdentityConfig;
use bookfarm_coordinator::server;
use bookfarm_coordinator::service::ServiceConfig;
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
async fn hostile_rpcs_are_rejected_and_change_nothing() {
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
        c.clone(),
        ids,
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
    // Admin calls need the admin token.
    let e = bookfarm_tests::admin(port)
        .await
        .get_status(pb::GetStatusRequest::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);

    let ch = channel(port).await;
    let mut w = WorkerServiceClient::with_interceptor(ch.clone(), Bearer::new(&token).unwrap())
        .max_encoding_message_size(64 << 20);
    let mut bad = WorkerServiceClient::with_interceptor(ch, Bearer::new("bad").unwrap());
    let reg = |identity: Option<pb::WorkerIdentity>| pb::RegisterWorkerRequest {
        identity,
        name: "h".into(),
        threads: 1,
    };
    // Identity problems.
    let cases = [
        (
            Some(pb::WorkerIdentity {
                protocol_version: 0,
                ..ident()
            }),
            Code::FailedPrecondition,
        ),
        (
            Some(pb::WorkerIdentity {
                protocol_version: PROTOCOL_VERSION + 1,
                ..ident()
            }),
            Code::FailedPrecondition,
        ),
        (
            Some(pb::WorkerIdentity {
                engine_version: "x".into(),
                ..ident()
            }),
            Code::FailedPrecondition,
        ),
        (
            Some(pb::WorkerIdentity {
                eval_hash: "other".into(),
                ..ident()
            }),
            Code::FailedPrecondition,
        ),
        (
            Some(pb::WorkerIdentity {
                search_signature: signature("other"),
                ..ident()
            }),
            Code::FailedPrecondition,
        ),
        (
            Some(pb::WorkerIdentity {
                search_signature: String::new(),
                ..ident()
            }),
            Code::FailedPrecondition,
        ),
        (None, Code::InvalidArgument),
    ];
    // An honest worker first: it pins the book's search signature.
    w.register_worker(reg(Some(ident()))).await.unwrap();
    for (id, code) in cases {
        let e = w.register_worker(reg(id.clone())).await.unwrap_err();
        assert_eq!(e.code(), code, "{id:?}: {e}");
    }
    let e = bad.register_worker(reg(Some(ident()))).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "bad token: {e}");
    let e = w
        .register_worker(reg(Some(pb::WorkerIdentity {
            protocol_version: 0,
            ..ident()
        })))
        .await
        .unwrap_err();
    assert!(
        e.message().contains("protocol version"),
        "explains: {}",
        e.message()
    );

    let me = w
        .register_worker(reg(Some(ident())))
        .await
        .unwrap()
        .into_inner()
        .worker_id;
    let other = w
        .register_worker(reg(Some(ident())))
        .await
        .unwrap()
        .into_inner()
        .worker_id;
    let lease = |n: u32| pb::LeaseJobsRequest {
        identity: Some(ident()),
        worker_id: me.clone(),
        free_slots: n,
        results: vec![],
    };
    // Jobs answered honestly until one is a re-search with an excluded move (the root's
    // expansion is a single search: its four symmetric moves are linked at once).
    let mut found = None;
    for _ in 0..8 {
        let jobs = w.lease_jobs(lease(8)).await.unwrap().into_inner().jobs;
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
    c.settle().unwrap();
    let status0 = admin_status(&mut admin).await;
    let book0 = c.snapshot();

    let excluded = job.excluded.trailing_zeros();
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
            vec![pb::LeafResult {
                job_id: "x".into(),
                ..good.clone()
            }],
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
            vec![pb::LeafResult {
                score: 65,
                ..good.clone()
            }],
            &me,
            Code::InvalidArgument,
        ),
        (
            "score -65",
            vec![pb::LeafResult {
                score: -65,
                ..good.clone()
            }],
            &me,
            Code::InvalidArgument,
        ),
        (
            "odd exact score",
            vec![pb::LeafResult {
                score: 3,
                exact: true,
                ..good.clone()
            }],
            &me,
            Code::InvalidArgument,
        ),
        (
            "selectivity 9",
            vec![pb::LeafResult {
                selectivity: 9,
                ..good.clone()
            }],
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
    for (what, rs, who, code) in cases {
        let e = submit(&mut w, who, rs).await.unwrap_err();
        assert_eq!(e.code(), code, "{what}: {e}");
        // Only the unknown worker carries the signal a worker re-registers on (an unknown
        // job is NOT_FOUND too).
        let unknown = ErrorCode::of(&e) == Some(ErrorCode::UnknownWorker);
        assert_eq!(unknown, what == "unknown worker", "{what}: {e:?}");
    }
    // Oversize message: refused by the transport limit before any handler runs.
    let huge = pb::ReportFailureRequest {
        identity: Some(ident()),
        worker_id: me.clone(),
        job_id: job.job_id.clone(),
        reason: "x".repeat(bookfarm_proto::MAX_MESSAGE_BYTES + 1),
        retryable: true,
    };
    let e = w.report_failure(huge).await.unwrap_err();
    assert!(
        matches!(e.code(), Code::OutOfRange | Code::ResourceExhausted),
        "oversize: {e}"
    );

    // Nothing changed.
    assert_eq!(c.snapshot(), book0);
    let s = admin_status(&mut admin).await;
    assert_eq!(
        (s.positions, s.completed),
        (status0.positions, status0.completed)
    );

    // The honest result goes through once; a resubmission is a harmless duplicate.
    let a = submit(&mut w, &me, vec![good.clone()]).await.unwrap().acks;
    assert_eq!(a[0].status, pb::AckStatus::Accepted as i32);
    let a = submit(&mut w, &me, vec![good.clone()]).await.unwrap().acks;
    assert_eq!(a[0].status, pb::AckStatus::Duplicate as i32);
    assert_eq!(
        admin_status(&mut admin).await.completed,
        status0.completed + 1
    );

    let _ = stop.send(());
    srv.await.unwrap().unwrap();
}

async fn admin_status(a: &mut Admin) -> pb::GetStatusResponse {
    a.get_status(pb::GetStatusRequest::default())
        .await
        .unwrap()
        .into_inner()
}
