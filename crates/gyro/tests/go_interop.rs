//! Interop with a Diameter implementation gyro did not write: the Gy client
//! in interop/go-diameter (built on github.com/fiorix/go-diameter) runs a
//! data session (CER, CCR-I/U/T with MSCC, DWR, an SMS event, unknown
//! subscriber and context, DPR) against a real `gyro serve` process and
//! checks every answer.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use support::{free_port, serve};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn go_diameter_gy_client_against_gyro_serve() {
    let build = Command::new(repo().join("interop/go-diameter/run.sh"))
        .output()
        .expect("run interop/go-diameter/run.sh");
    assert!(
        build.status.success(),
        "building the go-diameter client failed (Go 1.25 or later is needed; \
         scripts/test.sh installs it): {}",
        String::from_utf8_lossy(&build.stderr)
    );
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let dir = std::env::temp_dir().join(format!("gyro-go-interop-{}", std::process::id()));
    let mut server = Server(serve(addr, &dir, &[]));
    let out = Command::new(repo().join("interop/go-diameter/bin/gyclient"))
        .args(["-addr", &addr.to_string(), "-negative"])
        .output()
        .expect("run gyclient");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "gyclient found a problem");
    assert!(stdout.contains("PASS: all"), "{stdout}");
    for step in ["CCR-I", "CCR-U", "CCR-T", "DWR", "CCR-E", "DPR"] {
        assert!(
            stdout.contains(&format!("ok {step}")),
            "no `ok {step}` in:\n{stdout}"
        );
    }
    // SIGTERM: a graceful shutdown exits with success.
    let pid = server.0.id().to_string();
    let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(status.success());
    let t = Instant::now();
    let exit = loop {
        if let Some(s) = server.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "gyro serve ignored SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "gyro serve exited with {exit}");
    let cdrs = std::fs::read_dir(dir.join("cdr")).unwrap().count();
    assert!(cdrs >= 1, "CDR files are written");
    let _ = std::fs::remove_dir_all(&dir);
}
