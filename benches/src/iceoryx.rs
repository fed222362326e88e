//! The `iceoryx2` system: iceoryx2 (Eclipse, Rust, zero-copy shared-memory IPC) in its
//! request-response pattern, between two processes. Rank 0 is the client: its messages are
//! requests, and what it receives is the response to its last request. Rank 1 is the server: it
//! receives requests and answers the last one. Payloads are `[u8]` slices, copied into the loaned
//! sample and out of the received one, so the work is the same buffer-to-buffer transfer as for
//! every other system (iceoryx2's own benchmarks leave the payload untouched). Receivers spin
//! on `receive`, as nemesis's `poll` mode and MPI libraries do.

use std::time::{Duration, Instant};

use iceoryx2::active_request::ActiveRequest;
use iceoryx2::pending_response::PendingResponse;
use iceoryx2::port::client::Client;
use iceoryx2::port::server::Server;
use iceoryx2::prelude::*;
use iceoryx2::service::port_factory::request_response::PortFactory as RequestResponse;

use crate::error::{Error, Result};
use crate::workload::{Link, WINDOW};

type Svc = ipc::Service;
/// The ports and samples of a service of `[u8]` requests and responses without user headers.
type Pending = PendingResponse<Svc, [u8], (), [u8], ()>;
type Active = ActiveRequest<Svc, [u8], (), [u8], ()>;

/// How long the two sides wait for each other to appear.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

enum Side {
    Client {
        client: Client<Svc, [u8], (), [u8], ()>,
        /// The last request sent: the one a response is awaited for.
        pending: Option<Pending>,
    },
    Server {
        server: Server<Svc, [u8], (), [u8], ()>,
        /// The last request received: the one a response goes to.
        active: Option<Active>,
    },
}

/// One side of an iceoryx2 request-response service (fields drop in order: ports, service,
/// node).
pub struct IceoryxLink {
    rank: u32,
    side: Side,
    _service: RequestResponse<Svc, [u8], (), [u8], ()>,
    _node: Node<Svc>,
}

fn fail(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Run(format!("iceoryx2: {what}: {e:?}"))
}

impl IceoryxLink {
    /// Opens (or creates) `service` and its client (rank 0) or server (rank 1), for messages up
    /// to `max` bytes, and waits for the other side.
    pub fn open(rank: u32, service: &str, max: usize) -> Result<IceoryxLink> {
        set_log_level(LogLevel::Error);
        if rank == 0 {
            // Resources of benchmark processes killed earlier (a deadline, Ctrl-C) go now.
            let _ = Node::<Svc>::cleanup_dead_nodes(Config::global_config());
        }
        let node = NodeBuilder::new().create::<Svc>().map_err(|e| fail("create the node", e))?;
        let name: ServiceName = service.try_into().map_err(|e| fail("service name", e))?;
        let svc = node
            .service_builder(&name)
            .request_response::<[u8], [u8]>()
            // A whole window in flight, plus the acknowledged request.
            .max_active_requests_per_client(WINDOW + 2)
            .max_response_buffer_size(2)
            .max_clients(1)
            .max_servers(1)
            // Flow control: a full buffer makes the sender wait, it never drops a message.
            .enable_safe_overflow_for_requests(false)
            .enable_safe_overflow_for_responses(false)
            .open_or_create()
            .map_err(|e| fail("open the service", e))?;
        // Start small and grow by powers of two up to the largest message.
        let initial = max.clamp(1, 4096);
        let side = if rank == 0 {
            let client = svc
                .client_builder()
                .initial_max_slice_len(initial)
                .allocation_strategy(AllocationStrategy::PowerOfTwo)
                .create()
                .map_err(|e| fail("create the client", e))?;
            wait_for(|| svc.dynamic_config().number_of_servers() > 0, "the server")?;
            Side::Client { client, pending: None }
        } else {
            let server = svc
                .server_builder()
                .initial_max_slice_len(initial)
                .allocation_strategy(AllocationStrategy::PowerOfTwo)
                .create()
                .map_err(|e| fail("create the server", e))?;
            wait_for(|| svc.dynamic_config().number_of_clients() > 0, "the client")?;
            Side::Server { server, active: None }
        };
        Ok(IceoryxLink { rank, side, _service: svc, _node: node })
    }
}

fn wait_for(mut ready: impl FnMut() -> bool, who: &str) -> Result<()> {
    let t0 = Instant::now();
    while !ready() {
        if t0.elapsed() > CONNECT_TIMEOUT {
            return Err(Error::Run(format!("iceoryx2: {who} did not appear within {} s", CONNECT_TIMEOUT.as_secs())));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

fn copy_exact(from: &[u8], to: &mut [u8]) -> Result<()> {
    if from.len() != to.len() {
        return Err(Error::Run(format!(
            "iceoryx2: a message of {} bytes where {} were expected",
            from.len(),
            to.len()
        )));
    }
    to.copy_from_slice(from);
    Ok(())
}

impl Link for IceoryxLink {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn send(&mut self, buf: &[u8]) -> Result<()> {
        match &mut self.side {
            Side::Client { client, pending } => {
                let req = client.loan_slice_uninit(buf.len()).map_err(|e| fail("loan a request", e))?;
                *pending = Some(req.write_from_slice(buf).send().map_err(|e| fail("send a request", e))?);
            }
            Side::Server { active, .. } => {
                let to = active.as_ref().ok_or_else(|| Error::Run("iceoryx2: a response before any request".into()))?;
                let resp = to.loan_slice_uninit(buf.len()).map_err(|e| fail("loan a response", e))?;
                resp.write_from_slice(buf).send().map_err(|e| fail("send a response", e))?;
            }
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<()> {
        match &mut self.side {
            Side::Client { pending, .. } => {
                let from = pending
                    .as_ref()
                    .ok_or_else(|| Error::Run("iceoryx2: a response awaited before any request".into()))?;
                loop {
                    if let Some(resp) = from.receive().map_err(|e| fail("receive a response", e))? {
                        return copy_exact(resp.payload(), buf);
                    }
                    std::hint::spin_loop();
                }
            }
            Side::Server { server, active } => loop {
                if let Some(req) = server.receive().map_err(|e| fail("receive a request", e))? {
                    copy_exact(req.payload(), buf)?;
                    *active = Some(req);
                    return Ok(());
                }
                std::hint::spin_loop();
            },
        }
    }
}
