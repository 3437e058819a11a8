//! Trust-and-bounds figures: B14 (what asking the kernel for a new connection's user
//! costs) and S1 (a long soak of the mixed load: does anything grow?).

use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use butler_host::http::peer;

use super::runtime::mix;
use super::{Host, http, line_in, line_us, note, percentiles, status_kib};

/// B14: the peer-uid lookup the listener makes for every new TCP connection — netlink
/// `sock_diag`, and the `/proc/net/tcp` fallback — against what the connection itself
/// costs on loopback (connect, accept, close), measured in the same run.
pub fn b14_peer_uid() {
    const ROUNDS: usize = 2000;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    let mut connect = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let client = TcpStream::connect(address).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        connect.push(t.elapsed());
        drop((client, server));
    }
    // One live connection, looked up as the listener looks up each new one.
    let client = TcpStream::connect(address).expect("connect");
    let (server, peer_addr) = listener.accept().expect("accept");
    let local = server.local_addr().expect("local");
    let own = peer::own_uid();
    let time = |lookup: &dyn Fn() -> Option<u32>| {
        let mut samples = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let t = Instant::now();
            let uid = lookup();
            samples.push(t.elapsed());
            assert_eq!(uid, Some(own), "the lookup names our own uid");
        }
        percentiles(samples).0
    };
    let diag = time(&|| peer::sock_diag_uid(local, peer_addr).ok().flatten());
    let proc = time(&|| peer::proc_net_uid(local, peer_addr).ok().flatten());
    let (connect50, _) = percentiles(connect);
    line_us(
        "B14 peer uid of a new connection, netlink sock_diag (p50; baseline = loopback connect+accept)",
        diag,
        connect50,
    );
    line_us(
        "B14 peer uid of a new connection, /proc/net/tcp fallback (p50; baseline = loopback connect+accept)",
        proc,
        connect50,
    );
    drop(client);
}

/// One reading of what the host holds.
#[derive(Debug, Clone, Copy)]
struct Holding {
    rss_kib: u64,
    fds: usize,
    threads: u64,
}

fn holding(pid: u32) -> Holding {
    Holding {
        rss_kib: status_kib(pid, "VmRSS"),
        fds: std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count),
        threads: status_kib(pid, "Threads"),
    }
}

/// S1 (not in CI; `cargo bench -p butler-host -- S1`): the B13 mixed load from 16 clients
/// for `BUTLER_SOAK_SECS` (600 by default). The host's RSS, open files and threads are read
/// after a warm-up of a tenth of the run (at least 10 s) and at the end, each time once the
/// load has paused for [`SETTLE`] (so that neither reading catches requests in flight or
/// the runtime's idle blocking threads). Target: flat within ±5 %.
pub fn s1_soak() {
    let total = Duration::from_secs(std::env::var("BUTLER_SOAK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(600));
    let warm_up = (total / 10).max(Duration::from_secs(10));
    let dir = tempfile::tempdir().expect("temp");
    let host = Host::start_quiet(&dir.path().join("instance"));
    host.wait_all_ready(&["journal", "distill", "validity", "cards"], Duration::from_secs(120));
    load(host.authority(), warm_up);
    std::thread::sleep(SETTLE);
    let start = holding(host.pid());
    let measured = total.saturating_sub(warm_up);
    let (requests, errors) = load(host.authority(), measured);
    std::thread::sleep(SETTLE);
    let end = holding(host.pid());
    #[allow(clippy::cast_precision_loss)]
    let rate = requests as f64 / measured.as_secs_f64();
    #[allow(clippy::cast_precision_loss)]
    let (rss_end, rss_start) = (end.rss_kib as f64 / 1024.0, start.rss_kib as f64 / 1024.0);
    line_in("S1 soak, host RSS at the end (baseline = after the warm-up)", rss_end, rss_start, "MiB");
    #[allow(clippy::cast_precision_loss)]
    line_in(
        "S1 soak, host open files at the end (baseline = after the warm-up)",
        end.fds as f64,
        start.fds as f64,
        "fds",
    );
    #[allow(clippy::cast_precision_loss)]
    line_in(
        "S1 soak, host threads at the end (baseline = after the warm-up)",
        end.threads as f64,
        start.threads as f64,
        "threads",
    );
    note(&format!(
        "S1: {:.0} s of the B13 mix from {CLIENTS} clients after {:.0} s of warm-up: {rate:.0} req/s, {errors} answers outside 2xx",
        measured.as_secs_f64(),
        warm_up.as_secs_f64(),
    ));
}

/// Clients of the soak.
const CLIENTS: usize = 16;
/// The pause before each reading: longer than the runtime keeps an idle blocking thread.
const SETTLE: Duration = Duration::from_secs(11);

/// The B13 mix from [`CLIENTS`] clients for `duration`: requests made, and answers outside 2xx.
fn load(authority: &str, duration: Duration) -> (usize, usize) {
    let requests = AtomicUsize::new(0);
    let errors = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for client in 0..CLIENTS {
            let (requests, errors) = (&requests, &errors);
            scope.spawn(move || {
                let mut i = client;
                while started.elapsed() < duration {
                    let (_, path, body) = mix(i);
                    let method = if body.is_some() { "POST" } else { "GET" };
                    let (status, _) = http(authority, method, &path, body.as_deref());
                    requests.fetch_add(1, Ordering::Relaxed);
                    if !(200..300).contains(&status) {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    i += CLIENTS;
                }
            });
        }
    });
    (requests.into_inner(), errors.into_inner())
}
