//! Connecting and the capabilities exchange (CER/CEA).

use bytes::{Buf, BytesMut};
use gyro_diameter::header::frame_length;
use gyro_diameter::peer::{Event, Peer, PeerConfig, Role};
use gyro_diameter::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{now_ms, Plan, MAX_MESSAGE, READ_CHUNK};

/// Connects and exchanges capabilities.
pub(super) async fn open(
    idx: u32,
    plan: &Plan,
) -> Result<(TcpStream, Peer, PeerConfig, BytesMut), String> {
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
    let mut peer = Peer::new(
        Role::Initiator,
        &pcfg,
        now_ms(plan),
        plan.seed ^ (u64::from(idx) << 32) ^ 0x9e37_79b9,
    );
    let mut out = BytesMut::with_capacity(1024);
    peer.connect(&pcfg, &mut out)
        .map_err(|e| format!("encoding CER: {e}"))?;
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK);
    let handshake = async {
        stream
            .write_all(&out)
            .await
            .map_err(|e| format!("sending CER: {e}"))?;
        out.clear();
        loop {
            while let Some(len) = next_frame(&inbuf).map_err(|e| format!("reading CEA: {e}"))? {
                let msg = Message::parse(&inbuf[..len]).map_err(|e| format!("reading CEA: {e}"))?;
                let ev = peer
                    .handle(&pcfg, &msg, now_ms(plan), &mut out)
                    .map_err(|e| format!("reading CEA: {e}"))?;
                inbuf.advance(len);
                match ev {
                    Event::Opened => return Ok(()),
                    Event::Close(r) => return Err(format!("capabilities exchange failed: {r:?}")),
                    _ => {}
                }
            }
            if !out.is_empty() {
                stream.write_all(&out).await.map_err(|e| e.to_string())?;
                out.clear();
            }
            let n = stream
                .read_buf(&mut inbuf)
                .await
                .map_err(|e| format!("waiting for CEA: {e}"))?;
            if n == 0 {
                return Err("connection closed before the CEA".to_string());
            }
        }
    };
    match tokio::time::timeout(t, handshake).await {
        Ok(Ok(())) => Ok((stream, peer, pcfg, inbuf)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("no CEA within the timeout".to_string()),
    }
}

/// The length of the next whole message in `buf`, if there is one.
pub(super) fn next_frame(buf: &[u8]) -> Result<Option<usize>, gyro_diameter::Error> {
    Ok(frame_length(buf, MAX_MESSAGE)?.filter(|&n| buf.len() >= n))
}
