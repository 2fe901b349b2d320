//! `flightdeck sim serve`: the simulated OpenStack over HTTP, in real time.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use flightdeck_cloud::{SimClock, Timestamp};
use flightdeck_scenario::load_scenario;
use flightdeck_sim::{SimCloud, SimConfig, SimFault};
use flightdeck_sim_http::{ServeOptions, serve};

use crate::ServeArgs;

/// The wall clock, read here at the binary's edge only.
fn wall() -> Timestamp {
    Timestamp(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    )
}

pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if !(args.speed.is_finite() && args.speed > 0.0 && args.speed <= 1000.0) {
        bail!(
            "--speed must be a number above 0 and at most 1000, got {}",
            args.speed
        );
    }
    let start = wall();
    let clock = SimClock::new(start);
    let cloud = Arc::new(SimCloud::new(
        SimConfig::default(),
        args.seed,
        clock.clone(),
    ));
    if let Some(name) = &args.scenario {
        let loaded = load_scenario(name)?;
        for f in &loaded.scenario.spec.faults {
            cloud.inject(SimFault::from_spec(f, start));
        }
        let mut routers = std::collections::BTreeSet::new();
        for c in &loaded.clusters {
            if let Some(r) = c
                .spec
                .provider
                .openstack
                .as_ref()
                .and_then(|o| o.router.as_ref())
                && routers.insert(r.to_string())
            {
                cloud.add_foreign_router(r.as_str());
            }
        }
        eprintln!(
            "scenario {}: {} fault(s) scheduled from now on",
            loaded.scenario.metadata.name,
            loaded.scenario.spec.faults.len()
        );
    }
    // Virtual time follows the wall clock, scaled by --speed.
    let speed = args.speed;
    let ticker = clock.clone();
    let began = Instant::now();
    let tick_cloud = cloud.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let elapsed = began.elapsed().as_secs_f64() * speed * 1000.0;
            ticker.advance_to(start.plus_millis(elapsed as u64));
            tick_cloud.advance();
        }
    });
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let base = format!("http://{}", listener.local_addr()?);
    let options = ServeOptions::default();
    std::fs::write(
        &args.clouds_file,
        options.clouds_yaml("flightdeck-sim", &base),
    )
    .with_context(|| format!("cannot write {}", args.clouds_file.display()))?;
    println!("simulated OpenStack at {base} (Keystone: {base}/identity/v3)");
    println!(
        "clouds.yaml entry \"flightdeck-sim\" written to {}; use it with:",
        args.clouds_file.display()
    );
    println!(
        "  export OS_CLIENT_CONFIG_FILE={} OS_CLOUD=flightdeck-sim",
        args.clouds_file.display()
    );
    serve(cloud, listener, options).await?;
    Ok(ExitCode::SUCCESS)
}
