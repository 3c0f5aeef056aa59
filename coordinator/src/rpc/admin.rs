//! The operator-facing service: status, growth programs, export and import, book queries,
//! credentials and quarantine.

use super::encode::{credential, invitation, program_info, status_response};
use super::{cv, idst, st};
use crate::error::CoordinatorError;
use crate::identity::Identities;
use crate::live::Live;
use crate::service::{Coordinator, ProgramView};
use crate::store::CredentialState;
use bookfarm_book::program::Program;
use bookfarm_book::{BookDate, BookFormat};
use bookfarm_proto::convert::{ConvertError, export_format};
use bookfarm_proto::pb;
use futures::Stream;
use std::pin::Pin;
use tonic::{Request, Response, Status};

/// The operator-facing service (the admin interceptor has checked the caller).
#[derive(Debug, Clone)]
pub struct AdminApi {
    live: Live,
    ids: Identities,
}

impl AdminApi {
    /// Handlers over the service and its credential registry.
    pub fn new(live: Live) -> AdminApi {
        let ids = live.ids().clone();
        AdminApi { live, ids }
    }

    /// The service (unavailable while its store is being reopened).
    fn c(&self) -> Result<Coordinator, Status> {
        self.live.get().map_err(st)
    }
}

/// Size of the chunks an export is streamed in.
const EXPORT_CHUNK: usize = 1 << 20;

type ExportStream = Pin<Box<dyn Stream<Item = Result<pb::ExportChunk, Status>> + Send>>;

#[tonic::async_trait]
impl pb::admin_service_server::AdminService for AdminApi {
    async fn get_status(
        &self,
        req: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        let r = req.into_inner();
        Ok(Response::new(status_response(
            self.c()?.status(),
            r.worker_offset as usize,
            r.worker_limit as usize,
        )))
    }

    async fn start_expansion(
        &self,
        req: Request<pb::StartExpansionRequest>,
    ) -> Result<Response<pb::StartExpansionResponse>, Status> {
        let r = req.into_inner();
        let (replace, from) = (r.replace, r.from.clone());
        // An analysis's `from` is the line its `store` adds (it has no root of its own).
        let store = matches!(
            &r.selector,
            Some(pb::start_expansion_request::Selector::Analyze(a)) if a.store
        );
        let program = Program::try_from(r).map_err(cv)?;
        let c = self.c()?;
        let (q, stored) =
            tokio::task::spawn_blocking(move || c.start_request(program, &from, replace, store))
                .await
                .map_err(|e| Status::internal(e.to_string()))?
                .map_err(st)?;
        Ok(Response::new(pb::StartExpansionResponse {
            queued: q.jobs,
            program: q.program,
            position: u32::try_from(q.position).unwrap_or(u32::MAX),
            cancelled: q.cancelled,
            existing: q.existing,
            store_program: stored.map_or(0, |s| s.program),
        }))
    }

    async fn list_programs(
        &self,
        req: Request<pb::ListProgramsRequest>,
    ) -> Result<Response<pb::ListProgramsResponse>, Status> {
        let programs = self.c()?.programs(req.into_inner().finished);
        Ok(Response::new(pb::ListProgramsResponse {
            programs: programs.iter().map(program_info).collect(),
        }))
    }

    async fn cancel_program(
        &self,
        req: Request<pb::CancelProgramRequest>,
    ) -> Result<Response<pb::CancelProgramResponse>, Status> {
        let id = req.into_inner().id;
        let c = self.c()?;
        let record = tokio::task::spawn_blocking(move || c.cancel(id))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(st)?;
        // As listed now (with its cost), else as it was cancelled.
        let view = self
            .c()?
            .programs(true)
            .into_iter()
            .find(|p| p.record.id == id)
            .unwrap_or_else(|| ProgramView {
                description: record.program.describe(),
                record,
                progress: String::new(),
                figures: Default::default(),
            });
        Ok(Response::new(pb::CancelProgramResponse {
            program: Some(program_info(&view)),
        }))
    }

    async fn pause(
        &self,
        _req: Request<pb::PauseRequest>,
    ) -> Result<Response<pb::PauseResponse>, Status> {
        self.c()?.set_paused(true).map_err(st)?;
        Ok(Response::new(pb::PauseResponse {}))
    }

    async fn resume(
        &self,
        _req: Request<pb::ResumeRequest>,
    ) -> Result<Response<pb::ResumeResponse>, Status> {
        self.c()?.set_paused(false).map_err(st)?;
        Ok(Response::new(pb::ResumeResponse {}))
    }

    type ExportBookStream = ExportStream;

    type GetProgramOutputStream = ExportStream;

    async fn get_program_output(
        &self,
        req: Request<pb::ProgramOutputRequest>,
    ) -> Result<Response<Self::GetProgramOutputStream>, Status> {
        let id = req.into_inner().id;
        let c = self.c()?;
        let out = tokio::task::spawn_blocking(move || c.search_output(id))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(st)?;
        let chunks: Vec<Result<pb::ExportChunk, Status>> = out
            .output
            .text
            .as_bytes()
            .chunks(EXPORT_CHUNK)
            .map(|c| Ok(pb::ExportChunk { data: c.to_vec() }))
            .collect();
        Ok(Response::new(Box::pin(tokio_stream::iter(chunks))))
    }

    async fn export_book(
        &self,
        req: Request<pb::ExportBookRequest>,
    ) -> Result<Response<Self::ExportBookStream>, Status> {
        let format = export_format(req.into_inner().format).map_err(cv)?;
        let c = self.c()?;
        let bytes = tokio::task::spawn_blocking(move || {
            // Stamped with the current date, as Edax's save does.
            let mut book = c.book_snapshot();
            book.header_mut().date = BookDate::now();
            format.write(&book)
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?;
        let chunks: Vec<Result<pb::ExportChunk, Status>> = bytes
            .chunks(EXPORT_CHUNK)
            .map(|c| Ok(pb::ExportChunk { data: c.to_vec() }))
            .collect();
        Ok(Response::new(Box::pin(tokio_stream::iter(chunks))))
    }

    type BackupStoreStream = ExportStream;

    async fn backup_store(
        &self,
        _req: Request<pb::BackupStoreRequest>,
    ) -> Result<Response<Self::BackupStoreStream>, Status> {
        let c = self.c()?;
        let (mut file, len, summary) = tokio::task::spawn_blocking(move || c.backup())
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(st)?;
        tracing::info!(
            records = summary.records,
            base_bytes = summary.base_bytes,
            bytes = len,
            "store backup taken"
        );
        // Sent from the local copy a few chunks ahead of the client: memory stays bounded,
        // and the copy is gone once sent (or the client leaves).
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::task::spawn_blocking(move || {
            use std::io::Read as _;
            loop {
                let mut data = vec![0; EXPORT_CHUNK];
                let sent = match file.read(&mut data) {
                    Ok(0) => return,
                    Ok(n) => {
                        data.truncate(n);
                        tx.blocking_send(Ok(pb::ExportChunk { data }))
                    }
                    Err(e) => {
                        let _ = tx.blocking_send(Err(Status::internal(format!(
                            "reading the backup copy: {e}"
                        ))));
                        return;
                    }
                };
                if sent.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn import_book(
        &self,
        req: Request<pb::ImportBookRequest>,
    ) -> Result<Response<pb::ImportBookResponse>, Status> {
        let r = req.into_inner();
        let c = self.c()?;
        let n = tokio::task::spawn_blocking(move || {
            let book = BookFormat::Edax
                .read(&r.data)
                .map_err(|e| CoordinatorError::InvalidArgument(format!("book.dat: {e}")))?
                .book;
            c.import(*book.header(), book.positions().collect())
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(st)?;
        Ok(Response::new(pb::ImportBookResponse { positions: n }))
    }

    async fn book_info(
        &self,
        _req: Request<pb::BookInfoRequest>,
    ) -> Result<Response<pb::BookInfoResponse>, Status> {
        let (h, positions, links, leaves) = self.c()?.info();
        Ok(Response::new(pb::BookInfoResponse {
            level: u32::try_from(h.level).unwrap_or(0),
            depth: u32::try_from(h.depth()).unwrap_or(0),
            midgame_error: h.midgame_error,
            endcut_error: h.endcut_error,
            positions,
            links,
            leaves,
        }))
    }

    async fn show_position(
        &self,
        req: Request<pb::ShowPositionRequest>,
    ) -> Result<Response<pb::ShowPositionResponse>, Status> {
        let r = req.into_inner();
        let c = self.c()?;
        let p = c.show(&r.moves).map_err(st)?;
        // `show` accepted the move list.
        let analysis = bookfarm_engine::formats::transcript::board_after(&r.moves)
            .map(|b| c.analysis(&b))
            .unwrap_or_default()
            .iter()
            .map(|a| pb::Analysis {
                level: u32::from(a.level),
                r#move: u32::from(a.mv.code()),
                score: a.score,
                depth: a.depth,
                selectivity: u32::from(a.selectivity),
                exact: a.exact,
                nodes: a.nodes,
                elapsed_us: u64::try_from(a.elapsed.as_micros()).unwrap_or(u64::MAX),
            })
            .collect();
        let link = |l: &bookfarm_book::Link| pb::BookLink {
            r#move: u32::from(l.mv.code()),
            score: i32::from(l.score),
        };
        Ok(Response::new(match p {
            None => pb::ShowPositionResponse {
                analysis,
                ..pb::ShowPositionResponse::default()
            },
            Some(p) => pb::ShowPositionResponse {
                found: true,
                position: Some((&p.board).into()),
                value: i32::from(p.value),
                lower: i32::from(p.lower),
                upper: i32::from(p.upper),
                level: u32::from(p.level),
                links: p.links.iter().map(link).collect(),
                leaf: Some(link(&p.leaf)),
                wins: p.n_wins,
                draws: p.n_draws,
                losses: p.n_losses,
                lines: p.n_lines,
                analysis,
            },
        }))
    }

    async fn add_credential(
        &self,
        req: Request<pb::AddCredentialRequest>,
    ) -> Result<Response<pb::AddCredentialResponse>, Status> {
        let r = req.into_inner();
        let owner = Some(r.owner).filter(|o| !o.is_empty());
        let ids = self.ids.clone();
        let (token, rec) =
            tokio::task::spawn_blocking(move || ids.add(&r.name, owner.as_deref(), r.trusted))
                .await
                .map_err(|e| Status::internal(e.to_string()))?
                .map_err(idst)?;
        Ok(Response::new(pb::AddCredentialResponse {
            token,
            credential: Some(credential(&rec, 0, None)),
        }))
    }

    async fn list_credentials(
        &self,
        _req: Request<pb::ListCredentialsRequest>,
    ) -> Result<Response<pb::ListCredentialsResponse>, Status> {
        let credit = self.c()?.status().credit;
        Ok(Response::new(pb::ListCredentialsResponse {
            credentials: self
                .ids
                .list()
                .iter()
                .map(|c| {
                    let mine = credit.iter().find(|x| x.name == c.record.name);
                    credential(&c.record, c.live_sessions, mine)
                })
                .collect(),
        }))
    }

    async fn set_credential_state(
        &self,
        req: Request<pb::SetCredentialStateRequest>,
    ) -> Result<Response<pb::SetCredentialStateResponse>, Status> {
        let r = req.into_inner();
        let state = match pb::CredentialState::try_from(r.state) {
            Ok(pb::CredentialState::Active) => CredentialState::Active,
            Ok(pb::CredentialState::Blocked) => CredentialState::Blocked,
            Ok(pb::CredentialState::Revoked) => CredentialState::Revoked,
            _ => {
                return Err(cv(ConvertError::Enum {
                    field: "state",
                    value: r.state,
                }));
            }
        };
        let ids = self.ids.clone();
        let (rec, ended) =
            tokio::task::spawn_blocking(move || ids.set_state(&r.name, state, &r.reason))
                .await
                .map_err(|e| Status::internal(e.to_string()))?
                .map_err(idst)?;
        // The credential's sessions end now: their leases go back to the queue.
        self.c()?.drop_workers(&ended);
        // Unblocking also lifts a block for invalid results (the trust ledger's).
        if state == CredentialState::Active {
            let (c, name) = (self.c()?, rec.name.clone());
            tokio::task::spawn_blocking(move || c.unblock_contributor(&name))
                .await
                .map_err(|e| Status::internal(e.to_string()))?
                .map_err(st)?;
        }
        Ok(Response::new(pb::SetCredentialStateResponse {
            credential: Some(credential(&rec, 0, None)),
        }))
    }

    async fn release_quarantine(
        &self,
        req: Request<pb::ReleaseQuarantineRequest>,
    ) -> Result<Response<pb::ReleaseQuarantineResponse>, Status> {
        let r = req.into_inner();
        let boards = if r.all {
            None
        } else {
            Some(
                r.positions
                    .into_iter()
                    .map(|p| bookfarm_engine::Board::try_from(p).map_err(cv))
                    .collect::<Result<Vec<_>, Status>>()?,
            )
        };
        let c = self.c()?;
        let released =
            tokio::task::spawn_blocking(move || c.release_quarantined(boards.as_deref()))
                .await
                .map_err(|e| Status::internal(e.to_string()))?
                .map_err(st)?;
        Ok(Response::new(pb::ReleaseQuarantineResponse { released }))
    }

    async fn create_invitation(
        &self,
        req: Request<pb::CreateInvitationRequest>,
    ) -> Result<Response<pb::CreateInvitationResponse>, Status> {
        let r = req.into_inner();
        let name = Some(r.name).filter(|n| !n.is_empty());
        let owner = Some(r.owner).filter(|o| !o.is_empty());
        let uses = if r.uses == 0 { 1 } else { r.uses };
        let days = if r.valid_days == 0 { 7 } else { r.valid_days };
        let ids = self.ids.clone();
        let (code, rec) = tokio::task::spawn_blocking(move || {
            ids.invite(
                name.as_deref(),
                uses,
                std::time::Duration::from_secs(u64::from(days) * 86_400),
                owner.as_deref(),
            )
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(idst)?;
        Ok(Response::new(pb::CreateInvitationResponse {
            code,
            invitation: Some(invitation(&rec)),
        }))
    }

    async fn list_invitations(
        &self,
        _req: Request<pb::ListInvitationsRequest>,
    ) -> Result<Response<pb::ListInvitationsResponse>, Status> {
        Ok(Response::new(pb::ListInvitationsResponse {
            invitations: self.ids.invitations().iter().map(invitation).collect(),
        }))
    }

    async fn revoke_invitation(
        &self,
        req: Request<pb::RevokeInvitationRequest>,
    ) -> Result<Response<pb::RevokeInvitationResponse>, Status> {
        let name = req.into_inner().name;
        let ids = self.ids.clone();
        let rec = tokio::task::spawn_blocking(move || ids.revoke_invitation(&name))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(idst)?;
        Ok(Response::new(pb::RevokeInvitationResponse {
            invitation: Some(invitation(&rec)),
        }))
    }
}
