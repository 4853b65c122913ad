//! Connecting and the capabilities exchange (CER/CEA).

use std::sync::Arc;

use gyro_diameter::connection::{self, Connection, Event};
use gyro_diameter::peer::PeerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{now_ms, Plan, MAX_MESSAGE, READ_CHUNK};

/// Connects and exchanges capabilities. Whatever arrived after the CEA
/// stays buffered in the returned connection.
pub(super) async fn open(idx: u32, plan: &Plan) -> Result<(TcpStream, Connection), String> {
    let t = plan.args.timeout;
    let addr = plan.addr;
    let mut stream = match tokio::time::timeout(t, TcpStream::connect(addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(format!("connect to {addr}: {e}")),
        Err(_) => return Err(format!("connect to {addr}: timed out")),
    };
    let _ = stream.set_nodelay(true);
    let host = plan.args.connection_origin_host(idx);
    let mut pcfg = PeerConfig::new(&host, &plan.args.origin_realm);
    if let Ok(local) = stream.local_addr() {
        pcfg.host_ip_addresses = vec![local.ip()];
    }
    pcfg.product_name = "gyro-load".to_string();
    pcfg.origin_state_id = plan.session_high;
    pcfg.watchdog_ms = plan.args.watchdog.as_millis().max(1) as u64;
    pcfg.watchdog_jitter_ms = pcfg.watchdog_ms.min(2_000) / 3;
    pcfg.handshake_timeout_ms = t.as_millis().max(1) as u64;
    let mut config = connection::Config::new(pcfg);
    config.max_message_size = MAX_MESSAGE;
    config.message_timeout_ms = t.as_millis().max(1) as u64;
    let mut conn = Connection::connect(
        Arc::new(config),
        now_ms(plan),
        plan.seed ^ (u64::from(idx) << 32) ^ 0x9e37_79b9,
    )
    .map_err(|e| format!("encoding CER: {e}"))?;
    conn.read_buffer().reserve(READ_CHUNK);
    let handshake = async {
        loop {
            while let Some(ev) = conn.poll_event() {
                match ev {
                    Event::Opened { .. } => return Ok(()),
                    Event::Closed(r) => return Err(format!("capabilities exchange failed: {r:?}")),
                    _ => {}
                }
            }
            if let Some(out) = conn.poll_transmit() {
                stream
                    .write_all(&out)
                    .await
                    .map_err(|e| format!("sending CER: {e}"))?;
            }
            let n = stream
                .read_buf(conn.read_buffer())
                .await
                .map_err(|e| format!("waiting for CEA: {e}"))?;
            if n == 0 {
                return Err("connection closed before the CEA".to_string());
            }
            conn.handle_read(now_ms(plan));
        }
    };
    match tokio::time::timeout(t, handshake).await {
        Ok(Ok(())) => Ok((stream, conn)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("no CEA within the timeout".to_string()),
    }
}
