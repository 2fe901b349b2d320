//! Serves a fresh simulated cloud in real time on loopback and prints the
//! `clouds.yaml` entry that reaches it:
//!
//! ```text
//! cargo run -p flightdeck-sim-http --example serve -- 127.0.0.1:8774
//! ```
//!
//! The simulator's clock starts at the wall-clock time and follows it (every 20 ms),
//! so token expiry and status transitions happen as on a real cloud.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use flightdeck_cloud::{SimClock, Timestamp};
use flightdeck_sim::{SimCloud, SimConfig};
use flightdeck_sim_http::{ServeOptions, serve};

fn wall() -> Timestamp {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    Timestamp(ms)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let listen = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let clock = SimClock::new(wall());
    let cloud = Arc::new(SimCloud::new(SimConfig::default(), 1, clock.clone()));
    cloud.add_foreign_router("router1");
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            clock.advance_to(wall());
        }
    });
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    let options = ServeOptions::default();
    println!(
        "{}",
        options.clouds_yaml("sim", &format!("http://{}", listener.local_addr()?))
    );
    serve(cloud, listener, options).await
}
